"""The live path with tensors on an accelerator, as users move them there
(model.to(device), x.to(device); no default device): the capture corpus
equal to eager, and the device a capture was made for guarded.

    scripts/python test/python/device_test.py cuda

`cpu` runs the same checks with every tensor on the CPU. test/python/on_device.py
runs the other corpora with torch's default device set instead.
"""
import copy
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_cases  # noqa: E402

import dynamo  # noqa: E402

DEVICE = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cuda")
if DEVICE.type == "cuda" and not torch.cuda.is_available():
    sys.exit(f"device_test.py: {DEVICE} requested but torch.cuda.is_available() is False")
failures = []


def to_device(value):
    if isinstance(value, torch.Tensor):  # a leaf again, as the user's own input is
        return value.detach().to(DEVICE).requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v) for k, v in value.items()}
    return value


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
                and (torch.equal(a, b) or torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def resolve(path):
    value = capture_cases
    for part in path.split("."):
        value = getattr(value, part)
    return value


# The corpus' modules and tensor globals move, as a user's model does.
for name, value in list(vars(capture_cases).items()):
    if isinstance(value, torch.nn.Module):
        value.to(DEVICE)
    elif isinstance(value, torch.Tensor):
        setattr(capture_cases, name, value.to(DEVICE))

# 1. The capture corpus: three calls equal to eager, one capture, and the
# capture's tensor guards name the device.
ran, eager_raises = 0, []
for target, _inputs, make in capture_cases.CASES:
    fn = resolve(target)
    graphs = []

    def backend(gm, example_inputs, graphs=graphs):
        graphs.append(gm)
        return gm.forward

    compiled = dynamo.optimize(backend)(fn)
    for call in range(3):
        torch.manual_seed(100 + call)
        made = make()
        args, kwargs = (made.args, made.kwargs) if isinstance(made, capture_cases.Call) else (made, {})
        args, kwargs = to_device(args), to_device(kwargs)
        eager_args, eager_kwargs = copy.deepcopy((args, kwargs))
        torch.manual_seed(0)
        try:
            want = fn(*eager_args, **eager_kwargs)
        except Exception as e:  # noqa: BLE001 - a case that mixes devices eagerly is not this test's
            eager_raises.append(f"{target}: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
            break
        torch.manual_seed(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = compiled(*args, **kwargs)
        if not same(got, want):
            failures.append(f"{target}: call {call} differs from eager")
        for w in caught:
            if "recompiling" in str(w.message) or "eagerly" in str(w.message):
                failures.append(f"{target}: call {call}: {w.message}")
    else:
        ran += 1
        if len(graphs) > 1:
            failures.append(f"{target}: {len(graphs)} graphs over 3 calls, expected 1")
        runtime = compiled.dynamo_runtime
        tensor_guards = [str(g) for c in runtime.captures_made for g in c.guards if g.kind == g.TENSOR_MATCH]
        if DEVICE.type != "cpu" and any(DEVICE.type not in g for g in tensor_guards):
            failures.append(f"{target}: a tensor guard without the device: {tensor_guards}")
print(f"capture corpus on {DEVICE}: {ran} of {len(capture_cases.CASES)} cases ran "
      f"({len(eager_raises)} raise eagerly on {DEVICE}: tensors made inside on the CPU)")
for line in eager_raises:
    print("  eager raises:", line)

# 2. The device is guarded: a capture made for one device is not reused for
# another; the recapture names the device, and both equal eager.
if DEVICE.type != "cpu":
    def f(x, w):
        return torch.relu(x @ w) + x.sum()

    compiled = dynamo.optimize("eager")(f)
    for where in (DEVICE, torch.device("cpu"), DEVICE):
        x, w = torch.randn(4, 4, device=where), torch.randn(4, 4, device=where)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = compiled(x, w)
        if not same(got, f(x, w)):
            failures.append(f"device switch to {where}: differs from eager")
        told = [str(w.message) for w in caught if "recompiling" in str(w.message)]
        if where.type == "cpu" and not any("device" in t for t in told):
            failures.append(f"device switch to cpu: no recompile naming the device ({told})")
    captures = len(compiled.dynamo_runtime.captures_made)
    if captures != 2:
        failures.append(f"device switches: {captures} captures, expected 2 (one per device)")

for f in failures:
    print("FAIL", f)
print(f"device_test on {DEVICE}: {len(failures)} failures")
sys.exit(1 if failures else 0)
