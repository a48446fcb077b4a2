#!/usr/bin/env bash
# The GPU machine's run (issue 13): build from the .deb files of
# scripts/offline_deps.sh, then, on CUDA, the corpora equal to eager and the
# head-to-head benchmark against that machine's torch._dynamo.
#
#     scripts/gpu_check.sh [build] [tests] [bench]    # default: all three
#
# Runs with the python3 on PATH (the machine's, with torch), in
# build-offline/ (BUILD_DIR). Logs go to LOG_DIR (default gpu-logs/), one
# file a step, and a summary line a step to standard output.
set -uo pipefail
cd "$(dirname "$0")/.."
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(build tests bench)
export BUILD_DIR=${BUILD_DIR:-build-offline}
logs=${LOG_DIR:-gpu-logs}
mkdir -p "$logs"
export PYTHONPATH="$PWD/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
status=0
step() {  # step NAME COMMAND...: runs it, logs it, says how it went
  local name=$1; shift
  local start=$SECONDS
  "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || status=1
  printf '%-28s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - start))" "$(tail -1 "$logs/$name.log" | cut -c1-150)"
}
for s in "${steps[@]}"; do
  case $s in
    build)
      nvidia-smi -L 2>/dev/null | head -2
      python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())'
      step build scripts/offline_build.sh .deps ;;
    tests)
      # The version proofs on this machine's Python (3.12) and torch, CPU.
      step ctest ctest --test-dir "$BUILD_DIR" -R 'bytecode|guards_test|embed|capture_test|python_test|ir_test|registry_test' \
        --output-on-failure -j8
      # The live corpora with every tensor on the GPU.
      step cuda_moved_corpus python3 test/python/live_corpus_test.py --device cuda
      for t in live_corpus_test break_test live_correctness_test backends_test live_api_test; do
        step "cuda_$t" python3 test/python/on_device.py cuda "test/python/$t.py"
      done ;;
    bench)
      step head_to_head_cpu python3 bench/head_to_head.py --quick
      step head_to_head_cuda python3 bench/head_to_head.py --quick --device=cuda
      step inductor_cuda python3 bench/head_to_head.py --inductor --device=cuda ;;
    *) echo "gpu_check: unknown step $s" >&2; exit 2 ;;
  esac
done
exit $status
