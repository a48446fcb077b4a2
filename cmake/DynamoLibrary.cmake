include(GNUInstallDirs)

# dynamo_library(NAME stage SOURCES a.cc ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...]
#                [HEADERS extra.h ...])
#
# Declares the library of one pipeline stage the way every stage is built:
# target dynamo_<stage> (alias and exported name dynamo::<stage>), includes
# rooted at the source tree ("lib/python/object.h") and installed the same way
# under include/dynamo, the project's warnings for our code only, and
# membership of the package that hosts find with find_package(dynamo).
function(dynamo_library)
  cmake_parse_arguments(L "" "NAME" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS;HEADERS" ${ARGN})
  set(target dynamo_${L_NAME})
  add_library(${target} ${L_SOURCES})
  add_library(dynamo::${L_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${L_NAME})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/dynamo>)
  target_link_libraries(${target}
    PUBLIC ${L_PUBLIC_DEPS}
    PRIVATE ${L_PRIVATE_DEPS} $<BUILD_INTERFACE:dynamo_flags>)
  install(TARGETS ${target} EXPORT dynamoTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  # Public headers: every .h of the stage's folder (tests are .cc only).
  file(GLOB headers ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  install(FILES ${headers} ${L_HEADERS}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dynamo/${folder})
  set_property(GLOBAL APPEND PROPERTY DYNAMO_LIBRARIES ${target})
endfunction()
