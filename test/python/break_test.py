"""Graph breaks, live: the break corpus (break_cases.py) and the shared seed
corpus run through dynamo.runtime against eager, and every code object the
rewrite made checked by CPython's own tools.

    scripts/python test/python/break_test.py
"""
import dis
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import break_cases  # noqa: E402
import break_check  # noqa: E402
import live_runner  # noqa: E402
import seed_capture  # noqa: E402  (finds ../shared/corpus)
from seed_capture import seed_cases  # noqa: E402

from dynamo.runtime import Runtime  # noqa: E402

failures = []
runtimes = []


def compile_fn(fn):
    c = live_runner.compile_fn(fn)
    runtimes.append(c.runtime)
    return c


# 1. The break corpus: results, printed output, mutated arguments, globals
# and module state equal to eager; graph and break counts as predicted.
# On a GPU (test/python/on_device.py) the NumPy and SciPy cases are CPU-only
# programs: t.numpy() of a CUDA tensor raises eagerly, so they do not run.
cases = break_cases.CASES
if torch.get_default_device().type != "cpu":
    cases = [c for c in cases if not {"numpy", "scipy"} & set(c.tags)]
failures += break_check.run_cases(cases, compile_fn)
print(f"break corpus: {len(cases)} of {len(break_cases.CASES)} cases"
      + (f" (NumPy/SciPy cases are CPU-only programs: not on {torch.get_default_device()})"
         if len(cases) < len(break_cases.CASES) else ""))

# 1b. Under the PEP 523 frame evaluator (what dynamo.optimize runs), the
# corpus is run by reference_agreement_test.py, beside torch._dynamo.

# 2. The seed corpus: every case equal to eager on every call; new graphs per
# call as the corpus README describes for this design (2022 choices where the
# README allows either: from_numpy and scipy break; a new int value retraces).
EXPECTED_GRAPHS_PER_CALL = {
    "seed_add": [1], "seed_branch_on_dtype": [1, 1], "seed_loop_unrolled": [1],
    "seed_cache_and_recompile": [1, 0, 1, 1, 0, 1], "seed_sin_cos": [1],
    # The corpus' calls take one branch; a third call here takes the other
    # (`return y`: a resume function with no tensor op, so no new graph).
    "seed_data_dependent": [2, 0, 0], "seed_int_arg": [1],
    # With the other branch taken by the third call: three graphs in all.
    "seed_three_graphs": [2, 0, 1], "seed_sin_mul_cos": [1], "seed_print_breaks": [2],
    "mod_seed_wrapped": [1],
}


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


OTHER_BRANCH = {
    "seed_data_dependent": (seed_cases.T(5, 5, offset=5.0), seed_cases.T(5, 5, seed=1)),
    "seed_three_graphs": (seed_cases.T(10), seed_cases.T(10, seed=1, offset=5.0)),
}
seed_targets = [(c["name"], c["fn"], c["calls"] + ([OTHER_BRANCH[c["name"]]] if c["name"] in OTHER_BRANCH else []))
                for c in seed_cases.CASES]
for mname, (cls, calls) in seed_cases.MODULES.items():
    seed_targets.append((mname, seed_cases.build_module(cls).forward, calls))
for name, fn, calls in seed_targets:
    rt = Runtime()
    runtimes.append(rt)
    per_call = []
    for call in calls:
        before = len(rt.graphs)
        try:
            want = fn(*(seed_cases.materialize(s) for s in call))
        except (TypeError, RuntimeError) as e:
            # CPU-only NumPy code given GPU tensors (on_device.py): x.numpy()
            # or a CPU array's tensor meeting a CUDA one. The same error.
            try:
                rt.call(fn, tuple(seed_cases.materialize(s) for s in call), {})
                failures.append(f"{name}: eager raises {e!r}, the runtime does not")
            except type(e):
                pass
            per_call = None
            break
        got = rt.call(fn, tuple(seed_cases.materialize(s) for s in call), {})
        per_call.append(len(rt.graphs) - before)
        if not same(got, want):
            failures.append(f"{name}: result differs from eager")
    if per_call is None:
        print(f"seed {name}: raises eagerly on this device (CPU-only NumPy code), as the runtime does")
        continue
    expected = EXPECTED_GRAPHS_PER_CALL.get(name)
    if expected is not None and per_call != expected:
        failures.append(f"{name}: new graphs per call {per_call}, expected {expected}")
    if name in seed_capture.MUST_BREAK and not rt.break_sites:
        failures.append(f"{name}: expected a graph break")
    print(f"seed {name}: graphs per call {per_call}, breaks {len(rt.break_sites)}")

# 3. Every rewritten and resume code object is one CPython accepts: dis reads
# it, its line and position tables and its exception table decode.
codes = [code for rt in runtimes for code in rt.generated_code]
for code in codes:
    try:
        instructions = list(dis.get_instructions(code))
        assert instructions and instructions[-1].opname in ("RETURN_VALUE", "JUMP_BACKWARD", "RERAISE",
                                                              "JUMP_FORWARD", "RAISE_VARARGS", "POP_JUMP_BACKWARD_IF_TRUE",
                                                              "POP_JUMP_BACKWARD_IF_FALSE", "JUMP_BACKWARD_NO_INTERRUPT"), \
            f"ends with {instructions[-1].opname}"
        list(code.co_lines())
        list(code.co_positions())
        dis._parse_exception_table(code)
        dis.dis(code, file=open(os.devnull, "w"))
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        failures.append(f"{code.co_name}: CPython cannot read it: {e!r}")
print(f"generated code objects checked: {len(codes)}")

for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
