"""The single-graph corpus for offline capture (test/capture/capture_test.cc).

Each entry of CASES: (target, inputs, make_inputs). `target` is the --fn path
inside this file; inputs is a list of --input specs, or the name of an
--example-inputs function; make_inputs() builds real arguments matching them
(a positional tuple, or a Call with keywords).
Every construct the translator handles without a break appears here.
"""
import collections
import collections.abc
import contextlib
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = 0.5
MODE = "relu"
W_GLOBAL = torch.linspace(-1.0, 1.0, 4)


class Call:
    """Arguments with keywords, for make_inputs."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def mlp_examples():
    """Example inputs for the unbound MLP.forward: self is a real module."""
    return (mlp, torch.randn(4, 8))


def r(*shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(*shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(*shape) > 0.5
    return torch.randint(-5, 5, shape, dtype=dtype)


# --- arithmetic, comparisons, torch functions ---------------------------------
def arith(a, b):
    return a + b, a - b, a * b, a / b, -a, a ** 2, 2 * a - 1.5, a @ b.T


def int_arith(a, b):
    return a // 3, a % 4, a * b, a / 2, a + True, a & b, a | 1


def compare(a, b):
    return a < b, a >= 0.5, a == b, (a > 0) & (b > 0), a != 1


def torch_fns(x):
    return torch.sin(x) + torch.cos(x), torch.exp(x).sum(), torch.tanh(x), torch.sigmoid(x), torch.abs(x)


def reductions(x):
    return x.sum(dim=1, keepdim=True), x.mean(-1), x.amax(dim=0), x.sum(), torch.max(x, dim=1).values


def softmaxes(x):
    return F.softmax(x, dim=-1), F.log_softmax(x, dim=1), torch.softmax(x, 0)


def shapes(x):
    y = x.view(2, -1)
    z = x.reshape(-1)
    w = x.permute(2, 0, 1).contiguous()
    return y, z, w, x.transpose(0, 1), x.unsqueeze(0).squeeze(0), torch.flatten(x, 1)


def cat_stack(a, b):
    return torch.cat([a, b], dim=0), torch.stack((a, b), dim=1), torch.cat((a, b), -1)


def where_clamp(x, y):
    return torch.where(x > 0, x, y), x.clamp(min=-0.5, max=0.5), torch.clamp(y, -1, 1)


def casts(x):
    return x.to(torch.float64), x.float(), x.long(), x.to(dtype=torch.int32), x.bool()


def scalar_promotion(i, f):
    return i + 1.5, i * 2, f + i, i / i, torch.ones_like(f) * 3


def factories(x):
    return torch.zeros(3, 4) + x, torch.ones(2, 3, dtype=torch.float64), torch.full((2, 2), 7.0), torch.arange(6).view(2, 3)


def matmuls(a, b, c):
    return torch.matmul(a, b), a.mm(b), torch.bmm(c, c.transpose(1, 2))


# --- subscripts and slices ----------------------------------------------------
def indexing(x):
    return x[0], x[:, 1:3], x[..., None], x[::2], x[-1, :, 0], x[None, 1]


def seq_index(xs):
    first, *rest = xs
    return first + rest[-1], xs[1:][0]


# --- tensor metadata as Python values -------------------------------------------
def metadata(x):
    n, c = x.shape[0], x.size(1)
    total = x.numel() + x.dim() + len(x)
    out = x.view(n * c, -1) * total
    if x.dtype == torch.float32 and x.device.type == "cpu" and x.is_floating_point():
        out = out + 1
    return out, x.size(), x.ndim


# --- torch operators without an op-registry entry: metadata from meta kernels -----
def fallback_ops(x, y):
    a = torch.outer(x, y)                      # a builtin of torch
    v, i = torch.kthvalue(a, 2, dim=1)         # torch.return_types, by field too
    b = torch.repeat_interleave(x, 2) * x.element_size()
    if torch.is_complex(x) or torch.promote_types(x.dtype, torch.float64) != torch.float64:
        b = b + 1                              # Python values of guarded metadata
    c = a.logcumsumexp(1)                      # a Tensor method
    d = torch.ops.aten.cummax.default(a, 0)   # an aten overload
    return a, v + 1, i, b, c, d[0], torch.kron(x, y), torch.kthvalue(a, 1).indices


def branch_on_dtype(x):
    if x.dtype == torch.float64:
        return x - 1
    return x + 1


def branch_on_shape(x):
    if x.shape[-1] > 3:
        return x.sum(-1)
    elif x.ndim == 2:
        return x.mean()
    return x


def branch_on_flag(x, flag, mode):
    if flag:
        x = x * 2
    if mode == "square":
        return x * x
    return x


def none_arg(x, bias):
    if bias is None:
        return x + 1
    return x + bias


def scalar_args(x, n, f):
    return x * n + f, x.pow(n)


def while_const(x):
    i = 0
    while i < 4:
        x = x * 0.5
        i += 1
    return x


def asserts(x):
    assert x.dim() == 2, "expects a matrix"
    assert isinstance(x, torch.Tensor)
    return x.t()


def try_except(x):
    try:
        y = x + 1
    except RuntimeError:
        y = x - 1
    finally:
        z = 2
    return y * z


# --- loops ---------------------------------------------------------------------
def loop_range(x):
    for _ in range(3):
        x = x + 1
    return x


def loop_list(xs):
    total = xs[0] * 0
    for t in xs:
        total = total + t
    return total


def loop_zip_enumerate(xs, ys):
    out = []
    for i, (a, b) in enumerate(zip(xs, ys)):
        out.append(a * i + b)
    return out


def loop_dict(d):
    acc = 0
    for k, v in d.items():
        acc = acc + v.sum() * len(k)
    return acc


def loop_nested(x):
    out = x
    for i in range(2):
        for j in range(i + 1):
            out = out + i * j
    return out


def loop_break_continue(x):
    for i in range(10):
        if i % 2 == 0:
            continue
        if i > 6:
            break
        x = x + i
    return x


# --- builtins ------------------------------------------------------------------
def builtins_mix(xs, n):
    k = min(n, len(xs))
    m = max(1, abs(-n))
    s = sum(xs[:k])
    extra = [t * m for t in xs if t.dim() == 1]
    return s + sum(extra), int(3.7), float(k), bool(xs)


def map_filter(xs):
    doubled = list(map(lambda t: t * 2, xs))
    return tuple(doubled), [t for t in reversed(xs)]


def isinstance_checks(x, maybe):
    a = isinstance(x, torch.Tensor)
    b = isinstance(maybe, (list, tuple))
    c = isinstance(3, int)
    return x + (a + b + c)


def getattr_hasattr(x):
    fn = getattr(torch, "sin")
    has = hasattr(x, "shape")
    return fn(x) * has, getattr(x, "T")


def math_module(x):
    return x * math.pi + math.sqrt(4.0) + math.floor(2.5)


def fstrings(x, name):
    tag = f"{name}-{x.dim()}"
    if tag == "a-2":
        return x * 2
    return x


def global_reads(x):
    if MODE == "relu":
        x = F.relu(x)
    return x * SCALE + W_GLOBAL


# --- user functions: defaults, keywords, *args, **kwargs, closures -------------
def helper(a, b=2.0, *, c=1.0):
    return a * b + c


def varargs(*xs, **kw):
    return sum(xs) * kw.get("scale", 1.0)


def calls_helpers(x):
    return helper(x), helper(x, 3.0, c=-1.0), varargs(x, x, x, scale=2.0), varargs(x)


def closures(x):
    k = 3

    def add_k(t):
        return t + k

    counter = [0]

    def bump(t):
        counter.append(1)
        return t * len(counter)

    def make_scaler(s):
        def scale(t):
            return t * s
        return scale

    return add_k(x), bump(x), make_scaler(0.25)(x)


def nonlocal_cells(x):
    total = x * 0

    def acc(t):
        nonlocal total
        total = total + t
    acc(x)
    acc(x * 2)
    return total


def lambdas_comprehensions(xs):
    sq = [t * t for t in xs]
    d = {i: t for i, t in enumerate(xs)}
    f = lambda a, b=1: a - b  # noqa: E731
    return [f(t) for t in sq], d[1], tuple(t + 1 for t in xs[:1]) if False else sq[0]


ALLOWED_MODES = {"sum", "mean"}


def sets(x, mode):
    seen = {1, 2, 3}
    seen.add(4)
    evens = {n for n in range(6) if n % 2 == 0}
    total = x
    for n in sorted(seen | evens):
        total = total + n
    if mode in ALLOWED_MODES and 4 in seen and len(evens) == 3:
        total = total.sum() if mode == "sum" else total.mean()
    return total, frozenset({1}).issubset(seen)


def returns_dict(x):
    out = {"logits": x * 2, "probs": torch.softmax(x, -1)}
    out["aux"] = [x.sum(), None]
    return out


def star_args(x, y):
    args = (x, y)
    kwargs = {"dim": 0}
    return torch.cat(args, **kwargs), torch.stack([*args, x])


def grad_modes(x):
    with torch.no_grad():
        a = x * 2
    with torch.enable_grad():
        b = x * 3
    return a, b


def nested_no_grad(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = x + 1
        z = y * 2
    return y, z


def returns_constant_and_none(x):
    return x, 3, None, "label", (1.5, True)


# --- modules ---------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, d=8, hidden=16, act="gelu"):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)
        self.act = act
        self.scale = 0.5

    def forward(self, x):
        h = self.fc1(x)
        h = F.gelu(h) if self.act == "gelu" else F.relu(h)
        return self.fc2(h) * self.scale


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([MLP() for _ in range(3)])
        self.norm = nn.LayerNorm(8)
        self.register_buffer("offset", torch.arange(8, dtype=torch.float32))

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = x + block(x) * (i + 1)
        return self.norm(x) + self.offset


class Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2), nn.Tanh())

    def forward(self, x):
        return self.net(x), self.net[0](x)


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = F.max_pool2d(x, 2)
        return torch.flatten(self.pool(x), 1)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Child(Base):
    def forward(self, x):
        return super().forward(x) + self.helper(x)

    def helper(self, x, k=2):
        return x * k


class Wrapped(nn.Module):
    """The design documents' last example: a module wrapping another."""
    def __init__(self):
        super().__init__()
        self.inner = MLP(8, 8)
        self.proj = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        y = self.proj(self.inner(x))
        a, b = torch.split(self.drop(y) * 2, 4, dim=-1)
        return a + b


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6)
        self.ln = nn.LayerNorm(6)

    def forward(self, ids):
        return self.ln(self.emb(ids)).mean(dim=1)


class TrainingFlag(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        if self.training:
            return self.drop(x)
        return x * 2


class ParamMath(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.b = nn.Parameter(torch.zeros(4))

    def forward(self, x):
        return x @ self.w.t() + self.b, self.w.shape


class OptionalBlocks(nn.Module):
    """Truthiness of module containers: an empty ModuleList is false."""

    def __init__(self, n):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(n)])

    def forward(self, x):
        if self.blocks:
            for b in self.blocks:
                x = b(x)
        else:
            x = x * -1
        return x


class DictIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, batch):
        return self.lin(batch["x"]) + batch["y"]


class _Swish(nn.Module):
    @staticmethod
    def forward(x):
        return x * torch.sigmoid(x)


class StaticChild(nn.Module):
    """A child whose forward is a @staticmethod: nn.Module.__call__ calls it
    without the module."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.act = _Swish()

    def forward(self, x):
        return self.act(self.lin(x))


class DictHeads(nn.Module):
    """`key in self.heads` of an nn.ModuleDict (its own __contains__,
    traced: the graph has the heads that are there)."""

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(3, 2)})

    def forward(self, x):
        out = x.relu()
        if "cls" in self.heads:
            out = self.heads["cls"](out)
        if "box" in self.heads:
            out = out + self.heads["box"](x)
        return out


class Indexed(nn.Module):
    """A module with a __getitem__ of its own, indexed in its forward: the
    method is traced (run for real, its result had the path of self's
    first child, a guard that never held)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3)])

    def __getitem__(self, idx):
        return self.layers[idx]

    def forward(self, x):
        for i, _ in enumerate(self.layers):
            x = self[i](x)
        return x


class _Doubler(nn.Module):
    @classmethod
    def scaled(cls, x):
        return x + x


class SuperInClassmethod(_Doubler):
    """super() in a classmethod looks in the class's own MRO (super(cls, cls))."""

    @classmethod
    def scaled(cls, x):
        return super().scaled(x) + 1

    def forward(self, x):
        return self.scaled(x).relu()


class Hooked(nn.Module):
    """Forward pre-hooks (one taking keywords) and forward hooks on children,
    the kind instrumentation registers: traced into the graph."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.inner.register_forward_pre_hook(lambda m, args: (args[0].clamp(-2, 2),))
        self.inner.register_forward_hook(lambda m, args, out: out + args[0])
        self.norm.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] * 0.5,), kwargs), with_kwargs=True)
        self.norm.register_forward_hook(_scale_output)

    def forward(self, x):
        return self.norm(self.inner(x)).tanh()


def _scale_output(module, args, out):
    return None if module.training else out * 2


mlp = MLP().eval()
mlp_relu = MLP(act="relu").eval()
stack = Stack().eval()
seq = Seq().eval()
seq_train = Seq().train()
conv = Conv().eval()
conv_train = Conv().train()
child = Child().eval()
wrapped = Wrapped().eval()
embed = Embed().eval()
flag_eval = TrainingFlag().eval()
params = ParamMath()
dict_in = DictIn().eval()
hooked = Hooked().eval()
static_child = StaticChild().eval()
dict_heads = DictHeads().eval()
indexed = Indexed().eval()
super_in_classmethod = SuperInClassmethod().eval()
no_blocks = OptionalBlocks(0).eval()
two_blocks = OptionalBlocks(2).eval()

# --- collections made in the trace -------------------------------------------------
def collections_made(x, y):
    by_name = collections.defaultdict(list)
    for name, t in (("a", x), ("b", y), ("a", x - y)):
        by_name[name].append(t.relu())
    tally = collections.defaultdict(int)
    tally["n"] += len(by_name["a"])
    recent = collections.deque(maxlen=3)
    for t in by_name["a"]:
        recent.append(t * tally["n"])
    recent.appendleft(y.abs())
    recent.rotate(1)
    first = recent.popleft()
    return recent[0] + recent[-1] + by_name["b"][0], first.sigmoid(), len(recent)


# --- context managers defined in Python, and generator functions ----------------------
class _Scaled:
    """A context manager of the user's: __enter__/__exit__ traced."""

    def __init__(self, k):
        self.k, self.depth = k, 0

    def __enter__(self):
        self.depth += 1
        return self.k

    def __exit__(self, *exc):
        self.depth -= 1
        return False


@contextlib.contextmanager
def _doubled(t):
    yield t * 2


def _running_sums(xs):
    total = 0
    for x in xs:
        total = total + x
        yield total


def context_managers(x):
    with _Scaled(3) as k, contextlib.nullcontext(x.relu()) as r:
        y = x * k + r
    with _doubled(y) as d:
        z = d.sin()
    with contextlib.suppress(KeyError):
        z = z + 1
    return [s.tanh() for s in _running_sums([y, z])]


# --- generator expressions: run lazily by whatever consumes them -----------------
def genexpr_sum_dict(d):
    return sum(v.sum() for v in d.values())


def genexpr_tuple(x):
    return tuple(x * i for i in range(3))


def genexpr_any_all(xs, n):
    if any(t.dim() > 2 for t in xs):
        return xs[0] * 0
    if all(t.shape[0] == n for t in xs):
        return xs[0] + xs[1]
    return xs[0] - xs[1]


def genexpr_consumers(x, ys):
    scale = x.shape[0]  # a closure of the expression
    first = next(y * scale for y in ys)
    pairs = [a + b for a, b in zip((y + 1 for y in ys), ys)]
    total = x
    for i, y in enumerate(t.relu() for t in ys):
        total = total + y * i
    longest = max(t.shape[0] for t in ys)
    label = ",".join(str(i) for i in range(longest))
    both = torch.cat([*(t * 2 for t in ys), *(t - 1 for t in (u for u in ys))])
    keyed = dict((f"k{i}", t.sum()) for i, t in enumerate(ys))
    return (first, torch.stack(pairs), total * len(label), both, keyed["k0"] + keyed["k1"],
            sorted(t.shape[0] for t in ys))


class _Vec:
    """Operators defined in Python: __add__, __mul__ (NotImplemented for a
    number, so Python asks __rmul__), reflected forms, __matmul__."""

    def __init__(self, v):
        self.v = v

    def __add__(self, other):
        return _Vec(self.v + (other.v if isinstance(other, _Vec) else other))

    def __mul__(self, other):
        return _Vec(self.v * other.v) if isinstance(other, _Vec) else NotImplemented

    def __rmul__(self, k):
        return _Vec(self.v * k)

    def __radd__(self, k):
        return _Vec(self.v + k * 10)

    def __matmul__(self, other):
        return self.v @ other.v


def user_operators(x, y):
    a, b = _Vec(x), _Vec(y)
    c = a + b * a  # __mul__, then __add__
    d = 3 * a + 2  # __rmul__, __add__ with a number
    e = 1 + b      # __radd__
    return c.v, d.v, e.v, a @ b


def torch_modules_made_inline(x, y):
    # torch.nn modules without weights, made where they are used (common in
    # transformers code): made at capture, their forward traced.
    scores = torch.nn.Softmax(dim=-1)(x + y * 2)
    return nn.Dropout(p=0.0)(scores) + nn.GELU(approximate="tanh")(y), nn.Flatten(0)(x)


def tensor_attributes_and_fromkeys(x, idx):
    # .data reads the same values outside autograd; __class__ is the class
    # the tensor's guard checks; torch.tensor takes a range; fromkeys of
    # dict, OrderedDict and defaultdict maps every key to one value; x.layout
    # is an argument like dtype and device.
    picked = x[idx.data]
    name = f"{x.__class__.__name__}:{type(x).__name__}"
    steps = torch.tensor(range(x.shape[0])) * 2
    d = dict.fromkeys(["a", "b"], x + 1)
    o = collections.OrderedDict.fromkeys(("c", "a"), value=x - 2)
    dd = collections.defaultdict.fromkeys(iter(d), picked.sum())
    like = torch.zeros(x.shape[0], dtype=x.dtype, layout=x.layout, device=x.device)  # a torch.layout argument
    return (picked, len(name), steps, d["a"] * o["c"] + dd["b"], list(o), torch.is_floating_point(input=x),
            x.data * 2, like + 1)


# --- exceptions raised and caught inside calls ----------------------------------
class _Window:
    """A sequence by __getitem__ alone: IndexError ends it."""

    def __init__(self, items):
        self.items = items

    def __getitem__(self, i):
        if i >= len(self.items):
            raise IndexError("window index out of range", i)
        return self.items[i]


def _item_or(seq, i, default):
    try:
        return seq[i]
    except (KeyError, IndexError) as e:
        return default * len(e.args)


def _checked_scale(t, n):
    if n > 2:
        raise ValueError(f"scale {n} too large")
    return t * n


def _scale_or_shift(t, n, seen):
    try:
        try:
            return _checked_scale(t, n)
        finally:
            seen.append(n)  # runs on the way out, raised or not
    except ValueError as e:
        return t - len(str(e))


def exceptions_in_calls(x):
    w = _Window([x, x.exp()])
    seen = []
    a = _item_or(w, 1, x) + _item_or(w, 7, x)
    b = _scale_or_shift(x, 2, seen) + _scale_or_shift(x, 5, seen)
    return a, b, seen


# --- collections.abc classes, properties that raise AttributeError --------------
class _Layers(collections.abc.Sequence):
    """A Sequence view (abc.ABCMeta, empty __slots__ bases): iterated by
    Sequence.__iter__, which stops at the IndexError of __getitem__."""

    def __init__(self, items):
        self._items = items

    def __len__(self):
        return len(self._items)

    def __getitem__(self, i):
        if i >= len(self._items):
            raise IndexError("layer index out of range")
        return self._items[i]

    @property
    def compiled(self):
        if not self._items:
            raise AttributeError("no layers")
        return all(t.dim() == 1 for t in self._items)


def sequence_protocols(x):
    layers = _Layers([x, x * 2, x * 3])
    total = sum(t.sum() for t in layers)
    pairs = torch.stack([a - b for a, b in zip(layers, reversed(list(layers)))])
    empty = _Layers([])
    return (total, pairs, getattr(layers, "compiled", None), getattr(empty, "compiled", "absent"),
            hasattr(empty, "compiled"), hasattr(layers, "missing"), len(list(iter(layers))))


# --- dict subclasses made in the trace -----------------------------------------
class _Output(collections.OrderedDict):
    """transformers' ModelOutput in small."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = self.__dict__.get(f.name)
            if v is not None:
                self[f.name] = v

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        return dict(self.items())[k] if isinstance(k, str) else tuple(self.values())[k]


@dataclasses.dataclass
class _Hidden(_Output):
    last: torch.Tensor = None
    pooled: torch.Tensor = None
    extra: tuple = None


class _Options(dict):
    def scale(self):
        return self.get("scale", 1)


def dict_subclasses(x):
    out = _Hidden(last=x.relu(), extra=(x.sign(),))
    opts = _Options(scale=3)
    opts["shift"] = out[0].sum()
    return out, out["last"] * opts.scale() + opts["shift"], len(out), "pooled" in out, out.extra[0]


I = lambda *s: r(*s, dtype=torch.int64)  # noqa: E731

CASES = [
    ("arith", ["f32[3,3]", "f32[3,3]"], lambda: (r(3, 3), r(3, 3))),
    ("fallback_ops", ["f32[3]", "f32[4]"], lambda: (r(3), r(4))),
    ("int_arith", ["i64[4]", "i64[4]"], lambda: (I(4), I(4))),
    ("compare", ["f32[5]", "f32[5]"], lambda: (r(5), r(5))),
    ("torch_fns", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("reductions", ["f32[3,4]"], lambda: (r(3, 4),)),
    ("softmaxes", ["f32[2,5]"], lambda: (r(2, 5),)),
    ("shapes", ["f32[2,3,4]"], lambda: (r(2, 3, 4),)),
    ("cat_stack", ["f32[2,3]", "f32[2,3]"], lambda: (r(2, 3), r(2, 3))),
    ("where_clamp", ["f32[6]", "f32[6]"], lambda: (r(6), r(6))),
    ("casts", ["f32[2,2]"], lambda: (r(2, 2),)),
    ("scalar_promotion", ["i32[3]", "f16[3]"], lambda: (I(3).int(), r(3, dtype=torch.float16))),
    ("factories", ["f32[3,4]"], lambda: (r(3, 4),)),
    ("matmuls", ["f32[3,4]", "f32[4,5]", "f32[2,3,4]"], lambda: (r(3, 4), r(4, 5), r(2, 3, 4))),
    ("indexing", ["f32[4,5,6]"], lambda: (r(4, 5, 6),)),
    ("seq_index", ["[f32[3],f32[3],f32[3]]"], lambda: ([r(3), r(3), r(3)],)),
    ("metadata", ["f32[4,6]"], lambda: (r(4, 6),)),
    ("branch_on_dtype", ["f32[3]"], lambda: (r(3),)),
    ("branch_on_dtype", ["f64[3]"], lambda: (r(3, dtype=torch.float64),)),
    ("branch_on_shape", ["f32[2,5]"], lambda: (r(2, 5),)),
    ("branch_on_shape", ["f32[2,2]"], lambda: (r(2, 2),)),
    ("branch_on_flag", ["f32[3]", "True", "str:square"], lambda: (r(3), True, "square")),
    ("branch_on_flag", ["f32[3]", "False", "str:id"], lambda: (r(3), False, "id")),
    ("none_arg", ["f32[3]", "None"], lambda: (r(3), None)),
    ("none_arg", ["f32[3]", "f32[3]"], lambda: (r(3), r(3))),
    ("scalar_args", ["f32[3]", "int:3", "float:0.25"], lambda: (r(3), 3, 0.25)),
    ("while_const", ["f32[3]"], lambda: (r(3),)),
    ("asserts", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("try_except", ["f32[3]"], lambda: (r(3),)),
    ("exceptions_in_calls", ["f32[3]"], lambda: (r(3),)),
    ("dict_subclasses", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("sequence_protocols", ["f32[3]"], lambda: (r(3),)),
    ("loop_range", ["f32[3]"], lambda: (r(3),)),
    ("loop_list", ["[f32[2],f32[2],f32[2]]"], lambda: ([r(2), r(2), r(2)],)),
    ("loop_zip_enumerate", ["(f32[2],f32[2])", "[f32[2],f32[2]]"], lambda: ((r(2), r(2)), [r(2), r(2)])),
    ("loop_dict", ["{ab:f32[2],c:f32[3]}"], lambda: ({"ab": r(2), "c": r(3)},)),
    ("loop_nested", ["f32[2]"], lambda: (r(2),)),
    ("loop_break_continue", ["f32[2]"], lambda: (r(2),)),
    ("builtins_mix", ["[f32[3],f32[3],f32[3]]", "int:2"], lambda: ([r(3), r(3), r(3)], 2)),
    ("map_filter", ["[f32[2],f32[2]]"], lambda: ([r(2), r(2)],)),
    ("isinstance_checks", ["f32[2]", "[int:1]"], lambda: (r(2), [1])),
    ("getattr_hasattr", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("math_module", ["f32[3]"], lambda: (r(3),)),
    ("fstrings", ["f32[2,2]", "str:a"], lambda: (r(2, 2), "a")),
    ("global_reads", ["f32[4]"], lambda: (r(4),)),
    ("calls_helpers", ["f32[3]"], lambda: (r(3),)),
    ("closures", ["f32[3]"], lambda: (r(3),)),
    ("nonlocal_cells", ["f32[3]"], lambda: (r(3),)),
    ("lambdas_comprehensions", ["[f32[2],f32[2],f32[2]]"], lambda: ([r(2), r(2), r(2)],)),
    ("star_args", ["f32[2,3]", "f32[2,3]"], lambda: (r(2, 3), r(2, 3))),
    ("grad_modes", ["f32[3]:grad"], lambda: (r(3).requires_grad_(),)),
    ("nested_no_grad", ["f32[3]:grad"], lambda: (r(3).requires_grad_(),)),
    ("returns_constant_and_none", ["f32[2]"], lambda: (r(2),)),
    ("mlp.forward", ["f32[4,8]"], lambda: (r(4, 8),)),
    ("mlp_relu.forward", ["f32[2,8]"], lambda: (r(2, 8),)),
    ("hooked.forward", ["f32[3,4]"], lambda: (r(3, 4),)),
    ("context_managers", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("collections_made", ["f32[2,3]", "f32[2,3]"], lambda: (r(2, 3), r(2, 3))),
    ("MLP.forward", "mlp_examples", lambda: (mlp, r(4, 8))),  # --example-inputs
    ("stack.forward", ["f32[5,8]"], lambda: (r(5, 8),)),
    ("seq.forward", ["f32[3,4]"], lambda: (r(3, 4),)),
    ("seq_train.forward", ["f32[3,4]"], lambda: (r(3, 4),)),
    ("conv.forward", ["f32[2,3,8,8]"], lambda: (r(2, 3, 8, 8),)),
    ("child.forward", ["f32[2,4]"], lambda: (r(2, 4),)),
    ("wrapped.forward", ["f32[3,8]"], lambda: (r(3, 8),)),
    ("embed.forward", ["i64[2,5]"], lambda: (torch.randint(0, 20, (2, 5)),)),
    ("flag_eval.forward", ["f32[3]"], lambda: (r(3),)),
    ("params.forward", ["f32[2,4]"], lambda: (r(2, 4),)),
    ("dict_in.forward", ["{x:f32[2,3],y:f32[3]}"], lambda: ({"x": r(2, 3), "y": r(3)},)),
    ("helper", ["f32[3]", "b=float:3.0", "c=float:0.5"], lambda: Call(r(3), b=3.0, c=0.5)),
    ("varargs", ["f32[2]", "f32[2]", "scale=float:3.0"], lambda: Call(r(2), r(2), scale=3.0)),
    ("no_blocks.forward", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("two_blocks.forward", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("sets", ["f32[3]", "str:sum"], lambda: (r(3), "sum")),
    ("returns_dict", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("genexpr_sum_dict", ["{a:f32[2,3],b:f32[4]}"], lambda: ({"a": r(2, 3), "b": r(4)},)),
    ("genexpr_tuple", ["f32[3]"], lambda: (r(3),)),
    ("genexpr_any_all", ["[f32[2,3],f32[2,3]]", "int:2"], lambda: ([r(2, 3), r(2, 3)], 2)),
    ("genexpr_consumers", ["f32[3]", "[f32[3],f32[3]]"], lambda: (r(3), [r(3), r(3)])),
    ("tensor_attributes_and_fromkeys", ["f32[4]", "i64[2]"], lambda: (r(4), torch.tensor([1, 3]))),
    ("user_operators", ["f32[3]", "f32[3]"], lambda: (r(3), r(3))),
    ("torch_modules_made_inline", ["f32[2,3]", "f32[2,3]"], lambda: (r(2, 3), r(2, 3))),
    ("static_child.forward", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("dict_heads.forward", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("indexed.forward", ["f32[2,3]"], lambda: (r(2, 3),)),
    ("super_in_classmethod.forward", ["f32[2,3]"], lambda: (r(2, 3),)),
]


# --- guards against real calls ------------------------------------------------
class Mutation:
    """Arguments that are only valid while some state is changed; undo() restores it."""

    def __init__(self, args, undo):
        self.args, self.undo = args, undo


def _train(module, *args):
    module.train()
    return Mutation(args, module.eval)


def _set_global(name, value, *args):
    old = globals()[name]
    globals()[name] = value
    return Mutation(args, lambda: globals().__setitem__(name, old))


# (target, specs, [(what, make_inputs, the guard source expected to fail or None)])
GUARD_SCENARIOS = [
    ("scalar_args", ["f32[3]", "int:3", "float:0.25"], [
        ("matching inputs", lambda: (r(3), 3, 0.25), None),
        ("a float64 tensor", lambda: (r(3, dtype=torch.float64), 3, 0.25), "L['x']"),
        ("another shape", lambda: (r(4), 3, 0.25), "L['x']"),
        ("a non-contiguous tensor", lambda: (r(6)[::2], 3, 0.25), "L['x']"),
        ("requires_grad", lambda: (r(3).requires_grad_(), 3, 0.25), "L['x']"),
        ("another int", lambda: (r(3), 4, 0.25), "L['n']"),
        ("another float", lambda: (r(3), 3, 0.5), "L['f']"),
    ]),
    ("flag_eval.forward", ["f32[3]"], [
        ("matching inputs", lambda: (r(3),), None),
        ("train() mode", lambda: _train(flag_eval, r(3)), "L['self'].training"),
    ]),
    ("global_reads", ["f32[4]"], [
        ("matching inputs", lambda: (r(4),), None),
        ("a changed global", lambda: _set_global("SCALE", 0.75, r(4)), "G['SCALE']"),
        ("a changed global string", lambda: _set_global("MODE", "tanh", r(4)), "G['MODE']"),
    ]),
    ("loop_list", ["[f32[2],f32[2],f32[2]]"], [
        ("matching inputs", lambda: ([r(2), r(2), r(2)],), None),
        ("a longer list", lambda: ([r(2), r(2), r(2), r(2)],), "L['xs']"),
        ("an element's dtype", lambda: ([r(2), r(2, dtype=torch.float64), r(2)],), "L['xs'][1]"),
    ]),
    ("isinstance_checks", ["f32[2]", "[int:1]"], [
        ("matching inputs", lambda: (r(2), [1]), None),
        ("a tuple where the trace saw a list", lambda: (r(2), (1,)), "L['maybe']"),
    ]),
    ("loop_zip_enumerate", ["(f32[2],f32[2])", "[f32[2],f32[2]]"], [
        ("matching inputs", lambda: ((r(2), r(2)), [r(2), r(2)]), None),
        ("a list where the spec said tuple", lambda: ([r(2), r(2)], [r(2), r(2)]), "L['xs']"),
    ]),
    ("none_arg", ["f32[3]", "None"], [
        ("matching inputs", lambda: (r(3), None), None),
        ("a tensor instead of None", lambda: (r(3), r(3)), "L['bias']"),
    ]),
]
