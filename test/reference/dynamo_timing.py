"""Capture time of torch._dynamo (a fresh trace each time: reset, then compile
with a backend that returns the graph unchanged) beside torch.fx.symbolic_trace
and torch.jit.trace, in one run; libdynamo cannot run next to it (it embeds
3.11; torch._dynamo needs torch >= 2), so the fx and jit columns are the
common yardstick with bench/capture_bench.
    python3 test/reference/dynamo_timing.py
"""
import time

import torch
import torch._dynamo
import torch.fx
import torchvision


def best_ms(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return min(times)


def dynamo_capture(model, x):
    torch._dynamo.reset()
    graphs = []
    compiled = torch.compile(model, backend=lambda gm, ex: (graphs.append(gm), gm.forward)[1])
    with torch.no_grad():
        compiled(x)
    assert len(graphs) == 1


for name in ["resnet18", "mobilenet_v2"]:
    model = getattr(torchvision.models, name)().eval()
    x = torch.randn(1, 3, 224, 224)
    dyn = best_ms(lambda: dynamo_capture(model, x))
    fx = best_ms(lambda: torch.fx.symbolic_trace(model))
    with torch.no_grad():
        jit = best_ms(lambda: torch.jit.trace(model, x, check_trace=False))
    print(f"{name}: torch._dynamo {dyn:.1f} ms, fx.symbolic_trace {fx:.1f} ms, jit.trace {jit:.1f} ms; "
          f"dynamo/fx {dyn / fx:.1f}x, dynamo/jit {dyn / jit:.2f}x")
