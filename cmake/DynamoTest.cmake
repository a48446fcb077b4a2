# dynamo_add_test(NAME name SOURCES a.cc b.cc LIBS lib1 lib2 [LABELS l])
# A Catch2 v2 test binary whose main() starts the embedded interpreter
# (test/catch_main.cc), registered with CTest as one test per binary so the
# interpreter starts once per binary rather than once per test case.
function(dynamo_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE dynamo_test_main ${T_LIBS} dynamo_flags)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 1500)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "DYNAMO_SOURCE_DIR=${PROJECT_SOURCE_DIR};ASAN_OPTIONS=detect_leaks=0")
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
