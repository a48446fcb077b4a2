"""The offline capture corpus (capture_cases.py, 68 functions and modules)
run live through dynamo.optimize: three calls each with fresh random inputs
of the same metadata must equal eager, be captured once, and hit the cache
after (a recompile would have to name the guard that failed).

    scripts/python test/python/live_corpus_test.py
"""
import copy
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_cases  # noqa: E402

import dynamo  # noqa: E402


def resolve(path):
    value = capture_cases
    for part in path.split("."):
        value = getattr(value, part)
    return value


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and (torch.equal(a, b) or torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def arguments(make):
    made = make()
    if isinstance(made, capture_cases.Call):
        return made.args, made.kwargs
    return made, {}


failures = []
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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = compiled(*args, **kwargs)
        torch.manual_seed(0)
        want = fn(*eager_args, **eager_kwargs)
        if not same(got, want):
            failures.append(f"{target}: call {call} differs from eager")
        for w in caught:
            text = str(w.message)
            if "recompiling" in text:
                failures.append(f"{target}: call {call} recompiled with inputs of the same metadata: {text}")
            elif "eagerly" in text:
                failures.append(f"{target}: call {call}: {text}")
    # One capture, then cache hits (no graph at all for a function without
    # tensor ops, such as returning an argument as it is).
    if len(graphs) > 1:
        failures.append(f"{target}: {len(graphs)} graphs over 3 calls, expected 1")

for f in failures:
    print("FAIL", f)
print(f"{len(capture_cases.CASES)} cases, {len(failures)} failures")
sys.exit(1 if failures else 0)
