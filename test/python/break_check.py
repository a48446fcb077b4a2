"""Runs the graph-break corpus (break_cases.py) through a runner and against eager.

run_cases(cases, compile_fn, verbose=False) -> list of failure strings.
compile_fn(fn) returns an object c: c(*args, **kwargs) runs the compiled function
and c.stats() returns {"graphs": int, "breaks": int}.  For each case:
  reset(); every call eagerly, recording the result, the post-call value of every
  argument (mutations), state() and what was printed;
  reset(); every call through ONE compiled object, recording the same;
  compare bit for bit (tensors: dtype, shape, requires_grad, torch.equal; numpy
  arrays: dtype, shape, array_equal; floats exact; containers by type and
  structure; other objects ==), then compare stats with the expected counts.

  scripts/python test/python/break_check.py --eager-self-check
      checks the harness and the corpus: every case runs, is deterministic and its
      reset restores the state (an eager runner reporting the expected counts).
  scripts/python test/python/break_check.py --runner MODULE:FUNCTION
      uses MODULE.FUNCTION as compile_fn.
"""
import argparse
import contextlib
import dataclasses
import importlib
import io
import collections
import math
import os
import sys
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import break_cases  # noqa: E402


# ---------------------------------------------------------------- snapshots
@dataclasses.dataclass
class _TensorSnap:
    type_name: str
    value: torch.Tensor
    requires_grad: bool


@dataclasses.dataclass
class _Raised:
    type_name: str
    message: str


def _snap(obj):
    """A deep copy of obj's observable value, so later mutations don't leak in."""
    if isinstance(obj, torch.Tensor):
        return _TensorSnap(type(obj).__name__, obj.detach().clone(), obj.requires_grad)
    if isinstance(obj, np.ndarray):
        return obj.copy()
    if type(obj) is collections.defaultdict:
        return ("defaultdict", obj.default_factory, {k: _snap(v) for k, v in obj.items()})
    if type(obj) is collections.deque:
        return ("deque", obj.maxlen, [_snap(v) for v in obj])
    if isinstance(obj, dict) and type(obj) not in (dict, collections.OrderedDict):
        # A dict subclass (a ModelOutput): its class, items and attributes.
        return ("dict subclass", type(obj).__qualname__, {k: _snap(v) for k, v in obj.items()},
                {k: _snap(v) for k, v in vars(obj).items()})
    if isinstance(obj, dict):
        return type(obj)((k, _snap(v)) for k, v in obj.items())
    if isinstance(obj, list):
        return [_snap(v) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_snap(v) for v in obj) if type(obj) is tuple else type(obj)(obj)
    if isinstance(obj, tuple):  # namedtuple
        return type(obj)(*(_snap(v) for v in obj))
    return obj


def _floats_equal(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


# Cases tagged "numpy" run NumPy code in the graph on torch's kernels
# (lib/trace/numpy.cc), whose float results may differ from NumPy's own in
# the last place (torch's vectorised sqrt is Sleef's, 0.5001 ulp): for them
# float tensors agree to a few ulps, everything else still exactly.
_ULPS = {"on": False}


def _close_in_ulps(ev, cv):
    if not _ULPS["on"] or not ev.is_floating_point():
        return False
    eps = torch.finfo(ev.dtype).eps
    return bool(torch.isclose(ev, cv, rtol=4 * eps, atol=0, equal_nan=True).all())


def _compare(e, c, path, out):
    """Appends a line to out for every difference between eager e and compiled c."""
    if type(e) is not type(c):
        out.append(f"{path}: eager {type(e).__name__}, compiled {type(c).__name__}")
        return
    if isinstance(e, _TensorSnap):
        ev, cv = e.value, c.value
        if (e.type_name, ev.dtype, tuple(ev.shape), ev.device, e.requires_grad) != \
                (c.type_name, cv.dtype, tuple(cv.shape), cv.device, c.requires_grad):
            out.append(f"{path}: eager {e.type_name} {ev.dtype}{list(ev.shape)} "
                       f"requires_grad={e.requires_grad}, compiled {c.type_name} "
                       f"{cv.dtype}{list(cv.shape)} requires_grad={c.requires_grad}")
        elif not torch.equal(ev, cv):
            same = (ev.is_floating_point() or ev.is_complex()) and \
                bool(((ev == cv) | (ev.isnan() & cv.isnan())).all())
            if not same and not _close_in_ulps(ev, cv):
                diff = (ev.double() - cv.double()).abs().max().item() if ev.numel() else 0
                out.append(f"{path}: tensor values differ (max abs diff {diff!r})")
    elif isinstance(e, np.ndarray):
        if e.dtype != c.dtype or e.shape != c.shape:
            out.append(f"{path}: eager ndarray {e.dtype}{list(e.shape)}, "
                       f"compiled {c.dtype}{list(c.shape)}")
        elif not np.array_equal(e, c, equal_nan=e.dtype.kind in "fc"):
            out.append(f"{path}: ndarray values differ")
    elif isinstance(e, dict):
        if list(e) != list(c):
            out.append(f"{path}: eager keys {list(e)!r}, compiled keys {list(c)!r}")
            return
        for k in e:
            _compare(e[k], c[k], f"{path}[{k!r}]", out)
    elif isinstance(e, (list, tuple)):
        if len(e) != len(c):
            out.append(f"{path}: eager {type(e).__name__} of {len(e)}, compiled of {len(c)}")
            return
        for i, (a, b) in enumerate(zip(e, c)):
            _compare(a, b, f"{path}[{i}]", out)
    elif isinstance(e, float):
        if not _floats_equal(e, c):
            out.append(f"{path}: eager {e!r}, compiled {c!r}")
    elif isinstance(e, _Raised):
        if (e.type_name, e.message) != (c.type_name, c.message):
            out.append(f"{path}: eager raised {e.type_name}({e.message}), "
                       f"compiled raised {c.type_name}({c.message})")
    else:
        try:
            equal = bool(e == c)
        except Exception as err:  # noqa: BLE001 - an == that raises is a difference
            equal = False
            out.append(f"{path}: == raised {err!r}")
            return
        if not equal:
            out.append(f"{path}: eager {e!r}, compiled {c!r}")


# ---------------------------------------------------------------- running
def _run_all(case, runner):
    """Runs every call of case through runner; returns one record per call."""
    if case.reset is not None:
        case.reset()
    records = []
    for i, make in enumerate(case.calls):
        args, kwargs = make()
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                result = _snap(runner(*args, **kwargs))
            except Exception as err:  # noqa: BLE001 - recorded and compared
                result = _Raised(type(err).__name__, str(err))
        state = _snap(case.state()) if case.state is not None else None
        records.append({"result": result, "args": _snap(list(args)), "kwargs": _snap(kwargs),
                        "state": state, "printed": buf.getvalue()})
    return records


def _check_case(case, compile_fn, verbose):
    problems = []
    eager = _run_all(case, case.fn)
    if any(isinstance(r["result"], _Raised) for r in eager):
        bad = [i for i, r in enumerate(eager) if isinstance(r["result"], _Raised)]
        problems.append(f"eager raised on calls {bad}: {eager[bad[0]]['result']}")
    compiled_obj = compile_fn(case.fn)
    compiled = _run_all(case, compiled_obj)
    _ULPS["on"] = "numpy" in case.tags
    try:
        for i, (e, c) in enumerate(zip(eager, compiled)):
            for key in ("result", "args", "kwargs", "state", "printed"):
                _compare(e[key], c[key], f"call {i} {key}", problems)
    finally:
        _ULPS["on"] = False
    stats = compiled_obj.stats()
    expected = {"graphs": case.graphs, "breaks": case.breaks}
    for key, want in expected.items():
        got = stats.get(key)
        if got != want:
            problems.append(f"{key}: expected {want}, got {got} ({case.why})")
    if verbose:
        print(f"{case.name}: {len(case.calls)} calls, stats {stats}, "
              f"{'ok' if not problems else f'{len(problems)} problems'}")
    if case.reset is not None:
        case.reset()
    return problems


def run_cases(cases, compile_fn, verbose=False):
    failures = []
    for case in cases:
        try:
            problems = _check_case(case, compile_fn, verbose)
        except Exception:  # noqa: BLE001 - a crashing case is a failure, not the end
            problems = ["harness error: " + traceback.format_exc().strip().splitlines()[-1]]
            if verbose:
                traceback.print_exc()
        failures.extend(f"{case.name}: {p}" for p in problems)
    return failures


# ---------------------------------------------------------------- eager self-check
class EagerRunner:
    """Calls fn directly and reports the case's expected counts as its stats."""

    def __init__(self, fn, expected=None):
        self.fn = fn
        if expected is None:
            matches = [c for c in break_cases.CASES if c.fn is fn or c.fn == fn]
            if len(matches) != 1:
                raise LookupError(f"{fn!r} is the fn of {len(matches)} cases")
            expected = {"graphs": matches[0].graphs, "breaks": matches[0].breaks}
        self.expected = dict(expected)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def stats(self):
        return dict(self.expected)


def _corpus_problems(cases):
    """Static checks of the corpus itself plus determinism of the call builders."""
    problems = []
    names = [c.name for c in cases]
    for n in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{n}: duplicate case name")
    for c in cases:
        if sum(1 for d in cases if d.fn is c.fn or d.fn == c.fn) != 1:
            problems.append(f"{c.name}: fn shared with another case")
        if not c.why:
            problems.append(f"{c.name}: no why")
        if c.breaks < 1:
            problems.append(f"{c.name}: a break corpus case with breaks={c.breaks}")
        if c.graphs < 0 or not c.calls:
            problems.append(f"{c.name}: graphs={c.graphs}, {len(c.calls)} calls")
        for i, make in enumerate(c.calls):
            first, second = _snap(make()), _snap(make())
            diffs = []
            _compare(first, second, f"call {i} inputs", diffs)
            problems.extend(f"{c.name}: not deterministic: {d}" for d in diffs)
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--eager-self-check", action="store_true",
                      help="run the corpus against itself (eager vs eager)")
    mode.add_argument("--runner", metavar="MODULE:FUNCTION",
                      help="compile_fn to test, e.g. mypkg.testing:compile_for_break_check")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    parser.add_argument("-v", "--verbose", action="store_true")
    opts = parser.parse_args(argv)

    cases = [c for c in break_cases.CASES if opts.k in c.name]
    if opts.eager_self_check:
        failures = _corpus_problems(cases)
        if not opts.k and len(cases) < 45:
            failures.append(f"corpus: only {len(cases)} cases, expected at least 45")
        failures += run_cases(cases, lambda fn: EagerRunner(fn), verbose=opts.verbose)
        # Again in reverse order: a case whose reset misses some state, or whose
        # result depends on an earlier case, shows up here.
        failures += [f"(reverse order) {f}" for f in
                     run_cases(cases[::-1], lambda fn: EagerRunner(fn), verbose=False)]
    else:
        module_name, _, attr = opts.runner.partition(":")
        compile_fn = getattr(importlib.import_module(module_name), attr or "compile_fn")
        failures = run_cases(cases, compile_fn, verbose=opts.verbose)

    for f in failures:
        print(f)
    print(f"{len(cases)} cases, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
