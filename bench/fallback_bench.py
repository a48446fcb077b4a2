"""The meta fallback (issue 15) measured: the share of call nodes inferred by
the op registry vs torch's meta kernels on head_to_head's models, and the
capture cost of fallback ops (12 blocks of kthvalue/logcumsumexp/outer vs
the same graph of registry ops; with a build before the fallback the first
one breaks at each of them instead).

    scripts/python bench/fallback_bench.py models
    scripts/python bench/fallback_bench.py synthetic
"""
import os
import sys
import time
import warnings

import torch

import dynamo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.simplefilter("ignore")
import head_to_head as h  # noqa: E402

def explain(fn, args):
    dynamo.reset()
    t = time.perf_counter()
    o = dynamo.explain(fn)(*args)
    return o, time.perf_counter() - t

mode = sys.argv[1] if len(sys.argv) > 1 else "synthetic"
if mode == "models":
    for name, make in h.models(["resnet18", "vit_b_16", "bert", "gpt2"]):
        model, inputs = make()
        o, t = explain(model, inputs)  # head_to_head's mode: as constructed (train), grad on
        inferred = sum(len(g) for g in getattr(o, "inferred_on_meta", []))
        ops = sorted({x for g in getattr(o, "inferred_on_meta", []) for x in g})
        print(f"{name}: graphs {o.graph_count} breaks {o.graph_break_count} call nodes {o.op_count} "
              f"registry {o.op_count - inferred} fallback {inferred} {ops} explain {t:.2f}s "
              f"breaks: {[b.reason[:90] for b in o.break_reasons][:3]}")
else:
    # A model whose forward uses ops the registry lacks, 12 blocks deep.
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)
        def forward(self, x):
            y = self.lin(x)
            v = torch.kthvalue(y, 2, dim=1, keepdim=True).values
            z = y.logcumsumexp(1) - v
            return torch.nn.functional.relu(z) + torch.outer(z[:, 0], z[0]).sum(0)
    class Registry(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)
        def forward(self, x):
            y = self.lin(x)
            v = torch.amax(y, 1, keepdim=True)
            z = y.cumsum(1) - v
            return torch.nn.functional.relu(z) + (z[:, :1] * z[0]).sum(0)
    for label, block in [("fallback ops (kthvalue, logcumsumexp, outer)", Block), ("registry ops (amax, cumsum, mul)", Registry)]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[block() for _ in range(12)]).eval()
        x = torch.randn(8, 16)
        times = []
        for _ in range(5):
            with torch.no_grad():
                o, t = explain(model, (x,))
            times.append(t)
        inferred = sum(len(g) for g in getattr(o, "inferred_on_meta", []))
        print(f"{label}: graphs {o.graph_count} breaks {o.graph_break_count} call nodes {o.op_count} fallback {inferred} "
              f"capture+run median {sorted(times)[2]*1e3:.1f} ms (min {min(times)*1e3:.1f})")
