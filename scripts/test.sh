#!/usr/bin/env bash
# Runs the whole test suite from a fresh clone: installs the Debian packages
# the project needs, configures with warnings as errors, builds, runs CTest.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -L bytecode     # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build -G Ninja -DDYNAMO_WERROR=ON
cmake --build build
ctest --test-dir build --output-on-failure --parallel 2 "$@"
