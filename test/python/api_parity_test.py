"""The torch._dynamo-shaped API on torch 2.x: dynamo.compile (torch.compile's
signature: backend, fullgraph, mode/options for Inductor, disable),
graph_break, export(aten_graph=True, decomposition_table=...), Guard's
torch-spelled attributes; allow_in_graph, disallow_in_graph,
assume_constant_result, run, skip / disable(recursive=False), is_compiling
and dynamo.compiler, each run next to torch._dynamo on the same program in
this process (graph counts, the ops of each graph, results equal to eager).

    scripts/python test/python/api_parity_test.py
"""
import os
import sys
import warnings

import torch
from torch._decomp import get_decompositions

import dynamo
import torch._dynamo
from dynamo.loader import CaptureError, to_graph_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_runner  # noqa: E402

x, y = torch.randn(4), torch.randn(4)


def compile_signature():
    g = dynamo.compile(lambda a, b: torch.nn.functional.gelu(a) + b, backend="eager", fullgraph=True)
    torch.testing.assert_close(g(x, y), torch.nn.functional.gelu(x) + y)

    @dynamo.compile(backend="eager")
    def h(a):
        return a.cos() + 1
    torch.testing.assert_close(h(x), x.cos() + 1)
    m = torch.nn.Linear(4, 2)
    assert dynamo.compile(m, disable=True) is m
    assert isinstance(dynamo.compile(m, backend="eager"), dynamo.OptimizedModule)


def compile_inductor_mode_and_options():
    h = dynamo.compile(lambda a: torch.sin(a) * 2, mode="max-autotune-no-cudagraphs")
    torch.testing.assert_close(h(x), torch.sin(x) * 2)
    k = dynamo.compile(lambda a: torch.cos(a) - 1, options={"epilogue_fusion": False})
    torch.testing.assert_close(k(x), torch.cos(x) - 1)
    for bad in (dict(backend="eager", mode="max-autotune"), dict(options={"no_such_option": 1})):
        try:
            dynamo.compile(lambda a: a, **bad)
        except ValueError:
            continue
        raise AssertionError(f"dynamo.compile accepted {bad}")


def graph_break_splits():
    def f(a, b):
        c = torch.relu(a) * b
        dynamo.graph_break()
        return c.sum()
    out = dynamo.explain(f)(x, y)
    assert (out.graph_count, out.graph_break_count) == (2, 1), (out.graph_count, out.graph_break_count)
    torch.testing.assert_close(dynamo.optimize("eager")(f)(x, y), f(x, y))
    try:
        dynamo.compile(f, backend="eager", fullgraph=True)(x, y)
    except dynamo.Unsupported:
        return
    raise AssertionError("fullgraph=True did not raise at graph_break()")


def export_aten_graph():
    a, b = torch.randn(2, 3), torch.randn(4, 3)

    def f(p, q):
        return torch.nn.functional.gelu(p) @ q.t()
    gm, guards = dynamo.export(f, a, b, aten_graph=True,
                               decomposition_table=get_decompositions([torch.ops.aten.gelu]))
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert all(isinstance(t, torch._ops.OpOverload) for t in targets), targets
    assert torch.ops.aten.gelu.default not in targets and torch.ops.aten.erf.default in targets, targets
    torch.testing.assert_close(gm(a, b), f(a, b))
    plain, _ = dynamo.export(f, a, b, aten_graph=True)
    assert torch.ops.aten.gelu.default in {n.target for n in plain.graph.nodes}
    g = next(g for g in guards if g.kind == "TENSOR_MATCH")
    assert g.name == g.source and g.guard_types == ["TENSOR_MATCH"] and g.create_fn_name == "TENSOR_MATCH"


def export_tags_inputs():
    """Placeholders the exported graph reads carry their tensor's Python
    attributes, as torch._dynamo.export's do (meta["tensor_dict"])."""
    a, b, unused = torch.randn(3), torch.randn(3), torch.randn(3)
    a.tag, b.tag, unused.tag = "a", "b", "unused"
    gm, _ = dynamo.export(lambda p, q, r: p * q, a, b, unused)
    tags = [n.meta["tensor_dict"]["tag"] for n in gm.graph.nodes
            if n.op == "placeholder" and "tensor_dict" in n.meta]
    assert tags == ["a", "b"], tags


# ------------------------------------------------- side by side with torch._dynamo
def _names(gm):
    """The ops of a graph, comparable across the two: a call_function's
    callable by name, a call_method by its method name."""
    return [getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes
            if n.op in ("call_function", "call_method")]


def _recorder():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm
    return graphs, backend


def _both(fn, *calls):
    """fn under dynamo and under torch._dynamo (eager backends that record
    the graphs), each called with every argument tuple in `calls`; the
    results must equal eager's. Returns (ours, torch's): lists of graphs."""
    expected = [fn(*args) for args in calls]
    ours, backend = _recorder()
    opt = dynamo.optimize(backend)(fn)
    for args, want in zip(calls, expected):
        torch.testing.assert_close(opt(*args), want)
    torch._dynamo.reset()
    theirs, backend = _recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = torch.compile(fn, backend=backend)
        for args, want in zip(calls, expected):
            torch.testing.assert_close(opt(*args), want)
    torch._dynamo.reset()
    return ours, theirs


def _same_graphs(ours, theirs):
    a, b = [_names(g) for g in ours], [_names(g) for g in theirs]
    assert a == b, f"dynamo {a} != torch._dynamo {b}"


def _scaled_sin(a, b):
    # numpy on a shape: traced into, this would be a break; allowed, it runs
    # on meta tensors (a fresh shape each call of the backend's graph).
    import numpy as np
    return torch.sin(a) * b / float(np.sqrt(a.shape[-1]))


def allow_in_graph_one_node():
    dynamo.allow_in_graph(_scaled_sin)
    torch._dynamo.allow_in_graph(_scaled_sin)

    def f(a, b):
        return _scaled_sin(a + 1, b).cos()
    ours, theirs = _both(f, (x, y), (x, y))
    _same_graphs(ours, theirs)
    assert _names(ours[0]) == ["add", "_scaled_sin", "cos"], _names(ours[0])
    node = next(n for n in ours[0].graph.nodes if n.target is _scaled_sin)
    meta = node.meta["dynamo_meta"]
    assert meta["sizes"] == [4] and meta["device"] == torch.device("cpu") and meta["dtype"] == torch.float32, meta
    # Gradients flow through the node: requires_grad from the meta run.
    a = torch.randn(3, 5, requires_grad=True)
    ga = torch.autograd.grad(f(a, y[:1]).sum(), a)[0]
    out = dynamo.optimize("eager")(f)(a, y[:1])
    assert out.requires_grad
    torch.testing.assert_close(torch.autograd.grad(out.sum(), a)[0], ga)
    # A trace that relied on the entry guards the function's identity.
    graphs, backend = _recorder()
    dynamo.optimize(backend)(f)(x, y)
    guards = dynamo.explain(f)(x, y).out_guards
    assert any(g.kind == "ID_MATCH" and "_scaled_sin" in g.source for g in guards), guards


def allow_in_graph_effects_run_with_the_graph():
    """A node of an allowed function is never dropped as unused: its Python
    effects happen on every call (torch's test_grad_state_mutated)."""
    seen = []

    def note():
        seen.append(torch.is_grad_enabled())
    dynamo.allow_in_graph(note)
    torch._dynamo.allow_in_graph(note)

    def f(a):
        note()
        return a + 1
    counts = []
    for compile_ in (lambda b: dynamo.optimize(b)(f), lambda b: torch.compile(f, backend=b)):
        torch._dynamo.reset()
        graphs, backend = _recorder()
        opt = compile_(backend)
        seen.clear()
        torch.testing.assert_close(opt(x), x + 1)
        first = len(seen)  # the capture's run (meta or fake tensors), then the graph's
        torch.testing.assert_close(opt(x), x + 1)
        counts.append((first, len(seen) - first, [_names(g) for g in graphs]))
    torch._dynamo.reset()
    assert counts[0] == counts[1] == (2, 1, [["note", "add"]]), counts
    assert all(seen), seen


def allow_in_graph_that_reads_values_breaks():
    """An allowed function that cannot run on meta tensors (.item()) is a
    graph break at the call that says why; the call then runs in Python,
    where its own frame is captured (breaking at .item()): the graphs
    torch._dynamo makes too. Both equal eager."""
    def reads(a):
        return a * a.sum().item()
    dynamo.allow_in_graph(reads)
    torch._dynamo.allow_in_graph(reads)

    def f(a):
        return reads(a.cos()) + 1
    ours, theirs = _both(f, (x,))
    _same_graphs(ours, theirs)
    assert [_names(g) for g in ours] == [["cos"], ["sum"], ["mul"], ["add"]], [_names(g) for g in ours]
    out = dynamo.explain(f)(x)
    reason = out.break_reasons[0].reason
    assert "allow_in_graph" in reason and "meta" in reason, reason


def allow_in_graph_not_in_capture_files():
    """A capture's allowed-function node runs only in the live capture that
    made it: built from the capture alone (as a .pb is), it is refused."""
    graphs, backend = _recorder()
    opt = dynamo.optimize(backend)(lambda a, b: _scaled_sin(a, b) * 2)
    dynamo.allow_in_graph(_scaled_sin)
    opt(x, y)
    capture = opt.dynamo_runtime.captures_made[-1]
    try:
        to_graph_module(capture, 0)
    except CaptureError as e:
        assert "allow_in_graph" in str(e), e
        return
    raise AssertionError("an allowed function loaded from a capture without its callable")


def disallow_in_graph_breaks():
    dynamo.disallow_in_graph(torch.sub)
    torch._dynamo.disallow_in_graph(torch.sub)
    try:
        def f(a):
            a = torch.add(a, 1)
            a = torch.sub(a, 1)
            return torch.add(a, 1)
        ours, theirs = _both(f, (x,))
        _same_graphs(ours, theirs)
        assert [_names(g) for g in ours] == [["add"], ["add"]], [_names(g) for g in ours]
    finally:
        dynamo.allow_in_graph(torch.sub)
        torch._dynamo.allow_in_graph(torch.sub)
    ours, _ = _both(f, (x,))
    assert [_names(g) for g in ours] == [["add", "sub", "add"]], [_names(g) for g in ours]


_scale = {"value": 2}


def _current_scale():
    return _scale["value"]


def _other_scale():
    return 5


dynamo.assume_constant_result(_current_scale)
dynamo.assume_constant_result(_other_scale)
torch._dynamo.assume_constant_result(_current_scale)
torch._dynamo.assume_constant_result(_other_scale)
SCALE = _current_scale


def _times_scale(a):
    return a * SCALE()


def assume_constant_result_is_constant():
    """The result is a constant of the graph and is not guarded (a change is
    not seen: the same stale answer as torch's); the function's identity is
    (rebinding the global recaptures, in both)."""
    global SCALE
    results = {}
    for name, compile_ in (("dynamo", lambda f, b: dynamo.optimize(b)(f)),
                           ("torch", lambda f, b: torch.compile(f, backend=b))):
        torch._dynamo.reset()
        _scale["value"], SCALE = 2, _current_scale
        graphs, backend = _recorder()
        opt = compile_(_times_scale, backend)
        first = opt(x)
        _scale["value"] = 3
        stale = opt(x)
        SCALE = _other_scale
        rebound = opt(x)
        results[name] = (len(graphs), [_names(g) for g in graphs])
        torch.testing.assert_close(first, x * 2)
        torch.testing.assert_close(stale, x * 2)
        torch.testing.assert_close(rebound, x * 5)
    SCALE = _current_scale
    torch._dynamo.reset()
    assert results["dynamo"] == results["torch"] == (2, [["mul"], ["mul"]]), results


def run_uses_only_existing_captures():
    """torch's test_nested_optimize_run: dynamo.run(fn) runs the captures
    made, a new shape runs eagerly, nothing is captured."""
    counts = {}
    for name, compile_ in (("dynamo", lambda f, b: dynamo.optimize(b)(f)),
                           ("torch", lambda f, b: torch.compile(f, backend=b))):
        torch._dynamo.reset()
        graphs, backend = _recorder()

        def fn(a):
            return torch.relu(torch.cos(a) + torch.sin(a))
        opt = compile_(fn, backend)
        a, b, c = torch.randn(4), torch.randn(4, 4), torch.randn(4, 4, 4)
        torch.testing.assert_close(opt(a), fn(a))
        torch.testing.assert_close(opt(b), fn(b))
        run = (dynamo if name == "dynamo" else torch._dynamo).run(opt)
        torch.testing.assert_close(run(c), fn(c))
        torch.testing.assert_close(run(a), fn(a))
        counts[name] = len(graphs)
    torch._dynamo.reset()
    assert counts == {"dynamo": 2, "torch": 2}, counts

    # @run() on a function an optimized caller calls: traced into the caller
    # (torch's test_nested_optimize_decorator: one graph of 4 ops).
    @dynamo.run()
    def fn1(a):
        return torch.sin(a) * 10

    def fn2(a):
        return torch.relu(fn1(a) + 1)
    graphs, backend = _recorder()
    torch.testing.assert_close(dynamo.optimize(backend)(fn2)(x), fn2(x))
    assert [_names(g) for g in graphs] == [["sin", "mul", "add", "relu"]], [_names(g) for g in graphs]


def _inner(a):
    return a.sin() * 2


def _outer_body(a):
    b = _inner(a)
    return b + 1


def skip_frames_but_not_callees():
    """disable(recursive=False) (torch.compiler's spelling; dynamo.skip too):
    the function's own frame is not captured, the code it calls is."""
    for ours_skip in (dynamo.skip(_outer_body), dynamo.disable(_outer_body, recursive=False),
                      dynamo.compiler.disable(_outer_body, recursive=False)):
        theirs_skip = torch.compiler.disable(_outer_body, recursive=False)

        def top(a, skipped):
            return skipped(a.cos()) * 3
        expected = top(x, _outer_body)
        ours, backend = _recorder()
        torch.testing.assert_close(dynamo.optimize(backend)(top)(x, ours_skip), expected)
        torch._dynamo.reset()
        theirs, backend = _recorder()
        torch.testing.assert_close(torch.compile(top, backend=backend)(x, theirs_skip), expected)
        torch._dynamo.reset()
        _same_graphs(ours, theirs)
        assert [_names(g) for g in ours] == [["cos"], ["sin", "mul"], ["mul"]], [_names(g) for g in ours]
    # recursive=True: nothing below is captured either.
    disabled = dynamo.disable(_outer_body)
    ours, backend = _recorder()
    dynamo.optimize(backend)(lambda a: disabled(a.cos()) * 3)(x)
    assert [_names(g) for g in ours] == [["cos"], ["mul"]], [_names(g) for g in ours]
    # The original function is untouched: optimized alone, it is captured whole.
    ours, backend = _recorder()
    dynamo.optimize(backend)(_outer_body)(x)
    assert [_names(g) for g in ours] == [["sin", "mul", "add"]], [_names(g) for g in ours]


def is_compiling_in_captures():
    def f(a):
        if dynamo.is_compiling() and torch.compiler.is_compiling():
            return a + 1
        return a - 1
    assert not dynamo.is_compiling() and not dynamo.compiler.is_compiling()
    torch.testing.assert_close(dynamo.optimize("eager")(f)(x), x + 1)
    torch.testing.assert_close(torch.compile(f, backend="eager")(x), x + 1)
    torch._dynamo.reset()
    torch.testing.assert_close(f(x), x - 1)
    names = {"allow_in_graph", "assume_constant_result", "compile", "disable", "is_compiling",
             "is_dynamo_compiling", "list_backends", "reset"}
    assert names <= set(dir(torch.compiler)) and all(callable(getattr(dynamo.compiler, n)) for n in names)


def backend_failure_raises():
    """A backend that raises fails the call in both (BackendCompilerFailed,
    the backend's exception its inner_exception), on every call."""
    def broken(gm, example_inputs):
        raise RuntimeError("duck!")

    def f(a, b):
        return a + b / (a - b)
    for make, expected in ((lambda: dynamo.optimize(broken)(f), dynamo.BackendCompilerFailed),
                           (lambda: torch._dynamo.optimize(broken)(f), torch._dynamo.exc.BackendCompilerFailed)):
        opt = make()
        for _ in range(2):
            try:
                opt(x, y)
            except expected as e:
                assert isinstance(e.inner_exception, RuntimeError) and "duck!" in str(e), repr(e)
            else:
                raise AssertionError(f"{expected.__module__}: a backend that raises was not reported")
        torch._dynamo.reset()


TESTS = [export_tags_inputs, backend_failure_raises, compile_signature, compile_inductor_mode_and_options, graph_break_splits, export_aten_graph,
         allow_in_graph_one_node, allow_in_graph_effects_run_with_the_graph, allow_in_graph_that_reads_values_breaks,
         allow_in_graph_not_in_capture_files, disallow_in_graph_breaks, assume_constant_result_is_constant,
         run_uses_only_existing_captures, skip_frames_but_not_callees, is_compiling_in_captures]

if __name__ == "__main__":
    sys.exit(check_runner.run(TESTS, sys.argv[1:]))
