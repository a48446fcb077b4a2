"""Load time of a capture (resnet18's, for the closing note of the security issue) with and
without the trust checks: BUILD_DIR=build scripts/python test/security/measure_validation.py R18.pb
(R18.pb: dynamo-export a script holding torchvision.models.resnet18().eval() with --fn model.forward
-i x=f32[1,3,224,224] --weights embed)."""
import functools, operator, math, statistics, sys, time
import torch
from dynamo import loader, trust

PATH = sys.argv[1]
capture = loader.read_capture(PATH)
x = torch.randn(1, 3, 224, 224)

def unchecked():
    """The pre-fix resolution: walk attributes of the named namespace."""
    def resolve(target, what):
        parts = target.split(".")
        obj = {"torch": torch, "operator": operator, "math": math}[parts[0]]
        for p in parts[1:]:
            obj = getattr(obj, p)
        return obj
    ident = lambda text, what: text
    return {"identifier": ident, "attribute_path": ident, "qualname": ident, "string": ident,
            "call_target": resolve, "method": lambda t, w: t.split(".", 1)[1],
            "layout": lambda t, w: getattr(torch, t)}

originals = {k: getattr(trust, k) for k in unchecked()}
trust._load_allowlist()

def timed(n=15):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        loader.to_graph_module(capture, 0, base_dir=".")
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)

def checks_only(n=15):
    """Just the checks, over every string field the loader reads."""
    g = capture.graphs[0]
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        trust.qualname(capture.function_name, "f")
        for node in g.nodes:
            trust.identifier(node.name, "n")
            for k in node.kwargs:
                trust.identifier(k.name, "k")
            if node.kind == 2:
                trust.attribute_path(node.target, "a")
            elif node.kind == 3:
                trust.call_target(node.target, "t")
            elif node.kind == 4:
                trust.method(node.target, "m")
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)

t_read = []
for _ in range(5):
    t0 = time.perf_counter(); loader.read_capture(PATH); t_read.append(time.perf_counter() - t0)
for round_ in range(2):
    for k, v in unchecked().items():
        setattr(trust, k, v)
    off = timed()
    for k, v in originals.items():
        setattr(trust, k, v)
    on = timed()
    print(f"round {round_}: to_graph_module median/min  unchecked {off[0]*1e3:.1f}/{off[1]*1e3:.1f} ms"
          f"  checked {on[0]*1e3:.1f}/{on[1]*1e3:.1f} ms")
c = checks_only()
print(f"read_capture (46.9 MB .pb) median {statistics.median(t_read)*1e3:.1f} ms")
print(f"the checks alone over {len(capture.graphs[0].nodes)} nodes: median {c[0]*1e6:.0f} us, min {c[1]*1e6:.0f} us")
