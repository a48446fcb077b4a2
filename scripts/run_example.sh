#!/usr/bin/env bash
# The main job on the bundled example: set up, build, then show what
# libdynamo reads from a real torch model's forward method.
#
#   scripts/run_example.sh                                  # examples/mlp.py model.forward
#   scripts/run_example.sh examples/mlp.py --fn forward     # any script and target
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh >&2
cmake -S . -B build -G Ninja >&2
cmake --build build --target dynamo-inspect >&2
if [ $# -eq 0 ]; then
  set -- examples/mlp.py --fn model.forward
fi
exec build/tools/inspect/dynamo-inspect "$@"
