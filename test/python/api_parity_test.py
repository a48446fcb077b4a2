"""The torch._dynamo-shaped API on torch 2.x: dynamo.compile (torch.compile's
signature: backend, fullgraph, mode/options for Inductor, disable),
graph_break, export(aten_graph=True, decomposition_table=...), Guard's
torch-spelled attributes.

    scripts/python test/python/api_parity_test.py
"""
import os
import sys

import torch
from torch._decomp import get_decompositions

import dynamo

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


TESTS = [export_tags_inputs, compile_signature, compile_inductor_mode_and_options, graph_break_splits, export_aten_graph]

if __name__ == "__main__":
    sys.exit(check_runner.run(TESTS, sys.argv[1:]))
