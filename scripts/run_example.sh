#!/usr/bin/env bash
# The main job on the bundled example: set up and build, then capture a real
# torch model offline (dynamo-export), show what was read (dynamo-inspect), and
# load the capture back as a torch.fx.GraphModule to run it against eager.
#
#   scripts/run_example.sh                    # examples/mlp.py, model.forward, x=f32[4,16]
#   scripts/run_example.sh SCRIPT FN SPEC...  # any script, target and input specs
set -euo pipefail
cd "$(dirname "$0")/.."

venv=$(scripts/setup.sh | tail -n 1)
cmake -S . -B build -G Ninja -DDYNAMO_PYTHON="$venv/bin/python" >&2
cmake --build build --target dynamo-export dynamo-inspect dynamo_python_package >&2

script=${1:-examples/mlp.py}
fn=${2:-model.forward}
shift $(( $# > 2 ? 2 : $# )) || true
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=("x=f32[4,16]")
inputs=()
for s in "${specs[@]}"; do inputs+=(--input "$s"); done

out=build/example.pb
build/tools/export/dynamo-export "$script" --fn "$fn" "${inputs[@]}" --weights embed -o "$out"
build/tools/inspect/dynamo-inspect "$script" --fn "$fn"
echo
DYNAMO_VENV=$venv scripts/python - "$out" "$script" "$fn" <<'PY'
import importlib.util, sys, torch
from dynamo.loader import load
from dynamo.guards import resolve_source
path, script, fn_path = sys.argv[1:]
gm, capture = load(path)
g = capture.graphs[0]
print(f"CAPTURE {path}: {capture.function_name} ({capture.source_file}:{capture.first_line}), "
      f"{len(g.nodes)} nodes, {len(capture.guards)} guards, {len(capture.attributes)} attributes")
print(gm.graph)
print("GUARDS")
for guard in capture.guards:
    print(f"  {guard.source}: {type(guard).Kind.Name(guard.kind)}")
spec = importlib.util.spec_from_file_location("example", script)
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
target = module
for part in fn_path.split("."):
    target = getattr(target, part)
tensors = [s for s in capture.inputs if s.WhichOneof("value") == "tensor"]
from dynamo.loader import meta_dict
args = [torch.randn(meta_dict(s.tensor)["sizes"]) for s in tensors]
print("graph equals eager:", torch.allclose(gm(*args), target(*args)))
PY
