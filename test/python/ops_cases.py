"""Argument combinations for the op registry's differential test.

For every registry entry the C++ test asks for (by canonical name), this
module generates argument combinations, runs real torch on small CPU tensors,
and returns each case encoded as plain tuples the C++ side converts:

    ("tensor", sizes, strides, dtype_name, device, requires_grad)
    ("int", v) ("float", v) ("bool", v) ("none",) ("str", s) ("dtype", name)
    ("device", s) ("list", [..]) ("tuple", [..]) ("slice", start, stop, step)
    ("ellipsis",) ("memory_format", name)
    ("error", type_name, message)          # what torch raised

A case is (op_name, args, kwargs, expected). Generators are keyed by family;
every name the registry has must be known here (the test checks).
record_program_calls() adds the calls real programs make (resnet18,
mobilenet_v2, a transformer block, seed-like functions), recorded with a
TorchFunctionMode. To run a few entries only:

    DYNAMO_OPS_ONLY=torch.add,Tensor.view build-ops/test/ops/ops_differential_test
"""
import importlib
import itertools
import operator
import random

import torch
import torch.nn.functional as F

DTYPES = [torch.bool, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64]
FLOATS = [torch.float16, torch.float32, torch.float64]
_rng = random.Random(0)


class Spec:
    """A tensor to make fresh for each run: shape, dtype and a layout."""

    def __init__(self, shape, dtype=torch.float32, layout="contiguous", requires_grad=False,
                 values=None):
        self.shape, self.dtype, self.layout = tuple(shape), dtype, layout
        self.requires_grad, self.values = requires_grad, values

    def make(self):
        shape = self.shape
        if self.layout == "transposed" and len(shape) >= 2:
            base = self._data(shape[:-2] + (shape[-1], shape[-2]))
            t = base.transpose(-1, -2)
        elif self.layout == "strided" and len(shape) >= 1:
            base = self._data(shape[:-1] + (shape[-1] * 2,))
            t = base[..., ::2]
        elif self.layout == "channels_last" and len(shape) == 4:
            t = self._data(shape).contiguous(memory_format=torch.channels_last)
        elif self.layout == "expanded" and len(shape) >= 1:
            t = self._data(shape[:-1] + (1,)).expand(*shape)
        elif self.layout == "permuted" and len(shape) >= 3:
            base = self._data(shape[1:] + shape[:1])
            t = base.permute(len(shape) - 1, *range(len(shape) - 1))
        else:
            t = self._data(shape)
        if self.requires_grad:
            t = t.detach().requires_grad_()
        return t

    def _data(self, shape):
        g = torch.Generator().manual_seed(len(shape) * 7 + sum(shape))
        if self.values is not None:
            return self.values(shape).to(self.dtype)
        if self.dtype == torch.bool:
            # All True: a False divisor makes integer division raise, a
            # value-dependent error no metadata can predict.
            return torch.ones(shape, dtype=torch.bool)
        if self.dtype.is_floating_point:
            return (torch.randn(shape, generator=g) + 0.1).to(self.dtype)
        # Never zero: integer division by zero raises in torch.
        return torch.randint(1, 5, shape, generator=g).to(self.dtype)


def T(*shape, dtype=torch.float32, **kw):
    return Spec(shape, dtype, **kw)


# ---------------------------------------------------------------- encoding
def encode(v):
    if isinstance(v, Spec):
        v = v.make()
    if isinstance(v, torch.Tensor):
        return ("tensor", tuple(v.shape), tuple(v.stride()), str(v.dtype)[6:], str(v.device),
                bool(v.requires_grad))
    if v is None:
        return ("none",)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("float", v)
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, torch.dtype):
        return ("dtype", str(v)[6:])
    if isinstance(v, torch.device):
        return ("device", str(v))
    if isinstance(v, torch.memory_format):
        return ("memory_format", str(v)[6:])
    if isinstance(v, slice):
        return ("slice", v.start, v.stop, v.step)
    if v is Ellipsis:
        return ("ellipsis",)
    if isinstance(v, torch.Size):
        return ("tuple", [encode(x) for x in v])
    if isinstance(v, tuple):
        return ("tuple", [encode(x) for x in v])
    if isinstance(v, list):
        return ("list", [encode(x) for x in v])
    raise TypeError(f"cannot encode {type(v).__name__}")


def materialize(v):
    if isinstance(v, Spec):
        return v.make()
    if isinstance(v, tuple):
        return tuple(materialize(x) for x in v)
    if isinstance(v, list):
        return [materialize(x) for x in v]
    return v


def resolve(name):
    mod, attr = name.rsplit(".", 1)
    if mod == "Tensor":
        return getattr(torch.Tensor, attr)
    if mod == "operator":
        return getattr(operator, attr)
    return getattr(importlib.import_module(mod), attr)


def run_case(name, args, kwargs):
    fn = resolve(name)
    real_args = materialize(args)
    real_kwargs = {k: materialize(v) for k, v in kwargs.items()}
    enc_args = [encode(a) for a in real_args]
    enc_kwargs = [(k, encode(v)) for k, v in real_kwargs.items()]
    try:
        torch.manual_seed(0)
        out = fn(*real_args, **real_kwargs)
        expected = encode(out)
    except Exception as e:  # torch's rejection is the expected result
        expected = ("error", type(e).__name__, str(e).split("\n")[0][:300])
    return (name, enc_args, enc_kwargs, expected)


# ---------------------------------------------------------------- generators
GENERATORS = {}


def _registrar(table):
    """A decorator factory: @deco("a", "b") puts the function in `table` under each name."""
    def register(*names):
        def deco(fn):
            for n in names:
                table[n] = fn
            return fn
        return deco
    return register


gen = _registrar(GENERATORS)


def forms(base, methods=True, inplace=True, ops=()):
    out = [f"torch.{base}"]
    if methods:
        out.append(f"Tensor.{base}")
    if inplace:
        out.append(f"Tensor.{base}_")
    out += [f"operator.{o}" for o in ops]
    return out


BROADCAST_PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((2, 3), ()),
                   ((0, 3), (1, 3)), ((2, 3), (4,)), ((4, 1, 3), (2, 1)), ((1,), (0,)),
                   ((3, 1), (3, 1))]


def binary_cases(name, scalar_first=False, tensor_only=False):
    """Shapes x dtypes x scalar operands for one binary op form."""
    inplace = name.endswith("_") or name.startswith("operator.i")
    for da, db in itertools.product(DTYPES, DTYPES):
        yield (T(2, 3, dtype=da), T(3, dtype=db)), {}
    for sa, sb in BROADCAST_PAIRS:
        yield (T(*sa), T(*sb)), {}
    yield (T(2, 3, layout="transposed"), T(2, 3)), {}
    yield (T(3, 2, layout="strided", dtype=torch.float64), T(1, 2)), {}
    for la, lb in [("transposed", "transposed"), ("contiguous", "transposed"), ("strided", "transposed"),
                   ("expanded", "contiguous"), ("permuted", "contiguous"), ("permuted", "permuted"),
                   ("channels_last", "contiguous"), ("channels_last", "channels_last"), ("expanded", "expanded")]:
        yield (T(2, 3, 4, 5, layout=la), T(2, 3, 4, 5, layout=lb)), {}
        yield (T(2, 3, 4, layout=la), T(4, layout=lb)), {}
        yield (T(2, 1, 5, layout=la), T(3, 1, layout=lb)), {}
        yield (T(3, 1, 4, layout=la), T(3, 1, 4, layout=lb)), {}
        yield (T(4, 0, 3, layout=la), T(4, 0, 3, layout=lb)), {}
        if not tensor_only:
            yield (T(3, 4, 2, layout=la), 2.5), {}
    if not inplace:  # in-place on a leaf that requires grad raises (leafness is not metadata)
        yield (T(2, 3, requires_grad=True), T(3)), {}
    for d in DTYPES:
        yield (T(dtype=d), T(2, 2, dtype=torch.int32)), {}   # 0-dim tensor with a dimensioned one
        yield (T(2, 2, dtype=d), T(dtype=torch.float64)), {}
        if not tensor_only:
            for s in (2, 2.5, True):
                yield (T(2, 2, dtype=d), s), {}
                if scalar_first and not inplace:
                    yield (s, T(2, 2, dtype=d)), {}


@gen(*[n for b, o in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "truediv"),
                       ("floor_divide", "floordiv"), ("remainder", "mod"), ("pow", "pow"),
                       ("bitwise_and", "and_"), ("bitwise_or", "or_"), ("bitwise_xor", "xor")]
       for n in forms(b, ops=(o, "i" + o.rstrip("_")))] +
     [n for b in ["eq", "ne", "lt", "le", "gt", "ge"] for n in forms(b, ops=(b,))] +
     forms("fmod"))
def _binary(name):
    yield from binary_cases(name, scalar_first=name.startswith("operator."))
    base = name.split(".")[1].rstrip("_")
    if base in ("add", "sub"):
        for d in (torch.int64, torch.float32, torch.bool):
            for alpha in (2, 0.5, True):
                if name.startswith("operator."):
                    continue
                yield (T(2, 3, dtype=d), T(3, dtype=d)), {"alpha": alpha}
    if base == "div" and not name.startswith("operator."):
        for d in DTYPES:
            for mode in ("trunc", "floor", None):
                yield (T(2, 3, dtype=d), T(3, dtype=torch.int64)), {"rounding_mode": mode}
        yield (T(2, 3), T(3)), {"rounding_mode": "nearest"}
    if base == "pow":
        for d in DTYPES:
            yield (T(2, 3, dtype=d), -1), {}
            yield (T(2, 3, dtype=d), -1.5), {}
    if not name.startswith("operator."):
        yield (T(2, 3),), {"exponent" if base == "pow" else "other": T(3)}
        yield (T(2, 3), "x"), {}


@gen(*[n for b in ["logical_and", "logical_or", "logical_xor"] for n in forms(b)],
     *forms("maximum", inplace=False), *forms("minimum", inplace=False), *forms("atan2"))
def _binary_tensors(name):
    yield from binary_cases(name, tensor_only=True)


FLOAT_UNARY = ["sin", "cos", "tan", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "log1p",
               "expm1", "asin", "acos", "atan", "sinh", "cosh", "log2", "reciprocal", "exp2", "abs",
               "neg", "relu", "floor", "ceil", "round", "trunc", "sign"]


def unary_cases(name):
    for d in DTYPES:
        for shape in [(2, 3), (), (0, 4)]:
            yield (T(*shape, dtype=d),), {}
        yield (T(3, 2, dtype=d, layout="transposed"),), {}
    for lay in ("strided", "expanded", "permuted", "channels_last"):
        yield (T(2, 3, 4, 5, layout=lay),), {}
        yield (T(3, 1, 4, layout=lay),), {}
    if not name.endswith("_"):
        yield (T(2, 3, requires_grad=True),), {}


@gen(*[n for b in FLOAT_UNARY for n in forms(b)], "operator.neg", "operator.abs",
     *[n for b in ["isnan", "isinf", "isfinite", "logical_not", "bitwise_not"]
       for n in forms(b, inplace=False)], "operator.invert")
def _unary(name):
    yield from unary_cases(name)


@gen("torch.addcmul", "Tensor.addcmul", "Tensor.addcmul_", "torch.addcdiv", "Tensor.addcdiv",
     "Tensor.addcdiv_")
def _addc(name):
    for d in DTYPES:
        yield (T(2, 3, dtype=d), T(2, 3, dtype=d), T(2, 3, dtype=d)), {}
        yield (T(2, 3, dtype=d), T(3), T(2, 1, dtype=d)), {"value": 2}
        yield (T(2, 3), T(2, 3, dtype=d), T(3, dtype=torch.int64)), {"value": 0.5}
        yield (T(3, dtype=d), T(2, 1), T(1, 3)), {}
        yield (T(dtype=d), T(2, 3, dtype=torch.int32), T(2, 3, dtype=torch.float16)), {"value": True}
    yield (T(2, 3, layout="transposed"), T(2, 3), T(2, 3, layout="strided")), {"value": 5.0}
    yield (T(2, 3), T(4, 3), T(2, 3)), {}
    yield (T(0, 3), T(1, 3), T(3)), {}


@gen("torch.where")
def _where(name):
    for d in DTYPES:
        yield (T(2, 3, dtype=torch.bool), T(2, 3, dtype=d), T(3, dtype=torch.float32)), {}
        yield (T(2, 3, dtype=d), T(2, 3), T(2, 3)), {}
        yield (T(2, 1, dtype=torch.bool), T(1, 3, dtype=d), 0.5), {}
        yield (T(2, 1, dtype=torch.bool), 1, T(1, 3, dtype=d)), {}
    yield (T(2, 3, dtype=torch.bool), T(4), T(2, 3)), {}
    yield (T(0, 1, dtype=torch.bool), T(3), T(0, 3)), {}


@gen("torch.clamp", "torch.clip", "Tensor.clamp", "Tensor.clamp_")
def _clamp(name):
    for d in DTYPES:
        yield (T(2, 3, dtype=d),), {"min": 0}
        yield (T(2, 3, dtype=d),), {"min": 0.5, "max": 2.5}
        yield (T(2, 3, dtype=d), None, 3), {}
        yield (T(2, 3, dtype=d), T(3, dtype=torch.float32)), {}
        yield (T(2, 3, dtype=d), T(3, dtype=d), T(2, 1, dtype=d)), {}
    yield (T(2, 3),), {}
    yield (T(2, 3), T(4)), {}


@gen("Tensor.masked_fill", "Tensor.masked_fill_", "torch.masked_fill")
def _masked_fill(name):
    for d in DTYPES:
        yield (T(2, 3, dtype=d), T(2, 3, dtype=torch.bool), 0), {}
        yield (T(2, 3, dtype=d), T(3, dtype=torch.bool), 1.5), {}
        yield (T(2, 3, dtype=d), T(1, 1, dtype=torch.bool), T(dtype=d)), {}
    yield (T(3), T(2, 3, dtype=torch.bool), 0.0), {}
    yield (T(2, 3), T(2, 3, dtype=torch.int64), 0.0), {}
    yield (T(2, 3), T(2, 3, dtype=torch.bool), T(2)), {}
    yield (T(4, 1, 3, layout="transposed"), T(1, 3, dtype=torch.bool), float("-inf")), {}


# ---------------------------------------------------------------- driver
def generate(names):
    """All cases for `names` (the registry's entries), torch's results included."""
    cases = []
    for name in names:
        g = GENERATORS.get(name)
        if g is None:
            continue
        for args, kwargs in g(name):
            cases.append(run_case(name, args, kwargs))
    return cases


# ---------------------------------------------------------------- reductions
REDUCE_SHAPES = [(2, 3, 4), (3,), (), (2, 0, 3)]


def both(*bases):
    return [n for b in bases for n in (f"torch.{b}", f"Tensor.{b}")]


@gen(*both("sum", "mean", "prod", "amax", "amin", "logsumexp", "std", "var"))
def _reduce(name):
    base = name.split(".")[1]
    dims_needed = base in ("logsumexp",)
    single = base == "prod"
    for d in DTYPES:
        for shape in REDUCE_SHAPES:
            if not dims_needed:
                yield (T(*shape, dtype=d),), {}
            nd = max(len(shape), 1)
            for dim in ([0, -1, nd, -nd - 1] if single else [0, -1, [0, -1], [], nd]):
                for keepdim in (False, True):
                    yield (T(*shape, dtype=d), dim, keepdim), {}
            yield (T(*shape, dtype=d),), {"dim": 1 if single else (1,), "keepdim": True}
    if base in ("sum", "mean", "prod"):
        for d in DTYPES:
            yield (T(2, 3, dtype=torch.int64),), {"dtype": d}
            yield (T(2, 3, dtype=torch.float32), 1), {"dtype": d}
    if not dims_needed and not single:
        yield (T(2, 3),), {"dim": [1, 1]}
        yield (T(2, 3),), {"dim": None}
    if base in ("std", "var"):
        yield (T(2, 3), False), {}
        yield (T(2, 3),), {"unbiased": False}
        yield (T(2, 3), 1), {"correction": 0}
        yield (T(2, 3),), {"dim": 0, "correction": 2, "keepdim": True}
    yield (T(2, 3, requires_grad=True), 1), {}
    for lay in ("transposed", "permuted", "strided", "expanded", "channels_last"):
        x = T(2, 3, 4, 5, layout=lay)
        yield (x,) if dims_needed else (x, 1), {} if not dims_needed else {"dim": 1}
        yield (x, 1 if single else [1, 2], True), {}


@gen(*both("argmax", "argmin"))
def _argreduce(name):
    for d in DTYPES:
        for shape in REDUCE_SHAPES:
            yield (T(*shape, dtype=d),), {}
            for dim in (0, -1, 3):
                yield (T(*shape, dtype=d), dim), {}
                yield (T(*shape, dtype=d),), {"dim": dim, "keepdim": True}


@gen(*both("max", "min"))
def _maxmin(name):
    for d in DTYPES:
        for shape in REDUCE_SHAPES:
            yield (T(*shape, dtype=d),), {}
            for dim in (0, -1, 3):
                yield (T(*shape, dtype=d), dim), {}
                yield (T(*shape, dtype=d), dim, True), {}
        yield (T(2, 3, dtype=d), T(3, dtype=torch.float32)), {}
    yield (T(2, 3, requires_grad=True), 1), {}
    yield (T(2, 3), T(4)), {}


@gen(*both("all", "any"))
def _allany(name):
    for d in DTYPES + [torch.uint8]:
        for shape in REDUCE_SHAPES:
            yield (T(*shape, dtype=d),), {}
            yield (T(*shape, dtype=d), -1), {}
            yield (T(*shape, dtype=d), 0, True), {}
    yield (T(2, 3), 2), {}


@gen(*both("cumsum", "softmax", "log_softmax"), "torch.nn.functional.softmax",
     "torch.nn.functional.log_softmax")
def _scan(name):
    for d in DTYPES:
        for shape in [(2, 3), (), (0, 3), (2, 3, 4)]:
            for dim in (0, -1, 2):
                yield (T(*shape, dtype=d), dim), {}
            yield (T(*shape, dtype=d),), {"dim": 1, "dtype": torch.float64}
    yield (T(2, 3, requires_grad=True), 1), {}
    for lay in ("transposed", "permuted", "strided", "expanded", "channels_last"):
        yield (T(2, 3, 4, 5, layout=lay), 1), {}
    if name.startswith("torch.nn."):
        for shape in [(3,), (2, 3), (2, 3, 4), (2, 3, 4, 5)]:
            yield (T(*shape),), {}


# ---------------------------------------------------------------- shapes
LAYOUTS = ["contiguous", "transposed", "strided"]


def layouts(*shape, dtype=torch.float32):
    for lay in LAYOUTS:
        yield T(*shape, dtype=dtype, layout=lay)


@gen("Tensor.view", "Tensor.reshape", "torch.reshape")
def _view(name):
    varargs = name.startswith("Tensor.")
    targets = [(6, 4), (-1,), (2, -1), (4, 3, 2), (3, 8), (24,), (5, -1), (-1, -1), (2, 3, 4, 1),
               (1, 24), (24, 1), (0, -1)]
    for shape in [(2, 3, 4), (4, 6), (6, 4)]:
        for x in layouts(*shape):
            for tgt in targets:
                yield (x, tgt), {}
                if varargs:
                    yield (x, *tgt), {}
    for x in layouts(2, 0, 3):
        for tgt in [(0, 6), (-1, 3), (6, -1), (0,), (3, 0, 2)]:
            yield (x, tgt), {}
    for tgt in [(1,), (), (-1,), (1, 1)]:
        yield (T(), tgt), {}
    yield (T(2, 3, 1, layout="transposed"), (3, 2)), {}
    yield (T(4, 1, 3, layout="strided"), (4, 3)), {}
    yield (T(2, 3, requires_grad=True), (3, 2)), {}


@gen("Tensor.view_as", "Tensor.reshape_as", "Tensor.expand_as")
def _as(name):
    for x in layouts(2, 3):
        for o in [(3, 2), (6,), (2, 3), (4, 2, 3), (1, 6)]:
            yield (x, T(*o)), {}
    yield (T(3, 1), T(3, 4)), {}
    yield (T(1), T(0)), {}


@gen("torch.flatten", "Tensor.flatten")
def _flatten(name):
    for x in list(layouts(2, 3, 4)) + list(layouts(2, 1, 3)) + [T(), T(3), T(2, 0, 3)]:
        yield (x,), {}
        for s, e in [(0, -1), (1, 2), (0, 1), (1, -1), (-2, -1), (2, 1), (1, 1), (0, 5), (-4, 0)]:
            yield (x, s, e), {}
        yield (x,), {"start_dim": 1}


@gen("torch.unsqueeze", "Tensor.unsqueeze")
def _unsqueeze(name):
    for x in list(layouts(2, 3)) + [T(), T(0, 2), T(3)]:
        for d in (0, 1, 2, -1, -2, -3, 3, -4):
            yield (x, d), {}


@gen("torch.squeeze", "Tensor.squeeze")
def _squeeze(name):
    for x in [T(1, 3, 1), T(2, 1, 3, layout="transposed"), T(), T(1), T(0, 1), T(2, 3, layout="strided")]:
        yield (x,), {}
        for d in (0, 1, -1, 2, 3):
            yield (x, d), {}


@gen("torch.permute", "Tensor.permute")
def _permute(name):
    for x in list(layouts(2, 3, 4)):
        for p in [(0, 1, 2), (2, 0, 1), (-1, 0, 1), (1, 0), (0, 0, 1), (0, 1, 3)]:
            yield (x, p), {}
            if name.startswith("Tensor."):
                yield (x, *p), {}
    yield (T(), ()), {}


@gen("torch.transpose", "Tensor.transpose", "torch.swapaxes")
def _transpose(name):
    for x in list(layouts(2, 3, 4)) + [T(), T(3)]:
        for a, b in [(0, 1), (-1, -2), (0, 2), (1, 1), (0, 3), (0, -1)]:
            yield (x, a, b), {}


@gen("torch.t", "Tensor.t")
def _t(name):
    for x in list(layouts(2, 3)) + [T(), T(3), T(2, 3, 4), T(0, 2)]:
        yield (x,), {}


@gen("Tensor.expand")
def _expand(name):
    for x in [T(3, 1), T(1, 3, layout="transposed"), T(), T(3), T(2, 1, layout="strided"), T(1, 0)]:
        for tgt in [(3, 4), (2, 3, 4), (-1, 4), (4, -1), (2, -1, -1), (3, 1), (1, 3), (0, 3), (-1, 3, 4),
                    (5,), (2, 3, 0)]:
            yield (x, tgt), {}
            yield (x, *tgt), {}


@gen("torch.narrow", "Tensor.narrow")
def _narrow(name):
    for x in list(layouts(4, 6)) + [T(), T(0, 3)]:
        for d, s, l in [(0, 0, 2), (1, 2, 3), (-1, -3, 2), (0, 3, 2), (1, 6, 0), (1, -7, 1), (2, 0, 1),
                        (0, 1, -1)]:
            yield (x, d, s, l), {}


@gen("torch.select", "Tensor.select")
def _select(name):
    for x in list(layouts(4, 6)) + [T(), T(3), T(0, 2)]:
        for d, i in [(0, 0), (1, -1), (-1, 5), (0, 4), (0, -5), (2, 0)]:
            yield (x, d, i), {}


@gen("torch.split", "Tensor.split")
def _split(name):
    for x in list(layouts(5, 4)) + [T(0, 3), T()]:
        for how in [2, 1, 5, 7, 0, [2, 3], [1, 1, 3], [5], [2, 2], [0, 5], (3, 2)]:
            for d in (0, 1, -1):
                yield (x, how, d), {}
        yield (x, 2), {"dim": 1}


@gen("torch.chunk", "Tensor.chunk")
def _chunk(name):
    for x in list(layouts(5, 4)) + [T(0, 3), T(), T(3)]:
        for c in (1, 2, 3, 6, 0):
            for d in (0, -1):
                yield (x, c, d), {}


@gen("torch.unbind", "Tensor.unbind")
def _unbind(name):
    for x in list(layouts(3, 2)) + [T(), T(0, 3), T(2)]:
        for d in (0, 1, -1, 2):
            yield (x, d), {}


@gen("Tensor.detach", "torch.detach")
def _detach(name):
    for x in list(layouts(3, 2)) + [T(2, 3, requires_grad=True), T(), T(3, dtype=torch.int64)]:
        yield (x,), {}


@gen("Tensor.contiguous", "torch.clone", "Tensor.clone")
def _contig(name):
    for d in (torch.float32, torch.int64, torch.bool):
        for x in list(layouts(3, 2, dtype=d)) + [T(), T(0, 3), T(2, 3, 1, layout="transposed")]:
            yield (x,), {}
            yield (x,), {"memory_format": torch.contiguous_format}
            if name != "Tensor.contiguous":
                yield (x,), {"memory_format": torch.preserve_format}
    yield (T(2, 3, requires_grad=True),), {}


@gen("Tensor.repeat")
def _repeat(name):
    for x in [T(2, 3), T(), T(3, layout="strided"), T(0, 2)]:
        for rep in [(2, 1), (1, 2, 3), (2,), (0, 2), (3, 1, 1, 2)]:
            yield (x, rep), {}
            yield (x, *rep), {}


@gen("torch.cat", "torch.concat")
def _cat(name):
    for da, db in itertools.product(DTYPES, DTYPES):
        yield ([T(2, 3, dtype=da), T(1, 3, dtype=db)],), {}
    for d in (0, 1, -1, 2, -3):
        yield ([T(2, 3), T(2, 3, layout="transposed")], d), {}
        yield ([T(2, 3), T(2, 4)], d), {}
        yield ([T(2, 3), T(0), T(2, 3)], d), {}
        yield ([T(2, 3, 4), T(2, 3)], d), {}
    yield ([],), {}
    yield ([T(0), T(0)],), {}
    yield ([T(), T()],), {}
    yield ([T(2, 3)],), {"dim": 1}
    yield ((T(2, 3, requires_grad=True), T(2, 3)),), {}
    # The output's layout: at::cat's compute_output_memory_format.
    for la, lb in [("channels_last", "channels_last"), ("channels_last", "contiguous"), ("permuted", "permuted"),
                   ("contiguous", "channels_last"), ("strided", "strided"), ("expanded", "channels_last"),
                   ("transposed", "transposed"), ("channels_last", "strided")]:
        yield ([T(2, 3, 4, 5, layout=la), T(2, 3, 4, 5, layout=lb)], 1), {}
        yield ([T(2, 3, 4, 5, layout=la), T(2, 3, 4, 5, layout=lb)], 0), {}
    for la in ("permuted", "strided", "transposed"):
        yield ([T(2, 3, 4, 5, 2, layout=la), T(2, 3, 4, 5, 2)], 1), {}


@gen("torch.stack")
def _stack(name):
    for da, db in itertools.product(DTYPES, DTYPES):
        yield ([T(2, 3, dtype=da), T(2, 3, dtype=db)],), {}
    for d in (0, 1, 2, -1, -3, 3):
        yield ([T(2, 3), T(2, 3, layout="transposed")], d), {}
        yield ([T(2, 3), T(3, 2)], d), {}
        yield ([T(), T()], d), {}
    yield ([],), {}


@gen("Tensor.to")
def _to(name):
    for d in DTYPES:
        for x in [T(2, 3, dtype=torch.float32), T(3, 2, layout="transposed"), T(3, 2, layout="strided"),
                  T(2, 3, dtype=d), T()]:
            yield (x, d), {}
            yield (x,), {"dtype": d}
    for x in [T(2, 3), T(3, 2, layout="transposed")]:
        yield (x, "cpu"), {}
        yield (x, torch.device("cpu"), torch.float64), {}
        yield (x, T(2, dtype=torch.int64)), {}
        yield (x, torch.float32), {"copy": True}
        yield (x, torch.float64), {"memory_format": torch.preserve_format}
        yield (x, "nodevice"), {}
        yield (x, "cpu:x"), {}
    yield (T(2, 3, requires_grad=True), torch.float64), {}
    yield (T(2, 3, requires_grad=True), torch.int64), {}


@gen(*[f"Tensor.{n}" for n in ["float", "double", "half", "int", "long", "bool", "short", "bfloat16"]],
     "Tensor.type_as")
def _convert(name):
    for d in DTYPES:
        for x in [T(2, 3, dtype=d), T(3, 2, dtype=d, layout="transposed"),
                  T(3, 2, dtype=d, layout="strided"), T(dtype=d)]:
            if name == "Tensor.type_as":
                yield (x, T(1, dtype=torch.float64)), {}
                yield (x, T(1, dtype=d)), {}
            else:
                yield (x,), {}


MATMUL_SHAPES = [((2, 3), (3, 4)), ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((4, 2, 3), (3, 5)),
                 ((2, 3), (4, 3, 5)), ((4, 2, 3), (4, 3, 5)), ((4, 1, 2, 3), (5, 3, 2)), ((2, 3), (4, 5)),
                 ((3,), (4,)), ((), (3,)), ((4, 2, 3), (5, 3, 2)), ((3,), (2, 3, 4)), ((2, 3, 4), (4,)),
                 ((0, 3), (3, 2)), ((2, 0), (0, 3))]


@gen("torch.matmul", "Tensor.matmul", "operator.matmul", "torch.mm", "Tensor.mm", "torch.bmm",
     "Tensor.bmm")
def _matmul(name):
    for a, b in MATMUL_SHAPES:
        for d in DTYPES:
            yield (T(*a, dtype=d), T(*b, dtype=d)), {}
        yield (T(*a), T(*b, dtype=torch.float64)), {}
    yield (T(3, 2, layout="transposed"), T(3, 4, layout="transposed")), {}
    yield (T(4, 3, 2, layout="transposed"), T(4, 3, 5)), {}
    if "bmm" in name:
        pairs = [((2, 4, 5), (2, 5, 3))]
    elif name.endswith("mm"):
        pairs = [((4, 5), (5, 3))]
    else:
        pairs = [((2, 3, 4, 5), (2, 3, 5, 4)), ((2, 3, 4, 5), (5, 2)), ((3, 4), (2, 3, 4, 5))]
    for la, lb in [("transposed", "contiguous"), ("contiguous", "transposed"), ("permuted", "contiguous"),
                   ("contiguous", "permuted"), ("strided", "expanded"), ("channels_last", "channels_last")]:
        for a, b in pairs:
            yield (T(*a, layout=la), T(*b, layout=lb)), {}


@gen("Tensor.size", "Tensor.stride")
def _size(name):
    for x in list(layouts(2, 3)) + [T(), T(0, 4, 1)]:
        yield (x,), {}
        for d in (0, 1, -1, 2, -3):
            yield (x, d), {}
        yield (x,), {"dim": 1}


@gen("Tensor.dim", "Tensor.ndimension", "Tensor.numel", "torch.numel", "Tensor.nelement",
     "Tensor.is_contiguous", "Tensor.is_floating_point", "torch.is_floating_point")
def _query(name):
    for d in DTYPES:
        for x in list(layouts(2, 3, dtype=d)) + [T(dtype=d), T(0, 4, 1, dtype=d)]:
            yield (x,), {}
    if name == "torch.is_floating_point":  # its tensor is named input
        yield (), {"input": T(2, 3)}
        yield (), {"input": T(2, dtype=torch.int64)}


# ---------------------------------------------------------------- nn
NN = "torch.nn.functional."
NN_DTYPES = [torch.int64, torch.float16, torch.float32, torch.float64, torch.bool]


@gen(NN + "linear")
def _linear(name):
    for d in NN_DTYPES:
        yield (T(2, 3, dtype=d), T(4, 3, dtype=d)), {}
        yield (T(2, 3, dtype=d), T(4, 3, dtype=d), T(4, dtype=d)), {}
    for xs in [(3,), (5, 2, 3), (0, 3), (2, 4), (2, 0)]:
        yield (T(*xs), T(4, 3)), {}
        yield (T(*xs), T(4, 3), T(4)), {}
        yield (T(*xs), T(4, 3)), {"bias": T(1)}
    yield (T(2, 3), T(4, 3), T(5)), {}
    yield (T(2, 3), T(4, 3, dtype=torch.float64)), {}
    yield (T(2, 3), T(4, 3), T(4, dtype=torch.float64)), {}
    yield (T(2, 3, layout="transposed"), T(4, 3, layout="transposed"), T(4)), {}
    yield (T(2, 3), T(4, 3, requires_grad=True)), {}
    for lay in ("permuted", "strided", "expanded", "channels_last"):
        yield (T(2, 3, 4, 5, layout=lay), T(4, 5)), {}
        yield (T(2, 3, 4, 5, layout=lay), T(4, 5), T(4)), {}


@gen(NN + "conv2d")
def _conv2d(name):
    for d in NN_DTYPES + [torch.int32]:
        yield (T(2, 3, 8, 8, dtype=d), T(4, 3, 3, 3, dtype=d)), {}
    for kw in [{}, {"stride": 2}, {"padding": 1}, {"padding": (1, 2)}, {"dilation": 2}, {"stride": (2, 1), "padding": 1},
               {"padding": "same"}, {"padding": "valid"}, {"padding": "same", "stride": 2}, {"padding": "bogus"},
               {"stride": 0}, {"padding": -1}, {"dilation": 4}]:
        yield (T(2, 3, 8, 8), T(4, 3, 3, 3)), kw
        yield (T(3, 7, 9), T(6, 3, 3, 2), T(6)), kw
    yield (T(2, 6, 8, 8), T(6, 1, 3, 3)), {"groups": 6}
    yield (T(2, 6, 8, 8), T(4, 3, 3, 3)), {"groups": 2}
    yield (T(2, 6, 8, 8), T(3, 3, 3, 3)), {"groups": 2}
    yield (T(2, 5, 8, 8), T(4, 3, 3, 3)), {}
    yield (T(2, 3, 8, 8), T(4, 3, 9, 9)), {}
    yield (T(2, 3, 8, 8), T(4, 3, 3, 3), T(5)), {}
    yield (T(2, 3, 8, 8), T(4, 3, 3, 3, dtype=torch.float64)), {}
    yield (T(2, 3, 8, 8), T(4, 3, 3, 3), T(4, dtype=torch.float64)), {}
    for lay in ("transposed", "permuted", "strided", "expanded", "channels_last"):
        yield (T(2, 3, 8, 8, layout=lay), T(4, 3, 3, 3)), {}
    yield (T(0, 3, 8, 8), T(4, 3, 3, 3)), {}
    yield (T(8, 8), T(4, 3, 3, 3)), {}
    yield (T(2, 3, 8, 8, requires_grad=True), T(4, 3, 1, 1)), {"stride": 2}


@gen(NN + "max_pool2d", NN + "avg_pool2d")
def _pool(name):
    for d in NN_DTYPES + [torch.int32]:
        yield (T(2, 3, 8, 8, dtype=d), 2), {}
    for args in [(3, 2, 1), (3,), (2, 1), (3, 2, 2), (3, 3, 0), (1,), (9,), (0,), ((2, 3), (1, 2)), (3, None, 1)]:
        for x in [T(2, 3, 8, 8), T(3, 7, 9), T(1, 2, 1, 1)]:
            yield (x, *args), {}
            yield (x, *args), {"ceil_mode": True}
    if name.endswith("max_pool2d"):
        yield (T(2, 3, 8, 8), 3, 2, 1, 2), {}
        yield (T(2, 3, 8, 8), 2), {"return_indices": True}
    else:
        yield (T(2, 3, 8, 8), 2), {"divisor_override": 3}
        yield (T(2, 3, 8, 8), 2), {"divisor_override": 0}
        yield (T(2, 3, 8, 8), 3, 2, 1), {"count_include_pad": False}
    for lay in ("transposed", "permuted", "strided", "expanded", "channels_last"):
        yield (T(2, 3, 8, 8, layout=lay), 2), {}
    yield (T(0, 3, 8, 8), 2), {}
    yield (T(2, 0, 8, 8), 2), {}
    yield (T(8, 8), 2), {}


@gen(NN + "adaptive_avg_pool2d")
def _adaptive(name):
    for d in NN_DTYPES:
        for size in [1, (1, 1), 2, (3, None)]:
            yield (T(2, 3, 8, 8, dtype=d), size), {}
    for size in [(4, 4), (None, None), 0, (2, 3), 16]:
        yield (T(3, 7, 9), size), {}
    yield (T(2, 3, 0, 8), 2), {}
    yield (T(0, 3, 8, 8), 2), {}
    for lay in ("transposed", "permuted", "strided", "expanded", "channels_last"):
        yield (T(2, 3, 8, 8, layout=lay), 1), {}
        yield (T(2, 3, 8, 8, layout=lay), 2), {}


@gen(NN + "batch_norm")
def _bn(name):
    for d in NN_DTYPES:
        for training in (False, True):
            yield (T(2, 3, 4, 4, dtype=d), T(3, dtype=d), T(3, dtype=d)), {"training": training}
    for training in (False, True):
        for x in [T(2, 3), T(2, 3, 5), T(1, 3, 1, 1), T(1, 3), T(3), T(2, 3, 4, 4, layout="transposed"),
                  T(2, 3, 4, 4, layout="channels_last"), T(2, 3, 4, 4, layout="permuted")]:
            yield (x, T(3), T(3), T(3), T(3)), {"training": training}
            yield (x, None, None), {"training": training}
            yield (x, T(3), T(3)), {"training": training, "momentum": 0.5, "eps": 1e-3}
        yield (T(2, 3, 4), T(4), T(4)), {"training": training}
        yield (T(2, 3, 4), T(3), T(3), T(2)), {"training": training}
        yield (T(2, 3, 4), T(3, dtype=torch.float64), T(3, dtype=torch.float64)), {"training": training}
        yield (T(2, 3, 4, dtype=torch.float64), T(3), T(3)), {"training": training}
    yield (T(2, 3, requires_grad=True), T(3), T(3), T(3, requires_grad=True)), {}


@gen(NN + "layer_norm")
def _ln(name):
    for d in NN_DTYPES:
        yield (T(2, 3, 4, dtype=d), (4,)), {}
        yield (T(2, 3, 4, dtype=d), [4], T(4, dtype=d), T(4, dtype=d)), {}
    for shape in [(4,), (3, 4), (2, 3, 4), (3,), (4, 3), (5, 2, 3, 4), ()]:
        yield (T(2, 3, 4), shape), {}
    yield (T(2, 3, 4), (4,), T(4, dtype=torch.float64)), {}
    yield (T(2, 3, 4), (4,), T(3)), {}
    yield (T(2, 3, 4), (4,)), {"eps": 1e-6, "bias": T(4)}
    yield (T(2, 4, 3, layout="transposed"), (3,)), {}
    for lay in ("permuted", "strided", "expanded", "channels_last"):
        yield (T(2, 3, 4, 5, layout=lay), (5,)), {}
    yield (T(0, 4), (4,)), {}
    yield (T(2, 4, requires_grad=True), (4,)), {}


@gen(NN + "embedding")
def _embedding(name):
    ids = lambda *s, dtype=torch.int64: T(*s, dtype=dtype, values=lambda sh: torch.ones(sh))
    for d in NN_DTYPES:
        yield (ids(2, 3), T(5, 4, dtype=d)), {}
    for idx in [ids(2, 3, dtype=torch.int32), ids(), ids(0, 2), ids(7), T(2, 3), ids(2, 3, dtype=torch.bool)]:
        yield (idx, T(5, 4)), {}
    yield (ids(2), T(5)), {}
    yield (ids(2), T(5, 4)), {"padding_idx": 0}
    yield (ids(2), T(5, 4)), {"padding_idx": -5}
    yield (ids(2), T(5, 4)), {"padding_idx": 5}
    yield (ids(2, 3), T(5, 4, requires_grad=True)), {}


@gen(NN + "dropout", "torch.dropout")
def _dropout(name):
    fn = name == "torch.dropout"
    for d in NN_DTYPES:
        for p in (0.0, 0.5, 1.0):
            for train in (True, False):
                yield ((T(2, 3, dtype=d), p, train), {}) if fn else ((T(2, 3, dtype=d),), {"p": p, "training": train})
    for x in [T(2, 3, layout="transposed"), T(0, 3), T(), T(2, 3, requires_grad=True),
              T(2, 3, 4, 5, layout="channels_last"), T(2, 3, 4, 5, layout="permuted"), T(2, 3, 4, layout="strided")]:
        yield ((x, 0.3, True), {}) if fn else ((x, 0.3), {})
    if not fn:
        yield (T(2, 3), 1.5), {}
        yield (T(2, 3), -0.1), {}
        yield (T(2, 3), 0.5, True, True), {}
        yield (T(2, 3, layout="transposed"), 0.5), {"inplace": True}


@gen(NN + "scaled_dot_product_attention")
def _sdpa(name):
    # (query, key, value) shapes: heads, plain batches, 2-D, broadcast and
    # rank-broadcast batches, value width != key width, empty L and S, and
    # ones that do not multiply or broadcast.
    qkv = [((2, 4, 5, 8), (2, 4, 6, 8), (2, 4, 6, 3)), ((4, 5, 8), (4, 6, 8), (4, 6, 8)),
           ((5, 8), (6, 8), (6, 3)), ((2, 3, 4, 5, 8), (2, 3, 4, 6, 8), (2, 3, 4, 6, 3)),
           ((2, 4, 5, 8), (1, 4, 6, 8), (1, 4, 6, 3)), ((1, 4, 5, 8), (2, 4, 6, 8), (2, 4, 6, 3)),
           ((2, 4, 5, 8), (4, 6, 8), (4, 6, 3)), ((5, 8), (2, 4, 6, 8), (2, 4, 6, 3)),
           ((2, 4, 0, 8), (2, 4, 6, 8), (2, 4, 6, 3)), ((2, 4, 5, 8), (2, 4, 0, 8), (2, 4, 0, 3)),
           ((2, 4, 5, 8), (2, 4, 6, 7), (2, 4, 6, 3)), ((2, 4, 5, 8), (2, 4, 6, 8), (2, 4, 7, 3)),
           ((2, 4, 5, 8), (3, 4, 6, 8), (3, 4, 6, 3)), ((8,), (8,), (8,))]
    for q, k, v in qkv:
        yield (T(*q), T(*k), T(*v)), {}
    for d in DTYPES:
        yield (T(2, 5, 8, dtype=d), T(2, 6, 8, dtype=d), T(2, 6, 3, dtype=d)), {}
    yield (T(2, 5, 8, dtype=torch.float64), T(2, 6, 8), T(2, 6, 3)), {}
    yield (T(2, 5, 8), T(2, 6, 8, dtype=torch.float64), T(2, 6, 3, dtype=torch.float64)), {}
    q, k, v = T(2, 4, 5, 8), T(2, 4, 6, 8), T(2, 4, 6, 3)
    # Masks: bool and float, every broadcastable rank, wrong shapes and dtypes.
    for m in [T(5, 6, dtype=torch.bool), T(5, 6), T(1, 6), T(4, 5, 6), T(2, 1, 5, 6),
              T(2, 4, 5, 6, dtype=torch.bool), T(5, 7), T(2, 5, 6), T(3, 2, 4, 5, 6), T(6),
              T(5, 6, dtype=torch.float64), T(5, 6, dtype=torch.int64), T(5, 6, dtype=torch.float16)]:
        yield (q, k, v, m), {}
        yield (q, k, v), {"attn_mask": m}
    yield (T(2, 5, 8, dtype=torch.float64), T(2, 6, 8, dtype=torch.float64),
           T(2, 6, 3, dtype=torch.float64)), {"attn_mask": T(5, 6)}
    for m in [T(1, 1, 5, 6), T(1, 5, 6), T(1, 1, 1, 5, 6)]:
        yield (T(5, 8), T(6, 8), T(6, 3)), {"attn_mask": m}
        yield (T(4, 5, 8), T(4, 6, 8), T(4, 6, 3)), {"attn_mask": m}
    yield (T(4, 5, 8), T(4, 6, 8), T(4, 6, 3)), {"attn_mask": T(2, 1, 5, 6)}
    yield (T(4, 5, 8), T(4, 6, 8), T(4, 6, 3)), {"attn_mask": T(1, 4, 5, 6)}
    # is_causal (with and without a mask), dropout, scale, grad, layouts.
    yield (q, k, v), {"is_causal": True}
    yield (T(2, 4, 7, 8), k, v), {"is_causal": True}
    yield (q, k, v, None, 0.0, True), {}
    yield (q, k, v, T(5, 6, dtype=torch.bool)), {"is_causal": True}
    for p in (0.0, 0.5, 1.0, 1.5, -0.1):
        yield (q, k, v), {"dropout_p": p}
    yield (q, k, v, None, 0.3), {}
    yield (q, k, v), {"scale": 0.3}
    yield (q, k, v), {"scale": 0.3, "is_causal": True, "dropout_p": 0.2}
    yield (q, k, v, None, 0.0, False, 0.3), {}
    yield (T(2, 4, 5, 8, requires_grad=True), k, v), {}
    yield (q, k, T(2, 4, 6, 3, requires_grad=True)), {}
    yield (q, k, v, T(5, 6, requires_grad=True)), {}
    yield (T(2, 4, 5, 8, layout="transposed"), T(2, 4, 6, 8, layout="permuted"), v), {}
    yield (T(2, 5, 4, 8, layout="strided"), T(2, 5, 6, 8), T(2, 5, 6, 8, layout="expanded")), {}
    # Grouped-query attention: key/value heads divide the query's.
    yield (q, T(2, 2, 6, 8), T(2, 2, 6, 3)), {"enable_gqa": True}
    yield (q, T(2, 2, 6, 8), T(2, 1, 6, 3)), {"enable_gqa": True}
    yield (q, T(2, 3, 6, 8), T(2, 3, 6, 3)), {"enable_gqa": True}
    yield (q, T(2, 2, 6, 8), T(2, 2, 6, 3)), {}
    yield (T(4, 5, 8), T(2, 6, 8), T(2, 6, 3)), {"enable_gqa": True}
    # Layouts, which decide the backend: nn.MultiheadAttention's heads are
    # views of (L, B*H, E) projections; value width equal to the query's.
    # timm's and GPT-2's: one (B, N, 3*H*E) projection cut into q, k and v,
    # heads permuted to (B, H, N, E) without a copy (not dense).
    def fused(b, h, n, e, which, **kw):
        return Spec((b, h, n, e), values=lambda shape: torch.randn(b, n, 3 * h * e).reshape(b, n, 3, h, e)
                    .permute(2, 0, 3, 1, 4)[which], **kw)

    def split(b, h, n, e, which, **kw):
        return Spec((b, h, n, e), values=lambda shape: torch.randn(b, n, 3 * h * e).split(h * e, dim=2)[which]
                    .view(b, n, h, e).transpose(1, 2), **kw)

    def heads(b, h, n, e, **kw):
        return Spec((b, h, n, e), values=lambda shape: torch.randn(shape[2], shape[0] * shape[1], shape[3])
                    .transpose(0, 1).reshape(shape), **kw)
    for d in FLOATS + [torch.bfloat16]:
        same = (T(2, 4, 5, 8, dtype=d), T(2, 4, 6, 8, dtype=d), T(2, 4, 6, 8, dtype=d))
        yield same, {}
        yield (T(2, 4, 5, 8, dtype=d, layout="permuted"),) + same[1:], {}
        yield (T(2, 4, 5, 8, dtype=d, layout="transposed"),) + same[1:], {}
        yield (heads(2, 4, 5, 8, dtype=d), heads(2, 4, 6, 8, dtype=d), heads(2, 4, 6, 8, dtype=d)), {}
        yield (fused(2, 4, 5, 8, 0, dtype=d), fused(2, 4, 5, 8, 1, dtype=d), fused(2, 4, 5, 8, 2, dtype=d)), {}
        yield (split(2, 4, 5, 8, 0, dtype=d), split(2, 4, 5, 8, 1, dtype=d), split(2, 4, 5, 8, 2, dtype=d)), {}
        yield (fused(2, 4, 5, 8, 0, dtype=d), T(2, 4, 5, 8, dtype=d), T(2, 4, 5, 8, dtype=d)), {"is_causal": True}
    for kw in [{}, {"is_causal": True}, {"dropout_p": 0.3}, {"scale": 0.5},
               {"attn_mask": T(5, 6, dtype=torch.bool)}, {"attn_mask": T(1, 1, 5, 6)}]:
        yield (heads(2, 4, 5, 8), heads(2, 4, 6, 8), heads(2, 4, 6, 8)), kw
        yield (heads(2, 4, 5, 8, requires_grad=True), heads(2, 4, 6, 8), heads(2, 4, 6, 8)), kw
        yield (heads(1, 4, 5, 8), heads(1, 4, 6, 8), heads(1, 4, 6, 8)), kw
        yield (heads(2, 4, 5, 8), T(2, 4, 6, 8), heads(2, 4, 6, 8, layout="transposed")), kw
        yield (heads(2, 4, 5, 8), heads(2, 4, 6, 8), heads(2, 4, 6, 3)), kw
        yield (T(8, 5, 8, layout="transposed"), T(8, 6, 8), T(8, 6, 8)), kw
        yield (heads(2, 4, 5, 8), heads(1, 4, 6, 8), heads(1, 4, 6, 8)), kw


@gen("torch._native_multi_head_attention", "torch._transformer_encoder_layer_fwd")
def _fused_attention(name):
    # What nn.MultiheadAttention and nn.TransformerEncoderLayer pass in eval
    # with grad disabled, and the shapes, masks and dtypes around it.
    def proj(e, d=torch.float32, g=False):
        return [T(3 * e, e, dtype=d, requires_grad=g), T(3 * e, dtype=d), T(e, e, dtype=d), T(e, dtype=d)]

    def ffn(e, f=16, d=torch.float32):
        return [T(e, dtype=d), T(e, dtype=d), T(e, dtype=d), T(e, dtype=d),
                T(f, e, dtype=d), T(f, dtype=d), T(e, f, dtype=d), T(e, dtype=d)]

    masks = [(None, None), (T(5, 5, dtype=torch.bool), 0), (T(5, 5), 0), (T(2, 5, dtype=torch.bool), 1),
             (T(2, 5), 1), (T(2, 4, 5, 5, dtype=torch.bool), 2), (T(2, 4, 5, 5, dtype=torch.bool), None),
             (T(2, 4, 5, 5, dtype=torch.bool), 0), (T(5, 5, dtype=torch.bool), None),
             (T(2, 5, dtype=torch.bool), 0), (T(5, 5, dtype=torch.bool), 1), (T(5, 5), 2), (None, 1)]
    if name == "torch._native_multi_head_attention":
        x = T(2, 5, 8)
        for m, mt in masks:
            for nw, avg in [(True, True), (True, False), (False, True)]:
                yield (x, x, x, 8, 4, *proj(8), m, nw, avg, mt), {}
        for d in FLOATS:
            y = T(2, 5, 8, dtype=d)
            yield (y, y, y, 8, 4, *proj(8, d)), {}
        yield (T(2, 5, 8, dtype=torch.float64),) * 3 + (8, 4, *proj(8)), {}
        yield (x, x, x, 8, 4, *proj(8, g=True)), {}
        yield (T(2, 5, 8, requires_grad=True), x, x, 8, 4, *proj(8)), {}
        yield (x, T(2, 5, 8), T(2, 5, 8), 8, 4, *proj(8)), {"need_weights": False}
        yield (x, T(2, 3, 8), T(2, 3, 8), 8, 4, *proj(8)), {}
        yield (x, x, x, 6, 4, *proj(8)), {}
        yield (x, x, x, 8, 3, *proj(8)), {}
        yield (T(2, 5, 6),) * 3 + (6, 3, *proj(6)), {}
        yield (x, x, x, 8, 4, T(16, 8), T(24), T(8, 8), T(8)), {}
        yield (T(2, 0, 8),) * 3 + (8, 4, *proj(8)), {}
        yield (T(5, 8),) * 3 + (8, 4, *proj(8)), {}
        yield (T(1, 2, 5, 8),) * 3 + (8, 4, *proj(8)), {}
    else:
        x = T(2, 5, 8)
        for gelu in (False, True):
            for nf in (False, True):
                yield (x, 8, 4, *proj(8), gelu, nf, 1e-5, *ffn(8)), {}
        for m, mt in masks:
            yield (x, 8, 4, *proj(8), False, False, 1e-5, *ffn(8), m, mt), {}
        for d in FLOATS:
            yield (T(2, 5, 8, dtype=d), 8, 4, *proj(8, d), True, True, 1e-6, *ffn(8, d=d)), {}
        yield (T(2, 5, 8, requires_grad=True), 8, 4, *proj(8), False, False, 1e-5, *ffn(8)), {}
        yield (x, 8, 4, *proj(8, g=True), False, False, 1e-5, *ffn(8)), {}
        yield (T(2, 0, 8), 8, 4, *proj(8), False, False, 1e-5, *ffn(8)), {}
        yield (T(5, 8), 8, 4, *proj(8), False, False, 1e-5, *ffn(8)), {}
        yield (x, 6, 4, *proj(8), False, False, 1e-5, *ffn(8)), {}
        yield (x, 8, 3, *proj(8), False, False, 1e-5, *ffn(8)), {}
        yield (T(2, 5, 8, dtype=torch.float64), 8, 4, *proj(8), False, False, 1e-5, *ffn(8)), {}


@gen(*[NN + n for n in ["relu", "relu6", "hardtanh", "gelu", "silu", "leaky_relu", "sigmoid", "tanh",
                         "hardswish", "hardsigmoid"]], "torch.relu_")
def _activation(name):
    for d in NN_DTYPES + [torch.int32]:
        for x in [T(2, 3, dtype=d), T(dtype=d), T(0, 3, dtype=d), T(3, 2, dtype=d, layout="transposed")]:
            yield (x,), {}
    for lay in ("permuted", "strided", "channels_last"):
        yield (T(2, 3, 4, 5, layout=lay),), {}
    base = name.rsplit(".", 1)[1]
    if base in ("relu", "relu6", "hardtanh", "silu", "leaky_relu", "hardswish", "hardsigmoid"):
        yield (T(2, 3, layout="strided"),), {"inplace": True}
    if base == "hardtanh":
        yield (T(2, 3), 0.0, 6.0), {}
        yield (T(2, 3), 2.0, 1.0), {}
    if base == "gelu":
        yield (T(2, 3),), {"approximate": "tanh"}
        yield (T(2, 3),), {"approximate": "bogus"}
    if base == "leaky_relu":
        yield (T(2, 3), 0.2), {}
    if not name.endswith("_"):
        yield (T(2, 3, requires_grad=True),), {}


@gen("torch.triu", "torch.tril", "Tensor.triu", "Tensor.tril")
def _tri(name):
    for d in DTYPES:
        for x in [T(3, 4, dtype=d), T(2, 3, 3, dtype=d), T(3, dtype=d), T(dtype=d), T(0, 2, dtype=d),
                  T(4, 3, dtype=d, layout="transposed"), T(2, 3, 4, 5, dtype=d, layout="channels_last")]:
            yield (x,), {}
            yield (x, 1), {}
            yield (x,), {"diagonal": -1}


# ---------------------------------------------------------------- factories
FACTORY_KW = [{}, {"dtype": torch.float64}, {"dtype": torch.int64}, {"dtype": torch.bool}, {"dtype": torch.float16},
              {"requires_grad": True}, {"dtype": torch.int32, "requires_grad": True}, {"device": "cpu"},
              {"device": torch.device("cpu"), "dtype": torch.int32}]


@gen("torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn")
def _factory(name):
    for size in [(2, 3), (), (0,), (4,), (2, -1)]:
        for kw in FACTORY_KW:
            yield size, kw
            yield (size,), kw
    yield ([2, 3],), {}


@gen("torch.full")
def _full(name):
    for size in [(2, 3), (), (0, 2)]:
        for fill in (1, 2.5, True):
            for kw in FACTORY_KW[:5]:
                yield (size, fill), kw
    yield ((-1,), 1), {}


@gen("torch.randint")
def _randint(name):
    for args in [(5, (2, 3)), (1, 5, (4,)), (5, 0, (2,)), (0, (2,)), (-3, 3, ())]:
        for kw in [{}, {"dtype": torch.float32}, {"dtype": torch.int32}]:
            yield args, kw


@gen("torch.arange")
def _arange(name):
    for args in [(5,), (5.0,), (1, 5), (0, 1, 0.3), (3, 1, -1), (1, 0), (0, 5, 0), (2.5, 7), (0,), (True,),
                 (0.5, 5, 1.5), (0, 5, 1.5), (0.5, 5, 1)]:
        for kw in [{}, {"dtype": torch.float64}, {"dtype": torch.int32}]:
            yield args, kw


@gen("torch.eye", "torch.linspace")
def _eye(name):
    if name == "torch.eye":
        for args in [(3,), (2, 4), (0,), (-1,), (2, -1)]:
            for kw in FACTORY_KW[:4]:
                yield args, kw
    else:
        for args in [(0, 1, 5), (0, 10, 0), (1.5, 2, 3), (0, 1, -1)]:
            for kw in FACTORY_KW[:3]:
                yield args, kw


@gen("torch.tensor")
def _tensor(name):
    for data in [[1, 2, 3], [[1.0, 2], [3, 4]], [True, False], [True, 1], 3, 2.5, [], [[]], [[1], [2, 3]],
                 [[1, 2], [3, 4], [5, 6]], [[[1]], [[2]]], [1, [2]]]:
        yield (data,), {}
        yield (data,), {"dtype": torch.float64}
    yield ([1.0, 2.0],), {"requires_grad": True}
    # A tensor is copied: its dtype, device and (preserved) layout.
    for d in [torch.int64, torch.float16, torch.float32]:
        for x in list(layouts(3, 2, dtype=d)) + [T(dtype=d), T(0, 3, dtype=d), T(2, 1, 3, dtype=d)]:
            yield (x,), {}
            yield (x,), {"dtype": torch.float64}
    yield (T(2, 3),), {"requires_grad": True}
    yield (T(2, 3, dtype=torch.int64),), {"requires_grad": True}


@gen("torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.full_like", "torch.rand_like",
     "torch.randn_like")
def _like(name):
    fill = (2.5,) if name == "torch.full_like" else ()
    for d in DTYPES:
        for x in list(layouts(3, 2, dtype=d)) + [T(dtype=d), T(0, 3, dtype=d)]:
            yield (x, *fill), {}
        yield (T(2, 3, dtype=d), *fill), {"dtype": torch.float32}
    for kw in [{"memory_format": torch.contiguous_format}, {"memory_format": torch.preserve_format},
               {"requires_grad": True}, {"dtype": torch.int64, "requires_grad": True}]:
        yield (T(3, 2, layout="transposed"), *fill), kw
    for lay in ("permuted", "strided", "expanded", "channels_last"):
        yield (T(2, 3, 4, 5, layout=lay), *fill), {}
    yield (T(2, 3, requires_grad=True), *fill), {}


@gen("Tensor.new_zeros", "Tensor.new_ones", "Tensor.new_empty", "Tensor.new_full")
def _new(name):
    fill = (2.5,) if name == "Tensor.new_full" else ()
    for d in DTYPES:
        x = T(2, 3, dtype=d)
        yield (x, (3, 4), *fill), {}
        yield (x, [0], *fill), {"dtype": torch.float64}
        yield (x, (), *fill), {"requires_grad": True}
    yield (T(2, requires_grad=True), (2,), *fill), {}
    yield (T(2), (-1,), *fill), {}
    if not fill:  # sizes as separate arguments (x.new_zeros(4, 1)); new_full takes a sequence only
        yield (T(2, 3), 4, 1), {}
        yield (T(2, 3), 5), {"dtype": torch.int64}


# ---------------------------------------------------------------- indexing
S = slice
INDICES = [0, -1, 3, 4, -5, S(None), S(1, None), S(None, 2), S(0, 4, 2), S(-2, None), S(5, 9), S(None, None, -1),
           S(2, 1), None, Ellipsis, (0, 1), (S(None), 0), (Ellipsis, 1), (None, 0, None), (0, Ellipsis, None),
           (S(1, 3), S(None, None, 2)), (Ellipsis, None), (0, 0, 0, 0), (Ellipsis, Ellipsis), [0, 2], [[0, 1], [2, 3]],
           [4], ([0, 1], [1, 2]), (S(None), [0, 2]), ([0, 1], S(None), [1, 0]), (0, [1, 2]), [0, S(None)], (),
           (None, [0, 1]), "bad", 1.5]


@gen("operator.getitem")
def _getitem(name):
    ids = lambda *s: T(*s, dtype=torch.int64, values=lambda sh: torch.ones(sh))
    for x in list(layouts(4, 5, 3)) + [T(4, 5)]:
        for idx in INDICES:
            yield (x, idx), {}
    for idx in [0, None, Ellipsis, (), S(None)]:
        yield (T(), idx), {}
    for d in DTYPES:
        yield (T(4, 5, dtype=d), (S(1, 3), None)), {}
    masks = [T(4, dtype=torch.bool), T(4, 5, dtype=torch.bool), T(3, dtype=torch.bool), T(5, dtype=torch.bool)]
    for m in masks:
        yield (T(4, 5), m), {}
        yield (T(4, 5), (S(None), m)), {}
    for idx in [ids(2), ids(2, 3), ids(), (S(None), ids(3)), (ids(2), ids(2)), (ids(2), ids(3)),
                T(2, dtype=torch.int32), T(2, dtype=torch.float32)]:
        yield (T(4, 5), idx), {}
    yield (T(4, 5, requires_grad=True), (0, S(1, 3))), {}
    yield (T(4, 5, requires_grad=True), [0, 1]), {}


@gen("operator.setitem")
def _setitem(name):
    for idx, value in [(0, 1.0), (S(1, 3), T(5)), (S(1, 3), T(2, 5)), (S(1, 3), T(3, 5)), ((0, 1), T()),
                       ([0, 1], T(2, 5)), ([0, 1], T(3)), (Ellipsis, T(1, 1, 5)), (S(None), T(4, 1)),
                       (T(4, 5, dtype=torch.bool), 0), (T(4, dtype=torch.bool), T(5)), (0, T(4)), (9, 0),
                       ((S(None), [0, 1]), T(4, 2)), (None, T(4, 5))]:
        for d in (torch.float32, torch.int64):
            yield (T(4, 5, dtype=d), idx, value), {}


@gen("torch.nonzero", "Tensor.nonzero", "torch.masked_select", "Tensor.masked_select")
def _nonzero(name):
    for d in DTYPES:
        for x in [T(3, 4, dtype=d), T(dtype=d), T(0, 2, dtype=d), T(5, dtype=d)]:
            if "nonzero" in name:
                yield (x,), {}
                yield (x,), {"as_tuple": True}
            else:
                yield (x, T(4, dtype=torch.bool)), {}
                yield (x, T(3, 1, dtype=d)), {}


@gen("torch.index_select", "Tensor.index_select", "torch.gather", "Tensor.gather")
def _gather(name):
    ids = lambda *s, dtype=torch.int64: T(*s, dtype=dtype, values=lambda sh: torch.ones(sh))
    for d in DTYPES:
        for dim in (0, 1, -1, 2):
            if "index_select" in name:
                for idx in [ids(3), ids(), ids(0), ids(2, 2), ids(2, dtype=torch.int32), T(2)]:
                    yield (T(4, 5, dtype=d), dim, idx), {}
            else:
                for idx in [ids(2, 3), ids(4, 5), ids(5, 2), ids(3), ids(2, 2, dtype=torch.int32)]:
                    yield (T(4, 5, dtype=d), dim, idx), {}
    if "index_select" in name:
        zeros = lambda *s: T(*s, dtype=torch.int64, values=lambda sh: torch.zeros(sh))
        yield (T(), 0, zeros(1)), {}
        yield (T(), 0, zeros(2)), {}


# ---------------------------------------------------------------- programs
# Every torch call that real programs make, recorded with a
# TorchFunctionMode and named canonically: small seed-like functions (the
# shapes of the project's examples), torchvision's resnet18 and mobilenet_v2
# in eval and train mode, and a small transformer block.
import math
import torch.nn as nn

_OPERATOR_DUNDERS = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv", "div": "truediv", "floordiv": "floordiv",
    "mod": "mod", "pow": "pow", "matmul": "matmul", "and": "and_", "or": "or_", "xor": "xor",
}
_COMPARE = {"lt", "le", "gt", "ge", "eq", "ne"}
_UNARY = {"neg": "neg", "abs": "abs", "invert": "invert", "pos": "pos"}


def _canonical_names():
    names = {}
    F_ = torch.nn.functional

    def put(obj, name):
        names.setdefault(id(obj), []).append(name)
    for attr in dir(F_):
        obj = getattr(F_, attr)
        if callable(obj) and not attr.startswith("_"):
            put(obj, f"torch.nn.functional.{attr}")
    for attr in dir(torch):
        obj = getattr(torch, attr, None)
        if callable(obj) and not attr.startswith("_") and not isinstance(obj, type):
            put(obj, f"torch.{attr}")
    for cls in (torch.Tensor, torch._C._TensorBase):
        for attr, obj in vars(cls).items():
            if attr.startswith("__") and attr.endswith("__"):
                continue
            if callable(obj):
                put(obj, f"Tensor.{attr}")
    return names


_NAMES = None


def canonical(func, args):
    """(name, args) for a recorded call; None for attribute reads and dunders
    that are not ops (__bool__, __len__, __repr__, ...)."""
    global _NAMES
    if _NAMES is None:
        _NAMES = _canonical_names()
    name = getattr(func, "__name__", "")
    if name.startswith("__") and name.endswith("__"):
        core = name[2:-2]
        if core in _UNARY:
            return [f"operator.{_UNARY[core]}"], args
        if core in _COMPARE:
            return [f"operator.{core}"], args
        if core in ("getitem", "setitem"):
            return [f"operator.{core}"], args
        if core.startswith("r") and core[1:] in _OPERATOR_DUNDERS:
            return [f"operator.{_OPERATOR_DUNDERS[core[1:]]}"], (args[1], args[0]) + tuple(args[2:])
        if core.startswith("i") and core[1:] in _OPERATOR_DUNDERS:
            return [f"operator.i{_OPERATOR_DUNDERS[core[1:]].rstrip('_')}"], args
        if core in _OPERATOR_DUNDERS:
            return [f"operator.{_OPERATOR_DUNDERS[core]}"], args
        return None, args
    if name == "__get__" or "getset_descriptor" in repr(func) or "property" in repr(type(func)):
        return None, args
    found = _NAMES.get(id(func))
    if found is None:
        return [f"<unnamed {getattr(func, '__module__', '?')}.{name}>"], args
    return found, args


def record_program_calls(registered):
    """Runs the programs under a TorchFunctionMode; returns (cases, unknown):
    one case per distinct call, and the canonical names reached that the
    registry lacks."""
    from torch.overrides import TorchFunctionMode
    calls = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            names, cargs = canonical(func, args)
            if names is not None:
                calls.append((names, cargs, dict(kwargs), out))
            return out

    programs = _seed_like_programs() + _models()  # built outside: only forward passes are recorded
    with Mode():
        for fn, inputs in programs:
            fn(*inputs)

    cases, unknown, seen = [], set(), set()
    for names, args, kwargs, out in calls:
        name = next((n for n in names if n in registered), None)
        if name is None:
            unknown.add(names[0])
            continue
        enc_args = [encode(a) for a in args]
        enc_kwargs = [(k, encode(v)) for k, v in kwargs.items()]
        key = repr((name, enc_args, enc_kwargs))
        if key in seen:
            continue
        seen.add(key)
        cases.append((name, enc_args, enc_kwargs, encode(out)))
    return cases, sorted(unknown)


def _t(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g, dtype=dtype)
    return torch.randint(1, 10, shape, generator=g, dtype=dtype)


def _seed_like_programs():
    """Small functions that reach the same ops as the project's seed
    examples: arithmetic with tensors and Python numbers, sin/cos/abs,
    reductions compared with numbers, a linear layer with dropout, split."""
    def arith(a, b):
        x = a + b
        y = a - b
        z = a / (torch.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * y + z * b - 2

    def trig(x, y):
        return torch.sin(x) + torch.cos(y), torch.sin(x) * torch.cos(x)

    def scalars(x, k):
        return x + k, x * 2, (x + 2) / 3, -x

    lin = nn.Linear(1, 1)

    def layers(x):
        out = nn.functional.dropout(lin(lin(x)) * 100, 0.1, training=False)
        return out.split(1, dim=-1)

    return [(arith, (_t(10), _t(10, seed=1))), (arith, (_t(4, dtype=torch.float64), _t(4, seed=1))),
            (trig, (_t(10, 10), _t(10, 10, seed=1))), (scalars, (_t(5, 5), 3)),
            (scalars, (_t(4, dtype=torch.int64), 2)), (layers, (_t(1, 1),))]


class Block(nn.Module):
    """A GPT-style block: embedding, causal multi-head attention written out
    with matmul/masked_fill/softmax, layer norms and a GELU MLP."""

    def __init__(self, vocab=50, d=32, heads=4, ctx=16):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.tok(idx) + self.pos(pos)
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(x.size(-1), dim=2)
        hd = x.size(-1) // self.heads
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        att = self.drop(att)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, -1)
        x = x + self.drop(self.proj(y))
        x = x + self.drop(self.out(nn.functional.gelu(self.fc(self.ln2(x)))))
        return x.mean(dim=1)


def _models():
    import torchvision
    torch.manual_seed(0)
    out = []
    for make in (torchvision.models.resnet18, torchvision.models.mobilenet_v2):
        for train in (False, True):
            m = make()
            m.train(train)
            out.append((m, (_t(2, 3, 32, 32),)))
    for train in (False, True):
        blk = Block()
        blk.train(train)
        out.append((blk, (torch.randint(0, 50, (2, 12)),)))
    return out


# ---------------------------------------------------------------- more
@gen("Tensor.fill_", "Tensor.zero_", "Tensor.copy_")
def _writes(name):
    for d in DTYPES:
        for x in [T(2, 3, dtype=d), T(3, 2, dtype=d, layout="transposed"), T(2, 3, dtype=d, layout="expanded"),
                  T(dtype=d), T(0, 3, dtype=d)]:
            if name == "Tensor.fill_":
                for v in (1, 2.5, True, T(), T(1)):
                    yield (x, v), {}
            elif name == "Tensor.zero_":
                yield (x,), {}
            else:
                for src in (T(3), T(2, 3, dtype=torch.float64), T(4), T(1, 1), T(2, 1, 3)):
                    yield (x, src), {}


@gen("torch.broadcast_to", "Tensor.broadcast_to")
def _broadcast_to(name):
    for x in [T(3, 1), T(1, 3, layout="transposed"), T(), T(3)]:
        for tgt in [(3, 4), (2, 3, 4), (-1, 4), (3,), (2, -1, 3), (0, 3)]:
            yield (x, tgt), {}


@gen("Tensor.unflatten")
def _unflatten(name):
    for x in list(layouts(2, 6)) + [T(), T(0, 4)]:
        for dim, sizes in [(1, (2, 3)), (-1, (3, -1)), (1, (4, 2)), (0, (1, 2)), (1, (6,)), (1, ()), (2, (1, 2)),
                           (1, (-1, -1))]:
            yield (x, dim, sizes), {}


@gen("torch.flip", "Tensor.flip", "torch.roll", "Tensor.roll")
def _flip(name):
    for d in (torch.float32, torch.int64, torch.bool):
        for x in list(layouts(3, 4, dtype=d)) + [T(dtype=d), T(0, 2, dtype=d), T(2, 3, 4, 5, dtype=d, layout="channels_last")]:
            if "flip" in name:
                for dims in [(0,), (0, 1), (-1,), (), (0, 0), (2,)]:
                    yield (x, dims), {}
                    if name.startswith("Tensor."):
                        yield (x, *dims), {}
            else:
                for args in [(1,), (1, 0), ((1, 2), (0, 1)), ((1, 2), (0,)), ((1, 2),), (1, 2)]:
                    yield (x, *args), {}


@gen("torch.sort", "Tensor.sort", "torch.argsort", "Tensor.argsort", "torch.topk", "Tensor.topk")
def _sort(name):
    for d in DTYPES:
        for x in list(layouts(3, 4, dtype=d)) + [T(dtype=d), T(0, 2, dtype=d), T(2, 3, 4, 5, dtype=d, layout="channels_last")]:
            if "sort" in name:
                yield (x,), {}
                yield (x, 0, True), {}
                yield (x,), {"dim": -2, "stable": True}
                yield (x, 2), {}
            else:
                for k, dim in [(1, -1), (2, 0), (0, 1), (5, -1), (3, 1)]:
                    yield (x, k, dim), {}
                yield (x, 1), {"largest": False}


@gen("torch.addmm")
def _addmm(name):
    for d in NN_DTYPES:
        yield (T(3, dtype=d), T(2, 4, dtype=d), T(4, 3, dtype=d)), {}
    for bias in [T(2, 3), T(1, 3), T(2, 1), T(), T(4), T(2, 3, dtype=torch.float64)]:
        yield (bias, T(2, 4), T(4, 3)), {}
    yield (T(3), T(2, 4), T(5, 3)), {}
    yield (T(3), T(2, 4), T(4, 3)), {"beta": 0.5, "alpha": 2}


@gen("torch.baddbmm", "Tensor.baddbmm")
def _baddbmm(name):
    for d in NN_DTYPES:
        yield (T(2, 3, 5, dtype=d), T(2, 3, 4, dtype=d), T(2, 4, 5, dtype=d)), {}
    for bias in [T(3, 5), T(1, 1, 5), T(2, 1, 1), T(), T(5), T(2, 3, 5, dtype=torch.float64),
                 T(3, 3, 5), T(4)]:
        yield (bias, T(2, 3, 4), T(2, 4, 5)), {}
    yield (T(2, 3, 5), T(2, 3, 4), T(3, 4, 5)), {}
    yield (T(2, 3, 5), T(2, 3, 4), T(2, 5, 5)), {}
    yield (T(2, 3, 5), T(3, 4), T(4, 5)), {}
    yield (T(0, 3, 5), T(0, 3, 4), T(0, 4, 5)), {}
    yield (T(2, 3, 5), T(2, 3, 4), T(2, 4, 5)), {"beta": 0.5, "alpha": 2}


@gen(NN + "pad")
def _pad(name):
    for x in list(layouts(2, 3)) + [T(2, 3, 4, 5, layout="channels_last"), T(3), T()]:
        for pad in [(1, 1), (1, 2, 3, 4), (0, 0), (-1, 0), (-2, -2), (1,), (1, 1, 1, 1, 1, 1), (2, -1, -1, 0)]:
            yield (x, pad), {}
        yield (x, (1, 1)), {"value": 2.0}


# ------------------------------------------- ops without a registry entry
# Torch operators the op registry has no entry for, whose metadata the
# translator asks torch's meta kernels for (lib/trace/meta_fallback.h). Each
# name is its canonical one; the C++ test resolves it by the operator rule
# and must find the object resolve_operator() finds here.
FALLBACK = {}


fallback = _registrar(FALLBACK)


def resolve_operator(name):
    root, *rest = name.split(".")
    obj = torch.Tensor if root == "Tensor" else torch
    if root == "torch" and len(rest) == 1:  # torch.<op>: the binding, not a Python wrapper of torch.functional
        obj = torch._C._VariableFunctions
    for part in rest:
        obj = getattr(obj, part)
    return obj


def run_operator_case(name, args, kwargs):
    real_args = materialize(args)
    real_kwargs = {k: materialize(v) for k, v in kwargs.items()}
    enc_args = [encode(a) for a in real_args]
    enc_kwargs = [(k, encode(v)) for k, v in real_kwargs.items()]
    try:
        torch.manual_seed(0)
        expected = encode(resolve_operator(name)(*real_args, **real_kwargs))
    except Exception as e:  # torch's rejection is the expected result
        expected = ("error", type(e).__name__, str(e).split("\n")[0][:300])
    return (name, enc_args, enc_kwargs, expected)


def generate_fallback():
    """Every fallback case: (name, args, kwargs, torch's result), like generate()."""
    cases = []
    for name, g in FALLBACK.items():
        for args, kwargs in g(name):
            cases.append(run_operator_case(name, args, kwargs))
    return cases


@fallback("torch.outer", "Tensor.outer", "torch.ops.aten.outer.default", "torch.ger")
def _outer(name):
    for a, b in [((3,), (4,)), ((0,), (2,)), ((1,), (1,)), ((2, 3), (4,))]:
        for da, db in [(torch.float32, torch.float32), (torch.int64, torch.float16), (torch.bool, torch.int32)]:
            yield (T(*a, dtype=da), T(*b, dtype=db)), {}
    yield (T(4, layout="strided"), T(3, requires_grad=True)), {}


@fallback("torch.kron")
def _kron(name):
    for a, b in [((2, 3), (3, 1)), ((2,), (3, 2)), ((2, 1, 2), (3,)), ((0, 2), (2, 2))]:
        yield (T(*a), T(*b, dtype=torch.float64)), {}
    yield (T(2, 3, layout="transposed"), T(2, 2)), {}


@fallback("torch.kthvalue", "Tensor.kthvalue")
def _kthvalue(name):
    for x in layouts(3, 4):
        yield (x, 2), {"dim": 1}
        yield (x, 1, 0), {"keepdim": True}
        yield (x, 5), {"dim": 1}                    # k past the dimension: raises
    yield (T(5, dtype=torch.int64), 3), {}
    yield (T(), 1), {}


@fallback("Tensor.logcumsumexp", "torch.logcumsumexp", "torch.cummax", "torch.cummin")
def _scan_fallback(name):
    for x in list(layouts(3, 4)) + [T(5, dtype=torch.float64), T(2, 0)]:
        for dim in (0, -1):
            yield (x, dim), {}
    yield (T(3, 4), 2), {}                          # dim out of range: raises
    if "cum" in name:
        yield (T(3, 4, dtype=torch.int64), 1), {}


@fallback("torch.repeat_interleave", "Tensor.repeat_interleave")
def _repeat_interleave(name):
    for x in [T(3), T(2, 3), T(2, 3, layout="transposed"), T(0, 2)]:
        yield (x, 2), {}
        yield (x, 3), {"dim": 0}
    yield (T(3), T(3, dtype=torch.int64, values=lambda s: torch.tensor([1, 2, 0]))), {"output_size": 3}
    yield (T(2, 3), T(3, dtype=torch.int64, values=lambda s: torch.tensor([2, 2, 1]))), {"dim": 1, "output_size": 5}


@fallback("torch._shape_as_tensor")
def _shape_as_tensor(name):
    for x in [T(2, 3), T(), T(0, 5, 1, dtype=torch.int32)]:
        yield (x,), {}


@fallback("torch.broadcast_tensors")
def _broadcast_tensors(name):
    for shapes in [[(3, 1), (4,)], [(2, 3), (2, 3), ()], [(1,), (0,)], [(2, 3), (4,)]]:
        yield ([T(*s) for s in shapes],), {}


@fallback("torch._C._nn.cross_entropy_loss")
def _cross_entropy_loss(name):
    target = T(3, dtype=torch.int64, values=lambda s: torch.tensor([0, 3, 1]))
    for reduction in (0, 1, 2):
        yield (T(3, 4), target, None, reduction, -100, 0.0), {}
    yield (T(3, 4, dtype=torch.float64, requires_grad=True), target), {}
    yield (T(3, 4), T(3, 4)), {}                    # probabilities as the target
    yield (T(3, 4), T(2, dtype=torch.int64)), {}    # batch sizes differ: raises


@fallback("torch._C._linalg.linalg_vector_norm")
def _vector_norm(name):
    for x in list(layouts(3, 4)) + [T(5, dtype=torch.float64), T(2, 3, dtype=torch.complex64)]:
        yield (x,), {}
        yield (x, 1, [0]), {"keepdim": True}
        yield (x, float("inf"), -1), {}
    yield (T(3, dtype=torch.int64),), {}            # integer input: raises


@fallback("torch._C._fft.fft_rfft", "torch._C._fft.fft_fft")
def _fft(name):
    for x in [T(8), T(3, 6), T(3, 6, layout="transposed"), T(4, dtype=torch.float64)]:
        yield (x,), {}
        yield (x,), {"n": 10, "dim": 0}


@fallback("torch._C._special.special_erfcx", "torch._C._special.special_xlog1py", "torch.logaddexp",
          "torch.hypot", "torch.heaviside")
def _binary_fallback(name):
    unary = name.endswith("erfcx")
    for a, b in BROADCAST_PAIRS[:6]:
        for d in (torch.float32, torch.float64, torch.int64):
            if unary:
                yield (T(*a, dtype=d),), {}
            else:
                yield (T(*a, dtype=d), T(*b, dtype=torch.float32 if name.endswith("heaviside") else d)), {}


@fallback("torch.searchsorted", "torch.bucketize")
def _search(name):
    for values in [T(2, 3), T(4), T()]:
        if name.endswith("bucketize"):
            yield (values, T(5)), {}
            yield (values, T(5)), {"out_int32": True}
        else:
            yield (T(5), values), {}
            yield (T(5), values), {"right": True, "out_int32": True}
    if name.endswith("searchsorted"):
        yield (T(2, 5), T(2, 3)), {}
        yield (T(2, 5), T(3, 3)), {}                # leading dims differ: raises


@fallback("torch.aminmax", "torch.nanmean", "torch.count_nonzero")
def _reduce_fallback(name):
    for x in list(layouts(3, 4)) + [T(2, 0, 3)]:
        yield (x,), {} if name.endswith("count_nonzero") else {"dim": 1}
        yield (x,), {"dim": 0, "keepdim": True} if not name.endswith("count_nonzero") else {"dim": 0}


@fallback("torch.diag_embed", "torch.rot90", "torch.trapz", "torch.frexp", "Tensor.element_size", "torch.is_complex")
def _misc_fallback(name):
    for x in list(layouts(3, 4)) + [T(2, 3, 4, dtype=torch.float64), T(5, dtype=torch.float16)]:
        yield (x,), {}
    if name.endswith("rot90"):
        yield (T(3, 4, 5), 3, [0, 2]), {}
        yield (T(3, 4), 1, [0, 0]), {}              # the same dimension twice: raises
