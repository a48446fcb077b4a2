#!/usr/bin/env bash
# Runs the whole test suite from a fresh clone: installs the Debian packages
# and the project's venv, configures against the venv's interpreter with
# warnings as errors, builds, runs CTest. Then the same build and the
# translator's tests on each further CPython the machine has (pyenv's
# shared-library 3.12 and 3.13), each in its own venv and build tree.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -L bytecode     # extra arguments go to ctest (3.11 only)
#   DYNAMO_EXTRA_PYTHONS= scripts/test.sh   # 3.11 only
set -euo pipefail
cd "$(dirname "$0")/.."

venv=$(scripts/setup.sh | tail -n 1)
cmake -S . -B build -G Ninja -DDYNAMO_WERROR=ON -DDYNAMO_PYTHON="$venv/bin/python"
cmake --build build
ctest --test-dir build --output-on-failure --parallel 2 "$@"
[ $# -eq 0 ] || exit 0

# The sanitizer build (issue 16): clang with AddressSanitizer,
# UndefinedBehaviorSanitizer and libFuzzer coverage. It runs the C++ tests
# (the interpreter embedded, torch imported where they need it), every fuzz
# harness's seeds and regression inputs and a short fuzzing run of each
# (scripts/fuzz.sh runs the long ones), then the live tests that drive the
# instrumented extension from the venv's Python with the sanitizer runtime
# preloaded. (Tests that start the instrumented CLIs from such a Python are
# left out: the CLIs carry their own runtime, and two runtimes cannot share
# a process; the fuzz harnesses cover the CLIs' parsers.)
# DYNAMO_SANITIZE_BUILD=0 skips it.
sanitizer_cpp='^(python_test|bytecode_test|bytecode_rewrite_test|guards_test|ir_test|ops_registry_test|ops_sym_test|ops_sym_shapes_test|capture_test|embed_module_test)$|^fuzz_'
sanitizer_live='^(break_test|live_corpus_test|concurrency_test|adversarial_test|adversarial_property_test|faults_test|dynamic_shapes_test|scalar_outputs_test|module_versions_test)$'
if [ "${DYNAMO_SANITIZE_BUILD:-1}" = 1 ]; then
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DDYNAMO_WERROR=ON -DDYNAMO_FUZZ=ON \
        -DDYNAMO_PYTHON="$venv/bin/python" -DDYNAMO_BUILD_BENCHMARKS=OFF -DDYNAMO_FUZZ_SMOKE_SECONDS=30
  # Only what these tests run (not the CLIs, benchmarks or other tests).
  cmake --build build-asan --target python_test bytecode_test bytecode_rewrite_test guards_test ir_test \
        ops_registry_test ops_sym_test ops_sym_shapes_test capture_test embed_module_test dynamo_C dynamo_python_package \
        input_spec_fuzz capture_fuzz bytecode_fuzz guards_fuzz \
        input_spec_fuzz_replay capture_fuzz_replay bytecode_fuzz_replay guards_fuzz_replay
  ctest --test-dir build-asan --output-on-failure --parallel 2 -R "$sanitizer_cpp"
  ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD=$(clang++ -print-file-name=libclang_rt.asan-x86_64.so) \
    ctest --test-dir build-asan --output-on-failure --parallel 2 -R "$sanitizer_live"
fi

# The tests that depend on the interpreter's version: its bytecode (decoder,
# assembler, the standard library's and torch's code objects), the
# translator, the rewrite and resume functions, the frame evaluator, guards.
version_tests='bytecode|guards_test|embed|break_test|live_corpus|live_api|live_correctness|dynamic_shapes|scalar_outputs|module_versions|capture_test|backends_test|memory_test|concurrency_test|adversarial_test|adversarial_property_test|faults_test|api_parity|device_runners'
for version in ${DYNAMO_EXTRA_PYTHONS-3.12 3.13}; do
  base=$(ls -d "$HOME/.pyenv/versions/$version".*/bin/python"$version" 2>/dev/null | tail -n 1 || true)
  if [ -z "$base" ]; then
    echo "test.sh: no pyenv CPython $version here: skipped" >&2
    continue
  fi
  extra_venv=$(DYNAMO_BASE_PYTHON=$base DYNAMO_VENV="$HOME/.cache/libdynamo/venv-$version" scripts/setup.sh | tail -n 1)
  cmake -S . -B "build-py$version" -G Ninja -DDYNAMO_WERROR=ON -DDYNAMO_PYTHON="$extra_venv/bin/python" \
        -DDYNAMO_BUILD_BENCHMARKS=OFF
  cmake --build "build-py$version"
  ctest --test-dir "build-py$version" --output-on-failure --parallel 2 -R "$version_tests"
done
