#!/usr/bin/env bash
# pip install . works: the source tree is built as a wheel (pyproject.toml,
# scikit-build-core) and installed into a fresh venv, used from there — the
# two CLIs as console commands, `import dynamo` with optimize and explain —
# and uninstalled without leftovers.
#
#   wheel_test.sh SOURCE_DIR PYTHON
#
# PYTHON is the project's venv. The fresh venv is made from the same base
# interpreter and sees the project venv's site-packages (torch, protobuf,
# scikit-build-core) through a .pth file, so nothing is downloaded; the build
# runs without isolation for the same reason. The build folder is
# SOURCE_DIR/build/wheel-<tag> (pyproject.toml), so a rerun is incremental.
set -euo pipefail
source=$(cd "$1" && pwd)
python=$2
scratch=$(mktemp -d /tmp/dynamo_wheel_XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# Nothing of the build tree or of an active environment may leak in.
unset PYTHONPATH DYNAMO_PYTHON VIRTUAL_ENV PYTHONHOME

base=$("$python" -c 'import sys; print(sys._base_executable)')
"$base" -m venv "$scratch/venv"
venv=$scratch/venv
project_site=$("$python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
venv_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$project_site" > "$venv_site/libdynamo_test_deps.pth"
if "$venv/bin/python" -c 'import dynamo' 2>/dev/null; then
  echo "wheel_test: dynamo importable before the install" >&2; exit 1
fi

start=$(date +%s)
"$venv/bin/python" -m pip install --no-build-isolation --no-deps --disable-pip-version-check \
    "$source" > "$scratch/install.log" 2>&1 || { tail -40 "$scratch/install.log" >&2; exit 1; }
echo "built and installed in $(( $(date +%s) - start )) s"

# The CLIs are console commands of the venv, and embed its interpreter even
# when it is not activated.
export PATH="$venv/bin:$PATH"
for cli in dynamo-export dynamo-inspect; do
  [ "$(command -v "$cli")" = "$venv/bin/$cli" ] || { echo "wheel_test: $cli not in $venv/bin" >&2; exit 1; }
done
cd "$scratch"
dynamo-export "$source/examples/mlp.py" --fn forward --input x=f32[4,16] --input y=f32[4,16] -o mlp.pb
test -s mlp.pb
out=$(dynamo-inspect mlp.pb)
grep -q "torch.sin" <<< "$out" || { echo "wheel_test: inspect output lacks torch.sin:" >&2; echo "$out" >&2; exit 1; }
grep -Eq "TENSOR_MATCH +L\['x'\]" <<< "$out" || { echo "wheel_test: inspect output lacks x's guard" >&2; exit 1; }
dynamo-inspect mlp.pb --dot mlp.dot > /dev/null
grep -q "^digraph capture" mlp.dot

"$venv/bin/python" - "$venv" <<'PY'
import os
import sys

import torch

import dynamo
import dynamo._C

venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(dynamo.__file__).startswith(venv), dynamo.__file__
assert os.path.realpath(dynamo._C.__file__).startswith(venv), dynamo._C.__file__
calls = []


def backend(gm, example_inputs):
    calls.append(len(example_inputs))
    return gm.forward


def f(x):
    y = torch.relu(x) * 2
    print("a break")
    return y.sum() + 1


x = torch.randn(5)
opt = dynamo.optimize(backend)(f)
assert torch.equal(opt(x), f(x)) and torch.equal(opt(x), f(x))
assert calls == [1, 1], calls  # two graphs (one break), captured once
out = dynamo.explain(f)(x)
assert out.graph_count == 2 and out.graph_break_count == 1, out
assert out.to_dot().count("subgraph cluster_") == 2
print("optimize and explain from the installed package: ok")
PY

"$venv/bin/python" -m pip uninstall -y --disable-pip-version-check libdynamo > "$scratch/uninstall.log"
for cli in dynamo-export dynamo-inspect; do
  if [ -e "$venv/bin/$cli" ]; then echo "wheel_test: $cli left after uninstall" >&2; exit 1; fi
done
if [ -e "$venv_site/dynamo" ]; then
  echo "wheel_test: left after uninstall:" >&2; find "$venv_site/dynamo" >&2; exit 1
fi
if "$venv/bin/python" -c 'import dynamo' 2>/dev/null; then
  echo "wheel_test: dynamo still importable after uninstall" >&2; exit 1
fi
echo "wheel built, installed into a fresh venv, used there and uninstalled"
