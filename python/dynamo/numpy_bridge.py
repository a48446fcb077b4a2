"""NumPy code on tensors, in graphs (lib/trace/numpy.cc).

A numpy.ndarray the trace holds is a tensor viewed as an array: the NumPy
calls made on it become graph nodes that run torch._numpy (torch's
NumPy-compatible layer over tensors, which follows NumPy's dtype rules) on
the node's tensors and hand tensors back. A node's target names what it
runs, in one of these forms (and nothing else resolves):

    torch._numpy.<name>                a public function of torch._numpy
    torch._numpy.<fft|linalg|random>.<name>
    torch._numpy.ndarray.<name>        a method of torch._numpy.ndarray
    torch._numpy.ndarray_attr.<name>   an attribute read (T, real, imag, ...)
    torch._numpy.operator.<name>       operator.<name> on arrays (a + b)

    resolve("torch._numpy.operator.add")(t1, t2)   # tensors in, tensors out

to_numpy(t) is what the rewritten code calls on a graph's output that the
frame holds as an array: the real numpy.ndarray over the tensor's memory.
"""
import contextlib
import operator
import re

import torch
import torch._numpy as tnp

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
_SUBMODULES = {"fft": tnp.fft, "linalg": tnp.linalg, "random": tnp.random}
PREFIX = "torch._numpy."


def _arrays(value):
    if isinstance(value, torch.Tensor):
        return tnp.ndarray(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_arrays(v) for v in value)
    return value


def _tensors(value):
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if isinstance(value, (tuple, list)):
        return type(value)(_tensors(v) for v in value)
    return value


def _numpy():
    import numpy
    return numpy


def _numpy_dtype(dtype):
    return _numpy().dtype(str(dtype).removeprefix("torch."))


def _eager_arguments(value):
    """The arguments of a meta run as NumPy takes them: zeros for tensors."""
    if isinstance(value, torch.Tensor):
        return _numpy().zeros(tuple(value.shape), dtype=_numpy_dtype(value.dtype))
    if isinstance(value, torch.dtype):
        return _numpy_dtype(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_eager_arguments(v) for v in value)
    return value


def _on_meta(value):
    if isinstance(value, torch.Tensor):
        return value.device.type == "meta"
    if isinstance(value, (tuple, list)):
        return any(_on_meta(v) for v in value)
    if isinstance(value, dict):
        return any(_on_meta(v) for v in value.values())
    return False


def _describe(value):
    np = _numpy()
    if isinstance(value, torch.Tensor):
        return f"array {str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, np.ndarray):
        return f"array {value.dtype}{list(value.shape)}"
    if isinstance(value, np.generic):
        return f"scalar {value.dtype}"
    return type(value).__name__


class NumpyCall:
    """One NumPy operation over tensors: arguments become torch._numpy
    arrays, results tensors again.

    Run on meta tensors (the trace's metadata run) it also runs NumPy itself
    on zeros of the same dtypes and shapes, and raises where torch._numpy's
    answer is not NumPy's (a dtype, a shape, a Python value for an array):
    the graph must give what eager NumPy gives. `scalars` then says which
    outputs NumPy returns as scalars (np.float64) rather than arrays, and
    `container` the sequence type NumPy returns."""

    def __init__(self, target, fn, eager):
        self.target = target
        self.fn = fn
        self.eager = eager
        self.container = None
        self.scalars = ()
        self.__name__ = "numpy_" + target[len(PREFIX):].replace(".", "_")
        self.__qualname__ = self.__name__

    def __repr__(self):
        return f"<numpy call {self.target}>"

    def __call__(self, *args, **kwargs):
        # NumPy's default float is float64, and torch._numpy leaves a few
        # results to torch's default float (an int array's true division
        # gives float32). Switching torch's default for the call is no cure:
        # it is process-wide and torch releases the GIL in its kernels, so
        # other threads made float64 tensors meanwhile (concurrency_test).
        # Such an op is caught instead by the metadata run's comparison with
        # NumPy (_check) and becomes a graph break: eager NumPy runs it.
        # NumPy's arrays live on the CPU: under torch.set_default_device the
        # tensors torch._numpy makes (scalars, aranges) are made there too,
        # so on meta tensors a CPU scalar joins them as it joins the real
        # run's CPU tensors.
        with torch.device("cpu") if torch._C._len_torch_function_stack() else contextlib.nullcontext():
            out = _tensors(self.fn(*_arrays(args), **{k: _arrays(v) for k, v in kwargs.items()}))
        if self.container is not None and isinstance(out, (tuple, list)):
            out = self.container(out)
        if _on_meta(out) or _on_meta(args) or _on_meta(kwargs):
            out = self._check(args, kwargs, out)
        return out

    def _check(self, args, kwargs, out):
        try:
            expected = self.eager(*_eager_arguments(args), **{k: _eager_arguments(v) for k, v in kwargs.items()})
        except Exception:  # noqa: BLE001 - NumPy cannot run on zeros here: nothing to compare
            return out
        np = _numpy()
        scalars = []

        def compare(e, o):
            if isinstance(o, torch.Tensor):
                if not isinstance(e, (np.ndarray, np.generic)) or e.dtype != _numpy_dtype(o.dtype) or \
                        tuple(e.shape) != tuple(o.shape):
                    raise TypeError(f"torch._numpy gives {_describe(o)} where NumPy gives {_describe(e)}")
                scalars.append(isinstance(e, np.generic))
            elif isinstance(o, (tuple, list)):
                if not isinstance(e, (tuple, list)) or len(e) != len(o):
                    raise TypeError(f"torch._numpy gives a {type(o).__name__} where NumPy gives {_describe(e)}")
                for x, y in zip(e, o):
                    compare(x, y)
            elif not (e is None and o is None):
                raise TypeError(f"torch._numpy gives {_describe(o)} where NumPy gives {_describe(e)}")

        compare(expected, out)
        self.scalars = tuple(scalars)
        if isinstance(out, (tuple, list)) and type(expected) is not type(out):
            self.container = type(expected)
            out = self.container(out)
        return out


def _method(name):
    def call(self, *args, **kwargs):
        return getattr(self, name)(*args, **kwargs)
    return call


def _attribute(name):
    def read(self):
        return getattr(self, name)
    return read


_cache = {}


def resolve(target):
    """The NumpyCall a node target names, or None when it names none."""
    if target in _cache:
        return _cache[target]
    if not isinstance(target, str) or not target.startswith(PREFIX):
        return None
    parts = target[len(PREFIX):].split(".")
    if not all(_PLAIN.match(p) for p in parts) or any(p.startswith("_") for p in parts):
        return None
    fn = eager = None
    if len(parts) == 1:
        f = getattr(tnp, parts[0], None)
        fn = f if callable(f) and not isinstance(f, type) else None
        eager = getattr(_numpy(), parts[0], None)
    elif len(parts) == 2 and parts[0] in _SUBMODULES:
        f = getattr(_SUBMODULES[parts[0]], parts[1], None)
        fn = f if callable(f) and not isinstance(f, type) else None
        eager = getattr(getattr(_numpy(), parts[0]), parts[1], None)
    elif len(parts) == 2 and parts[0] == "ndarray" and callable(getattr(tnp.ndarray, parts[1], None)):
        fn = eager = _method(parts[1])
    elif len(parts) == 2 and parts[0] == "ndarray_attr" and hasattr(tnp.ndarray, parts[1]):
        fn = eager = _attribute(parts[1])
    elif len(parts) == 2 and parts[0] == "operator" and callable(getattr(operator, parts[1], None)):
        fn = eager = getattr(operator, parts[1])
    if fn is None or eager is None:
        return None
    _cache[target] = NumpyCall(target, fn, eager)
    return _cache[target]


def to_numpy(tensor):
    """A graph output the frame holds as an array: numpy's view of it."""
    return tensor.numpy(force=True)


def to_numpy_scalar(tensor):
    """A graph output NumPy would have returned as a scalar (np.float64)."""
    return tensor.numpy(force=True)[()]
