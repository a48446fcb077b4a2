"""Guards checked once per module version (lib/guards/versions.h, issue 18):
while nothing a module's stamp records has changed (its class, its __dict__,
_parameters, _buffers, _modules, its hook dicts, and the same for every
submodule), the guards below it are not read again. Every change a guard
stood for must still be caught:

- each kind of change (a hyper-parameter written, a submodule replaced by
  setattr or by Sequential/ModuleList item assignment, a parameter or a
  buffer replaced, train()/eval(), a forward hook added and removed, a class
  attribute changed, __dict__ written directly, object.__setattr__, a
  deleted attribute that falls back to the class), on a nested model,
  made right after the first call (the stamps recorded when the capture's
  guards were compiled) and after 200 calls (the stamps in use): the next call equals eager on the changed
  model, through a new capture;
- the stamps are in use: on an interpreter whose dict versions can be relied
  on (dynamo._C.cache_stats()["module_versions"]; CPython 3.11 and 3.12),
  the 200 calls skip a stamped subtree on every call after the second; on
  3.13 none is made and every guard is read on every call;
- the failure message of a change names the guard, as without stamps;
- what OptimizedModule.__call__'s C path keeps between calls (the original
  module, its forward, that no hook is set; lib/embed/callers.cc FastMemo)
  is found again after each change that bears on it, after many calls: a
  hook on the module or a global one, an instance forward, the class's
  forward replaced, _orig_mod replaced, two wrappers called in turn.

    scripts/python test/python/module_versions_test.py [-v]
"""
import copy
import sys
import types
import warnings

import torch
from torch import nn

import dynamo
from dynamo import _C

warnings.simplefilter("ignore")
VERBOSE = "-v" in sys.argv
FAILURES = []


def fail(name, message):
    FAILURES.append(f"{name}: {message}")
    print(f"FAIL {name}: {message}")


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.ReLU()
        self.scale = 2.0
        self.register_buffer("offset", torch.ones(4))

    def forward(self, x):
        return self.act(self.lin(x)) * self.scale + self.offset


class Model(nn.Module):
    shift = 0.5  # a class attribute the forward reads

    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.blocks = nn.ModuleList([nn.Linear(4, 4)])
        self.bn = nn.BatchNorm1d(4)
        self.sizes = (4, 4)

    def forward(self, x):
        y = self.inner(x) + self.seq(x)
        for b in self.blocks:
            y = b(y)
        y = self.bn(y) + self.shift
        return y.reshape(-1, self.sizes[1])

    forward_plain = forward

    def forward_doubled(self, x):
        return self.forward_plain(x) * 2


def replace_parameter(m):
    m.inner.lin.weight = nn.Parameter(torch.randn(4, 4))


def replace_buffer(m):
    m.inner.offset = torch.full((4,), 3.0)


def hook_added(m):
    m.inner.lin.register_forward_hook(lambda mod, args, out: out * -1)


def hook_removed(m):
    handle = m.inner.lin.register_forward_hook(lambda mod, args, out: out * -1)
    m(torch.randn(2, 4))  # the hook in place for one call
    handle.remove()


def class_attribute(m):
    Model.shift = 1.5


def dict_write(m):
    m.inner.__dict__["scale"] = 7.0


def object_setattr(m):
    object.__setattr__(m.inner, "scale", 9.0)


# (name, change, needs a new capture)
CHANGES = [
    ("attribute write", lambda m: setattr(m.inner, "scale", 3.0), True),
    ("submodule setattr", lambda m: setattr(m.inner, "act", nn.Tanh()), True),
    ("Sequential item", lambda m: m.seq.__setitem__(1, nn.Sigmoid()), True),
    ("ModuleList append", lambda m: m.blocks.append(nn.Linear(4, 4)), True),
    ("parameter replaced", replace_parameter, True),
    ("buffer replaced", replace_buffer, True),
    ("train()", lambda m: m.train(), True),
    ("hook added", hook_added, True),
    ("hook added then removed", hook_removed, False),
    ("class attribute", class_attribute, True),
    ("__dict__ written", dict_write, True),
    ("object.__setattr__", object_setattr, True),
    ("tuple attribute", lambda m: setattr(m, "sizes", (2, 8)), True),
]


class Counter:
    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def same(a, b):
    return a.shape == b.shape and torch.allclose(a, b, rtol=1e-5, atol=1e-5)


def run_change(name, change, recaptures, calls):
    label = f"{name} after {calls} call{'s' if calls > 1 else ''}"
    Model.shift = 0.5
    torch.manual_seed(0)
    model = Model().eval()
    reference = copy.deepcopy(model)
    counter = Counter()
    opt = dynamo.optimize(counter)(model)
    x = torch.randn(2, 4)
    before = _C.cache_stats()["skipped_subtrees"]
    with torch.no_grad():
        for _ in range(calls):
            if not same(opt(x), reference(x)):
                return fail(label, "differs from eager before the change")
    skipped = _C.cache_stats()["skipped_subtrees"] - before
    reliable = _C.cache_stats()["module_versions"]
    if calls > 2 and reliable and skipped < calls - 2:
        fail(label, f"stamps not in use: {skipped} subtrees skipped over {calls} calls")
    if calls > 2 and not reliable and skipped != 0:
        fail(label, f"{skipped} subtrees skipped where dict versions cannot be relied on")
    graphs = counter.graphs
    # Kept alive: an entry also goes when an object its guards identify
    # dies, which would hide a change the stamps missed.
    kept = list(model.modules()) + list(model.parameters()) + list(model.buffers())
    torch.manual_seed(1)  # a new module or parameter: the same in both
    change(model)
    if change is not class_attribute:  # the reference shares the class
        torch.manual_seed(1)
        change(reference)
    with torch.no_grad():
        got, want = opt(x), reference(x)
        again = opt(x)
    Model.shift = 0.5
    del kept
    if not same(got, want) or not same(again, want):
        return fail(label, "a stale result after the change (the guard it stood for was skipped)")
    if recaptures and counter.graphs == graphs:
        return fail(label, "no new capture after the change")
    if VERBOSE:
        print(f"ok {label}: {counter.graphs - graphs} new graph(s), {skipped} subtrees skipped before")


def failure_message():
    """A change is explained by the guard that failed, stamps or not."""
    torch.manual_seed(0)
    model = Model().eval()
    opt = dynamo.optimize(Counter())(model)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(5):
            opt(x)
        model.inner.scale = 4.0
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            dynamo.config.warn_recompiles = True
            try:
                opt(x)
            finally:
                dynamo.config.warn_recompiles = False
    text = " ".join(str(w.message) for w in seen)
    if "scale" not in text or "expected 2.0, got 4.0" not in text:
        fail("failure message", f"the recompile does not name the guard: {text!r}")


def many_models_one_code():
    """Two instances of one class share a code object: each has its own
    entry and stamp, and a change to one does not leak into the other."""
    torch.manual_seed(0)
    a, b = Model().eval(), Model().eval()
    ra, rb = copy.deepcopy(a), copy.deepcopy(b)
    opt = dynamo.optimize(Counter())
    oa, ob = opt(a), opt(b)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(20):
            oa(x), ob(x)
        b.inner.scale = 5.0
        rb.inner.scale = 5.0
        for _ in range(3):
            if not same(oa(x), ra(x)) or not same(ob(x), rb(x)):
                return fail("two models", "a stale result for one of two models sharing a code object")


def _set_forward(m):
    m.forward = types.MethodType(lambda self, x: self.inner(x) * 3, m)


def _class_forward(m):
    Model.forward = Model.forward_doubled


def _global_hook(m):
    return torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: out + 0.25)


# (name, change made to the model and the reference; its undo, given what
# the change returned)
CALL_CHANGES = [
    ("forward hook on the module", lambda m: m.register_forward_hook(lambda mod, args, out: out * -1),
     lambda h: h.remove()),
    ("forward pre-hook on the module", lambda m: m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,)),
     lambda h: h.remove()),
    ("instance forward", _set_forward, lambda h: None),
    ("class forward replaced", _class_forward, lambda h: setattr(Model, "forward", Model.forward_plain)),
]


def _warm_model():
    """A fresh model, its eager copy, the wrapper and an input, after 50
    calls through the wrapper."""
    dynamo.reset()
    torch.manual_seed(0)
    model = Model().eval()
    reference = copy.deepcopy(model)
    opt = dynamo.optimize(Counter())(model)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(50):
            opt(x)
    return model, reference, opt, x


def call_path_changes():
    for name, change, undo in CALL_CHANGES:
        model, reference, opt, x = _warm_model()
        label = f"call path: {name} after 50 calls"
        with torch.no_grad():
            handles = [change(model), change(reference)]
            try:
                got, want = opt(x), reference(x)
                again = opt(x)
            finally:
                for h in handles:
                    undo(h)
            if not same(got, want) or not same(again, want):
                fail(label, "a stale result after the change")
            elif same(want, Model.forward_plain(reference, x)):
                fail(label, "the change changed nothing: the test proves nothing")
            if not same(opt(x), reference(x)):
                fail(label, "a stale result after the change was undone")
    # A global hook: it runs on every module of both, in eager and compiled.
    model, reference, opt, x = _warm_model()
    with torch.no_grad():
        plain = reference(x)
        handle = _global_hook(model)
        try:
            got, want = opt(x), reference(x)
        finally:
            handle.remove()
        if not same(got, want) or same(want, plain):
            fail("call path: global forward hook after 50 calls", "a stale result after the change")
    # _orig_mod replaced: the wrapper runs the new module.
    model, reference, opt, x = _warm_model()
    other = Model().eval()
    with torch.no_grad():
        opt._orig_mod = other
        if not same(opt(x), other(x)) or same(other(x), reference(x)):
            fail("call path: _orig_mod replaced after 50 calls", "the old module ran")
    # Keyword arguments (their values follow the positional ones), more of
    # them than fit the call path's small buffer.
    class Keywords(nn.Module):
        def forward(self, x, a=None, b=None, c=None, d=None, e=None, f=None, g=None, h=None):
            return x + a * b - c + d * e - f + g * h

    keywords = Keywords()
    opt = dynamo.optimize(Counter())(keywords)
    counted = {k: torch.full((4,), float(i + 1)) for i, k in enumerate("abcdefgh")}
    same_x = dict.fromkeys("abcdefgh", x)
    with torch.no_grad():
        for _ in range(20):
            for named in (counted, same_x):
                if not same(opt(x, **named), keywords(x, **named)):
                    return fail("call path: keyword arguments", "differs from eager")
    # Two wrappers called in turn share OptimizedModule.__call__.
    dynamo.reset()
    torch.manual_seed(0)
    a, b = Model().eval(), Model().eval()
    opt = dynamo.optimize(Counter())
    oa, ob = opt(a), opt(b)
    with torch.no_grad():
        for _ in range(20):
            if not same(oa(x), a(x)) or not same(ob(x), b(x)):
                return fail("call path: two wrappers in turn", "one ran the other's module")


def main():
    for name, change, recaptures in CHANGES:
        for calls in (1, 200):
            dynamo.reset()
            run_change(name, change, recaptures, calls)
    failure_message()
    many_models_one_code()
    call_path_changes()
    stats = _C.cache_stats()
    print(f"module_versions_test: {len(CHANGES) * 2} changes, module_versions={stats['module_versions']}, "
          f"{stats['skipped_subtrees']} subtrees skipped, {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
