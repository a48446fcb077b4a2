"""Evaluates a capture's guards against a real call, offline: which guard
(if any) fails for given arguments. The live cache does the same in C++, and
checks ID_MATCH by object identity where this checker can only compare names.

    failure = check_guards(capture, fn, args, kwargs)
    # None when every guard holds, else (guard, "expected ..., got ...")
"""
import ast
import inspect
import re
import sys

import torch

from dynamo import dynamo_ir_pb2 as ir
from dynamo.loader import dtype_of, meta_dict

_TOKEN = re.compile(r"""\s*(?:
      (?P<root>[LG])\[(?P<rootkey>'(?:[^'\\]|\\.)*')\]
    | sys\.modules\[(?P<module>'(?:[^'\\]|\\.)*')\]
    | \.(?P<entry>keys|values)\(\)\[(?P<pos>\d+)\]
    | \.(?P<call>[A-Za-z_][A-Za-z0-9_]*)\(\)
    | \.(?P<attr>[A-Za-z_][A-Za-z0-9_]*)
    | \[(?P<index>-?\d+)\]
    | \[(?P<key>'(?:[^'\\]|\\.)*')\]
    )""", re.X)


def _torch_function_modes():
    """torch's function-mode stack as lib/python/torch_modes.h describes it
    (written again here, not imported: this module is the independent
    cross-check of the C++ evaluator, and loads in hosts without dynamo._C)."""
    entries = []
    for i in range(torch._C._len_torch_function_stack()):
        mode = torch._C._get_function_stack_at(i)
        cls = type(mode)
        if (cls.__module__, cls.__qualname__) != ("torch.utils._device", "DeviceContext"):
            entries.append(f"mode={cls.__module__}.{cls.__qualname__}")
            continue
        device = mode.device
        index = device.index
        if index is None and device.type == "cuda" and hasattr(torch._C, "_cuda_getDevice"):
            index = torch._C._cuda_getDevice()
        entries.append(f"device={device.type}" + ("" if index is None else f":{index}"))
    return ",".join(entries)


# The global states a GLOBAL_STATE guard can name (lib/trace/guards.cc).
_GLOBAL_STATE = {"grad_mode": torch.is_grad_enabled,
                 # per device (torch.is_autocast_cpu_enabled() warns that it is deprecated)
                 "is_autocast_enabled": lambda: torch.is_autocast_enabled("cuda"),
                 "is_autocast_cpu_enabled": lambda: torch.is_autocast_enabled("cpu"),
                 "is_inference_mode_enabled": torch.is_inference_mode_enabled,
                 "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
                 "default_dtype": torch.get_default_dtype,
                 "torch_function_modes": _torch_function_modes,
                 "torch_dispatch_modes": torch._C._len_torch_dispatch_stack,
                 "cublas_allow_tf32": torch._C._get_cublas_allow_tf32,
                 "autocast_gpu_dtype": lambda: torch.get_autocast_dtype("cuda"),
                 "autocast_cpu_dtype": lambda: torch.get_autocast_dtype("cpu")}


def _unquote(s):
    return s[1:-1].replace("\\'", "'").replace("\\\\", "\\")


_TUPLE_ITERATOR = type(iter(()))


def _call_query(value, name):
    """A call step: only the pure queries the trace reads through call
    sources, each on its own type (a capture's guards are data: they must
    not call anything else)."""
    if name == "__subclasses__" and isinstance(value, type):
        return type.__subclasses__(value)
    if name == "__reduce__" and type(value) is _TUPLE_ITERATOR:  # (iter, (tuple,), position)
        return value.__reduce__()
    torch = sys.modules.get("torch")
    if torch is not None and ((name == "untyped_storage" and isinstance(value, torch.Tensor)) or
                              (name in ("size", "nbytes") and type(value) is torch.UntypedStorage)):
        return getattr(value, name)()
    raise TypeError(f"a guard source may call only cls.__subclasses__(), tensor.untyped_storage(), "
                    f"storage.size() / nbytes() and a tuple iterator's __reduce__(), not {name}() of a "
                    f"{type(value).__name__}")


def resolve_source(source, frame_locals, frame_globals):
    """The value a guard's source path names (raises LookupError/AttributeError)."""
    pos, value, started = 0, None, False
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if not m:
            raise ValueError(f"cannot parse source {source!r} at {pos}")
        pos = m.end()
        if m.group("root"):
            scope = frame_locals if m.group("root") == "L" else frame_globals
            value, started = scope[_unquote(m.group("rootkey"))], True
        elif m.group("module"):
            value, started = sys.modules[_unquote(m.group("module"))], True
        elif not started:
            raise ValueError(f"source {source!r} has no root")
        elif m.group("entry"):  # a dict's key or value by position
            value = list(getattr(value, m.group("entry"))())[int(m.group("pos"))]
        elif m.group("call"):  # a pure query, called again: cls.__subclasses__()
            value = _call_query(value, m.group("call"))
        elif m.group("attr"):
            value = getattr(value, m.group("attr"))
        elif m.group("index"):
            value = value[int(m.group("index"))]
        else:
            value = value[_unquote(m.group("key"))]
    return value


def _split_last(source):
    """(the source up to its last step, that step's match): HASATTR's owner
    and the attribute or key whose presence it checks."""
    pos, start, last = 0, 0, None
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if not m:
            raise ValueError(f"cannot parse source {source!r} at {pos}")
        start, last, pos = pos, m, m.end()
    return source[:start], last


def identity_name(value):
    """The stable name an ID_MATCH guard records (lib/trace/guards.cc)."""
    if isinstance(value, type(sys)):
        return f"module {value.__name__}"
    qualname = getattr(value, "__qualname__", None)
    if isinstance(qualname, str) and qualname:
        module = getattr(value, "__module__", None)
        return f"{module}.{qualname}" if module else qualname
    t = type(value)
    if t.__module__ == "torch" and t.__qualname__ in ("dtype", "layout", "memory_format"):
        return repr(value)  # torch's singletons name themselves: "torch.float32"
    return f"instance of {t.__module__}.{t.__qualname__}"


def _constant(arg):
    which = arg.WhichOneof("value")
    if which == "list":
        items = [_constant(a) for a in arg.list.items]
        return tuple(items) if arg.list.is_tuple else items
    if which == "none":
        return None
    return getattr(arg, which)


_SYM_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a ** b}
_SYM_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
                ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def sym_eval(text, bindings):
    """A size expression or relation in lib/ops/sym.h's printed form (Python
    syntax: ints, symbols, + - * // % **, max, min, one comparison),
    evaluated over `bindings`. Only that grammar is accepted: the text comes
    from a capture file and is never handed to eval()."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in bindings:
                raise ValueError(f"symbol {node.id} is bound by no tensor")
            return bindings[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _SYM_BINOPS:
            return _SYM_BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min")
                and len(node.args) == 2 and not node.keywords):
            return (max if node.func.id == "max" else min)(ev(node.args[0]), ev(node.args[1]))
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SYM_COMPARE):
            return _SYM_COMPARE[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        raise ValueError(f"not a size expression: {text!r}")
    if len(text) > 4096:
        raise ValueError("a size expression longer than 4096 characters")
    return ev(ast.parse(text, mode="eval"))


def _tensor_failure(value, expected, bindings):
    if not isinstance(value, torch.Tensor):
        return f"expected a tensor, got {type(value).__name__}"
    want = meta_dict(expected, symbolic=True)
    got = {"dtype": value.dtype, "sizes": list(value.shape), "strides": list(value.stride()),
           "device": value.device, "requires_grad": value.requires_grad}
    # A symbol takes the size where it first appears; expressions (strides
    # over a tensor's own sizes) are evaluated once its symbols are bound.
    if len(want["sizes"]) == len(got["sizes"]):
        for w, g in zip(want["sizes"], got["sizes"]):
            if isinstance(w, str) and w.isidentifier() and w not in bindings:
                bindings[w] = g
    for field in ("sizes", "strides"):
        try:
            want[field] = [sym_eval(w, bindings) if isinstance(w, str) else w for w in want[field]]
        except (ValueError, ZeroDivisionError) as e:
            return f"{field}: {e}"
    for field in ("dtype", "device", "sizes", "strides", "requires_grad"):
        if field == "strides" and not want["strides"]:
            continue
        if want[field] != got[field]:
            return f"{field}: expected {want[field]}, got {got[field]}"
    return None


def _shape_env_failure(guard, bindings):
    """The first symbol out of its range or relation that fails, worded as
    lib/guards/evaluator.cc words it."""
    env = guard.shape_env
    for sym in env.symbols:
        if sym.name not in bindings:
            return f"{sym.name} ({sym.source}.size({sym.dim})) is bound by no tensor"
        v = bindings[sym.name]
        if v < sym.min or (sym.max and v > sym.max):
            high = sym.max if sym.max else "inf"
            return f"{sym.source}.size({sym.dim}) = {v}: {sym.name} must be in [{sym.min}, {high}]"
    for relation in env.relations:
        try:
            holds = sym_eval(relation, bindings)
        except (ValueError, ZeroDivisionError) as e:
            return f"{relation}: {e}"
        if not holds:
            names = sorted({n.id for n in ast.walk(ast.parse(relation, mode="eval")) if isinstance(n, ast.Name)})
            values = ", ".join(f"{n} = {bindings[n]}" for n in names if n in bindings)
            return f"{relation} failed: {values}"
    return None


def frame_locals_for(fn, arguments):
    """The locals a real frame of fn would start with: its bound arguments,
    self for a method, and its closure's free variables."""
    target = fn.__func__ if inspect.ismethod(fn) else fn
    frame = dict(arguments)
    if inspect.ismethod(fn):
        frame[target.__code__.co_varnames[0]] = fn.__self__
    for name, cell in zip(target.__code__.co_freevars, target.__closure__ or ()):
        try:
            frame[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    return frame


def frame_for_call(fn, args=(), kwargs=None):
    """The locals fn's frame starts with for fn(*args, **kwargs)."""
    # The code's own parameters, not those functools.wraps advertises: a
    # wrapper(*args, **kwargs) frame holds `args` and `kwargs`.
    bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **(kwargs or {}))
    bound.apply_defaults()
    return frame_locals_for(fn, bound.arguments)


def check_guards(capture, fn, args=(), kwargs=None):
    """The first failing guard for calling fn(*args, **kwargs), or None."""
    target = fn.__func__ if inspect.ismethod(fn) else fn
    frame_locals = frame_for_call(fn, args, kwargs)
    frame_globals = target.__globals__
    bindings = {}  # size symbols -> the call's sizes (dynamic shapes)
    for guard in capture.guards:
        if guard.kind == ir.Guard.SHAPE_ENV:
            problem = _shape_env_failure(guard, bindings)
            if problem:
                return guard, f"sizes: {problem}"
            continue
        if guard.kind == ir.Guard.GLOBAL_STATE:
            # By name from a fixed table: a capture's text never picks a
            # torch function to call (README, "Trust model").
            reader = _GLOBAL_STATE.get(guard.source)
            if reader is None:
                return guard, f"{guard.source}: unknown global state"
            kind = guard.value.WhichOneof("value")
            if kind is None:
                return guard, f"{guard.source}: the guard holds no expected value"
            expected = (dtype_of(guard.value.dtype) if kind == "dtype" else getattr(guard.value, kind))
            if reader() != expected:
                return guard, f"{guard.source}: expected {expected}, got {reader()}"
            continue
        if guard.kind == ir.Guard.OBJECT_ALIASING:
            try:
                values = [resolve_source(s, frame_locals, frame_globals) for s in guard.sources]
            except (LookupError, AttributeError) as e:
                return guard, f"{guard.source}: cannot be read ({e!r})"
            for i in range(len(values)):
                for j in range(i + 1, len(values)):
                    same = values[i] is values[j]
                    if same != (guard.groups[i] == guard.groups[j]):
                        return guard, (f"{guard.sources[i]} is {guard.sources[j]}: "
                                       f"expected {not same}, got {same}")
            continue
        if guard.kind == ir.Guard.HASATTR:
            owner, last = _split_last(guard.source)
            try:
                value = resolve_source(owner, frame_locals, frame_globals)
                if last.group("attr"):
                    present = hasattr(value, last.group("attr"))
                else:  # a key: `in`, by the container's own rule
                    key = int(last.group("index")) if last.group("index") else _unquote(last.group("key"))
                    present = key in value
            except (LookupError, AttributeError, TypeError) as e:
                return guard, f"{owner}: cannot be read ({e!r})"
            if present != guard.value.bool_value:
                want = "present" if guard.value.bool_value else "absent"
                what = "attribute" if last.group("attr") else "key"
                return guard, f"{guard.source}: expected the {what} to be {want}"
            continue
        try:
            value = resolve_source(guard.source, frame_locals, frame_globals)
        except (LookupError, AttributeError) as e:
            return guard, f"{guard.source}: cannot be read ({e!r})"
        problem = None
        if guard.kind == ir.Guard.TENSOR_MATCH:
            problem = _tensor_failure(value, guard.tensor, bindings)
        elif guard.kind == ir.Guard.EQUALS_MATCH:
            expected = _constant(guard.value)
            nan = type(value) is float and type(expected) is float and value != value and expected != expected
            if type(value) in (int, float, bool, str, tuple, list) and not nan and (
                    type(value) is not type(expected) or value != expected):
                problem = f"expected {expected!r}, got {value!r}"
            elif (type(expected) is str and type(value) is not str and not isinstance(value, (set, frozenset))
                  and repr(value) != expected):  # recorded by its repr (a NumPy scalar; a set's order may vary)
                problem = f"expected {expected}, got {value!r}"
        elif guard.kind == ir.Guard.IS_NONE:
            if value is not None:
                problem = f"expected None, got {type(value).__name__}"
        elif guard.kind == ir.Guard.LENGTH_MATCH:
            if len(value) != guard.value.int_value:
                problem = f"expected length {guard.value.int_value}, got {len(value)}"
        elif guard.kind == ir.Guard.TYPE_MATCH:
            if identity_name(type(value)) != guard.value.string_value:
                problem = f"expected type {guard.value.string_value}, got {identity_name(type(value))}"
        elif guard.kind == ir.Guard.ID_MATCH:
            # Offline, identity is checked by name; the live cache compares objects.
            if identity_name(value) != guard.value.string_value:
                problem = f"expected {guard.value.string_value}, got {identity_name(value)}"
        if problem:
            return guard, f"{guard.source}: {problem}"
    return None
