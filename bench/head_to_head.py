"""dynamo vs torch._dynamo in one process, interleaved, reset between:
first-call capture time (first call with a trivial backend minus one eager
call), graphs, breaks and guards per capture, and warm per-call overhead over
eager (for resnet18, the machinery alone: its graph returns a stored output;
for mobilenet_v2, the whole call with its graph).
One table with ratios; no assertions (benchmarks are not tests).

    scripts/python bench/head_to_head.py [--quick] [--device=cuda] [model ...]
    scripts/python bench/head_to_head.py --inductor [--device=cuda] [model ...]

--inductor races the compilers end to end instead: dynamo.optimize("inductor")
(our graph handed to torch's Inductor) vs torch.compile(backend="inductor"),
each in its own process with its own empty Inductor cache (a warm cache
would make the second side's compile free): compile time (first call minus
one eager call), then steady-state latency and the speed-up over eager.

--device=cuda puts every model and input on the GPU (times are taken after
torch.cuda.synchronize()); the default is the CPU.

Models: resnet18, mobilenet_v2, vit_b_16 (torchvision), bert (BERT-base from a
transformers config), gpt2 (GPT-2 small from a config), a timm model
(resnet50d), all random weights, with torch.fx.symbolic_trace's time beside
(it infers no shapes and makes no guards); warm overhead on a two-tensor function, a
3-layer MLP, resnet18 at 1x3x32x32 and mobilenet_v2 at 1x3x64x64.
"""
import sys
import time
import warnings

import torch

import dynamo
import torch._dynamo

QUICK = "--quick" in sys.argv
DEVICE = torch.device(next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--device=")), "cpu"))


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def on_device(model, inputs):
    return model.to(DEVICE), tuple(i.to(DEVICE) for i in inputs)
warnings.simplefilter("ignore")
torch.set_num_threads(2)


class Counter:
    """A trivial backend that counts graphs (and keeps them for op counts)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def models(names):
    import torchvision
    make = {
        "resnet18": lambda: (torchvision.models.resnet18(), (torch.randn(1, 3, 224, 224),)),
        "mobilenet_v2": lambda: (torchvision.models.mobilenet_v2(), (torch.randn(1, 3, 224, 224),)),
        "vit_b_16": lambda: (torchvision.models.vit_b_16(), (torch.randn(1, 3, 224, 224),)),
    }

    def bert():
        from transformers import BertConfig, BertModel
        return BertModel(BertConfig()), (torch.randint(0, 30000, (1, 128)),)

    def gpt2():
        from transformers import GPT2Config, GPT2LMHeadModel
        return GPT2LMHeadModel(GPT2Config()), (torch.randint(0, 50000, (1, 128)),)

    def timm_model():
        import timm
        return timm.create_model("resnet50d", pretrained=False), (torch.randn(1, 3, 224, 224),)

    make.update(bert=bert, gpt2=gpt2, resnet50d=timm_model)
    for name in names or make:
        yield name, (lambda name=name: on_device(*make[name]()))


def first_call(opt_fn, model, inputs):
    """The first call's time minus the median of three steady eager calls
    (one eager call's noise is as large as a small capture)."""
    model(*inputs)  # warm: the eager calls subtracted are steady ones
    runs = []
    for _ in range(3):
        sync()
        t = time.perf_counter()
        model(*inputs)
        sync()
        runs.append(time.perf_counter() - t)
    eager = sorted(runs)[1]
    t = time.perf_counter()
    opt_fn(*inputs)
    sync()
    return time.perf_counter() - t - eager


def ours(model, inputs):
    dynamo.reset()
    backend = Counter()
    opt = dynamo.optimize(backend)(model)
    compiled_guards = dynamo._C.cache_stats()["guard_compile_seconds"]
    seconds = first_call(opt, model, inputs)
    runtime = opt.dynamo_runtime
    guards = sum(len(c.guards) for c in runtime.captures_made)
    phases = {k: sum(p[k] for p in runtime.phase_times) for k in ("trace", "rewrite", "graph", "backend")}
    phases["guards"] = dynamo._C.cache_stats()["guard_compile_seconds"] - compiled_guards
    return seconds, len(backend.graphs), len(runtime.break_sites), guards, phases


def theirs(model, inputs):
    torch._dynamo.reset()
    backend = Counter()
    opt = torch.compile(model, backend=backend)
    seconds = first_call(opt, model, inputs)
    from torch._dynamo.utils import counters
    breaks = sum(counters["graph_break"].values())
    guards = 0
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
        fn = model.forward if isinstance(model, torch.nn.Module) else model
        guards = sum(len(str(e.guard_manager).splitlines()) for e in _debug_get_cache_entry_list(fn.__code__))
    except Exception:  # noqa: BLE001 - guard counts are informative only
        pass
    counters.clear()
    return seconds, len(backend.graphs), breaks, guards


def fx_trace(model):
    """Seconds of torch.fx.symbolic_trace(model) (no shapes inferred, no
    guards), the median of three; None where FX cannot trace the model
    (transformers' models need their own tracer)."""
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        try:
            torch.fx.symbolic_trace(model)
        except Exception:  # noqa: BLE001 - a model FX cannot trace has no figure
            return None
        runs.append(time.perf_counter() - t)
    return sorted(runs)[1]


def _stored(gm, example_inputs):
    """A backend whose graph returns the output it computed once: what is
    timed is the machinery around the graph (guards, frame, call)."""
    out = gm(*example_inputs)
    return lambda *a: out


def warm_overhead(fn, args, n, stored=False):
    def per_call(f):
        for _ in range(50):
            f(*args)
        sync()
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                f(*args)
            sync()
            best = min(best, (time.perf_counter() - t) / n)
        return best
    # With `stored`, nothing of the model runs: the per-call time is all
    # machinery (a large model's own run would drown it in noise).
    eager = 0.0 if stored else per_call(fn)
    backend = _stored if stored else (lambda gm, ex: gm.forward)
    dynamo.reset()
    a = per_call(dynamo.optimize(backend)(fn)) - eager
    torch._dynamo.reset()
    b = per_call(torch.compile(fn, backend=backend)) - eager
    return a, b


INDUCTOR_MODELS = {
    "mlp": lambda: (torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512),
                                        torch.nn.GELU(), torch.nn.Linear(512, 10)), (torch.randn(32, 256),)),
    "resnet18": lambda: (__import__("torchvision").models.resnet18(), (torch.randn(1, 3, 64, 64),)),
}


def steady_latency(fn, args, seconds=1.0):
    """Median per-call time over repeated timed batches."""
    for _ in range(3):
        fn(*args)
    sync()
    samples, spent = [], 0.0
    while spent < seconds or len(samples) < 5:
        t = time.perf_counter()
        fn(*args)
        sync()
        dt = time.perf_counter() - t
        samples.append(dt)
        spent += dt
    samples.sort()
    return samples[len(samples) // 2]


def inductor_side(side, name):
    """One side of the Inductor race, in this (fresh) process: JSON on stdout."""
    import json
    torch.manual_seed(0)
    model, inputs = on_device(*INDUCTOR_MODELS[name]())
    model.eval()
    with torch.no_grad():
        opt = dynamo.optimize("inductor")(model) if side == "ours" else torch.compile(model, backend="inductor")
        compile_s = first_call(opt, model, inputs)
        same = torch.allclose(opt(*inputs), model(*inputs), rtol=1e-3, atol=1e-3)
        eager = steady_latency(model, inputs)
        compiled = steady_latency(opt, inputs)
    print(json.dumps({"compile": compile_s, "eager": eager, "compiled": compiled, "same": bool(same)}))


def inductor_race(names):
    import json
    import os
    import subprocess
    import tempfile
    print(f"{'inductor':10} {'compile ours s':>14} {'torch s':>8} {'ratio':>6}   "
          f"{'latency ours ms':>15} {'torch ms':>9} {'eager ms (each side)':>21}   speed-up ours/torch   equal")
    for name in names or INDUCTOR_MODELS:
        row = {}
        for side in ("ours", "torch"):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FX_GRAPH_CACHE="0",
                           TORCHINDUCTOR_AUTOGRAD_CACHE="0")
                out = subprocess.run([sys.executable, __file__, "--inductor-side", f"--device={DEVICE}", side, name],
                                     env=env,
                                     capture_output=True, text=True, check=True)
                row[side] = json.loads(out.stdout.strip().splitlines()[-1])
        o, t = row["ours"], row["torch"]
        print(f"{name:10} {o['compile']:14.2f} {t['compile']:8.2f} {t['compile'] / max(o['compile'], 1e-9):5.2f}x   "
              f"{o['compiled'] * 1e3:15.3f} {t['compiled'] * 1e3:9.3f} {o['eager'] * 1e3:10.3f} {t['eager'] * 1e3:10.3f}   "
              f"{o['eager'] / o['compiled']:8.2f}x / {t['eager'] / t['compiled']:.2f}x   {o['same'] and t['same']}")


def main():
    names = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--inductor-side" in sys.argv:
        return inductor_side(*names)
    if "--inductor" in sys.argv:
        return inductor_race(names)
    print(f"on {DEVICE}" + (f" ({torch.cuda.get_device_name()})" if DEVICE.type == "cuda" else ""))
    print(f"{'model':14} {'ours ms':>9} {'torch ms':>9} {'ratio':>7}   graphs o/t  breaks o/t  guards o/t"
          f"   {'fx.symbolic_trace ms':>20}")
    phase_rows = []
    with torch.no_grad():
        for name, make in models(names):
            model, inputs = make()
            model.eval()
            # Ours is captured three times (reset between), the median kept;
            # torch._dynamo's once (seconds each).
            o = sorted((ours(model, inputs) for _ in range(3)), key=lambda r: r[0])[1]
            t = theirs(model, inputs)
            fx = fx_trace(model)
            print(f"{name:14} {o[0] * 1e3:9.1f} {t[0] * 1e3:9.1f} {t[0] / max(o[0], 1e-9):6.1f}x   "
                  f"{o[1]:4}/{t[1]:<4}  {o[2]:4}/{t[2]:<4}  {o[3]:5}/{t[3]:<5}   "
                  + (f"{fx * 1e3:20.1f}" if fx is not None else f"{'n/a':>20}"))
            phase_rows.append((name, o[0], o[4]))
    # Where our first call goes: the C++ trace and rewrite, the GraphModule
    # built from the capture, the backend, the guards compiled; the rest is
    # the first run of the graph over eager's and the runtime's own Python.
    print(f"\n{'first call, ms':14} {'trace':>7} {'rewrite':>8} {'graph':>7} {'backend':>8} {'guards':>7} {'rest':>7}")
    for name, total, p in phase_rows:
        rest = total - sum(p.values())
        print(f"{name:14} " + " ".join(f"{p[k] * 1e3:{w}.1f}" for k, w in
                                       (("trace", 7), ("rewrite", 8), ("graph", 7), ("backend", 8), ("guards", 7)))
              + f" {rest * 1e3:7.1f}")
    print(f"\n{'warm overhead':20} {'ours us':>8} {'torch us':>9} {'ratio':>7}")
    import torchvision
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 4)).eval().to(DEVICE)
    r18 = torchvision.models.resnet18().eval().to(DEVICE)
    # The whole call, graph included: the graph's parameter reads (three or
    # four modules deep each) are part of what a warm call costs.
    mbv2 = torchvision.models.mobilenet_v2().eval().to(DEVICE)
    cases = [("a + b", lambda a, b: a + b, (torch.randn(1, device=DEVICE), torch.randn(1, device=DEVICE)), 20000, False),
             ("3-layer MLP", mlp, (torch.randn(1, 16, device=DEVICE),), 5000, False),
             ("resnet18 (machinery)", r18, (torch.randn(1, 3, 32, 32, device=DEVICE),), 500 if QUICK else 2000, True),
             ("mobilenet_v2 (call)", mbv2, (torch.randn(1, 3, 64, 64, device=DEVICE),), 100 if QUICK else 400, False)]
    with torch.no_grad():
        for label, fn, args, n, stored in cases:
            a, b = warm_overhead(fn, args, n, stored)
            # Below zero: the captured graph runs faster than eager's module
            # calls (no per-submodule __call__), so no ratio is meaningful.
            ratio = f"{b / a:6.1f}x" if a > 0 else "  ours below eager"
            print(f"{label:20} {a * 1e6:8.2f} {b * 1e6:9.2f} {ratio}")


if __name__ == "__main__":
    main()
