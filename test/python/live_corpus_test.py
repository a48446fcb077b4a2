"""The offline capture corpus (capture_cases.py, 68 functions and modules)
run live through dynamo.optimize: three calls each with fresh random inputs
of the same metadata must equal eager, be captured once, and hit the cache
after (a recompile would have to name the guard that failed).

    scripts/python test/python/live_corpus_test.py [--device cuda]

With --device, the corpus' modules and inputs are moved there as users move
theirs (.to(device); torch's default device stays the CPU), every tensor
guard must name the device, a case that raises eagerly there (CPU tensors
made inside meeting a CUDA input) is reported and skipped, and a capture
made for the device must not be reused for CPU inputs. test/python/on_device.py
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

DEVICE = torch.device(sys.argv[sys.argv.index("--device") + 1]) if "--device" in sys.argv else None
if DEVICE is not None and DEVICE.type == "cuda" and not torch.cuda.is_available():
    sys.exit(f"live_corpus_test.py: {DEVICE} requested but torch.cuda.is_available() is False")


def resolve(path):
    value = capture_cases
    for part in path.split("."):
        value = getattr(value, part)
    return value


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
                and (torch.equal(a, b) or torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def to_device(value):
    if DEVICE is None:
        return value
    if isinstance(value, torch.Tensor):  # a leaf again, as the user's own input is
        return value.detach().to(DEVICE).requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v) for k, v in value.items()}
    return value


def arguments(make):
    made = make()
    if isinstance(made, capture_cases.Call):
        return to_device(made.args), to_device(made.kwargs)
    return to_device(made), {}


def recorded(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        return fn(*args, **kwargs), [str(w.message) for w in caught]


if DEVICE is not None:  # the corpus' modules and tensor globals move, as a user's model does
    for name, value in list(vars(capture_cases).items()):
        if isinstance(value, torch.nn.Module):
            value.to(DEVICE)
        elif isinstance(value, torch.Tensor):
            setattr(capture_cases, name, value.to(DEVICE))

failures, eager_raises = [], []
for target, _inputs, make in capture_cases.CASES:
    fn = resolve(target)
    graphs = []

    def backend(gm, example_inputs, graphs=graphs):
        graphs.append(gm)
        return gm.forward

    compiled = dynamo.optimize(backend)(fn)
    for call in range(3):
        torch.manual_seed(100 + call)
        args, kwargs = arguments(make)
        eager_args, eager_kwargs = copy.deepcopy((args, kwargs))
        torch.manual_seed(0)  # the same random stream for dropout in both runs
        try:
            want = fn(*eager_args, **eager_kwargs)
        except Exception as e:  # noqa: BLE001 - only on a device: reported below, not this test's
            if DEVICE is None:
                raise
            eager_raises.append(f"{target}: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
            break
        torch.manual_seed(0)
        got, told = recorded(compiled, *args, **kwargs)
        if not same(got, want):
            failures.append(f"{target}: call {call} differs from eager")
        for text in told:
            if "recompiling" in text:
                failures.append(f"{target}: call {call} recompiled with inputs of the same metadata: {text}")
            elif "eagerly" in text:
                failures.append(f"{target}: call {call}: {text}")
    else:
        # One capture, then cache hits (no graph at all for a function without
        # tensor ops, such as returning an argument as it is).
        if len(graphs) > 1:
            failures.append(f"{target}: {len(graphs)} graphs over 3 calls, expected 1")
        if DEVICE is not None and DEVICE.type != "cpu":
            captures = compiled.dynamo_runtime.captures_made
            tensor_guards = [str(g) for c in captures for g in c.guards if g.kind == g.TENSOR_MATCH]
            if any(DEVICE.type not in g for g in tensor_guards):
                failures.append(f"{target}: a tensor guard without the device: {tensor_guards}")

where = f" on {DEVICE}" if DEVICE is not None else ""
print(f"{len(capture_cases.CASES) - len(eager_raises)} of {len(capture_cases.CASES)} cases ran{where}"
      + (f" ({len(eager_raises)} raise eagerly there)" if eager_raises else ""))
for line in eager_raises:
    print("  eager raises:", line)

# The device is guarded: a capture for one device is not reused for another;
# the recapture names the device, and both equal eager.
if DEVICE is not None and DEVICE.type != "cpu":
    def f(x, w):
        return torch.relu(x @ w) + x.sum()

    compiled = dynamo.optimize("eager")(f)
    for on in (DEVICE, torch.device("cpu"), DEVICE):
        x, w = torch.randn(4, 4, device=on), torch.randn(4, 4, device=on)
        got, told = recorded(compiled, x, w)
        if not same(got, f(x, w)):
            failures.append(f"device switch to {on}: differs from eager")
        if on.type == "cpu" and not any("recompiling" in t and "device" in t for t in told):
            failures.append(f"device switch to cpu: no recompile naming the device ({told})")
    if len(compiled.dynamo_runtime.captures_made) != 2:
        failures.append(f"device switches: {len(compiled.dynamo_runtime.captures_made)} captures, expected 2")

for f in failures:
    print("FAIL", f)
print(f"{len(capture_cases.CASES)} cases, {len(failures)} failures")
sys.exit(1 if failures else 0)
