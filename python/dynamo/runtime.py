"""Runs Python functions through libdynamo's live capture: on a call, the
function is traced on its real arguments (graph breaks allowed), its graph is
handed to a backend, and the rewritten code runs instead of the original:
graph, side effects, the part Python must run, then resume functions, which
are captured the same way when they run. Results are cached per code object
behind the capture's guards.

    rt = Runtime(backend=lambda gm, example_inputs: gm)
    rt.call(fn, (x, y), {})          # == fn(x, y)
    rt.stats()                       # {"graphs": 1, "breaks": 0, ...}

Memory: what is cached for an object goes when the object goes. The frame
evaluator's entries (in each code object's co_extra) refer to a Runtime's
callback without keeping it alive, and go when it dies, so dropping an
optimized function or module frees its captures; an entry also goes when an
object its guards identify dies. The names a capture installs in its
function's globals (compiled graph, resume functions) go with its entry.
A Runtime's history (graphs, captures_made, break_records, generated_code)
keeps the last HISTORY_LIMIT items of each (up to twice that); stats()
counts them all. Its
graphs are held weakly: a GraphModule holds the parameters it reads, and
only the backend's result (or the user) may keep it alive.
"""
import collections
import gc
import itertools
import sys
import threading
import time
import types
import warnings
import weakref

import torch

from dynamo import _C
from dynamo import config
from dynamo import deferred
from dynamo import dynamo_ir_pb2 as ir
from dynamo import logs
from dynamo.guards import check_guards, frame_for_call, resolve_source
from dynamo.exc import BackendCompilerFailed, RecompileError, TorchRuntimeError, Unsupported  # noqa: F401 - re-exported
from dynamo.loader import to_graph_module

_ids = itertools.count()  # rewrite ids: globals stay unique per process
# dynamo.run(): while `run_only.on` in this thread, a cache miss runs the
# frame eagerly and nothing is captured (dynamo/decorators.py).
run_only = threading.local()

# How many items each of a Runtime's history lists keeps (the newest; up to
# twice as many for the lists, see _History): a
# long-lived Runtime that recompiles (new objects, cache_size_limit) must not
# grow without bound. explain() uses a fresh Runtime per call.
HISTORY_LIMIT = 1000


def _eager_backend(gm, example_inputs):
    # The generated forward itself: a GraphModule has no hooks, and
    # nn.Module.__call__ would cost microseconds per call.
    return gm.forward


def format_break(b):
    """'file:line: message [REASON] | source | hint: ...' for a GraphBreak."""
    text = f"{b.location.file}:{b.location.line}: {b.message} [{ir.GraphBreak.Reason.Name(b.reason)}]"
    if b.location.text:
        text += f" | {b.location.text}"
    if b.hint:
        text += f" | hint: {b.hint}"
    return text


class LazyCapture:
    """A live capture's ir.Capture proto, parsed from the capture kept in C++
    (`live`, a dynamo._C.LiveCapture) when something first reads it: explain,
    logs, dumps, a break's record, the FX graph. A first call that reads
    none of these never serializes or parses it. Reads as the proto does;
    `proto` is the proto itself."""

    __slots__ = ("live", "_proto")

    def __init__(self, live):
        self.live = live
        self._proto = None

    @property
    def proto(self):
        if self._proto is None:
            self._proto = ir.Capture.FromString(self.live.serialize())
        return self._proto

    def __getattr__(self, name):
        return getattr(self.proto, name)

    def __repr__(self):
        return repr(self.proto)


def capture_proto(capture):
    """The ir.Capture proto of a capture a Runtime recorded."""
    return capture.proto if isinstance(capture, LazyCapture) else capture


class _Entry:
    """One cached compilation of a code object: the guards it holds under
    and the function to run (None: run the original as it is)."""

    def __init__(self, capture, function, live=None, direct=None, installed=None):
        self.capture = capture  # a LazyCapture
        self.function = function
        self.live = live  # the dynamo._C.LiveCapture the frame evaluator compiles the guards from
        # (compiled graph, argument slots, outputs, returns a tuple) when the
        # call is the graph alone: the frame evaluator calls it directly.
        self.direct = direct
        self.installed = installed  # the globals this capture installed (_Installed)


class _History(list):
    """A list that keeps between HISTORY_LIMIT and twice that many of the
    newest items appended (trimmed in blocks, so that appending stays
    cheap and `history[len_before:]` still reads what was just added)."""

    def append(self, item):
        super().append(item)
        if len(self) > 2 * HISTORY_LIMIT:
            del self[:HISTORY_LIMIT]


class _WeakHistory:
    """The newest HISTORY_LIMIT objects appended, held weakly: iterating
    yields those still alive; len() counts every one kept, dead or alive."""

    def __init__(self):
        self._refs = collections.deque(maxlen=HISTORY_LIMIT)

    def append(self, obj):
        self._refs.append(weakref.ref(obj))

    def __len__(self):
        return len(self._refs)

    def __iter__(self):
        return (obj for obj in (ref() for ref in list(self._refs)) if obj is not None)

    def __getitem__(self, i):
        return list(self)[i]


class _Installed:
    """The names one capture put in its function's globals (the compiled
    graph, resume functions). The cache entry of the capture holds it (the
    frame evaluator's, or a _Entry); when the entry goes, so do the names,
    unless something else has been bound to them since."""

    __slots__ = ("globals", "names")

    def __init__(self, globals_):
        self.globals = globals_
        self.names = []

    def add(self, name, value):
        self.globals[name] = value
        self.names.append((name, value))

    def __del__(self):
        try:
            for name, value in self.names:
                if self.globals.get(name) is value:
                    del self.globals[name]
        except Exception:  # noqa: BLE001 - interpreter shutdown: the globals may be gone
            pass


class _Resume:
    """The callable a rewritten code calls to continue after a break: it
    makes the resume function (with the caller's cells as its closure) and
    runs it through the runtime, or plainly when capturing it would not help.
    It sits in the user's globals, so it holds its Runtime weakly."""

    def __init__(self, runtime, code, globals_, capture, takes_closure):
        self.runtime, self.code, self.globals = weakref.ref(runtime), code, globals_
        self.capture, self.takes_closure = capture, takes_closure

    def __call__(self, *args):
        closure = None
        if self.takes_closure:
            closure, args = args[0], args[1:]
        fn = types.FunctionType(self.code, self.globals, self.code.co_name, None, closure)
        runtime = self.runtime()
        if not self.capture or runtime is None or runtime.evaluate_frames:
            # Under the frame evaluator the call itself is captured (or, for
            # code marked to skip, run as it is).
            return fn(*args)
        return runtime.call(fn, args, {})


class _FrameCallback:
    """What the frame evaluator calls on a miss, and the key its entries are
    filed under. The evaluator refers to it without keeping it alive and
    drops its entries when it dies; it holds its Runtime weakly, so nothing
    but the optimized function or module keeps the Runtime (its graphs,
    captures, backend) alive."""

    __slots__ = ("runtime", "__weakref__")

    def __init__(self, runtime):
        self.runtime = weakref.ref(runtime)

    def __call__(self, function, args, kwargs, recompile_reason):
        runtime = self.runtime()
        if runtime is None:
            return None  # this call runs as it is
        return runtime._on_frame(function, args, kwargs, recompile_reason)


class Runtime:
    """One optimize() context: a backend, a cache per code object, and what
    was captured (graphs, breaks, guards) for explain()."""

    def __init__(self, backend=None, cache_size_limit=None, nopython=False, evaluate_frames=True, dynamic=None):
        self.backend = backend or _eager_backend
        # Dynamic shapes: True, every size of every tensor input is a symbol
        # (0 and 1 excepted); False, none is, mark_dynamic included; None,
        # automatic (config.automatic_dynamic_shapes) and mark_dynamic.
        self.dynamic = dynamic
        self._seen_sizes = weakref.WeakKeyDictionary()    # code -> {source: sizes}
        self._dynamic_dims = weakref.WeakKeyDictionary()  # code -> {source: {dims}}
        # True: the PEP 523 evaluator (lib/embed/eval_frame.h) captures the
        # call and every frame it makes, guards checked in C++. False: only
        # the called function and its resume functions, guards checked here
        # in Python (dynamo.guards) -- the plain runner of rewritten code.
        self.evaluate_frames = evaluate_frames
        self._callback = _FrameCallback(self)  # one object: the C++ cache is keyed by it
        self._entry_codes = weakref.WeakSet()
        self._cache_size_limit = cache_size_limit
        self.nopython = nopython
        self.cache = weakref.WeakKeyDictionary()  # code object -> [_Entry]
        # History, the newest HISTORY_LIMIT of each, in order:
        self.graphs = _WeakHistory()      # GraphModules handed to the backend (weakly)
        self.captures_made = _History()   # LazyCapture: each reads as its Capture proto
        self.break_records = _History()   # GraphBreak protos
        self.generated_code = _History()  # rewritten and resume code objects
        self._resume_codes = {}  # resume code -> the first equal one made (bounded by the program's text)
        # Per capture, seconds in each phase of its first call: trace and
        # rewrite (C++), graph (the GraphModule), backend; the guards are
        # compiled after (dynamo._C.cache_stats()["guard_compile_seconds"]).
        self.phase_times = _History()
        self.break_sites = set()   # (file, line, offset, reason): bounded by the program's text
        self.warned = weakref.WeakSet()  # code objects already warned about
        self.warned_modes = weakref.WeakSet()  # code objects told they ran under a TorchFunctionMode
        self.captures = 0
        self.cache_hits = 0
        self.graphs_made = 0       # every GraphModule, counted

    def reset(self):
        """Drops this Runtime's own cache, warnings and automatic-dynamic
        history (dynamo.reset(); the frame evaluator's caches go there too)."""
        self.cache.clear()
        self._resume_codes.clear()
        self.warned.clear()
        self._seen_sizes.clear()
        self._dynamic_dims.clear()

    def _dynamic_spec(self, target, frame):
        """What capture_call's `dynamic` says for this call (`frame`: its
        locals, None where inspect cannot bind them): automatic dynamic
        marks the dimensions of tensor inputs whose sizes differ from the
        previous capture of the same code."""
        if self.dynamic is False:
            return {"none": True}
        spec = {"all": self.dynamic is True}
        if self.dynamic is None and config.automatic_dynamic_shapes:
            if frame is None:
                return spec  # no history for a call inspect cannot bind
            code = target.__code__
            seen = self._seen_sizes.setdefault(code, {})
            dims = self._dynamic_dims.setdefault(code, {})
            for label, tensor in _tensor_inputs(frame):
                sizes = tuple(tensor.shape)
                before = seen.get(label)
                if before is not None and len(before) == len(sizes):
                    changed = {d for d, (a, b) in enumerate(zip(before, sizes)) if a != b}
                    if changed:
                        dims.setdefault(label, set()).update(changed)
                seen[label] = sizes
            spec["dims"] = {label: sorted(ds) for label, ds in dims.items()}
        return spec

    def stats(self):
        return {"graphs": self.graphs_made, "breaks": len(self.break_sites),
                "captures": self.captures, "cache_hits": self.cache_hits}

    def call(self, fn, args, kwargs):
        if self.evaluate_frames:
            target = fn.__func__ if isinstance(fn, types.MethodType) else fn
            if target.__code__ not in self._entry_codes:
                # The function asked for is captured even if its file is one
                # the evaluator skips (torch's own modules).
                _C.mark_capture(target.__code__)
                self._entry_codes.add(target.__code__)
            # One C call sets the callback and puts the previous one back:
            # no Python runs in between, so a KeyboardInterrupt cannot land
            # between setting it and a `try` and leave it set.
            return _C.run_with_eval_frame(self._callback, self._limit(), fn, *args, **kwargs)
        return self._call_checked(fn, args, kwargs)

    def _limit(self):
        return self._cache_size_limit if self._cache_size_limit is not None else config.cache_size_limit

    def _on_frame(self, function, args, kwargs, recompile_reason):
        """The frame evaluator's miss: capture this call of `function`."""
        if config.error_on_nested_fx_trace and function.__code__ in self._entry_codes and _fx_symbolic_tracing():
            # FX is tracing the optimized function itself (frames FX traces
            # inside an optimized region are the region's business).
            raise RuntimeError("Detected that you are using FX to symbolically trace a dynamo-optimized function; "
                               "FX would record the original code, not the capture (set "
                               "dynamo.config.error_on_nested_fx_trace = False to trace the original)")
        if _another_tracer_running() or getattr(run_only, "on", False) or self._under_function_mode(function):
            return None  # this call runs as it is, nothing cached
        code = function.__code__
        if recompile_reason is not None:
            _recompiling(code, recompile_reason)
        entry = self._compile_or_warn(function, function, args, kwargs)
        if entry is None:
            return False  # this code runs eagerly, for this Runtime only
        code = entry.function.__code__ if entry.function is not None else None
        return entry.live, code, entry.direct, entry.installed

    def _call_checked(self, fn, args, kwargs):
        target = fn.__func__ if isinstance(fn, types.MethodType) else fn
        code = target.__code__
        entries = self.cache.setdefault(code, [])
        for entry in entries:
            if entry.capture is None:  # capture failed: this code runs eagerly
                return fn(*args, **kwargs)
            if check_guards(entry.capture, fn, args, kwargs) is None:
                self.cache_hits += 1
                return self._run(entry, fn, args, kwargs)
        if getattr(run_only, "on", False) or self._under_function_mode(target):
            return fn(*args, **kwargs)
        limit = self._limit()
        if len(entries) >= limit:
            if code not in self.warned:
                self.warned.add(code)
                warnings.warn(f"dynamo: {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}) was "
                              f"captured {limit} times (config.cache_size_limit); it runs eagerly from now on")
            return fn(*args, **kwargs)
        if entries and (config.warn_recompiles or config.error_on_recompile or logs.enabled("recompiles")):
            failure = check_guards(entries[-1].capture, fn, args, kwargs)
            _recompiling(code, failure[1] if failure else "no guard set holds")
        entry = self._compile_or_warn(fn, target, args, kwargs)
        if entry is None:
            entries.append(_Entry(None, None))  # this code runs eagerly from now on
            return fn(*args, **kwargs)
        entries.append(entry)
        return self._run(entry, fn, args, kwargs)

    def _under_function_mode(self, function):
        """True while a TorchFunctionMode other than torch's default-device
        one is active: it can change what any torch call returns, so the
        call runs as it is, uncaptured (captures made without the mode are
        guarded on the mode stack and do not run under it either)."""
        modes = _C.torch_function_modes()
        if all(mode.startswith("device=") for mode in modes.split(",") if mode):
            return False
        code = function.__code__
        if code not in self.warned_modes:
            self.warned_modes.add(code)
            warnings.warn(f"dynamo: running {code.co_qualname} eagerly: a TorchFunctionMode is active ({modes})")
        return True

    def _compile_or_warn(self, fn, target, args, kwargs):
        """_compile, or None after one warning when capture or the backend
        fails: never break the user's program (unless nopython)."""
        try:
            return self._compile(fn, target, args, kwargs)
        except Unsupported:
            raise
        except BackendCompilerFailed as e:
            if not config.suppress_errors:
                raise
            warnings.warn(f"dynamo: running {target.__code__.co_qualname} eagerly: capture failed: {e}")
            return None
        except Exception as e:  # noqa: BLE001 - any internal failure falls back to eager
            if self.nopython:
                raise
            warnings.warn(f"dynamo: running {target.__code__.co_qualname} eagerly: capture failed: {e}")
            return None

    @staticmethod
    def _run(entry, fn, args, kwargs):
        function = entry.function
        if function is None:
            return fn(*args, **kwargs)
        target = fn.__func__ if isinstance(fn, types.MethodType) else fn
        if target.__closure__ is not None:
            # Same code, this call's cells (a resume function gets its
            # caller's frame's cells; a nested def, its enclosing call's).
            function = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                                          target.__defaults__, target.__closure__)
            function.__kwdefaults__ = target.__kwdefaults__
        if isinstance(fn, types.MethodType):
            return function(fn.__self__, *args, **kwargs)
        return function(*args, **kwargs)

    def _compile(self, fn, target, args, kwargs):
        # A capture allocates thousands of objects in cycles (FX nodes and
        # graphs): left on, the cyclic collector runs full collections of the
        # whole heap (the user's models included) in the middle of it, for
        # tens to hundreds of milliseconds. It runs afterwards instead.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._compile_now(fn, target, args, kwargs)
        finally:
            if collecting:
                gc.enable()

    def _compile_now(self, fn, target, args, kwargs):
        self.captures += 1
        self_obj = fn.__self__ if isinstance(fn, types.MethodType) else None
        # The call's locals, bound once for the dynamic-shape history and the
        # graph's example inputs.
        try:
            frame, unbound = frame_for_call(fn, args, kwargs), None
        except Exception as e:  # noqa: BLE001 - raised below, where a graph needs the inputs
            frame, unbound = None, e
        result = _C.capture_call(target, self_obj, tuple(args), dict(kwargs), next(_ids),
                                 self._dynamic_spec(target, frame),
                                 bool(config.capture_scalar_outputs or self.nopython))
        live = result["capture"]
        capture = LazyCapture(live)
        if self.nopython and live.break_count:
            first = capture.graph_breaks[0]
            # An op that fails is the program's error (torch._dynamo's
            # TorchRuntimeError), not a limit of the capture.
            error = TorchRuntimeError if first.reason == ir.GraphBreak.OP_FAILS else Unsupported
            raise error(format_break(first))
        self.captures_made.append(capture)
        for b in capture.graph_breaks if live.break_count else ():
            self.break_records.append(b)
            self.break_sites.add((b.location.file, b.location.line, b.offset, b.reason))
            logs.emit("graph_breaks", lambda b=b: f"Graph break in {target.__code__.co_qualname}: {format_break(b)}")
        _log_capture(target.__code__, capture, result["code"] is not None)
        if result["code"] is None:
            if self.nopython and result["skip_reason"]:
                # The frame would run as it is: Python, not a graph.
                raise Unsupported(f"{target.__code__.co_qualname}: {result['skip_reason']}")
            _dump(target.__code__, capture, None)
            return _Entry(capture, None, live)
        globals_ = target.__globals__
        installed = _Installed(globals_)
        compiled = raw = None
        callback_off = False
        phases = dict(result["timings"], graph=0.0, backend=0.0)
        self.phase_times.append(phases)
        if result["graph_name"]:
            started = time.perf_counter()
            callables = _graph_callables()
            gm = deferred.graph_module(live, lambda: capture.graphs[0], result["attributes"], callables)
            if gm is None:  # a graph with subgraphs: FX's own, from the proto
                gm = to_graph_module(capture.proto, 0, attributes=result["attributes"], callables=callables,
                                     lint=False)
            phases["graph"] = time.perf_counter() - started
            if frame is None:
                raise unbound
            example_inputs = [_graph_input(resolve_source(name, frame, globals_)) for name in live.tensor_inputs]
            self.graphs.append(gm)
            self.graphs_made += 1
            logs.emit("graph_code", lambda: f"TRACED GRAPH {result['graph_name']} "
                                            f"({target.__code__.co_qualname}, {target.__code__.co_filename}:"
                                            f"{target.__code__.co_firstlineno})\n{gm.code.strip()}")
            if config.verbose:
                print(f"dynamo: captured {target.__code__.co_qualname}:\n{gm.code}")
            held = sys.getrefcount(gm)
            backend = self.backend
            if getattr(backend, "_dynamo_static_shapes", False) and live.has_symbols:
                backend = _PerShape(backend)
            started = time.perf_counter()
            try:
                compiled = backend(gm, example_inputs)
            except Exception as e:  # noqa: BLE001 - any backend failure is the backend's
                raise BackendCompilerFailed(self.backend, e) from e
            phases["backend"] = time.perf_counter() - started
            if sys.getrefcount(gm) <= held:
                _let_go(gm)
            raw = compiled
            callback_off = self.evaluate_frames and self.backend is not _eager_backend
            if callback_off:
                compiled = _without_capture(compiled)
            installed.add(result["graph_name"], compiled)
        _dump(target.__code__, capture, self.graphs[-1] if result["graph_name"] else None)
        for name, value in result["objects"]:  # what no import path names (a class the trace made)
            installed.add(name, value)
        for name, code, capture_it, takes_closure, _offset in result["resumes"]:
            # Paths that join meet at equal resume code (code objects
            # compare by content): one code object, so one cache and its
            # captures, not one per path. (A resume of a resume function
            # keeps that function's offsets, so deeper joins still differ.)
            try:
                code = self._resume_codes.setdefault(code, code)
            except TypeError:  # a constant that cannot be hashed: this code stays its own
                pass
            installed.add(name, _Resume(self, code, globals_, capture_it, takes_closure))
            self.generated_code.append(code)
            if not capture_it:
                _C.mark_skip(code)
        self.generated_code.append(result["code"])
        function = types.FunctionType(result["code"], globals_, target.__name__,
                                      target.__defaults__, target.__closure__)
        function.__kwdefaults__ = target.__kwdefaults__
        direct = None
        if result["direct"] is not None and compiled is not None:
            slots, outputs, is_tuple = result["direct"]
            # The frame evaluator turns the callback off itself: no Python
            # wrapper on the warm path.
            direct = (raw, slots, outputs, is_tuple, callback_off)
        return _Entry(capture, function, live, direct, installed)


def _dump(code, capture, gm):
    if not logs.dumping():
        return
    from dynamo.explain import Guard  # noqa: PLC0415 - explain imports this module
    # The file names what a live capture leaves to its caller: where it came from.
    named = ir.Capture()
    named.CopyFrom(capture_proto(capture))
    named.source_file, named.function_name, named.first_line = code.co_filename, code.co_qualname, code.co_firstlineno
    named.python_version, named.torch_version = sys.version.split()[0], torch.__version__
    logs.dump_capture(code.co_qualname, named.SerializeToString(), capture, [gm.code.strip() + "\n"] if gm is not None else [],
                      [str(Guard(g)) for g in capture.guards], [format_break(b) for b in capture.graph_breaks])


def _recompiling(code, reason):
    """A guard failed and `code` is about to be captured again."""
    _log_recompile(code, reason)
    if config.error_on_recompile:
        raise RecompileError(f"recompiling {code.co_qualname}: {reason}")
    if config.warn_recompiles:
        warnings.warn(f"dynamo: recompiling {code.co_qualname}: {reason}")


def _log_recompile(code, reason):
    logs.emit("recompiles", lambda: f"Recompiling function {code.co_qualname} in {code.co_filename}:"
                                    f"{code.co_firstlineno}\n    triggered by the guard failure: {reason}")


def _log_capture(code, capture, rewritten):
    """The bytecode and guards artifacts of one capture (dynamo.logs)."""
    where = f"{code.co_qualname} {code.co_filename}:{code.co_firstlineno}"
    if rewritten:
        logs.emit("bytecode", lambda: f"ORIGINAL BYTECODE {where}\n{logs.format_listing(capture.original_bytecode)}")
        logs.emit("bytecode", lambda: f"MODIFIED BYTECODE {where}\n{logs.format_listing(capture.rewritten_bytecode)}")
    if logs.enabled("guards"):
        from dynamo.explain import Guard  # noqa: PLC0415 - explain imports this module
        logs.emit("guards", lambda: f"GUARDS {where}\n" + "\n".join(f"  {Guard(g)}" for g in capture.guards))


def _graph_input(value):
    """A graph input as the graph takes it: a numpy.ndarray input is the
    tensor over its memory (lib/trace/numpy.cc)."""
    t = type(value)
    if t.__name__ == "ndarray" and t.__module__ == "numpy":
        return torch.from_numpy(value)  # as rewrite.cc passes it (never moved to a default device)
    return value


def _let_go(gm):
    """The backend kept no reference to its GraphModule (a backend that
    compiles it into something else): nothing can reach it but the cyclic
    collector, which may run much later (FX's modules are cyclic), so drop
    what it holds now -- the parameters and buffers it reads belong to the
    user's modules, which must be freed when the user drops them."""
    gm._modules.clear()
    gm._parameters.clear()
    gm._buffers.clear()
    vars(gm).pop("_dynamo_pending", None)  # a DeferredGraphModule's graph to build holds them too
    for name in [n for n, v in vars(gm).items() if isinstance(v, torch.Tensor)]:
        delattr(gm, name)


def _graph_callables():
    """The functions dynamo.allow_in_graph put in graphs, by node target
    (none unless dynamo.decorators was imported)."""
    decorators = sys.modules.get("dynamo.decorators")
    return decorators.graph_callables() if decorators is not None else None


def _fx_symbolic_tracing():
    fx = torch.fx._symbolic_trace
    return fx.is_fx_symbolic_tracing() if hasattr(fx, "is_fx_symbolic_tracing") else fx.is_fx_tracing()


def _another_tracer_running():
    """True while torch.fx.symbolic_trace or torch.jit.trace runs the frames
    (their arguments are proxies and tracer values, not what a capture may
    read), or torch._dynamo compiles them: we step aside rather than capture
    another tracer's machinery, one capture per proxy."""
    if _fx_symbolic_tracing():
        return True
    if torch._C._get_tracing_state() is not None:
        return True
    return bool(torch.compiler.is_compiling())


def _without_capture(compiled):
    """A backend's compiled graph runs with the frame evaluator off: modules
    a backend inserts are its business, not frames to capture again."""
    def run(*args):
        previous = _C.set_eval_frame(None)
        try:
            return compiled(*args)
        finally:
            _C.set_eval_frame(previous)
    return run


def _tensor_inputs(frame):
    """(source, tensor) for each tensor a frame's locals hold, directly or
    as an item of a list, tuple or dict (**kwargs): what automatic dynamic
    watches."""
    for name, value in frame.items():
        if isinstance(value, torch.Tensor):
            yield f"L[{name!r}]", value
        elif isinstance(value, (list, tuple)) and len(value) <= 64:
            for i, item in enumerate(value):
                if isinstance(item, torch.Tensor):
                    yield f"L[{name!r}][{i}]", item
        elif isinstance(value, dict) and len(value) <= 64:  # **kwargs
            for key, item in value.items():
                if isinstance(key, str) and isinstance(item, torch.Tensor):
                    yield f"L[{name!r}][{key!r}]", item


class _PerShape:
    """A backend that specialises on shapes (Inductor, AOTAutograd) given a
    graph with symbolic sizes: compiled again for each new combination of
    input sizes and strides (the capture itself stays one). Keyed by the
    inputs' geometry, so a compiled graph only ever runs on the shapes it
    was compiled for."""

    def __init__(self, backend):
        self.backend = backend
        self.compiled = {}
        self.gm = None

    @staticmethod
    def _key(inputs):
        return tuple((tuple(t.shape), t.stride()) if isinstance(t, torch.Tensor) else (type(t), t) for t in inputs)

    def __call__(self, gm, example_inputs):
        self.gm = gm
        self.compiled[self._key(example_inputs)] = self.backend(gm, example_inputs)
        return self.run

    def run(self, *inputs):
        key = self._key(inputs)
        compiled = self.compiled.get(key)
        if compiled is None:
            compiled = self.compiled[key] = self.backend(self.gm, list(inputs))
        return compiled(*inputs)

