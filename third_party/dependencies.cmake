# CMake glue only: every dependency comes from Debian's packages (see
# scripts/setup.sh). Nothing is vendored here.

# The target CPython: the project's venv (scripts/setup.sh makes it), so the
# library, the CLIs, the extension and the tests all use the interpreter the
# user has, with pip's torch. Whatever python3 comes first on PATH is never
# picked by accident; -DDYNAMO_PYTHON=PATH names another one.
if(DEFINED SKBUILD)
  # pip install . (pyproject.toml): the interpreter pip builds for, which
  # scikit-build-core passes in.
  set(_dynamo_default_python "${Python3_EXECUTABLE}")
elseif(DEFINED ENV{DYNAMO_VENV})
  set(_dynamo_default_python "$ENV{DYNAMO_VENV}/bin/python")
else()
  set(_dynamo_default_python "$ENV{HOME}/.cache/libdynamo/venv-3.11/bin/python")
endif()
set(DYNAMO_PYTHON "${_dynamo_default_python}" CACHE FILEPATH "Target CPython interpreter (the project's venv)")
if(NOT EXISTS "${DYNAMO_PYTHON}")
  message(FATAL_ERROR "libdynamo: no Python at ${DYNAMO_PYTHON}: run scripts/setup.sh (it makes the venv) "
                      "or pass -DDYNAMO_PYTHON=/path/to/venv/bin/python")
endif()
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
