"""Runs a test script with its tensors on another device: torch's default
device is set before the script imports anything, so its modules'
parameters, its inputs and the tensors its functions make are all there
(a DeviceContext mode on torch's function-mode stack, which the translator
reads and guards). On a GPU machine:

    scripts/python test/python/on_device.py cuda test/python/live_corpus_test.py

Here, `cpu` runs the same scripts under the same default-device mode.
"""
import os
import runpy
import sys

import torch

if len(sys.argv) < 3:
    sys.exit("usage: on_device.py DEVICE SCRIPT [ARGS...]")
device, script = sys.argv[1], sys.argv[2]
if torch.device(device).type == "cuda" and not torch.cuda.is_available():
    sys.exit(f"on_device.py: {device} requested but torch.cuda.is_available() is False")
if torch.device(device).type == "cuda":
    # Eager and captured runs compared at the scripts' CPU tolerances: no
    # TF32 (10-bit mantissas in matmuls and convolutions) and the same
    # convolution algorithm on both sides.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False

# The shared seed corpus draws its inputs from CPU generators (so values
# are the same everywhere): drawn on the CPU, then moved to the device.
seed_dir = os.environ.get("DYNAMO_SEED_CORPUS") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                 "..", "..", "..", "shared", "corpus")
sys.path.insert(0, os.path.normpath(seed_dir))
try:
    import seed_cases
except ImportError:
    seed_cases = None
if seed_cases is not None:
    _materialize = seed_cases.materialize

    def moved(value):
        if isinstance(value, torch.Tensor):
            return value.to(device)
        if isinstance(value, (list, tuple)):
            return type(value)(moved(v) for v in value)
        if isinstance(value, dict):
            return {k: moved(v) for k, v in value.items()}
        return value

    depth = 0

    def materialize(spec):
        # seed_cases.materialize calls itself for nested specs (an array is
        # made from a tensor spec): only the outermost value moves.
        global depth
        depth += 1
        try:
            with torch.device("cpu"):
                value = _materialize(spec)
        finally:
            depth -= 1
        return moved(value) if depth == 0 else value

    seed_cases.materialize = materialize

torch.set_default_device(device)
sys.argv = sys.argv[2:]
print(f"on_device: {script} with torch's default device {torch.get_default_device()}", flush=True)
runpy.run_path(script, run_name="__main__")
