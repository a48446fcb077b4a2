#!/usr/bin/env bash
# Long fuzzing campaigns (the test command runs only short smoke runs).
# Builds build-fuzz with clang, AddressSanitizer, UndefinedBehaviorSanitizer
# and libFuzzer against the project's venv, then fuzzes each harness named
# (default: all four) for SECONDS with JOBS parallel workers, one after the
# other. New corpus entries go to fuzz-out/corpus/NAME, crashes to
# fuzz-out/crashes/NAME-*, logs to fuzz-out/logs. A crash input belongs in
# test/fuzz/NAME/regressions/ once fixed: every build replays that folder.
#
#   scripts/fuzz.sh                              # all harnesses, 1 h each, 2 workers
#   SECONDS_EACH=600 JOBS=8 scripts/fuzz.sh guards bytecode
#   scripts/fuzz.sh --build-only
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${SECONDS_EACH:-3600}
jobs=${JOBS:-2}
build=${FUZZ_BUILD_DIR:-build-fuzz}
venv=$(scripts/setup.sh | tail -n 1)
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DDYNAMO_FUZZ=ON -DDYNAMO_PYTHON="$venv/bin/python" \
  -DDYNAMO_BUILD_BENCHMARKS=OFF >/dev/null
targets=()
names=("$@")
[ "${names[0]:-}" = "--build-only" ] && names=()
[ ${#names[@]} -gt 0 ] || names=(input_spec capture bytecode guards)
for n in "${names[@]}"; do targets+=("${n}_fuzz"); done
cmake --build "$build" --target "${targets[@]}"
[ "${1:-}" = "--build-only" ] && exit 0

root=$PWD
mkdir -p fuzz-out/crashes
export ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc
for n in "${names[@]}"; do
  mkdir -p "fuzz-out/corpus/$n" "fuzz-out/logs/$n"
  inputs=("$root/test/fuzz/$n/seeds")
  [ -d "test/fuzz/$n/regressions" ] && inputs+=("$root/test/fuzz/$n/regressions")
  echo "fuzz.sh: $n for ${seconds}s with $jobs workers (logs in fuzz-out/logs/$n)" >&2
  # libFuzzer writes each worker's log (fuzz-N.log) into the current folder.
  (cd "fuzz-out/logs/$n" &&
   "$root/$build/test/fuzz/${n}_fuzz" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
     -jobs="$jobs" -workers="$jobs" -dict="$root/test/fuzz/$n.dict" -print_final_stats=1 \
     -artifact_prefix="$root/fuzz-out/crashes/$n-" "$root/fuzz-out/corpus/$n" "${inputs[@]}") || true
  ls "fuzz-out/crashes/$n-"* 2>/dev/null || echo "fuzz.sh: $n: no crash" >&2
done
