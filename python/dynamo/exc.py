"""The errors dynamo raises, named as torch._dynamo.exc names them.

Code written for torch.compile catches torch._dynamo.exc's classes
(`except torch._dynamo.exc.Unsupported`). Importing torch._dynamo costs
over a second, so these classes do not subclass torch's; instead, when
torch._dynamo.exc is already loaded at the moment one is raised (and a
handler naming torch's class can only exist if it is), the instance made is
of a class that derives from both: ours first, then torch's class of the
same name. `except dynamo.Unsupported` and `except
torch._dynamo.exc.Unsupported` then both catch it; without torch._dynamo
loaded, nothing of torch is imported."""
import sys


class _Mirrored(RuntimeError):
    """An error that is also an instance of torch._dynamo.exc's class of
    the same name, when that module is loaded."""

    _both = {}  # (our class, torch's class) -> the class deriving from both

    def __new__(cls, *args, **kwargs):
        torch_exc = sys.modules.get("torch._dynamo.exc")
        theirs = getattr(torch_exc, cls.__name__, None) if torch_exc is not None else None
        if isinstance(theirs, type) and issubclass(theirs, BaseException) and not issubclass(cls, theirs):
            key = (cls, theirs)
            both = _Mirrored._both.get(key)
            if both is None:
                # Ours come first in its MRO (__init__, __reduce__: torch's
                # __init__ signatures differ between versions), and the
                # message is printed as ours, whatever torch's __str__ does.
                both = type(cls.__name__, (cls, theirs), {
                    "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                    "__str__": RuntimeError.__str__})
                _Mirrored._both[key] = both
            cls = both
        return RuntimeError.__new__(cls, *args, **kwargs)

    def __init__(self, *args):
        RuntimeError.__init__(self, *args)

    def __reduce__(self):
        # Pickled as our own class: the one deriving from torch's has no
        # import path.
        return (_ours(type(self)), self.args)


def _ours(cls):
    for c in cls.__mro__:
        if c.__module__ == __name__:
            return c
    return cls


class Unsupported(_Mirrored):
    """A graph break where none is allowed (nopython=True, export)."""


class TorchRuntimeError(_Mirrored):
    """An operation of the traced code fails on the inputs it was traced
    with (a one-element conversion of a larger tensor, shapes that do not
    broadcast): eager would raise at the same place. Raised under nopython,
    where no Python runs the operation to raise its own error."""


class RecompileError(_Mirrored):
    """A recompile while config.error_on_recompile is set."""


class BackendCompilerFailed(_Mirrored):
    """The backend raised while compiling a graph (torch._dynamo's exception
    of that name): the user's compiler is broken, so the call fails rather
    than running eagerly unnoticed (config.suppress_errors=True: it warns
    and the frame runs eagerly). The backend's exception is __cause__."""

    def __init__(self, backend, inner):
        self.backend_name = getattr(backend, "__name__", repr(backend))
        self.inner_exception = inner
        RuntimeError.__init__(self, f"backend={self.backend_name!r} raised:\n{type(inner).__name__}: {inner}")

    def __reduce__(self):
        # The message is kept; the backend and its exception may not pickle.
        return (_backend_failed, (self.backend_name, self.args[0] if self.args else ""))


def _backend_failed(name, message):
    e = RuntimeError.__new__(BackendCompilerFailed)
    RuntimeError.__init__(e, message)
    e.backend_name, e.inner_exception = name, None
    return e
