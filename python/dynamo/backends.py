"""Backends for dynamo.optimize: what turns a captured graph into the callable
that runs in its place. The contract is torch's:
backend(gm: torch.fx.GraphModule, example_inputs: list[Tensor]) -> callable,
where the callable takes the graph's flat tensor inputs and returns what gm
returns (here always a tuple of tensors).

    dynamo.list_backends()                 # ['eager', 'torchscript', 'ts']

    @dynamo.register_backend
    def my_backend(gm, example_inputs):    # dynamo.optimize("my_backend")
        gm.graph.print_tabular()
        return gm

Built in: "eager" runs the GraphModule as it is; "ts" (alias "torchscript")
scripts it (or traces it when scripting fails), and when the graph serves
inference only freezes it and runs torch.jit.optimize_for_inference. Every
TorchScript candidate is run once beside the GraphModule on clones of the
example inputs and kept only if its outputs (and the inputs it mutates) agree
(allclose, rtol 1e-5); otherwise the GraphModule itself is returned with a
warning, so "ts" is never silently wrong.
"""
import contextlib
import warnings

import torch

_BACKENDS = {}


def _static_shapes(backend):
    """Marks a compiler that specialises on its example inputs' shapes: the
    runtime compiles a graph with symbolic sizes once per input shape for it
    (dynamo.runtime._PerShape), since what it returns holds for one shape."""
    backend._dynamo_static_shapes = True
    return backend


class InvalidBackend(ValueError):
    """A backend name that is not registered."""


def register_backend(compiler_fn=None, name=None):
    """Registers compiler_fn under `name` (default: its __name__); usable as
    @register_backend or @register_backend(name="x"). Returns compiler_fn."""
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name)
    if not callable(compiler_fn):
        raise TypeError(f"backend {compiler_fn!r} is not callable")
    key = name or compiler_fn.__name__
    if key in _BACKENDS and _BACKENDS[key] is not compiler_fn:
        raise ValueError(f"backend {key!r} is already registered")
    _BACKENDS[key] = compiler_fn
    return compiler_fn


def list_backends():
    """The names dynamo.optimize accepts, sorted (aliases included)."""
    return sorted(_BACKENDS)


def lookup_backend(backend):
    """A registered name or a callable with torch's backend contract -> the callable."""
    if isinstance(backend, str):
        try:
            return _BACKENDS[backend]
        except KeyError:
            raise InvalidBackend(f"unknown backend {backend!r}; registered: {', '.join(list_backends())}") \
                from None
    if callable(backend):
        return backend
    raise TypeError(f"a backend is a registered name or a callable (gm, example_inputs) -> callable, "
                    f"not {type(backend).__name__}")


@register_backend
def eager(gm, example_inputs):
    """The captured GraphModule's forward, run as it is (as torch's eager
    backend: the module's __call__ would add microseconds per call for
    hooks a GraphModule never has)."""
    return gm.forward


# ----------------------------------------------------------------- TorchScript
def _clone(values):
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            c = v.detach().clone()
            out.append(c.requires_grad_(v.requires_grad) if c.is_floating_point() or c.is_complex() else c)
        else:
            out.append(v)
    return out


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    return [value]


def _close(want, got):
    want, got = _flat(want), _flat(got)
    if len(want) != len(got):
        return False
    for w, g in zip(want, got):
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor) or w.shape != g.shape or w.dtype != g.dtype:
                return False
            if w.is_floating_point() or w.is_complex():
                if not torch.allclose(w.detach(), g.detach(), rtol=1e-5, atol=1e-5, equal_nan=True):
                    return False
            elif not torch.equal(w, g):
                return False
        elif w != g:
            return False
    return True


def _agrees(candidate, gm, example_inputs):
    """candidate and gm give the same outputs and input mutations on clones
    of example_inputs (the same random seed for both; two runs of the
    candidate, so the JIT's profiling executor has optimised the second)."""
    want_in = _clone(example_inputs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        want = gm(*want_in)
    for _ in range(2):
        got_in = _clone(example_inputs)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            got = candidate(*got_in)
        if not (_close(want, got) and _close(want_in, got_in)):
            return False
    return True


def _script_or_trace(gm, example_inputs):
    try:
        with warnings.catch_warnings():
            # GraphModule's own attributes (meta dicts) trip a TorchScript notice.
            warnings.filterwarnings("ignore", message="The TorchScript type system doesn't support")
            return torch.jit.script(gm), "scripted"
    except Exception as script_error:  # noqa: BLE001 - tracing is the fallback
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", torch.jit.TracerWarning)
                # Straight-line graphs: tracing records them exactly. Clones,
                # so tracing does not mutate the caller's tensors (buffers).
                return torch.jit.trace(gm, tuple(_clone(example_inputs)), check_trace=False), "traced"
        except Exception as trace_error:  # noqa: BLE001
            raise RuntimeError(f"script: {script_error}; trace: {trace_error}") from trace_error


@register_backend(name="ts")
@_static_shapes
def torchscript(gm, example_inputs):
    """TorchScript: script (else trace) the graph; for inference (grad mode
    off, which the capture guards, or nothing requiring grad) also freeze it
    and run optimize_for_inference. Falls back to gm, with a warning."""
    try:
        scripted, how = _script_or_trace(gm, example_inputs)
    except Exception as e:  # noqa: BLE001 - never break the user's program
        warnings.warn(f"dynamo: ts backend: cannot script or trace the graph ({e}); running it as a GraphModule")
        return gm
    needs_grad = any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs) or \
        any(p.requires_grad for p in gm.parameters())
    candidates = []
    if not torch.is_grad_enabled() or not needs_grad:
        for name, make in (("optimize_for_inference",
                            lambda: torch.jit.optimize_for_inference(torch.jit.freeze(scripted.eval()))),
                           ("frozen", lambda: torch.jit.freeze(scripted.eval()))):
            try:
                candidates.append((name, make()))
            except Exception:  # noqa: BLE001 - the next candidate will do
                pass
    candidates.append((how, scripted))
    for name, candidate in candidates:
        try:
            if _agrees(candidate, gm, example_inputs):
                return candidate
        except Exception:  # noqa: BLE001 - a candidate that fails to run is skipped
            pass
    warnings.warn(f"dynamo: ts backend: no TorchScript form of the graph agrees with it "
                  f"({', '.join(n for n, _ in candidates)}); running it as a GraphModule")
    return gm


register_backend(torchscript, name="torchscript")


# ------------------------------------------------------------ torch's compilers
# Our graph handed to the compilers torch.compile uses. They take a plain
# GraphModule with real example inputs (they make their own fake tensors), so
# torch._dynamo's tracing state is not needed; the compiled callable takes the
# graph's flat inputs, as every backend's does.

@contextlib.contextmanager
def _scalar_outputs(gm):
    """torch's compilers trace our graph again on fake tensors. A number the
    graph reads from a tensor (Tensor.item(), tolist(): config.capture_scalar_outputs)
    is then an unbacked symbol, which only a fake mode with a ShapeEnv allows:
    the one torch._dynamo hands them in its tracing context. Without such a
    read, nothing is set, as before."""
    reads = any(n.op == "call_method" and n.target in ("item", "tolist") for n in gm.graph.nodes)
    from torch._guards import TracingContext, tracing
    if not reads or TracingContext.try_get() is not None:
        yield
        return
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    with tracing(TracingContext(FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True))):
        yield


@register_backend
@_static_shapes
def inductor(gm, example_inputs):
    """TorchInductor (torch.compile's default): AOTAutograd, then generated
    kernels (C++/OpenMP on the CPU, Triton on GPUs). Inference and training."""
    from torch._inductor.compile_fx import compile_fx
    with _scalar_outputs(gm):
        return compile_fx(gm, example_inputs)


def _aot(fw_compiler):
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import default_partition

    def compile(gm, example_inputs):
        with _scalar_outputs(gm):
            return aot_module_simplified(gm, example_inputs, fw_compiler=fw_compiler,
                                         partition_fn=default_partition)
    return compile


def _boxed_nop(fx_g, example_inputs):
    from torch._functorch.aot_autograd import make_boxed_func
    return make_boxed_func(fx_g.forward)


@register_backend
@_static_shapes
def aot_eager(gm, example_inputs):
    """AOTAutograd with eager kernels: the forward and backward graphs torch
    traces from ours (ATen ops, functionalized), run by the ATen kernels —
    what "inductor" runs minus the code generation, to tell a compiler bug
    from a capture bug."""
    return _aot(_boxed_nop)(gm, example_inputs)
