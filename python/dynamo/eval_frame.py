"""dynamo.optimize, disable and reset: the torch._dynamo entry points over
dynamo.runtime.Runtime.

    opt = dynamo.optimize("eager")         # one Runtime: one cache, one history
    f = opt(f)                              # functools.wraps(f); f(x) is captured
    model = opt(model)                      # OptimizedModule; model._orig_mod
    g = dynamo.disable(g)                   # never captured
    dynamo.reset()                          # every Runtime forgets its captures

A function (or bound method) is run through the Runtime: captured on its real
arguments on a cache miss, graph breaks handled by resume functions, cached
per code object behind the capture's guards. A module's forward is captured
the same way; its own hooks (and global module hooks) run as plain Python
around the captured forward, as nn.Module.__call__ would run them.
"""
import functools
import types
import warnings
import weakref

import torch

from dynamo import _C
from dynamo import config
from dynamo.backends import lookup_backend
from dynamo.runtime import Runtime

# Every Runtime optimize() made, for reset(); weak so that dropping an
# optimized function drops its captures.
_runtimes = weakref.WeakSet()


def _new_runtime(backend, nopython, dynamic=None):
    runtime = Runtime(backend=backend, nopython=nopython, dynamic=dynamic)
    _runtimes.add(runtime)
    return runtime


def reset():
    """Drops the cached captures of every Runtime made by optimize(): the
    next call of any optimized function captures again (like
    torch._dynamo.reset(); Runtime.graphs keeps, weakly, the graphs
    already handed over). Caches also go without reset(): an entry goes
    when its optimize() context, its code or an object its guards identify
    dies (see dynamo.runtime)."""
    reset_caches = getattr(_C, "reset_caches", None)
    if reset_caches is not None:  # the frame evaluator's per-code caches
        reset_caches()
    for runtime in list(_runtimes):
        drop = getattr(runtime, "reset", None)
        if callable(drop):
            drop()
        else:  # the Runtime's own cache (guards checked in Python) and its warnings
            getattr(runtime, "cache", {}).clear()
            getattr(runtime, "warned", set()).clear()


def _is_disabled(fn):
    return bool(getattr(fn, "_dynamo_disable", False))


def disable(fn=None, recursive=True, *, reason=None):
    """fn (a function, method or module), never captured: optimize() leaves
    it as it is, and when optimized code calls it, the graph breaks at the
    call (the marker is `_dynamo_disable = True`, and torch's
    `_torchdynamo_disable`, which torch._dynamo honours too). `@disable` and
    `@disable()` both work. torch.compiler.disable's signature: `reason` is
    recorded as `_dynamo_disable_reason`.

    recursive=True: fn runs with the frame evaluator off, so nothing it
    calls is captured either (a module is marked in place and returned).
    recursive=False: only fn's own frames are skipped; the functions it
    calls are captured as usual (torch's `disable(recursive=False)`, once
    spelled `torch._dynamo.skip`; see skip())."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if not callable(fn):
        raise TypeError(f"dynamo.disable expects a callable, got {type(fn).__name__}")
    if _is_disabled(fn) and (not recursive or getattr(fn, "_dynamo_disable_recursive", True)):
        return fn
    if not recursive:
        return _skip_frames(fn, reason)
    if isinstance(fn, torch.nn.Module):
        fn._dynamo_disable = True
        return fn
    fn = getattr(fn, "_torchdynamo_orig_callable", fn)  # disable(optimize(f)): f, plainly

    @functools.wraps(fn)
    def _disabled(*args, **kwargs):
        # The frame evaluator off for the length of the call (this wrapper is
        # dynamo code, which the evaluator itself never captures).
        previous = _C.set_eval_frame(None)
        try:
            return fn(*args, **kwargs)
        finally:
            if previous is not None:
                _C.set_eval_frame(previous)

    _disabled._dynamo_disable = True
    _disabled._dynamo_disable_reason = reason
    _disabled._torchdynamo_disable = True
    _disabled._torchdynamo_orig_callable = fn
    return _disabled


def _skipped_copy(function):
    """function with a copy of its code that the frame evaluator always
    runs as it is: the original's code (called elsewhere, optimized
    elsewhere) stays capturable."""
    code = function.__code__.replace()  # a new code object: its own co_extra
    _C.mark_skip(code)
    copy = types.FunctionType(code, function.__globals__, function.__name__, function.__defaults__,
                              function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__ = function.__qualname__
    copy.__dict__.update(function.__dict__)
    return copy


def _skip_frames(fn, reason):
    """disable(fn, recursive=False): fn's frames are skipped, what it calls
    is captured."""
    if isinstance(fn, torch.nn.Module):
        # Captured code calls a module through type(m).forward, so a
        # per-instance skip could not be honoured there.
        raise TypeError("dynamo.disable(recursive=False) takes functions and methods; for a module, "
                        "decorate its class's forward")
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        target = types.MethodType(_skipped_copy(fn.__func__), fn.__self__)
    elif isinstance(fn, types.FunctionType):
        target = _skipped_copy(fn)
    else:
        raise TypeError(f"dynamo.disable(recursive=False) expects a Python function, method or module, "
                        f"got {type(fn).__name__}")

    @functools.wraps(fn)
    def _skipped(*args, **kwargs):
        # The evaluator stays on: frames target's code starts are captured.
        return target(*args, **kwargs)

    # Captured code breaks at a call of it (the translator reads the marker),
    # so the call runs in Python, where the evaluator skips target's frame.
    _skipped._dynamo_disable = True
    _skipped._dynamo_disable_reason = reason
    _skipped._dynamo_disable_recursive = False
    _skipped._torchdynamo_disable = True
    _skipped._torchdynamo_disable_recursive = False
    return _skipped


def skip(fn=None):
    """disable(fn, recursive=False): fn's own frames are never captured, the
    code it calls is (torch._dynamo.skip's meaning; torch 2.14 spells it
    torch.compiler.disable(fn, recursive=False))."""
    if fn is None:
        return skip
    return disable(fn, recursive=False)


def capture_target(fn):
    """The function or bound method the Runtime captures for calling fn:
    fn itself, a module's forward, a callable object's __call__; None when
    there is no Python code to capture (a builtin)."""
    if isinstance(fn, OptimizedModule):
        fn = fn._orig_mod
    fn = getattr(fn, "_torchdynamo_orig_callable", fn)
    if isinstance(fn, torch.nn.Module):
        return fn.forward
    if isinstance(fn, (types.FunctionType, types.MethodType)):
        target = fn.__func__ if isinstance(fn, types.MethodType) else fn
        return fn if isinstance(target, types.FunctionType) else None
    call = getattr(type(fn), "__call__", None)
    if isinstance(call, types.FunctionType):
        return types.MethodType(call, fn)
    return None


def _has_hooks(module):
    """What makes nn.Module.__call__ do more than call forward."""
    m = torch.nn.modules.module
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks or
                module._backward_pre_hooks or
                getattr(m, "_global_forward_hooks", None) or getattr(m, "_global_forward_pre_hooks", None) or
                getattr(m, "_global_backward_hooks", None) or getattr(m, "_global_backward_pre_hooks", None))


class OptimizedModule(torch.nn.Module):
    """A module whose forward runs through one Runtime. Calling it behaves
    like calling the original: the original's hooks run (in Python) around
    the captured forward; parameters, buffers, train()/eval() and
    state_dict() are the original's (under the `_orig_mod.` prefix, as in
    torch); other attributes are read from the original."""

    def __init__(self, mod, runtime, ctx=None):
        super().__init__()
        self._orig_mod = mod
        self.dynamo_runtime = runtime
        # The optimize() that made it: applied to other functions (the
        # module's own methods), they share its Runtime (torch's name).
        self.dynamo_ctx = ctx
        if runtime.evaluate_frames and runtime._cache_size_limit is None:
            # What __call__'s C fast path (_C.ModuleCall) runs the original's
            # forward under when no hook is set anywhere (with
            # config.cache_size_limit, as Runtime.call would).
            self._dynamo_callback = runtime._callback

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            modules = self.__dict__.get("_modules")
            if not modules or "_orig_mod" not in modules:
                raise
            return getattr(modules["_orig_mod"], name)

    def __dir__(self):
        # What __getattr__ reaches: the original's names (its submodules,
        # parameters and buffers included), then the wrapper's own.
        names = dir(self._orig_mod)
        known = set(names)
        return names + [n for n in super().__dir__() if n not in known]

    def forward(self, *args, **kwargs):
        mod = self._orig_mod
        runtime = self.dynamo_runtime
        # What nn.Module.__call__ would run now: the instance's own forward
        # when one was set (even after optimize()), else the class's.
        target = mod.forward
        if not _has_hooks(mod):
            return runtime.call(target, args, kwargs)
        # The original's __call__ (its hooks, in Python) with its forward
        # routed to the capture for the length of the call.
        missing = object()
        previous = mod.__dict__.get("forward", missing)
        mod.__dict__["forward"] = functools.wraps(target)(lambda *a, **k: runtime.call(target, a, k))
        try:
            return mod(*args, **kwargs)
        finally:
            if previous is missing:
                del mod.__dict__["forward"]
            else:
                mod.__dict__["forward"] = previous

    def _call_slow(self, *args, **kwargs):
        if self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks:
            return super().__call__(*args, **kwargs)  # hooks on the wrapper itself
        return self.forward(*args, **kwargs)

    # In C: forward's fast path without a Python frame of ours when no hook
    # is set (on the wrapper, the original or torch's global lists), else
    # _call_slow.
    __call__ = _C.ModuleCall(_call_slow, config, torch.nn.modules.module)


class _Optimize:
    """What optimize() returns: applied to functions and modules, it routes
    them through its one Runtime (`.runtime`)."""

    def __init__(self, backend, nopython, dynamic=None):
        self.backend = lookup_backend(backend)
        self.nopython = nopython
        self.runtime = _new_runtime(self.backend, nopython, dynamic)

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"dynamo.optimize(...) expects a function or an nn.Module, got {type(fn).__name__}")
        if _is_disabled(fn) and getattr(fn, "_dynamo_disable_recursive", True):
            return fn
        if isinstance(fn, OptimizedModule):
            fn = fn._orig_mod
        if isinstance(fn, torch.nn.Module):
            return OptimizedModule(fn, self.runtime, self)
        fn = getattr(fn, "_torchdynamo_orig_callable", fn)  # re-optimizing: the original
        if not getattr(fn, "_dynamo_disable_recursive", True) and self.runtime.evaluate_frames:
            return self._around_skipped(fn)
        target = capture_target(fn)
        if target is None:
            warnings.warn(f"dynamo.optimize: {fn!r} has no Python code to capture; it runs as it is")
            return fn
        runtime = self.runtime
        if runtime.evaluate_frames:
            # The fast path: one C call sets the evaluator's callback around
            # the call (Runtime.call does the same with more Python).
            code = getattr(target, "__func__", target).__code__
            _C.mark_capture(code)
            runtime._entry_codes.add(code)
            # run_with_eval_frame(callback, config.cache_size_limit, target,
            # ...) as one C callable. What is returned stays a Python
            # function, as torch.compile's is (torch.fx.symbolic_trace,
            # inspect and tools that want a FunctionType take it).
            call = _C.OptimizedFunction(runtime._callback, target, config)

            @functools.wraps(fn)
            def _optimized(*args, **kwargs):
                return call(*args, **kwargs)
        else:
            @functools.wraps(fn)
            def _optimized(*args, **kwargs):
                return runtime.call(target, args, kwargs)

        _optimized._torchdynamo_orig_callable = fn
        # torch._dynamo tracing a caller of ours breaks at the call and runs
        # it, as it does its own disable()d functions; run_with_eval_frame
        # turns torch's callback off for the length of our region.
        _optimized._torchdynamo_disable = True
        _optimized._torchdynamo_disable_recursive = True
        _optimized.dynamo_runtime = runtime
        return _optimized

    def _around_skipped(self, fn):
        """optimize(disable(f, recursive=False)): f's frames run as they
        are, the calls they make are captured by this Runtime."""
        run, callback = _C.run_with_eval_frame, self.runtime._callback

        @functools.wraps(fn)
        def _optimized(*args, **kwargs):
            return run(callback, config.cache_size_limit, fn, *args, **kwargs)

        # Called from captured code it breaks, as fn itself would.
        _optimized._dynamo_disable = True
        _optimized._dynamo_disable_recursive = False
        _optimized._torchdynamo_disable = True
        _optimized.dynamo_runtime = self.runtime
        return _optimized

    def __enter__(self):
        raise NotImplementedError("dynamo.optimize(...) as a context manager needs the frame evaluator; "
                                  "apply it to a function or module instead: dynamo.optimize(backend)(fn)")

    def __exit__(self, *exc):
        return False


def _identity(fn):
    return fn


def optimize(backend="eager", nopython=False, disable=False, dynamic=None):
    """A decorator that captures functions and modules with `backend`.

        @dynamo.optimize("eager")
        def f(x, y): ...
        model = dynamo.optimize("ts")(model)          # an OptimizedModule

    backend: a name from dynamo.list_backends() or a callable
    (gm: torch.fx.GraphModule, example_inputs: list[Tensor]) -> callable.
    nopython=True: a graph break raises dynamo.Unsupported (with its
    location) instead of falling back to Python. disable=True: the identity.
    Each optimize() call owns one Runtime (its cache and history: `.runtime`,
    and `fn.dynamo_runtime` on what it returns). Failures inside capture or
    the backend never break the program: the call runs eagerly, with a
    warning. dynamic=True: every size of every tensor input is symbolic (0
    and 1 stay static); False: all sizes are static (mark_dynamic ignored);
    None (the default): a dimension whose size changes between captures
    becomes symbolic (config.automatic_dynamic_shapes), and so do those
    mark_dynamic names."""
    if disable:
        return _identity
    return _Optimize(backend, nopython, dynamic)


def optimize_assert(backend="eager"):
    """optimize(backend, nopython=True), torch's spelling."""
    return optimize(backend, nopython=True)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """torch.compile's shape over optimize(): code ports by changing
    `torch.compile` to `dynamo.compile`.

        model = dynamo.compile(model)                       # Inductor, like torch.compile
        @dynamo.compile(backend="eager", fullgraph=True)
        def f(x): ...

    fullgraph=True: a graph break raises dynamo.Unsupported (optimize's
    nopython). mode and options configure Inductor, as torch.compile's do
    ("reduce-overhead", "max-autotune", {"epilogue_fusion": False}, ...).
    dynamic: as optimize()'s (True: all sizes symbolic; False: none; None:
    automatic). disable=True: the model as it is."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if disable:
        return model
    if mode is not None or options:
        if backend != "inductor":
            raise ValueError(f"dynamo.compile: mode and options configure Inductor, not backend {backend!r}")
        backend = _inductor_with(mode, options or {})
    return optimize(backend, nopython=fullgraph, dynamic=dynamic)(model)


def _inductor_with(mode, options):
    """The "inductor" backend run under Inductor's config for `mode` and
    `options`, as torch.compile applies them."""
    import torch._inductor
    from torch._inductor import config as inductor_config
    patches = dict(torch._inductor.list_mode_options(mode)) if mode is not None else {}
    patches.update(options)
    unknown = sorted(k for k in patches if not hasattr(inductor_config, k.split(".")[0]))
    if unknown:
        raise ValueError(f"dynamo.compile: unknown Inductor options {unknown}")
    inductor = lookup_backend("inductor")

    def inductor_configured(gm, example_inputs):
        with inductor_config.patch(patches):
            return inductor(gm, example_inputs)
    inductor_configured._dynamo_static_shapes = True
    return inductor_configured


def graph_break():
    """Ends the graph here when called from captured code (the code after it
    is a resume function); nothing when run eagerly."""


graph_break._dynamo_disable = True


def mark_dynamic(t, index):
    """Makes dimension `index` (an int or a list of them) of tensor `t`
    symbolic in the captures it enters (unless optimize(dynamic=False)),
    as torch._dynamo.mark_dynamic does: the same attribute, so either
    spelling works with either compiler. A size of 0 or 1 stays static."""
    indices = [index] if isinstance(index, int) else list(index)
    marked = set(getattr(t, "_dynamo_dynamic_indices", set()))
    marked.update(indices)
    t._dynamo_dynamic_indices = marked


def maybe_mark_dynamic(t, index):
    """mark_dynamic: libdynamo never refuses a marked dimension (a relation
    the trace needs becomes a guard), so the two are one."""
    mark_dynamic(t, index)


def mark_static(t, index=None):
    """Keeps dimension `index` of `t` (every dimension when None) static,
    even under optimize(dynamic=True)."""
    indices = range(t.dim()) if index is None else ([index] if isinstance(index, int) else list(index))
    marked = set(getattr(t, "_dynamo_static_indices", set()))
    marked.update(indices)
    t._dynamo_static_indices = marked
