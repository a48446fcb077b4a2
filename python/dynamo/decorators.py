"""What the user tells the translator about particular callables, shaped like
torch._dynamo's decorators (and torch.compiler's spellings of them).

    dynamo.allow_in_graph(fn)          # a call of fn is one graph node, fn runs when the graph runs
    dynamo.disallow_in_graph(torch.sub)  # a call of torch.sub ends the graph; it runs in Python
    dynamo.assume_constant_result(fn)  # fn() runs once, at capture; its result is a constant
    dynamo.run(fn)                     # the captures already made, nothing new captured
    dynamo.is_compiling()              # True in captured code, False when run eagerly

The translator (lib/trace/call_policy.cc) reads `_policy` whenever captured
code calls something: id(fn) -> (kind, fn, graph target). A trace that
relied on an entry guards the callable's identity (its source, ID_MATCH).
Changing an entry affects captures made afterwards, as in torch (call
dynamo.reset() to recapture what is cached).

Allowed functions in graphs: a node calling fn has the target
"allow_in_graph.<module>.<qualname>" (made unique with "#N" when two
functions share a name). The live runtime builds its GraphModule with
`graph_callables()`, so the node calls fn itself. A capture file never
names code that loading may run (README, "Trust model"): loading such a
node from a .pb is refused with a message naming it.
"""
import functools
import threading

import torch

from dynamo import runtime

ALLOWED_TARGET_PREFIX = "allow_in_graph."  # lib/trace/call_policy.cc: kAllowedTargetPrefix

_policy = {}   # id(fn) -> (kind, fn, target); kind: "allow", "disallow", "constant", "is_compiling"
_targets = {}  # allowed graph target -> fn
_lock = threading.Lock()


def _name(fn):
    if isinstance(fn, torch._library.custom_ops.CustomOpDef):  # no __name__: its operator's
        return f"{ALLOWED_TARGET_PREFIX}torch.ops.{fn._namespace}.{fn._name}"
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__qualname__
    return f"{ALLOWED_TARGET_PREFIX}{module}.{qualname}"


def _set(kind, fn, what):
    if isinstance(fn, (list, tuple)):
        return type(fn)(_set(kind, f, what) for f in fn)
    if not callable(fn):
        raise TypeError(f"dynamo.{what} expects a callable, got {type(fn).__name__}")
    if kind == "allow" and _is_registry_op(fn):
        kind = None  # in the graph already: allowing it only undoes disallow_in_graph
    with _lock:
        old = _policy.pop(id(fn), None)
        if old is not None and old[2] is not None:
            _targets.pop(old[2], None)
        target = None
        if kind == "allow":
            base = target = _name(fn)
            n = 1
            while target in _targets:
                n += 1
                target = f"{base}#{n}"
            _targets[target] = fn
        if kind is not None:
            _policy[id(fn)] = (kind, fn, target)
    return fn


def _is_registry_op(fn):
    from dynamo import trust
    return any(fn is op for op in trust._load_allowlist().functions.values())


def allow_in_graph(fn):
    """Calls of fn from captured code become one call_function node of the
    graph instead of being traced into (or breaking): the backend's
    GraphModule calls fn. The node's output metadata comes from running fn
    on meta tensors of the arguments' metadata at capture time (so fn's
    Python side effects happen then too, as with torch's fake tensors); a
    fn that cannot run on meta tensors (it reads values, raises, returns
    something else than tensors, None or tuples/lists of those) is a graph
    break that says why. Takes a callable or a list/tuple of them; returns
    what it was given. For an op the registry knows (torch.sub), which is
    in the graph already, it only undoes disallow_in_graph(fn)."""
    return _set("allow", fn, "allow_in_graph")


def disallow_in_graph(fn):
    """Calls of fn (a torch op such as torch.sub, or any callable) from
    captured code end the graph there: the call runs in Python and the code
    after it is captured again. Undoes allow_in_graph(fn)."""
    return _set("disallow", fn, "disallow_in_graph")


def assume_constant_result(fn):
    """A call of fn from captured code runs once, at capture, on constant
    arguments, and its result is a constant of the graph. Like torch, the
    result is not guarded (a later change of what fn returns is not seen
    until the code is captured again); which function is called is guarded
    (rebinding the name to another function recaptures). A result that is a
    tensor, or arguments that are not constants, are a graph break."""
    return _set("constant", fn, "assume_constant_result")


def _allow_custom_operator(op):
    """The translator's question for a torch.ops object it is called with:
    True when it is an operator of a torch.library namespace other than aten
    (torch.ops.mylib.foo, torch.ops.mylib.foo.default, a function decorated
    with torch.library.custom_op), which is then
    registered here as allow_in_graph would (its fake or meta kernel gives
    the node's metadata; the graph calls the operator). aten's operators are
    the op registry's and torch's meta fallback's."""
    if isinstance(op, torch._ops.OpOverload):
        namespace = op.namespace
    elif isinstance(op, torch._ops.OpOverloadPacket):
        namespace = op._qualified_op_name.split("::")[0]
    elif isinstance(op, torch._library.custom_ops.CustomOpDef):
        namespace = op._namespace
    else:
        return False
    if namespace == "aten":
        return False
    with _lock:
        known = id(op) in _policy
    if not known:
        _set("allow", op, "allow_in_graph")
        entry = _policy.get(id(op))
        if entry is not None and entry[2] is not None and isinstance(op, torch._library.custom_ops.CustomOpDef):
            with _lock:
                _targets[entry[2]] = op._opoverload  # what the function calls, and what FX can name
    return _policy.get(id(op), (None,))[0] == "allow"


def _forget(fn):
    """Removes fn's entry (tests)."""
    _set(None, fn, "_forget")


def is_compiling():
    """True in code libdynamo captures (the translator answers it; the
    graph holds the branch taken), False when the code runs eagerly.
    Under torch's own compiler it answers what torch.compiler.is_compiling()
    does."""
    return torch.compiler.is_compiling()


_policy[id(is_compiling)] = ("is_compiling", is_compiling, None)


_function_targets = {}  # autograd.Function subclass -> its graph target


def _autograd_function_target(cls):
    """The graph target of cls.apply for a torch.autograd.Function subclass
    called from captured code (lib/trace/call_policy.cc): one node calling
    it, so its forward and its own backward run as in eager. Kept for the
    process, like an allowed function."""
    with _lock:
        target = _function_targets.get(cls)
        if target is None:
            base = target = f"{ALLOWED_TARGET_PREFIX}{cls.__module__}.{cls.__qualname__}.apply"
            n = 1
            while target in _targets:
                n += 1
                target = f"{base}#{n}"
            _targets[target] = _apply_of(cls)
            _function_targets[cls] = target
        return target


def _apply_of(cls):
    """cls.apply as a Python function (FX names a node's callable by its
    module and name, which the C classmethod bound to cls lacks)."""
    def apply(*args):
        return cls.apply(*args)
    apply.__module__ = cls.__module__
    apply.__name__ = f"{cls.__name__}_apply"
    apply.__qualname__ = f"{cls.__qualname__}.apply"
    return apply


def graph_callables():
    """{graph target: callable} for a live capture's GraphModule: the
    allowed functions by the names the translator gave their nodes."""
    with _lock:
        return dict(_targets)


def _innermost(fn):
    seen = 0
    while hasattr(fn, "_torchdynamo_orig_callable") and seen < 32:
        fn, seen = fn._torchdynamo_orig_callable, seen + 1
    return fn


def run(fn=None):
    """fn run with the captures already made and nothing captured anew: a
    frame whose guards hold runs its captured code, a miss runs eagerly (no
    capture, no backend call). For a function or module dynamo.optimize()
    returned, its captures; called from code being captured, fn is traced
    as its original. `@dynamo.run()` and `dynamo.run(fn)` both work (torch
    also takes run() as a decorator)."""
    if fn is None:
        return run
    if not callable(fn):
        raise TypeError(f"dynamo.run expects a callable, got {type(fn).__name__}")

    @functools.wraps(fn)
    def _run_only(*args, **kwargs):
        previous = getattr(runtime.run_only, "on", False)
        runtime.run_only.on = True
        try:
            return fn(*args, **kwargs)
        finally:
            runtime.run_only.on = previous

    _run_only._torchdynamo_orig_callable = _innermost(fn)
    return _run_only
