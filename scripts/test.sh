#!/usr/bin/env bash
# Runs the whole test suite from a fresh clone: installs the Debian packages
# and the project's venv, configures against the venv's interpreter with
# warnings as errors, builds, runs CTest.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -L bytecode     # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."

venv=$(scripts/setup.sh | tail -n 1)
cmake -S . -B build -G Ninja -DDYNAMO_WERROR=ON -DDYNAMO_PYTHON="$venv/bin/python"
cmake --build build
ctest --test-dir build --output-on-failure --parallel 2 "$@"
