"""Runs a loaded capture against eager execution (test/capture/capture_test.cc).

run_case(pb_path, fn, make_inputs) -> list of problems:
  - the example inputs satisfy the capture's guards (so they match the specs);
  - the graph's outputs equal eager's (same structure; tensors equal up to
    float rounding, NaNs included);
  - every node's recorded metadata (dtype, sizes, strides when recorded,
    device, requires_grad) equals what torch produces running the graph.
"""
import torch
import torch.fx

from dynamo.guards import check_guards, frame_for_call, resolve_source
from dynamo.loader import load


def _compare(eager, graph, path, problems):
    if isinstance(eager, torch.Tensor):
        if not isinstance(graph, torch.Tensor):
            problems.append(f"{path}: eager tensor, graph {type(graph).__name__}")
        elif eager.dtype != graph.dtype or eager.shape != graph.shape:
            problems.append(f"{path}: eager {eager.dtype}{list(eager.shape)}, "
                            f"graph {graph.dtype}{list(graph.shape)}")
        elif eager.dtype.is_floating_point or eager.dtype.is_complex:
            if not torch.allclose(eager, graph, rtol=1e-5, atol=1e-6, equal_nan=True):
                problems.append(f"{path}: values differ by {(eager - graph).abs().max().item()}")
        elif not torch.equal(eager, graph):
            problems.append(f"{path}: values differ")
    elif isinstance(eager, dict):
        if not isinstance(graph, dict) or list(graph) != list(eager):
            problems.append(f"{path}: eager dict {list(eager)}, graph {graph!r}")
            return
        for k in eager:
            _compare(eager[k], graph[k], f"{path}[{k!r}]", problems)
    elif isinstance(eager, (list, tuple)):
        if not isinstance(graph, (list, tuple)) or len(graph) != len(eager):
            problems.append(f"{path}: eager {type(eager).__name__} of {len(eager)}, graph {graph!r}")
            return
        for i, (e, g) in enumerate(zip(eager, graph)):
            _compare(e, g, f"{path}[{i}]", problems)
    elif eager != graph:
        problems.append(f"{path}: eager {eager!r}, graph {graph!r}")


class _MetaRecorder(torch.fx.Interpreter):
    """Runs the graph and compares each node's result with its recorded meta."""

    def __init__(self, gm, problems):
        super().__init__(gm)
        self.problems = problems
        self.checked = 0

    def run_node(self, n):
        result = super().run_node(n)
        meta = n.meta.get("dynamo_meta")
        if meta is not None and isinstance(result, torch.Tensor):
            self.checked += 1
            got = {"dtype": result.dtype, "sizes": list(result.shape), "device": result.device,
                   "requires_grad": result.requires_grad}
            for key, value in got.items():
                if meta[key] != value:
                    self.problems.append(f"node {n.name} ({n.target}): {key} recorded "
                                         f"{meta[key]}, torch gives {value}")
            if meta["strides"] and meta["strides"] != list(result.stride()):
                self.problems.append(f"node {n.name} ({n.target}): strides recorded "
                                     f"{meta['strides']}, torch gives {list(result.stride())}")
        return result


def run_case(pb_path, fn, make_inputs):
    problems = []
    gm, capture = load(pb_path)
    args = make_inputs()
    kwargs = {}
    if hasattr(args, "kwargs"):  # capture_cases.Call
        args, kwargs = args.args, args.kwargs
    failure = check_guards(capture, fn, args, kwargs)
    if failure is not None:
        problems.append(f"example inputs fail a guard: {failure[1]}")
        return problems, 0
    frame = frame_for_call(fn, args, kwargs)
    placeholders = [resolve_source(spec.name, frame, {})
                    for spec in capture.inputs if spec.WhichOneof("value") == "tensor"]
    torch.manual_seed(0)
    eager = fn(*args, **kwargs)
    torch.manual_seed(0)
    recorder = _MetaRecorder(gm, problems)
    graph = recorder.run(*placeholders)
    _compare(eager, graph, "output", problems)
    return problems, recorder.checked


def check_guard_scenarios(pb_path, fn, scenarios):
    """Each scenario's inputs must fail exactly on the expected guard source
    (or pass when None is expected). Returns problems."""
    from dynamo.loader import read_capture
    capture = read_capture(pb_path)
    problems = []
    for what, make, expected in scenarios:
        made = make()
        undo = getattr(made, "undo", None)
        args = made.args if undo else made
        try:
            failure = check_guards(capture, fn, args)
        finally:
            if undo:
                undo()
        got = failure[0].source if failure else None
        if got != expected:
            detail = failure[1] if failure else "all guards hold"
            problems.append(f"{what}: expected the guard on {expected} to fail, got {got} ({detail})")
    return problems


def reference_record():
    """(torch version, cases): torch._dynamo's record of the corpus, made now, in this process, by
    the venv's torch (test/reference/dynamo_reference.py): the oracle is the
    torch the project runs with, never a file from another version."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
    import dynamo_reference
    data = dynamo_reference.record()
    return data["torch"], data["cases"]


def compare_with_reference(pb_path, case, target):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
    from compare_reference import compare_case
    if case["target"] != target:
        return [f"the reference records {case['target']!r} here, the corpus has {target!r}"]
    return compare_case(pb_path, case)
