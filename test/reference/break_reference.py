"""torch._dynamo on the graph-break corpus (test/python/break_cases.py), for
comparison with libdynamo's counts: graphs handed to the backend and distinct
graph breaks over each case's calls, and whether results, printed output and
side effects equal eager. Also times torch._dynamo's warm-call overhead on a
trivial function and resnet18 (the figures bench/live_bench.py gives for
libdynamo). Run where torch >= 2 is installed:

    python3 test/reference/break_reference.py > test/reference/breaks_dynamo_2.11.json
"""
import json
import os
import sys
import time

import torch
import torch._dynamo
from torch._dynamo.utils import counters

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import break_cases  # noqa: E402
import break_check  # noqa: E402


class Compiled:
    def __init__(self, fn):
        torch._dynamo.reset()
        counters.clear()
        self.graphs = 0

        def backend(gm, example_inputs):
            self.graphs += 1
            return gm.forward
        self.fn = torch._dynamo.optimize(backend)(fn)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def stats(self):
        return {"graphs": self.graphs, "breaks": len(counters["graph_break"])}


def main():
    out = {"torch": torch.__version__, "python": sys.version.split()[0], "cases": {}}
    for case in break_cases.CASES:
        made = []

        def compile_fn(fn):
            c = Compiled(fn)
            made.append(c)
            return c
        problems = break_check.run_cases([case], compile_fn)
        wrong = [p for p in problems if "expected" not in p.split(":", 2)[1] or "call" in p]
        s = made[0].stats() if made else {}
        out["cases"][case.name] = {"graphs": s.get("graphs"), "breaks": s.get("breaks"),
                                   "equal_to_eager": not wrong, "problems": wrong[:3]}

    def per_call_us(fn, n):
        best = 1e9
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            best = min(best, (time.perf_counter() - t) / n)
        return best * 1e6
    a, b = torch.ones(1), torch.ones(1)
    f = lambda x, y: x + y  # noqa: E731
    torch._dynamo.reset()
    g = torch._dynamo.optimize(lambda gm, ex: gm.forward)(f)
    g(a, b)
    eager, compiled = per_call_us(lambda: f(a, b), 20000), per_call_us(lambda: g(a, b), 20000)
    out["trivial_overhead_us"] = round(compiled - eager, 2)
    try:
        import torchvision
        torch.set_num_threads(2)
        m = torchvision.models.resnet18().eval()
        x = torch.randn(1, 3, 32, 32)
        torch._dynamo.reset()
        result = {}
        opt = torch._dynamo.optimize(lambda gm, ex: (result.setdefault("out", gm(*ex)), lambda *a: result["out"])[1])(m)
        with torch.no_grad():
            t = time.perf_counter()
            opt(x)
            out["resnet18_first_call_ms"] = round((time.perf_counter() - t) * 1e3, 1)
            out["resnet18_machinery_us"] = round(per_call_us(lambda: opt(x), 300), 1)
    except Exception as e:  # noqa: BLE001
        out["resnet18_error"] = repr(e)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
