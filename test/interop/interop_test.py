"""dynamo and torch's own compiler (torch._dynamo, torch.compile,
torch.export) in one process: every order and nesting gives eager's results,
neither crashes (each case runs in its own interpreter, so a segfault is a
failed case, not a lost run), gc.collect() and interpreter exit included, and
reset() of one leaves the other's caches alone.

    scripts/python test/interop/interop_test.py [case ...]
"""
import os
import subprocess
import sys
import textwrap

PRELUDE = r'''
import gc, threading, torch, dynamo, torch._dynamo
from torch.testing import assert_close

class Count:
    """A backend that counts its compiles and runs the graph as it is."""
    def __init__(self): self.n = 0
    def __call__(self, gm, example_inputs):
        self.n += 1
        return gm.forward

def f(x):
    return torch.relu(x) + 1

def g(x, y):
    return (x * y).sin() - y

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 4)
    def forward(self, x):
        return self.b(torch.relu(self.a(x)))

class Breaks(torch.nn.Module):
    """Two graphs around a data-dependent branch."""
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
    def forward(self, x):
        y = self.a(x)
        if y.sum() > 0:
            y = y * 2
        return torch.tanh(y)

torch.manual_seed(0)
x = torch.randn(4, 8)
y = torch.randn(4, 8)
'''

CASES = {
    # The program: dynamo, then torch._dynamo, then a collection.
    "dynamo_then_torch": r'''
ours, theirs = Count(), Count()
dynamo.reset(); assert_close(dynamo.optimize(ours)(f)(x), f(x))
torch._dynamo.reset(); assert_close(torch._dynamo.optimize(theirs)(f)(x), f(x))
gc.collect()
assert ours.n == 1 and theirs.n == 1, (ours.n, theirs.n)
''',
    "torch_then_dynamo": r'''
ours, theirs = Count(), Count()
assert_close(torch.compile(f, backend=theirs)(x), f(x))
assert_close(dynamo.optimize(ours)(f)(x), f(x))
gc.collect()
assert ours.n == 1 and theirs.n == 1, (ours.n, theirs.n)
''',
    # Interleaved on the same function, with each reset leaving the other's
    # cache alone: after torch._dynamo.reset() ours still hits, and back.
    "interleaved_resets": r'''
ours, theirs = Count(), Count()
a, b = dynamo.optimize(ours)(g), torch.compile(g, backend=theirs)
for _ in range(3):
    assert_close(a(x, y), g(x, y)); assert_close(b(x, y), g(x, y))
torch._dynamo.reset(); gc.collect()
assert_close(a(x, y), g(x, y))
assert ours.n == 1, ours.n
dynamo.reset(); gc.collect()
assert_close(b(x, y), g(x, y))
assert theirs.n == 2, theirs.n       # torch's reset dropped its own cache
assert_close(a(x, y), g(x, y))
assert ours.n == 2, ours.n           # and ours dropped ours
gc.collect()
''',
    "modules_both_orders": r'''
net = Net().eval()
want = net(x)
with torch.no_grad():
    ours, theirs = Count(), Count()
    assert_close(dynamo.optimize(ours)(net)(x), want)
    assert_close(torch.compile(net, backend=theirs)(x), want)
    assert_close(dynamo.optimize(ours)(net)(x), want)
    torch._dynamo.reset(); dynamo.reset(); gc.collect()
    assert_close(torch.compile(net, backend=theirs)(x), want)
    assert_close(dynamo.optimize(ours)(net)(x), want)
gc.collect()
''',
    "graph_breaks_both": r'''
m = Breaks()
for sign in (1, -1):
    inp = sign * x.abs()
    want = m(inp)
    ours, theirs = Count(), Count()
    assert_close(dynamo.optimize(ours)(m)(inp), want)
    assert_close(torch.compile(m, backend=theirs)(inp), want)
    assert_close(dynamo.optimize(ours)(m)(inp), want)
    assert ours.n >= 2 and theirs.n >= 2, (ours.n, theirs.n)
gc.collect()
''',
    "training_both": r'''
net = Net()
ours, theirs = Count(), Count()
def step(model, inp):
    model.zero_grad()
    loss = model(inp).square().mean()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in net.parameters()]
want = step(net, x)
for opt in (dynamo.optimize(ours)(net), torch.compile(net, backend=theirs), dynamo.optimize(ours)(net)):
    got = step(opt, x)
    assert_close(got, want)
gc.collect()
''',
    "export_after_capture": r'''
net = Net().eval()
assert_close(dynamo.optimize(Count())(net)(x), net(x))
ep = torch.export.export(net, (x,))
assert_close(ep.module()(x), net(x))
assert_close(dynamo.optimize(Count())(net)(x), net(x))
gc.collect()
''',
    "export_then_dynamo": r'''
net = Net().eval()
ep = torch.export.export(net, (x,))
assert_close(dynamo.optimize(Count())(net)(x), net(x))
assert_close(ep.module()(x), net(x))
gc.collect()
''',
    # torch.compile'd callable inside a function dynamo captures: traced
    # through to the original (one graph of ours; torch never compiles).
    "torch_compiled_inside_ours": r'''
theirs, ours = Count(), Count()
inner = torch.compile(g, backend=theirs)
def outer(a, b):
    return inner(a, b) * 3
assert_close(dynamo.optimize(ours)(outer)(x, y), outer(x, y))
assert ours.n == 1, ours.n
gc.collect()
''',
    # Ours inside a region torch compiles: torch runs it as code to skip,
    # and its results (and ours) stay eager's.
    "ours_inside_torch_compiled": r'''
theirs, ours = Count(), Count()
inner = dynamo.optimize(ours)(g)
def outer(a, b):
    return inner(a, b) * 3
for _ in range(2):
    assert_close(torch.compile(outer, backend=theirs)(x, y), outer(x, y))
assert_close(inner(x, y), g(x, y))
gc.collect()
''',
    # Tracing machinery run inside a capture (torch.fx.symbolic_trace,
    # torch.jit.trace): their frames see proxies, not values; dynamo steps
    # aside instead of capturing them (once per proxy), and the captures made
    # stay bounded over many calls.
    "tracers_inside_ours": r'''
import dynamo.runtime as rt
seen = []
compile_ = rt.Runtime._compile
def spy(self, fn, target, args, kwargs):
    seen.append(target.__code__.co_qualname)
    proxies = [a for a in args if isinstance(a, torch.fx.Proxy)]
    assert not proxies, f"captured {target.__code__.co_qualname} on fx proxies"
    return compile_(self, fn, target, args, kwargs)
rt.Runtime._compile = spy
class M(torch.nn.Module):
    def forward(self, a):
        return torch.relu(a) + 1
def h(a):
    gm = torch.fx.symbolic_trace(M())
    traced = torch.jit.trace(M(), (a,))
    return gm(a) * 2 + traced(a)
opt = dynamo.optimize(Count())(h)
for _ in range(60):
    assert_close(opt(x), h(x))
assert "<module>" not in seen, seen  # modules imported lazily on the way
# Each call makes a new GraphModule, so the frames that receive it recapture,
# until the cache limit per code object: bounded, not one per call.
assert len(seen) <= 60, len(seen)
gc.collect()
''',
    "threads": r'''
errors = []
def run(make):
    try:
        fn = make()
        for i in range(30):
            inp = torch.randn(4, 8)
            assert_close(fn(inp, inp + i), g(inp, inp + i))
    except BaseException as e:  # reported by the main thread
        errors.append(repr(e))
ts = [threading.Thread(target=run, args=(lambda: dynamo.optimize(Count())(g),)),
      threading.Thread(target=run, args=(lambda: torch.compile(g, backend=Count()),))]
for t in ts: t.start()
for t in ts: t.join()
assert not errors, errors
gc.collect()
''',
}


def main(names):
    failures = []
    for name in names or CASES:
        code = PRELUDE + textwrap.dedent(CASES[name]) + "\nprint('interop ok')\n"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"))
        ok = proc.returncode == 0 and proc.stdout.strip().endswith("interop ok")
        print(f"{'ok  ' if ok else 'FAIL'} {name} (exit {proc.returncode})")
        if not ok:
            failures.append(name)
            print(textwrap.indent((proc.stdout + proc.stderr)[-3000:], "    "))
    print(f"{len(names or CASES) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
