"""The peers of bench/capture_bench.cc: torch's own ways to capture the same
models, timed in the same process (whole capture; shapes included where the
tool computes them)."""
import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp


def fx_symbolic_trace(model, example):
    return torch.fx.symbolic_trace(model)


def fx_trace_with_shapes(model, example):
    gm = torch.fx.symbolic_trace(model)
    with torch.no_grad():
        ShapeProp(gm).propagate(example)
    return gm


def jit_trace(model, example):
    with torch.no_grad():
        return torch.jit.trace(model, example, check_trace=False)
