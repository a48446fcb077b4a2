"""Dynamic shapes, live (issue 14): symbolic sizes keep a new batch size or
sequence length from being a new capture, and never give a wrong result.

- SWEEP: resnet18, a GPT-style model (causal mask sliced by T, positions
  from torch.arange(T), views by B, T, C), BERT from a transformers config
  and corpus functions that compute with sizes, each over 20 batch sizes
  and 20 sequence lengths, per grad mode: every call equal to eager, at
  most 2 captures (the static first call, then the dynamic one), asserted;
  torch._dynamo's captures on the same sweep in the same run, printed.
- GUARDS: a relation the trace relied on (two sizes equal, a bound, a
  branch on a size, a size used as a plain int, divisibility, the 0/1
  specialisation), violated by the next call: a recapture and eager's
  answer (or eager's exception).
- OFFLINE: dynamo-export's capture with symbolic sizes (f32[B,3,32,32],
  --dim B=2..64) for resnet18, the GPT-style model and a corpus function,
  loaded and run at several sizes: equal to eager.
- API: optimize(dynamic=True/False), dynamo.mark_dynamic / mark_static
  (and torch._dynamo.mark_dynamic's attribute), config.automatic_dynamic_shapes,
  a shape-specialising backend (aot_eager) given a symbolic graph.

    scripts/python test/python/dynamic_shapes_test.py [-v]
"""
import math
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
from dynamo import dynamo_ir_pb2 as ir

warnings.simplefilter("ignore")
VERBOSE = "-v" in sys.argv
FAILURES = []
TABLE = []


def fail(name, message):
    FAILURES.append(f"{name}: {message}")
    print(f"FAIL {name}: {message}")


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and \
            torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if hasattr(a, "to_tuple"):  # transformers' ModelOutput
        return same(a.to_tuple(), b.to_tuple())
    return type(a) is type(b) and a == b


def outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 - the exception type is the answer
        return ("raise", type(e))


def relations(runtime):
    """Every SHAPE_ENV relation of a Runtime's captures."""
    out = []
    for c in runtime.captures_made:
        for g in c.guards:
            if g.kind == ir.Guard.SHAPE_ENV:
                out.extend(g.shape_env.relations)
    return out


def symbolic_captures(runtime):
    return sum(any(g.kind == ir.Guard.SHAPE_ENV for g in c.guards) for c in runtime.captures_made)


# ------------------------------------------------------------------ models

class CausalSelfAttention(nn.Module):
    def __init__(self, C, nh, block):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.nh = nh
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        q = q.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        v = v.view(B, T, self.nh, C // self.nh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, C, nh, block):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, nh, block)
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's shape: the causal mask built from T, positions arange(T)."""

    def __init__(self, vocab=97, C=32, nh=4, layers=2, block=64):
        super().__init__()
        self.block = block
        self.wte, self.wpe = nn.Embedding(vocab, C), nn.Embedding(block, C)
        self.h = nn.ModuleList([Block(C, nh, block) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab, bias=False)

    def forward(self, idx):
        b, t = idx.size()
        assert t <= self.block, f"sequence of {t} is longer than {self.block}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def resnet18():
    import torchvision
    return torchvision.models.resnet18(num_classes=10)


def bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    return BertModel(cfg)


# Corpus functions that compute with sizes.
def halves(x):
    n = x.shape[0] // 2
    return x[:n] * 2, x[n:] - 1, n


def flatten_scale(x):
    B = x.size(0)
    return x.reshape(B, -1) * (x.size(1) * x.size(2)), x.numel()


def pad_to_multiple(x):
    T = x.shape[-1]
    pad = (8 - T % 8) % 8
    return F.pad(x, (0, pad)).view(x.shape[0], -1, 8).sum(-1)


def mean_by_len(x, mask):
    lengths = mask.sum(-1, keepdim=True)
    return (x * mask).sum(-1, keepdim=True) / lengths + x.new_zeros(x.shape[0], 1) + len(x)


# ------------------------------------------------------------------ sweeps

def sweep(name, model, make_inputs, sizes, dynamo_reference=True):
    """model optimized over make_inputs(s) for each s, per grad mode: equal
    to eager, at most 2 captures per grad mode; torch._dynamo's captures on
    the same calls, for the table."""
    if isinstance(model, nn.Module):
        model.eval()
    for grad in (False, True):
        counted = {"graphs": 0}

        def backend(gm, example_inputs):
            counted["graphs"] += 1
            return gm.forward
        opt = dynamo.optimize(backend)(model)
        runtime = opt.dynamo_runtime
        started = time.perf_counter()
        for s in sizes:
            args, kwargs = make_inputs(s)
            with torch.set_grad_enabled(grad):
                got, want = outcome(opt, *args, **kwargs), outcome(model, *args, **kwargs)
            if got[0] != want[0] or (got[0] == "ok" and not same(got[1], want[1])):
                fail(f"{name} grad={grad} size={s}", f"eager {want[0]} {want[1] if want[0] == 'raise' else ''}, "
                                                     f"optimized {got[0]} {got[1] if got[0] == 'raise' else ''}")
                break
        ours_s = time.perf_counter() - started
        ours = runtime.captures
        if ours > 2:
            fail(f"{name} grad={grad}", f"{ours} captures over {len(sizes)} sizes (at most 2); "
                                        f"relations {relations(runtime)[:6]}")
        if symbolic_captures(runtime) == 0 and len(set(sizes)) > 1:
            fail(f"{name} grad={grad}", "no capture with symbolic sizes")
        theirs, theirs_s = "-", 0.0
        if dynamo_reference:
            theirs, theirs_s = torch_dynamo_captures(model, make_inputs, sizes, grad)
        TABLE.append((name, grad, len(sizes), ours, counted["graphs"], f"{ours_s:.2f}", theirs, f"{theirs_s:.2f}"))
        if VERBOSE:
            print(TABLE[-1])


def torch_dynamo_captures(model, make_inputs, sizes, grad):
    import torch._dynamo  # noqa: PLC0415 - loaded only for the comparison
    torch._dynamo.reset()
    frames = {"n": 0}

    def backend(gm, example_inputs):
        frames["n"] += 1
        return gm.forward
    compiled = torch.compile(model, backend=backend)
    started = time.perf_counter()
    for s in sizes:
        args, kwargs = make_inputs(s)
        with torch.set_grad_enabled(grad):
            outcome(compiled, *args, **kwargs)
    elapsed = time.perf_counter() - started
    torch._dynamo.reset()
    return frames["n"], elapsed


def sweeps():
    torch.manual_seed(0)
    batches = list(range(2, 22))      # 20 batch sizes
    lengths = list(range(6, 64, 3))  # 20 sequence lengths
    r18 = resnet18()
    sweep("resnet18 batch", r18, lambda b: ((torch.randn(b, 3, 32, 32),), {}), batches)
    gpt = GPT()
    sweep("gpt batch", gpt, lambda b: ((torch.randint(0, 97, (b, 16)),), {}), batches)
    sweep("gpt length", gpt, lambda t: ((torch.randint(0, 97, (2, t)),), {}), lengths)
    try:
        b = bert()
    except ImportError:
        print("skip bert: transformers is not installed")
    else:
        def bert_inputs(shape):
            ids = torch.randint(0, 97, shape)
            return (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        sweep("bert batch", b, lambda n: bert_inputs((n, 12)), batches)
        sweep("bert length", b, lambda t: bert_inputs((2, t)), lengths)
    sweep("halves", halves, lambda b: ((torch.randn(b, 3),), {}), batches)
    sweep("flatten_scale", flatten_scale, lambda b: ((torch.randn(b, 3, 5),), {}), batches)
    sweep("pad_to_multiple", pad_to_multiple, lambda t: ((torch.randn(3, t),), {}), lengths)
    sweep("mean_by_len", mean_by_len,
          lambda t: ((torch.randn(4, t), (torch.arange(t) < t // 2 + 1).float().expand(4, t)), {}), lengths)


# ------------------------------------------------------------------ guards

def expect_recapture(name, fn, first, second, dynamic=True):
    """fn optimized with dynamic sizes, called with `first` then `second`
    (which violates a relation the first trace relied on): eager's answer
    both times, and a second capture."""
    opt = dynamo.optimize("eager", dynamic=dynamic)(fn)
    for args in (first, second):
        got, want = outcome(opt, *args), outcome(fn, *args)
        if got[0] != want[0] or (got[0] == "ok" and not same(got[1], want[1])) or \
                (got[0] == "raise" and got[1] is not want[1]):
            fail(name, f"eager {want}, optimized {got}")
            return
    if opt.dynamo_runtime.captures != 2:
        fail(name, f"{opt.dynamo_runtime.captures} captures (the second call violates {relations(opt.dynamo_runtime)})")


def expect_one_capture(name, fn, calls, dynamic=True):
    opt = dynamo.optimize("eager", dynamic=dynamic)(fn)
    for args in calls:
        got, want = outcome(opt, *args), outcome(fn, *args)
        if got[0] != want[0] or (got[0] == "ok" and not same(got[1], want[1])):
            fail(name, f"eager {want}, optimized {got}")
            return
    if opt.dynamo_runtime.captures != 1:
        fail(name, f"{opt.dynamo_runtime.captures} captures, expected 1 ({relations(opt.dynamo_runtime)})")


BIAS = torch.arange(64.0)


def guards():
    # Two sizes broadcast together: equal, or one of them 1.
    expect_recapture("broadcast equality", lambda x, y: x + y,
                     (torch.randn(5), torch.randn(5)), (torch.randn(5), torch.randn(7)))
    expect_recapture("broadcast against 1", lambda x, y: x + y,
                     (torch.randn(5, 3), torch.randn(5, 3)), (torch.randn(5, 3), torch.randn(1, 3)))
    # A slice bound past the sliced size: torch clamps, the trace guarded it.
    expect_recapture("slice bound", lambda x: BIAS[: x.shape[0]] + x,
                     (torch.randn(8),), (torch.randn(70),))
    # A branch on a size.
    expect_recapture("branch on a size", lambda x: x * 2 if x.size(0) > 6 else x * 3,
                     (torch.randn(4),), (torch.randn(9),))
    # A size used as a plain Python int (range: the loop is unrolled).
    expect_recapture("size as a Python int", lambda x: sum(x[i] for i in range(x.shape[0])),
                     (torch.randn(4),), (torch.randn(5),))
    # Divisibility: a view's -1 that divides exactly; the next size does not
    # divide, and both raise or not as eager does.
    expect_recapture("view divisibility", lambda x: x.view(-1, 4).sum(1),
                     (torch.randn(8),), (torch.randn(10),))
    # Sizes 0 and 1 stay specialised.
    expect_recapture("size 1", lambda x: x.sum(0) + x.shape[0], (torch.randn(5, 3),), (torch.randn(1, 3),))
    expect_recapture("size 0", lambda x: x.sum(0) + x.shape[0], (torch.randn(5, 3),), (torch.randn(0, 3),))
    # Two inputs' sizes equal by a matmul.
    expect_recapture("matmul inner sizes", lambda a, b: a @ b,
                     (torch.randn(3, 5), torch.randn(5, 2)), (torch.randn(3, 6), torch.randn(7, 2)))
    # Relations that keep holding: one capture over many sizes.
    expect_one_capture("arithmetic on sizes", lambda x: x.view(x.size(0) * x.size(1), -1).sum() + x.size(0) // 2,
                       [(torch.randn(b, t, 4),) for b, t in ((2, 3), (5, 7), (9, 4), (3, 11))])
    # The same tensor through two parameters: the second path has the
    # first one's symbolic sizes.
    expect_one_capture("one tensor, two parameters", lambda a, b: a.view(b.shape[0], -1) + b.shape[0],
                       [(t, t) for t in (torch.randn(4, 3), torch.randn(7, 3), torch.randn(9, 3))])
    expect_one_capture("size results returned", lambda x: (x.shape, x.size(1) * 4, x.numel(), len(x)),
                       [(torch.randn(b, t),) for b, t in ((2, 3), (5, 7), (9, 4))])


# ------------------------------------------------------------------ API

def api():
    f = lambda x: x.sum(0) * x.shape[0]  # noqa: E731

    # dynamic=False: every new size is a capture.
    opt = dynamo.optimize("eager", dynamic=False)(f)
    for b in (2, 3, 4):
        opt(torch.randn(b, 3))
    if opt.dynamo_runtime.captures != 3 or symbolic_captures(opt.dynamo_runtime):
        fail("dynamic=False", f"{opt.dynamo_runtime.captures} captures")

    # Automatic dynamic off: also one capture per size.
    dynamo.config.automatic_dynamic_shapes = False
    try:
        opt = dynamo.optimize("eager")(f)
        for b in (2, 3, 4):
            opt(torch.randn(b, 3))
        if opt.dynamo_runtime.captures != 3:
            fail("automatic_dynamic_shapes=False", f"{opt.dynamo_runtime.captures} captures")
        # mark_dynamic still counts: one capture from the start.
        opt = dynamo.optimize("eager")(f)
        for b in (2, 3, 4):
            x = torch.randn(b, 3)
            dynamo.mark_dynamic(x, 0)
            if not same(opt(x), f(x)):
                fail("mark_dynamic", "differs from eager")
        if opt.dynamo_runtime.captures != 1:
            fail("mark_dynamic", f"{opt.dynamo_runtime.captures} captures")
        # torch._dynamo's own mark_dynamic sets the same attribute.
        from torch._dynamo import mark_dynamic as torch_mark_dynamic
        opt = dynamo.optimize("eager")(f)
        for b in (2, 3, 4):
            x = torch.randn(b, 3)
            torch_mark_dynamic(x, 0)
            opt(x)
        if opt.dynamo_runtime.captures != 1:
            fail("torch._dynamo.mark_dynamic", f"{opt.dynamo_runtime.captures} captures")
    finally:
        dynamo.config.automatic_dynamic_shapes = True

    # mark_static beats dynamic=True.
    opt = dynamo.optimize("eager", dynamic=True)(f)
    for b in (2, 3):
        x = torch.randn(b, 3)
        dynamo.mark_static(x, 0)
        opt(x)
    if opt.dynamo_runtime.captures != 2:
        fail("mark_static", f"{opt.dynamo_runtime.captures} captures")

    # Automatic dynamic: the second size makes the dimension symbolic.
    opt = dynamo.optimize("eager")(f)
    for b in range(2, 10):
        opt(torch.randn(b, 3))
    if opt.dynamo_runtime.captures != 2 or symbolic_captures(opt.dynamo_runtime) != 1:
        fail("automatic dynamic", f"{opt.dynamo_runtime.captures} captures")

    # A backend that specialises on shapes (AOTAutograd) is compiled per
    # shape behind one capture; results equal eager, gradients too.
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = dynamo.optimize("aot_eager", dynamic=True)(model)
    for b in (2, 5, 3, 5):
        x = torch.randn(b, 4)
        got, want = opt(x), model(x)
        if not same(got, want):
            fail("aot_eager per shape", f"batch {b} differs")
        gw = torch.autograd.grad(got.sum(), model[0].weight)[0]
        ew = torch.autograd.grad(want.sum(), model[0].weight)[0]
        if not same(gw, ew):
            fail("aot_eager per shape", f"batch {b}: gradients differ")
    if opt.dynamo_runtime.captures != 1:
        fail("aot_eager per shape", f"{opt.dynamo_runtime.captures} captures")

    # The recompile message names the relation that failed.
    opt = dynamo.optimize("eager", dynamic=True)(lambda x: x * 2 if x.size(0) > 6 else x * 3)
    opt(torch.randn(4))
    caught = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        opt(torch.randn(9))
        caught = [str(m.message) for m in w if "recompiling" in str(m.message)]
    if not any("s0 <= 6 failed: s0 = 9" in m for m in caught):
        fail("recompile message", f"got {caught}")



# ------------------------------------------------------------------ offline

EXPORT_SCRIPT = """
import torch
import dynamic_shapes_test as t
torch.manual_seed(0)
resnet = t.resnet18().eval()
gpt = t.GPT().eval()
halves = t.halves
try:
    bert = t.bert().eval()
except ImportError:
    bert = None
"""


def offline():
    """dynamo._C.capture (dynamo-export) with symbolic sizes: the loaded
    GraphModule run at several sizes the guards admit equals eager."""
    import importlib.util
    import os
    import tempfile

    from dynamo import _C
    from dynamo.guards import sym_eval
    from dynamo.loader import load
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "models_for_export.py")
        with open(script, "w") as f:
            f.write(EXPORT_SCRIPT)
        spec = importlib.util.spec_from_file_location("models_for_export_eager", script)
        eager = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(eager)  # the same seed: the same weights as the captured copy
        cases = [
            ("resnet.forward", ["x=f32[B,3,32,32]"], ["B=2..64"], eager.resnet,
             [(torch.randn(b, 3, 32, 32),) for b in (2, 3, 7, 16)]),
            ("gpt.forward", ["idx=i64[B,T]"], ["B=2..8", "T=2..64"], eager.gpt,
             [(torch.randint(0, 97, (b, t)),) for b, t in ((2, 5), (3, 16), (4, 64), (2, 33))]),
            ("halves", ["x=f32[N,3]"], ["N=2..1000,%2"], eager.halves,
             [(torch.randn(n, 3),) for n in (2, 4, 10, 64)]),
        ]
        for fn, inputs, dims, model, calls in cases:
            path = os.path.join(tmp, "capture.pb")
            with open(path, "wb") as f:
                f.write(_C.capture(script, fn, inputs, weights="embed", dims=dims))
            gm, capture = load(path)
            shape_env = [g.shape_env for g in capture.guards if g.kind == ir.Guard.SHAPE_ENV]
            if not shape_env:
                fail(f"offline {fn}", "no SHAPE_ENV guard")
                continue
            names = [s.name for s in shape_env[0].symbols]
            for args in calls:
                # The guards admit these sizes (the symbols bound from the inputs).
                bindings = {}
                for spec_name, a in zip(capture.inputs, args):
                    for d, dim in enumerate(spec_name.tensor.sizes):
                        if dim.WhichOneof("value") == "symbol":
                            bindings[dim.symbol] = a.shape[d]
                if not all(sym_eval(r, bindings) for r in shape_env[0].relations):
                    fail(f"offline {fn}", f"sizes {bindings} outside {list(shape_env[0].relations)}")
                    continue
                with torch.no_grad():
                    got, want = gm(*args), model(*args)
                if isinstance(want, torch.Tensor) and isinstance(got, (tuple, list)) and len(got) == 1:
                    got = got[0]
                if isinstance(want, tuple):
                    got = tuple(got)
                if not same(got, want):
                    fail(f"offline {fn}", f"differs from eager at {[tuple(a.shape) for a in args]}")
            if VERBOSE:
                print(f"offline {fn}: symbols {names} relations {list(shape_env[0].relations)}")
        if eager.bert is not None:
            offline_program(script, eager, tmp)
        else:
            print("skip offline bert: transformers is not installed")


def offline_program(script, eager, tmp):
    """BERT (transformers) through its own forward's wrappers, whose context
    variable writes a capture replays after the graph: exported with
    allow_breaks and symbolic B and T, run by dynamo.loader.load_program
    (which regenerates the code with the same sizes symbolic) at several
    sizes: equal to eager."""
    from dynamo import _C
    from dynamo.loader import load_program
    data = _C.capture(script, "bert.forward", ["input_ids=i64[B,T]", "attention_mask=i64[B,T]"],
                      weights="embed", dims=["B=1..16", "T=2..64"], allow_breaks=True)
    capture = ir.Capture.FromString(data)
    if not any(g.kind == ir.Guard.SHAPE_ENV for g in capture.guards):
        fail("offline bert", "no SHAPE_ENV guard")
        return
    run = load_program(capture, eager.bert.forward, base_dir=tmp, trusted=True)
    for b, t in ((2, 8), (3, 17), (1, 5), (4, 64)):
        ids = torch.randint(0, 97, (b, t))
        with torch.no_grad():
            got = run(input_ids=ids, attention_mask=torch.ones_like(ids))
            want = eager.bert(input_ids=ids, attention_mask=torch.ones_like(ids))
        if not same(got.last_hidden_state, want.last_hidden_state):
            fail("offline bert", f"differs from eager at batch {b}, length {t}")
    if VERBOSE:
        relations = [list(g.shape_env.relations) for g in capture.guards if g.kind == ir.Guard.SHAPE_ENV]
        print(f"offline bert.forward (with breaks allowed): {len(capture.graphs)} graph(s), relations {relations}")


def main():
    started = time.perf_counter()
    guards()
    api()
    offline()
    sweeps()
    print(f"{'model':<18} {'grad':<5} {'sizes':>5} {'ours':>5} {'graphs':>6} {'ours s':>7} {'torch._dynamo':>13} {'theirs s':>8}")
    for row in TABLE:
        print(f"{row[0]:<18} {str(row[1]):<5} {row[2]:>5} {row[3]:>5} {row[4]:>6} {row[5]:>7} {row[6]:>13} {row[7]:>8}")
    print(f"dynamic_shapes_test: {len(FAILURES)} failures in {time.perf_counter() - started:.0f}s")
    for f in FAILURES:
        print("  " + f)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
