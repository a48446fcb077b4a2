# CMake glue only: every dependency comes from Debian's packages (see
# scripts/setup.sh). Nothing is vendored here.

# The target CPython. Debian's /usr/bin/python3.11 is the one with torch; the
# pyenv interpreters that come first on PATH must never be picked by accident,
# so the interpreter is pinned unless the caller names another explicitly.
set(DYNAMO_PYTHON "/usr/bin/python3.11" CACHE FILEPATH "Target CPython interpreter")
set(Python3_EXECUTABLE "${DYNAMO_PYTHON}" CACHE FILEPATH "" FORCE)
set(Python3_FIND_STRATEGY LOCATION)
set(Python3_FIND_UNVERSIONED_NAMES NEVER)
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Embed Development.Module)
if(NOT Python3_VERSION_MAJOR EQUAL 3 OR Python3_VERSION_MINOR LESS 11)
  message(FATAL_ERROR "libdynamo needs CPython >= 3.11, found ${Python3_VERSION} at ${Python3_EXECUTABLE}")
endif()
message(STATUS "libdynamo: target CPython ${Python3_VERSION} (${Python3_EXECUTABLE})")
set(DYNAMO_PYTHON_EXECUTABLE "${Python3_EXECUTABLE}")

find_package(absl REQUIRED)
find_package(Protobuf REQUIRED)
find_package(CLI11 REQUIRED)
if(DYNAMO_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()
if(DYNAMO_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
