"""The graph-break corpus: programs a capturer can only run by breaking the graph.

Each entry of CASES is a Case: a function (or an nn.Module instance) plus a list
of calls made in order through ONE compiled object, so caching, recompilation
and resume functions show.  break_check.py runs every case eagerly and through a
runner, compares results, argument mutations, printed output and side-effect
state bit for bit, then compares the runner's stats with `graphs`/`breaks`.

Expected counts follow the runner's rules (see the project's break-runner brief):
  R1 inline user functions / module forwards; a graph counts only with >= 1 tensor op.
  R2 a break at instruction I of the top frame: graph before I, I runs in Python,
     a resume function starting after I is traced when it runs.
  R3 data-dependent `if`: the graph before computes the condition; each branch
     taken is its own resume function (both taken: 1 + 2 graphs).
  R4 a break inside an inlined call is one break at the top frame's call
     instruction; the callee runs in plain Python, uncaptured.
  R5 a break inside a for/while body of the top frame: graph up to just before the
     loop; the loop and the rest of the function run in plain Python.
  R6 a break inside `with`/`try` of the top frame: graph up to just before the
     block; the block and the rest run in plain Python.
  R7 side effects are replayed, they do not break.
  R8 guards: tensor metadata, values of Python scalars (incl. values produced at a
     break, e.g. .item(), which are constants in the resume graph), list lengths,
     identity of globals, grad mode.
  R9 `breaks` counts distinct break sites over all calls.
What breaks (the 2022 design): print, .item(), .tolist(), scipy functions,
numpy.random and NumPy forms torch._numpy lacks (out=), unknown C functions
(zlib, struct, json), data-dependent jumps. NumPy on tensors (.numpy(),
numpy functions, torch.from_numpy) is traced, as torch._dynamo traces it.  Where a Python scalar changes between calls it is
used in tensor code on the side of the break where it is read, so the count does
not hinge on whether unused scalars are guarded.

Everything is deterministic: tensors come from seeded generators, modules are
initialised from seeded generators and kept in eval mode.
"""
import collections
import dataclasses
import json
import struct
import zlib
from typing import Any, Callable, List, Optional

import numpy as np
import scipy.fft
import scipy.special
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    calls: List[Callable[[], tuple]]  # each returns fresh (args, kwargs)
    graphs: int                       # distinct graphs compiled over all calls
    breaks: int                       # distinct break sites hit over all calls
    reset: Optional[Callable[[], None]] = None
    state: Optional[Callable[[], Any]] = None
    why: str = ""
    tags: tuple = ()


CASES: List[Case] = []


def case(name, fn, calls, graphs, breaks, why, tags, reset=None, state=None):
    CASES.append(Case(name, fn, list(calls), graphs, breaks, reset, state, why, tuple(tags)))


def T(*shape, seed=0, scale=1.0, offset=0.0, dtype=torch.float32, low=0, high=10,
      requires_grad=False):
    """A fresh tensor from a seeded generator: equal values on every invocation."""
    g = torch.Generator().manual_seed(seed)
    # Drawn on the CPU (the generator's device), then put on torch's default
    # device: the same values when test/python/on_device.py sets another.
    if dtype.is_floating_point:
        t = torch.randn(*shape, generator=g, dtype=dtype, device="cpu") * scale + offset
    else:
        t = torch.randint(low, high, shape, generator=g, dtype=dtype, device="cpu")
    t = t.to(torch.get_default_device())
    return t.requires_grad_() if requires_grad else t


def A(*args, **kwargs):
    return args, kwargs


def seeded(module, seed):
    """Deterministic parameters (independent of the global RNG), eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in module.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g, device="cpu") * 0.4)
    return module.eval()


# ============================================================ data-dependent if
def dd_if_sum(x, y):
    s = x * 2
    if s.sum() > 0:
        out = s + y
    else:
        out = s - y
    return out


case("dd_if_sum", dd_if_sum,
     [lambda: A(T(4, 4, seed=1, offset=1.0), T(4, 4, seed=2)),
      lambda: A(T(4, 4, seed=3, offset=-1.0), T(4, 4, seed=2)),
      lambda: A(T(4, 4, seed=1, offset=1.0), T(4, 4, seed=2))],
     graphs=3, breaks=1, tags=("dd_if",),
     why="R3: [mul,sum,gt] + true resume [add] + false resume [sub]; call 3 hits the cache")


def dd_elif(x):
    m = x.mean()
    if m > 0.5:
        return x * 2
    elif m < -0.5:
        return x * -2
    return x + 1


case("dd_elif", dd_elif,
     [lambda: A(T(3, 3, seed=4, scale=0.1, offset=2.0)),
      lambda: A(T(3, 3, seed=5, scale=0.1, offset=-2.0)),
      lambda: A(T(3, 3, seed=6, scale=0.1))],
     graphs=5, breaks=2, tags=("dd_if",),
     why="R3 twice: [mean,gt]; true->[mul]; false resume [lt] breaks again at the elif "
         "jump (2nd site) -> [mul] / [add]; the 3 calls take all 3 paths: 5 graphs")


def dd_kwargs(x, *, scale=2.0, shift=None):
    y = x * scale
    if shift is not None:
        y = y + shift
    if (y > 0).all():
        return {"pos": y.sqrt() * scale}
    return {"neg": y.abs() * scale, "count": (y < 0).sum()}


case("dd_kwargs", dd_kwargs,
     [lambda: A(T(3, 3, seed=7, scale=0.2, offset=3.0)),
      lambda: A(T(3, 3, seed=7, scale=0.2, offset=3.0), shift=T(3, 3, seed=8, offset=-10.0)),
      lambda: A(T(3, 3, seed=7, scale=0.2, offset=3.0), scale=3.0)],
     graphs=6, breaks=1, tags=("dd_if", "kwargs", "dict"),
     why="R3+R8: top compiled for (2.0,None),(2.0,tensor),(3.0,None) = 3 graphs; "
         "resumes: true@2.0, false@2.0, true@3.0 (scale is used after the jump) = 3; one jump site")


def dd_nested_if(x, y):
    a = x.sum()
    b = y.sum()
    if a > 0:
        if b > 0:
            r = x + y
        else:
            r = x - y
    else:
        r = x * y
    return r, a + b


case("dd_nested_if", dd_nested_if,
     [lambda: A(T(4, seed=9, offset=2.0), T(4, seed=10, offset=2.0)),
      lambda: A(T(4, seed=9, offset=2.0), T(4, seed=10, offset=-2.0)),
      lambda: A(T(4, seed=9, offset=-2.0), T(4, seed=10, offset=2.0))],
     graphs=5, breaks=2, tags=("dd_if", "tuple"),
     why="[sum,sum,gt]; a>0 resume [gt] breaks at the inner jump (2nd site) -> [add,add] "
         "/ [sub,add]; a<=0 resume [mul,add]: 5 graphs")


def dd_ternary(x):
    y = x * 2 if x.sum() > 0 else x / 2
    return y + 1


case("dd_ternary", dd_ternary,
     [lambda: A(T(2, 3, seed=11, offset=1.0)), lambda: A(T(2, 3, seed=12, offset=-1.0))],
     graphs=3, breaks=1, tags=("dd_if",),
     why="R3 on a conditional expression: [sum,gt] + [mul,add] + [div,add]")


# ============================================================ print
def print_between(x, y):
    z = x * 2
    print("between graphs", z.shape[0])
    return z + y


case("print_between", print_between, [lambda: A(T(3, 4, seed=13), T(4, seed=14))],
     graphs=2, breaks=1, tags=("print",), why="R2: [mul] | print | [add]")


def print_tensor(x):
    y = x.relu()
    print("y =", y)
    return y.sum(), y * 3


case("print_tensor", print_tensor, [lambda: A(T(2, 3, seed=15))],
     graphs=2, breaks=1, tags=("print", "tuple"),
     why="R2: [relu] (y is a graph output printed in Python) | [sum,mul]")


def print_twice(x):
    a = x + 1
    print("a ready")
    b = a * a
    print("b ready", end=" |\n")
    return b - x


case("print_twice", print_twice, [lambda: A(T(4, seed=16)), lambda: A(T(4, seed=17))],
     graphs=3, breaks=2, tags=("print",),
     why="R2 twice: [add] | print | [mul] | print | [sub]; call 2 same metadata: cache hits")


def print_first(x, k=2):
    print("start", k, sep=":")
    return x * k


case("print_first", print_first,
     [lambda: A(T(3, seed=18)), lambda: A(T(3, seed=18), k=2), lambda: A(T(3, seed=18), k=3)],
     graphs=2, breaks=1, tags=("print", "defaults"),
     why="R1: nothing before print (no graph); resume [mul] specialised on k: k=2, k=3")


def print_shapes(x, scale=1.0):
    y = x * scale
    print("shape", tuple(y.shape))
    return y.sum(0)


case("print_shapes", print_shapes,
     [lambda: A(T(4, 4, seed=19)), lambda: A(T(4, 4, seed=20), scale=1.0),
      lambda: A(T(2, 3, seed=21))],
     graphs=4, breaks=1, tags=("print", "defaults", "kwargs"),
     why="R8: [mul]+[sum] for 4x4; explicit scale=1.0 equals the default (hit); 2x3 "
         "recompiles both: 4")


# ============================================================ numpy
def np_roundtrip(x):
    y = x + 1
    a = y.numpy()
    b = np.square(a)
    t = torch.from_numpy(b)
    return t * 2 + y


case("np_roundtrip", np_roundtrip, [lambda: A(T(3, 3, seed=22))],
     graphs=1, breaks=0, tags=("numpy",),
     why="NumPy on tensors is traced (torch._numpy): .numpy(), np.square and torch.from_numpy "
         "are in the one graph [add, square, mul, add]")


def np_arg(x, arr):
    t = torch.from_numpy(arr)
    return x * t, t.sum()


case("np_arg", np_arg,
     [lambda: A(T(4, seed=23), T(4, seed=24).numpy()),
      lambda: A(T(4, seed=25), T(4, seed=26).numpy())],
     graphs=1, breaks=0, tags=("numpy", "tuple"),
     why="the array argument is a graph input (torch.as_tensor of it, its dtype and layout "
         "guarded); [mul,sum] reused for the second array")


def _np_normalize(t):
    a = t.numpy()
    a = (a - a.mean()) / (a.std() + 1.0)
    return torch.from_numpy(a)


def np_helper(x, y):
    z = x * y
    n = _np_normalize(z)
    return n + z


case("np_helper", np_helper, [lambda: A(T(3, 4, seed=27), T(3, 4, seed=28))],
     graphs=1, breaks=0, tags=("numpy", "nested"),
     why="R4: the helper's NumPy work (mean, std, arithmetic) is traced: one graph")


def np_view_mutation(x):
    y = x.clone()
    a = y.numpy()
    np.negative(a, out=a)
    return y * 2, x


case("np_view_mutation", np_view_mutation, [lambda: A(T(2, 2, seed=29))],
     graphs=2, breaks=1, tags=("numpy", "tuple"),
     why=".numpy() is traced; np.negative(out=a) breaks (out= is not traced) and mutates y "
         "through the shared buffer: [clone] | [mul] must see the mutation")


# ============================================================ scipy
def scipy_dct_ortho(x):
    y = x * 0.5
    c = scipy.fft.dct(y.numpy(), norm="ortho")
    t = torch.from_numpy(c)
    return t + y


case("scipy_dct_ortho", scipy_dct_ortho, [lambda: A(T(4, 4, seed=30))],
     graphs=2, breaks=1, tags=("scipy", "numpy"),
     why=".numpy() and torch.from_numpy are traced; scipy.fft.dct breaks: [mul] | [add]")


def _expit(t):
    return torch.from_numpy(scipy.special.expit(t.numpy()))


def scipy_expit(x, w):
    h = x @ w
    s = _expit(h)
    return s * h, s


case("scipy_expit", scipy_expit, [lambda: A(T(3, 4, seed=31), T(4, 2, seed=32))],
     graphs=2, breaks=1, tags=("scipy", "nested", "tuple"),
     why="R4: the helper (numpy+scipy) is one break at its call: [matmul] | [mul]")


def scipy_erf_inline(x):
    e = torch.from_numpy(scipy.special.erf(x.numpy()))
    return e * x, e.sum()


case("scipy_erf_inline", scipy_erf_inline, [lambda: A(T(5, seed=33))],
     graphs=1, breaks=1, tags=("scipy", "numpy", "tuple"),
     why=".numpy() of the input is traced, erf breaks with no op before it (x.numpy() is "
         "rebuilt from x); the resume after it [mul,sum]")


def scipy_comb(x):
    n = x.shape[0]
    k = scipy.special.comb(n, 2, exact=True)
    return x * k


case("scipy_comb", scipy_comb,
     [lambda: A(T(4, 2, seed=34)), lambda: A(T(4, 2, seed=35)), lambda: A(T(5, 2, seed=36))],
     graphs=2, breaks=1, tags=("scipy", "unknown_c"),
     why="no tensor op before comb (no top graph); resume [mul] with k constant: "
         "4x2/k=6 and 5x2/k=10")


# ============================================================ .item() / .tolist()
def item_scale(x):
    s = x.abs().max().item()
    return x / s, s


case("item_scale", item_scale,
     [lambda: A(T(3, 3, seed=37)), lambda: A(T(3, 3, seed=38)), lambda: A(T(3, 3, seed=37))],
     graphs=3, breaks=1, tags=("item", "tuple"),
     why="[abs,max] | item | [div] specialised on s: two distinct s values; call 3 repeats call 1")


def item_index(x, scores):
    i = scores.argmax().item()
    return x[i] * 2, i


case("item_index", item_index,
     [lambda: A(T(4, 3, seed=39), torch.tensor([0.0, 3.0, 1.0, 2.0])),
      lambda: A(T(4, 3, seed=39), torch.tensor([5.0, 0.0, 1.0, 2.0])),
      lambda: A(T(4, 3, seed=40), torch.tensor([0.0, 3.0, 1.0, 2.0]))],
     graphs=3, breaks=1, tags=("item", "tuple"),
     why="[argmax] | item | [select,mul] for i=1 and i=0; call 3 i=1 again: hit")


def tolist_sum(x):
    vals = x.sum(dim=1).tolist()
    total = 0.0
    for v in vals:
        total += v
    return x * total, vals


case("tolist_sum", tolist_sum,
     [lambda: A(T(3, 2, seed=41)), lambda: A(T(3, 2, seed=41)), lambda: A(T(3, 2, seed=42))],
     graphs=3, breaks=1, tags=("tolist", "list"),
     why="[sum] | tolist | resume (Python loop over floats unrolled, no break) [mul] per "
         "distinct vals: 2")


def item_int_branch(x):
    n = int(x.sum().item())
    if n % 2 == 0:
        return x + n
    return x - n


case("item_int_branch", item_int_branch,
     [lambda: A(torch.tensor([1, 2, 3, 4])), lambda: A(torch.tensor([1, 2, 3, 5]))],
     graphs=3, breaks=1, tags=("item",),
     why="[sum] | item | resume: n constant, the Python if is static: [add] for 10, [sub] for 11")


def tolist_shape(x, sizes):
    dims = sizes.tolist()
    return x.reshape(dims) + 1


case("tolist_shape", tolist_shape,
     [lambda: A(T(16, seed=43), torch.tensor([2, 8])),
      lambda: A(T(16, seed=43), torch.tensor([4, 4])),
      lambda: A(T(16, seed=44), torch.tensor([2, 8]))],
     graphs=2, breaks=1, tags=("tolist",),
     why="R1: no op before .tolist() (no top graph); resume [reshape,add] per dims: [2,8],[4,4]")


def item_kwarg(x, *, thresh=0.0):
    m = (x - thresh).mean().item()
    return {"above": x > m + thresh, "m": m}


case("item_kwarg", item_kwarg,
     [lambda: A(T(2, 4, seed=45)), lambda: A(T(2, 4, seed=45), thresh=0.5),
      lambda: A(T(2, 4, seed=45), thresh=0.0)],
     graphs=4, breaks=1, tags=("item", "kwargs", "dict"),
     why="top [sub,mean] per thresh (0.0, 0.5) = 2; resume [gt] per (m, thresh) = 2; "
         "call 3 repeats call 1")


# ============================================================ loops
def for_print(x):
    y = x * 2
    for i in range(3):
        y = y + i
        print("step", i)
    return y


case("for_print", for_print, [lambda: A(T(3, seed=46))],
     graphs=1, breaks=1, tags=("loop",),
     why="R5: [mul] before the loop; loop and return in plain Python")


def while_item(x):
    y = x + 1
    i = 0
    while i < 3:
        y = y * 2
        v = y.sum().item()
        y = y - v / 16
        i += 1
    return y, i


case("while_item", while_item, [lambda: A(T(4, seed=47))],
     graphs=1, breaks=1, tags=("loop", "item"),
     why="R5: .item() in the while body; [add] before the loop, the rest plain Python")


def _np_sqrt_abs(t):
    return torch.from_numpy(np.sqrt(np.abs(t.numpy())))


def for_numpy_helper(xs):
    total = xs[0] * 0
    for t in xs:
        total = total + _np_sqrt_abs(t)
    print("done")
    return total


case("for_numpy_helper", for_numpy_helper,
     [lambda: A([T(3, seed=48), T(3, seed=49), T(3, seed=50)]),
      lambda: A([T(3, seed=51), T(3, seed=52), T(3, seed=53)])],
     graphs=1, breaks=1, tags=("loop", "numpy", "nested"),
     why="R4 inside R5: the helper call in the loop is the one site; [mul] before the loop; "
         "the print after the loop runs in plain Python (not traced, not a site)")


def for_dict_print(x, weights):
    x = x - 1
    out = {}
    for k, w in weights.items():
        out[k] = x * w
        if k == "b":
            print("half way at", k)
    return out


case("for_dict_print", for_dict_print,
     [lambda: A(T(2, 2, seed=54), {"a": 0.5, "b": 2.0, "c": -1.0})],
     graphs=1, breaks=1, tags=("loop", "print", "dict"),
     why="R5: print in the 2nd iteration; [sub] before the loop")


def while_print(x, n=3):
    y = x.sigmoid()
    k = 0
    while k < n:
        y = y * 2
        if k == 1:
            print("k is", k)
        k += 1
    return y, k


case("while_print", while_print, [lambda: A(T(3, seed=55)), lambda: A(T(3, seed=56), n=3)],
     graphs=1, breaks=1, tags=("loop", "print", "defaults"),
     why="R5: [sigmoid] before the loop; n=3 passed explicitly equals the default: hit")


def for_dd_if(xs):
    acc = xs[0] * 0
    for t in xs:
        if t.sum() > 0:
            acc = acc + t
        else:
            acc = acc - t
    return acc


case("for_dd_if", for_dd_if,
     [lambda: A([T(4, seed=57, offset=1.0), T(4, seed=58, offset=-1.0), T(4, seed=59)]),
      lambda: A([T(4, seed=60, offset=-1.0), T(4, seed=61, offset=1.0), T(4, seed=62)])],
     graphs=1, breaks=1, tags=("loop", "dd_if"),
     why="R5: data-dependent jump in the loop body; [mul] before the loop")


def print_then_loop(x):
    y = x + 1
    print("before loop")
    z = y * 2
    for i in range(2):
        print("loop", i)
        z = z + i
    return z + 1


case("print_then_loop", print_then_loop, [lambda: A(T(2, 3, seed=63))],
     graphs=2, breaks=2, tags=("loop", "print"),
     why="R2 then R5 in the resume: [add] | print | resume [mul] up to its loop | print in "
         "loop (2nd site), rest plain Python")


# ============================================================ nested user calls (2 levels)
def _inner_print(t):
    print("inner", t.shape[0])
    return t * 3


def _middle(t):
    u = t + 1
    return _inner_print(u) - 1


def nested_print(x):
    a = x * 2
    b = _middle(a)
    return a + b


case("nested_print", nested_print, [lambda: A(T(3, seed=64))],
     graphs=2, breaks=1, tags=("nested", "print"),
     why="R4: print 2 levels down is one site at nested_print's call; [mul] | _middle "
         "uncaptured | [add]")


def _inner_branch(t):
    if t.mean() > 0:
        return t * 2
    return t / 2


def _outer_branch(t, k=1.0):
    return _inner_branch(t * k) + k


def nested_dd(x):
    y = x - 0.25
    z = _outer_branch(y, k=2.0)
    return z.sum(), y


case("nested_dd", nested_dd,
     [lambda: A(T(4, seed=65, offset=2.0)), lambda: A(T(4, seed=66, offset=-2.0))],
     graphs=2, breaks=1, tags=("nested", "dd_if", "kwargs", "tuple"),
     why="R4: the data-dependent jump 2 levels down is one site at the call; both branches "
         "run in Python; [sub] | [sum] reused")


def _inner_item(t):
    return t.max().item()


def _middle_scale(t):
    m = _inner_item(t)
    return t / m, m


def nested_item(x):
    y = x.abs() + 1
    z, m = _middle_scale(y)
    return z * m


case("nested_item", nested_item,
     [lambda: A(T(3, seed=67)), lambda: A(T(3, seed=68))],
     graphs=3, breaks=1, tags=("nested", "item"),
     why="R4: [abs,add] | _middle_scale in Python | resume [mul] with the float m constant: "
         "two values")


def _tag(d):
    return zlib.crc32(json.dumps(d, sort_keys=True).encode())


def _describe(t, name):
    return _tag({"name": name, "shape": list(t.shape)})


def nested_c(x, name="x"):
    y = x.tanh()
    h = _describe(y, name)
    return y * (h % 7), h


case("nested_c", nested_c,
     [lambda: A(T(2, 3, seed=69)), lambda: A(T(2, 3, seed=70), name="x")],
     graphs=2, breaks=1, tags=("nested", "unknown_c", "defaults"),
     why="R4: json/zlib 2 levels down; [tanh] | [mul] with h constant (same shape and name)")


def _leaf_np(t):
    return torch.from_numpy(np.cumsum(t.numpy(), axis=0))


def _mid_np(t, scale=2.0):
    u = t * scale
    v = _leaf_np(u)
    return {"u": u, "v": v + 1}


def nested_numpy(x):
    base = x.exp()
    d = _mid_np(base)
    return d["v"] - base, d


case("nested_numpy", nested_numpy, [lambda: A(T(3, 2, seed=71))],
     graphs=1, breaks=0, tags=("nested", "numpy", "dict"),
     why="R4: np.cumsum two levels down is traced: one graph [exp, mul, cumsum, add, sub]")


def _leaf_json(meta, *, indent=None):
    return json.dumps(meta, indent=indent)


def _mid_json(t, tag="mid"):
    s = _leaf_json({"tag": tag, "n": t.shape[-1]})
    return [t * len(s), s]


def nested_list_kwargs(x, tag="mid"):
    y = x.exp() - 1
    out = _mid_json(y, tag=tag)
    out.append(y.sum())
    return out


case("nested_list_kwargs", nested_list_kwargs,
     [lambda: A(T(2, 2, seed=72)), lambda: A(T(2, 2, seed=73), tag="mid")],
     graphs=2, breaks=1, tags=("nested", "unknown_c", "list", "kwargs"),
     why="R4: [exp,sub] | _mid_json in Python | resume appends [sum] to the returned list")


# ============================================================ with torch.no_grad()
def nograd_print(x, w):
    y = x @ w
    with torch.no_grad():
        z = y * 2
        print("inside no_grad")
        z = z + 1
    return y + z


case("nograd_print", nograd_print,
     [lambda: A(T(2, 3, seed=74), T(3, 3, seed=75, requires_grad=True))],
     graphs=2, breaks=1, tags=("no_grad", "print"),
     why="[matmul, set_grad_enabled, mul] | no_grad entered again, print | the resume function "
         "continues inside the block: [add, exit, add]")


def nograd_item(x):
    x = x * 1.5
    with torch.no_grad():
        s = x.norm().item()
    return x / s


case("nograd_item", nograd_item, [lambda: A(T(4, seed=76)), lambda: A(T(4, seed=77))],
     graphs=3, breaks=1, tags=("no_grad", "item"),
     why="[mul, set_grad_enabled, norm (Tensor.norm's Python code traced: linalg_vector_norm)] | item() "
         "inside no_grad entered again | the resume function continues inside the block: [exit, div] "
         "with s constant, one per call's value")


def _stats_nograd(t):
    with torch.no_grad():
        m = t.mean().item()
    return m


def nograd_nested(x, w):
    h = (x * w).relu()
    m = _stats_nograd(h)
    return h - m


case("nograd_nested", nograd_nested,
     [lambda: A(T(3, seed=78), T(3, seed=79, requires_grad=True)),
      lambda: A(T(3, seed=80), T(3, seed=79, requires_grad=True))],
     graphs=3, breaks=1, tags=("no_grad", "nested", "item"),
     why="R4: with+item inside the helper; [mul,relu] | resume [sub] with m constant: 2 values")


def nograd_branch(x):
    y = x.cos()
    with torch.no_grad():
        if y.sum() > 0:
            y = y + 1
        else:
            y = y - 1
    return y * 2


case("nograd_branch", nograd_branch,
     [lambda: A(T(3, seed=81)), lambda: A(T(3, seed=82, offset=3.0))],
     graphs=3, breaks=1, tags=("no_grad", "dd_if"),
     why="data-dependent jump inside the with: [cos, set_grad_enabled, sum, gt] | the jump, inside "
         "no_grad entered again | a resume function per successor, inside the block: [add, ...] / [sub, ...]")


# ============================================================ try/except
def try_print(x):
    y = x + 2
    try:
        z = y * 3
        print("in try")
    except RuntimeError:
        z = y
    return z - 1


case("try_print", try_print, [lambda: A(T(3, seed=83))],
     graphs=1, breaks=1, tags=("try", "print"),
     why="R6: [add] before the try; the try body and return in plain Python")


def try_json_except(x, s="3"):
    y = x.neg() * len(s)
    try:
        n = json.loads(s)
    except ValueError:
        n = -1
    return y * n


case("try_json_except", try_json_except,
     [lambda: A(T(3, seed=84)), lambda: A(T(3, seed=84), s="oops")],
     graphs=2, breaks=1, tags=("try", "unknown_c", "defaults"),
     why="R6: [neg,mul] before the try, one per s value (len(s) is used); call 2 raises "
         "and is caught in plain Python")


def _shape_tag(t):
    try:
        return zlib.crc32(struct.pack("<i", *t.shape))
    except struct.error:
        return 0


def try_nested(x):
    y = x * x
    tag = _shape_tag(y)
    return y + (tag % 5)


case("try_nested", try_nested,
     [lambda: A(T(3, seed=85)), lambda: A(T(2, 2, seed=86))],
     graphs=4, breaks=1, tags=("try", "nested", "unknown_c"),
     why="R4: try+struct inside the helper (2-D shape raises, caught -> 0); [mul] | [add] "
         "per shape: 2 shapes x 2 graphs")


def try_item_raise(x):
    y = x.sum(0)
    try:
        v = y.max().item()
        if v > 100:
            raise ValueError("big")
        out = y / v
    except ValueError:
        out = y
    return out


case("try_item_raise", try_item_raise,
     [lambda: A(T(3, 3, seed=87, offset=1.0)), lambda: A(T(3, 3, seed=88, offset=50.0))],
     graphs=1, breaks=1, tags=("try", "item"),
     why="R6: [sum] before the try; .item()/raise/except in plain Python (call 2 raises)")


# ============================================================ containers and closures
def live_containers(x, y):
    lst = [x * 2, 3, "tag"]
    d = {"a": y + 1, "n": 4, "pair": (x, 1.5)}
    tup = (lst[0], d["n"])
    print("containers", len(lst), d["n"])
    return lst[0] + d["a"] * tup[1] + d["pair"][0] * d["pair"][1], lst, d


case("live_containers", live_containers, [lambda: A(T(3, seed=89), T(3, seed=90))],
     graphs=2, breaks=1, tags=("containers", "print", "list", "dict"),
     why="R2: [mul,add] | print | [mul,add,mul,add]; list/dict/tuple mixing tensors and "
         "constants are live across the break")


def closure_reads(x, k=3):
    bias = x.mean(0)

    def inner(t):
        return t * k + bias

    a = inner(x)
    print("closure")
    return inner(a)


case("closure_reads", closure_reads, [lambda: A(T(2, 3, seed=91))],
     graphs=2, breaks=1, tags=("closure", "print", "defaults"),
     why="R2: [mean,mul,add] | print | [mul,add]; the closure is live across the break")


def closure_nonlocal(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count

    y = bump(x)
    print("count", count)
    y = bump(y)
    return y, count


case("closure_nonlocal", closure_nonlocal, [lambda: A(T(3, seed=92)), lambda: A(T(3, seed=93))],
     graphs=2, breaks=1, tags=("closure", "print", "tuple"),
     why="R2: [add] | print | [add]; the cell starts at 0 every call so the constants repeat")


def _make_counted():
    calls = 0
    scale = 0.5

    def counted(x):
        nonlocal calls
        calls += 1
        y = x * scale + calls
        print("call", calls)
        return y * calls

    def reset():
        nonlocal calls
        calls = 0

    def state():
        return calls

    return counted, reset, state


_counted, _counted_reset, _counted_state = _make_counted()
case("closure_counter", _counted,
     [lambda: A(T(3, seed=94)), lambda: A(T(3, seed=94)), lambda: A(T(3, seed=94))],
     graphs=6, breaks=1, tags=("closure", "side_effect", "print"),
     reset=_counted_reset, state=_counted_state,
     why="R8: the nonlocal counter (1,2,3) is used in tensor code before and after the "
         "print: top [mul,add] x3 + resume [mul] x3")


def containers_dd(x):
    meta = {"scale": 2, "names": ["p", "q"]}
    pair = (x.abs(), meta["scale"])
    if pair[0].sum() > 5:
        out = [pair[0] * pair[1], meta["names"][0]]
    else:
        out = [pair[0] / pair[1], meta["names"][1]]
    return out, meta


case("containers_dd", containers_dd,
     [lambda: A(T(4, 4, seed=95, scale=2.0)), lambda: A(T(4, 4, seed=96, scale=0.05))],
     graphs=3, breaks=1, tags=("containers", "dd_if", "list", "dict"),
     why="R3: [abs,sum,gt] + [mul] + [div]; dict/tuple live into both branch resumes")


def list_arg_append(x, log):
    log.append(x + 1)
    print("logged", len(log))
    log.append(log[-1] * 2)
    return len(log)


case("list_arg_append", list_arg_append,
     [lambda: A(T(2, seed=97), []), lambda: A(T(2, seed=98), []),
      lambda: A(T(2, seed=99), [T(2, seed=100)])],
     graphs=4, breaks=1, tags=("containers", "side_effect", "print"),
     why="R7+R8: [add] | print | [mul]; empty list twice (hit), then a list of length 1 "
         "recompiles both (list length guard)")


def _make_affine(scale, bias):
    def affine(x):
        y = x * scale
        print("affine")
        return y + bias
    return affine


_affine = _make_affine(0.75, T(3, seed=101))
case("closure_affine", _affine, [lambda: A(T(2, 3, seed=102)), lambda: A(T(2, 3, seed=103))],
     graphs=2, breaks=1, tags=("closure", "print"),
     why="R2 in a closure reading a float and a tensor cell: [mul] | [add], reused")


# ============================================================ side effects
LAST_SUM = None
LAST_TAG = None


def global_assign(x):
    global LAST_SUM, LAST_TAG
    y = x * 2
    LAST_SUM = y.sum()
    print("mid")
    LAST_TAG = "done"
    return y + LAST_SUM


def _reset_globals():
    global LAST_SUM, LAST_TAG
    LAST_SUM, LAST_TAG = None, None


case("global_assign", global_assign, [lambda: A(T(3, seed=104)), lambda: A(T(3, seed=105))],
     graphs=2, breaks=1, tags=("side_effect", "print"),
     reset=_reset_globals, state=lambda: (LAST_SUM, LAST_TAG),
     why="R7: global stores replayed on both sides; [mul,sum] | [add] reading the global "
         "tensor written before the break; reused")


COUNTER = 0


def global_counter(x):
    global COUNTER
    COUNTER += 1
    y = x + COUNTER
    print("counter", COUNTER)
    return y * 2


def _reset_counter():
    global COUNTER
    COUNTER = 0


case("global_counter", global_counter, [lambda: A(T(3, seed=106)), lambda: A(T(3, seed=106))],
     graphs=3, breaks=1, tags=("side_effect", "print"),
     reset=_reset_counter, state=lambda: COUNTER,
     why="R8: COUNTER (0, then 1) is read and used in [add]: top x2; resume [mul] x1")


REGISTRY = {}


def _reset_registry():
    REGISTRY.clear()
    REGISTRY.update({"pre": torch.zeros(3), "post": torch.zeros(3)})


_reset_registry()


def global_dict_set(x):
    y = x.sum(0)
    REGISTRY["pre"] = y
    print("registered")
    REGISTRY["post"] = y * 2
    return REGISTRY["pre"] + REGISTRY["post"]


case("global_dict_set", global_dict_set,
     [lambda: A(T(4, 3, seed=107)), lambda: A(T(4, 3, seed=108))],
     graphs=2, breaks=1, tags=("side_effect", "print", "dict"),
     reset=_reset_registry, state=lambda: dict(REGISTRY),
     why="R7: key stores replayed; keys pre-set and values f32[3] so guards hold: "
         "[sum] | [mul,add], reused")


def inplace_arg(x, y):
    x.add_(1)
    print("after add_")
    y.mul_(x)
    return x.sum() + y.sum()


case("inplace_arg", inplace_arg, [lambda: A(T(3, seed=109), T(3, seed=110))],
     graphs=2, breaks=1, tags=("side_effect", "print"),
     why="R7: [add_] | print | [mul_,sum,sum,add]; both arguments are mutated")


def inplace_branch(x):
    x.mul_(2)
    if x.sum() > 0:
        x.sub_(1)
    else:
        x.add_(1)
    return x


case("inplace_branch", inplace_branch,
     [lambda: A(T(4, seed=111, offset=1.0)), lambda: A(T(4, seed=112, offset=-1.0))],
     graphs=3, breaks=1, tags=("side_effect", "dd_if"),
     why="R3: [mul_,sum,gt] + [sub_] + [add_]; returns the mutated argument")


class Tracker:
    def __init__(self):
        self.n = 0
        self.last = None


TRACKER = Tracker()


def _reset_tracker():
    TRACKER.n, TRACKER.last = 0, None


def object_attr(x):
    TRACKER.last = x * 3
    print("tracked")
    TRACKER.n += 1
    return TRACKER.last + TRACKER.n


case("object_attr", object_attr,
     [lambda: A(T(3, seed=113)), lambda: A(T(3, seed=113)), lambda: A(T(3, seed=113))],
     graphs=4, breaks=1, tags=("side_effect", "print", "opaque"),
     reset=_reset_tracker, state=lambda: (TRACKER.n, TRACKER.last),
     why="R7+R8: top [mul] reused; resume reads n (0,1,2) and adds it: [add] x3")


# ============================================================ unknown C functions
def c_crc32(x, y=None):
    z = x * 2 if y is None else x * y
    h = zlib.crc32(b"libdynamo")
    return z + (h % 11)


case("c_crc32", c_crc32, [lambda: A(T(3, seed=114)), lambda: A(T(3, seed=114), y=T(3, seed=115))],
     graphs=3, breaks=1, tags=("unknown_c", "defaults"),
     why="top [mul] for y=None and y=tensor (2); resume [add] with the same crc constant (1)")


def c_struct(x):
    y = x.t() * 1.5
    n, m = y.shape
    packed = struct.pack("<hh", n, m)
    return y * len(packed), packed


case("c_struct", c_struct, [lambda: A(T(2, 3, seed=116))],
     graphs=2, breaks=1, tags=("unknown_c", "tuple"),
     why="[t,mul] | struct.pack | [mul]; bytes returned")


def c_json_dumps(x, cfg):
    s = json.dumps(cfg, sort_keys=True)
    return {"out": x * len(s), "json": s}


case("c_json_dumps", c_json_dumps,
     [lambda: A(T(2, seed=117), {"lr": 0.1, "layers": [2, 3]}),
      lambda: A(T(2, seed=118), {"lr": 0.1, "layers": [2, 3]}),
      lambda: A(T(2, seed=117), {"lr": 0.25, "layers": [2, 3, 4], "name": "b"})],
     graphs=2, breaks=1, tags=("unknown_c", "dict"),
     why="no op before json.dumps (no top graph); resume [mul] per distinct string s: 2")


def c_json_loads(x, spec='{"scale": 0.5, "shift": 2}'):
    y = x.abs()
    p = json.loads(spec)
    return y * p["scale"] + p["shift"]


case("c_json_loads", c_json_loads, [lambda: A(T(3, seed=119)), lambda: A(T(3, seed=120))],
     graphs=2, breaks=1, tags=("unknown_c", "defaults"),
     why="[abs] | json.loads | [mul,add] with the parsed dict's constants; reused")


# ============================================================ opaque objects
class Hasher:
    def __init__(self, salt):
        self.salt = salt

    def digest(self, t):
        return zlib.crc32(struct.pack("<i", t.shape[0]) + self.salt)


HASHER = Hasher(b"salt")


def opaque_method(x):
    y = x.relu()
    h = HASHER.digest(y)
    return y * (h % 13)


case("opaque_method", opaque_method, [lambda: A(T(4, seed=121))],
     graphs=2, breaks=1, tags=("opaque", "unknown_c", "nested"),
     why="R4: method inlined, C call inside: one site at the call; [relu] | [mul]")


class Scaler:
    def __init__(self, k):
        self.k = k

    def packed(self, t):
        return struct.unpack("<f", struct.pack("<f", self.k * t.dim()))[0]


SCALER = Scaler(0.3)


def opaque_arg(x, sc):
    a = x * 2
    f = sc.packed(a)
    return a * f


case("opaque_arg", opaque_arg,
     [lambda: A(T(2, 2, seed=122), SCALER), lambda: A(T(2, 2, seed=123), SCALER)],
     graphs=2, breaks=1, tags=("opaque", "unknown_c", "nested"),
     why="R4: [mul] | sc.packed in Python | [mul] with the float32-rounded constant; "
         "same object and k every call")


class Journal:
    def __init__(self):
        self.entries = []

    def record(self, t):
        self.entries.append(json.dumps(list(t.shape)))
        return len(self.entries)


JOURNAL = Journal()


def opaque_journal(x):
    y = x.sum(1)
    n = JOURNAL.record(y)
    return y * n


case("opaque_journal", opaque_journal, [lambda: A(T(2, 3, seed=124)), lambda: A(T(2, 3, seed=125))],
     graphs=3, breaks=1, tags=("opaque", "unknown_c", "side_effect"),
     reset=JOURNAL.entries.clear, state=lambda: list(JOURNAL.entries),
     why="R4: [sum] | record in Python (mutates the journal) | [mul] per n (1, 2)")


class Window:
    def __init__(self):
        self.w = torch.tensor([0.25, 0.5, 0.25])

    def smooth(self, t):
        return torch.from_numpy(np.convolve(t.numpy(), self.w.numpy(), mode="same"))


WINDOW = Window()


def opaque_numpy(x):
    y = x.flatten()[:8] * 2
    z = WINDOW.smooth(y)
    return z - y


case("opaque_numpy", opaque_numpy, [lambda: A(T(3, 4, seed=126))],
     graphs=1, breaks=0, tags=("opaque", "numpy", "nested"),
     why="R4: the helper's NumPy smoothing is traced: one graph")


# ============================================================ nn.Modules
class BreakMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        h = self.drop(F.relu(self.fc1(x)))
        print("hidden", tuple(h.shape))
        return self.fc2(h)


case("mod_break_mlp", seeded(BreakMLP(), 1),
     [lambda: A(T(2, 8, seed=127)), lambda: A(T(2, 8, seed=128)), lambda: A(T(3, 8, seed=129))],
     graphs=4, breaks=1, tags=("module", "print"),
     why="R2 in forward: [linear,relu,dropout(eval)] | [linear]; batch 3 recompiles both")


def _log_norm(t):
    print("norm", round(t.norm().item(), 4))
    return t


class HelperBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        h = _log_norm(h)
        return torch.tanh(h)


case("mod_helper_break", seeded(HelperBreak(), 2), [lambda: A(T(2, 4, seed=130))],
     graphs=2, breaks=1, tags=("module", "nested", "print", "item"),
     why="R4: [linear] | _log_norm in Python | [tanh]")


class GateModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.pos = nn.Linear(4, 2)
        self.neg = nn.Linear(4, 2)

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        if x.mean() > 0:
            return self.pos(h)
        return self.neg(h) * -1


case("mod_gate", seeded(GateModule(), 3),
     [lambda: A(T(3, 4, seed=131, offset=1.0)), lambda: A(T(3, 4, seed=132, offset=-1.0))],
     graphs=3, breaks=1, tags=("module", "dd_if"),
     why="R3: [linear,tanh,mean,gt] + [linear] + [linear,mul]")


class NoisyBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("block")
        return y.relu()


class OuterNoisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(4, 4)
        self.block = NoisyBlock()
        self.post = nn.Linear(4, 4)

    def forward(self, x):
        a = self.pre(x)
        b = self.block(a)
        return self.post(b) + a


case("mod_submodule_break", seeded(OuterNoisy(), 4), [lambda: A(T(2, 4, seed=133))],
     graphs=2, breaks=1, tags=("module", "nested", "print"),
     why="R4: submodule forward breaks: one site at self.block(a); [linear] | [linear,add]")


class CountingMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.fc2 = nn.Linear(6, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        h = F.relu(self.fc1(x))
        print("forward call", self.calls)
        return self.fc2(h)


_counting = seeded(CountingMLP(), 5)


def _reset_counting():
    _counting.calls = 0


case("mod_counting", _counting,
     [lambda: A(T(2, 4, seed=134)), lambda: A(T(2, 4, seed=134)), lambda: A(T(2, 4, seed=135))],
     graphs=4, breaks=1, tags=("module", "side_effect", "print"),
     reset=_reset_counting, state=lambda: _counting.calls,
     why="R8: self.calls (0,1,2) is read before the break: top [linear,relu] x3; the "
         "resume [linear] does not read it: x1")


class Normalizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.register_buffer("running", torch.zeros(4))

    def forward(self, x, *, eps=1e-3, return_stats=False):
        m = x.mean(0)
        self.running.mul_(0.9).add_(m * 0.1)
        s = x.std().item()
        out = (x - m) / (s + eps) * self.scale
        if return_stats:
            return {"out": out, "s": s}
        return out


_normalizer = seeded(Normalizer(), 6)


def _reset_normalizer():
    _normalizer.running.zero_()


case("mod_normalizer", _normalizer,
     [lambda: A(T(3, 4, seed=136)), lambda: A(T(3, 4, seed=136), eps=1e-3),
      lambda: A(T(3, 4, seed=137), return_stats=False)],
     graphs=3, breaks=1, tags=("module", "item", "side_effect", "kwargs"),
     reset=_reset_normalizer, state=lambda: _normalizer.running,
     why="[mean,mul_,mul,add_,std] reused (kwargs equal the defaults); resume "
         "[sub,div,mul] per s: 2 values")


class PrintLayer(nn.Module):
    def forward(self, x):
        print("PrintLayer", tuple(x.shape))
        return x


class SeqWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 4)
        self.seq = nn.Sequential(nn.Linear(4, 4), PrintLayer(), nn.ReLU())
        self.out = nn.Linear(4, 2)

    def forward(self, x, *, residual=True):
        h = self.inp(x)
        y = self.seq(h)
        if residual:
            y = y + h
        return self.out(y)


case("mod_sequential_break", seeded(SeqWrapper(), 7),
     [lambda: A(T(2, 4, seed=138)), lambda: A(T(2, 4, seed=139), residual=True)],
     graphs=2, breaks=1, tags=("module", "nested", "print", "kwargs"),
     why="R4: the print in a Sequential member is one site at self.seq(h); [linear] | "
         "[add,linear]")


class TopKRouter(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = nn.ModuleList([nn.Linear(3, 3) for _ in range(4)])

    def forward(self, x):
        order = x.sum(1).argsort(descending=True)[:2].tolist()
        outs = [self.experts[i](x[i]) for i in order]
        return torch.stack(outs), order


case("mod_topk_router", seeded(TopKRouter(), 8),
     [lambda: A(torch.tensor([[1.0, 0, 0], [4, 0, 0], [2, 0, 0], [3, 0, 0]])),
      lambda: A(torch.tensor([[1.0, 1, 0], [4, 1, 0], [2, 1, 0], [3, 1, 0]])),
      lambda: A(torch.tensor([[4.0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]]))],
     graphs=3, breaks=1, tags=("module", "tolist", "list"),
     why="[sum,argsort,getitem] | tolist | resume [linear x2,stack] per order: [1,3] "
         "twice (hit), [0,3]")


class EmaModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("ema", torch.zeros(4))

    def forward(self, x):
        y = self.lin(x)
        with torch.no_grad():
            self.ema.mul_(0.5).add_(y.mean(0) * 0.5)
            print("ema updated")
        return y - self.ema


_ema = seeded(EmaModule(), 9)


def _reset_ema():
    _ema.ema.zero_()


case("mod_nograd_ema", _ema, [lambda: A(T(2, 4, seed=140)), lambda: A(T(2, 4, seed=141))],
     graphs=2, breaks=1, tags=("module", "no_grad", "print", "side_effect"),
     reset=_reset_ema, state=lambda: _ema.ema,
     why="[linear, set_grad_enabled, mul_, mean, mul, add_] | no_grad entered again, print | "
         "[exit, sub] in the resume function")


class SpectralHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def spectrum(self, t):
        return torch.from_numpy(scipy.fft.dct(t.detach().numpy(), type=2, norm="ortho"))

    def forward(self, x, gain=1.0):
        h = self.lin(x) * gain
        s = self.spectrum(h)
        return {"h": h, "s": s * gain}


case("mod_scipy_method", seeded(SpectralHead(), 10),
     [lambda: A(T(2, 4, seed=142)), lambda: A(T(2, 4, seed=143), gain=1.0)],
     graphs=2, breaks=1, tags=("module", "scipy", "nested", "dict", "defaults"),
     why="R4: the module's own helper method does numpy+scipy: one site; [linear,mul] | [mul]")


# ============================================================ generator expressions
def gen_across_print(x, xs):
    y = x + 1
    g = (t * 2 for t in xs)
    print("generator made", len(xs))
    return y + sum(g)


case("gen_across_print", gen_across_print, [lambda: A(T(3, seed=150), [T(3, seed=151), T(3, seed=152)])],
     graphs=2, breaks=2, tags=("generator", "print", "list"),
     why="[add] | print: the untouched generator is rebuilt by calling the expression again | "
         "sum() over that real generator runs in Python (its frame is CPython's, not the "
         "trace's) | [add]")


def gen_to_python(x):
    n = len(bytes(i for i in range(x.shape[0])))
    return x * n


case("gen_to_python", gen_to_python, [lambda: A(T(4, seed=153))],
     graphs=1, breaks=1, tags=("generator", "unknown_c"),
     why="bytes() of a generator is a call the translator cannot see: the generator is "
         "rebuilt and handed to Python; no op before it; resume [mul]")


def gen_started_across_print(x, xs):
    g = (t * x for t in xs)
    first = next(g)
    print("first taken")
    return first + sum(g)


case("gen_started_across_print", gen_started_across_print,
     [lambda: A(T(3, seed=154), [T(3, seed=155), T(3, seed=156), T(3, seed=157)])],
     graphs=0, breaks=1, tags=("generator", "print", "list"),
     why="a generator resumed before the break holds a frame midway, which bytecode cannot "
         "rebuild: the call runs as plain Python, equal to eager")


def gen_any_side_effect(x, log):
    def note(t):
        log.append(t.shape[0])
        return t.shape[0] > 2
    hit = any(note(t) for t in (x, x[:2], x[:1]))
    print("noted", len(log))
    return x * 2 if hit else x


case("gen_any_side_effect", gen_any_side_effect,
     [lambda: A(T(3, seed=158), []), lambda: A(T(2, seed=159), [])],
     graphs=1, breaks=1, tags=("generator", "print", "closure", "side_effect"),
     why="any() stops at the first true value, as in Python: 3 rows hit at once (log [3], "
         "replayed), 2 rows try all three (log [2, 2, 1]); no op before the print (slices "
         "unused), resume [mul] for the hit, nothing for the miss")


# ============================================================ grad mode
def grad_mode_query(x):
    with torch.no_grad():
        y = x * 2 if torch.is_grad_enabled() else x - 1
    print("grad mode read")
    return y + torch.is_grad_enabled()


case("grad_mode_query", grad_mode_query, [lambda: A(T(3, seed=160))],
     graphs=2, breaks=1, tags=("no_grad", "print"),
     why="torch.is_grad_enabled() is the trace's own mode: False inside the with "
         "([sub], not [mul]), True after it | print | [add]")


# ============================================================ user classes
class _Acc:
    def __init__(self, x, scale=2):
        self.total = x * scale
        self.n = 1

    def add(self, t):
        self.total = self.total + t
        self.n += 1
        return self

    def __len__(self):
        return self.n


def user_object_across_break(x):
    acc = _Acc(x).add(x.relu())
    print("count", acc.n, bool(acc))
    acc.add(x)
    return acc.total / len(acc), acc.n


case("user_object_across_break", user_object_across_break, [lambda: A(T(3, seed=170))],
     graphs=2, breaks=1, tags=("user_class", "print"),
     why="_Acc(x) is object.__new__ then __init__ inlined; the instance crosses the print: "
         "rebuilt as object.__new__(_Acc) with total (a graph output) and n=2 | "
         "[mul, relu, add] | print | [add, div]")


@dataclasses.dataclass
class _Out:
    y: torch.Tensor
    k: int = 3
    extra: list = dataclasses.field(default_factory=list)


def dataclass_across_break(x):
    o = _Out(x.sin())
    o.k += 1
    o.extra.append(o.k)
    print("k", o.k, o.extra)
    return o.y * o.k + len(o.extra)


case("dataclass_across_break", dataclass_across_break, [lambda: A(T(3, seed=171))],
     graphs=2, breaks=1, tags=("user_class", "dataclass", "print"),
     why="the dataclass's exec'd __init__ is inlined (default_factory list); | [sin] | print | [mul, add]")


_Pair = collections.namedtuple("_Pair", ["a", "b"], defaults=(None,))


def namedtuple_across_break(x):
    p = _Pair(x + 1, b=x * 2)
    print("fields", p._fields, len(p))
    return p.a + p.b, p


case("namedtuple_across_break", namedtuple_across_break, [lambda: A(T(3, seed=172))],
     graphs=2, breaks=1, tags=("namedtuple", "print"),
     why="the named tuple's __new__ (exec'd, restricted builtins) is inlined; p crosses the "
         "print and is returned: rebuilt by tuple.__new__(_Pair, ...) | [add, mul] | print | [add]")


class _OutputBase(collections.OrderedDict):
    """transformers' ModelOutput in small: items and attributes kept in step
    by __setattr__/__setitem__ overrides that call dict's and object's
    through super(); indexing by position or name."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = self.__dict__.get(f.name)
            if v is not None:
                self[f.name] = v

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class _EncoderOutput(_OutputBase):
    hidden: torch.Tensor = None
    pooled: torch.Tensor = None
    attentions: tuple = None


def dict_subclass_output(x):
    out = _EncoderOutput(hidden=x.tanh(), attentions=(x.sigmoid(),))
    out.pooled = out[0].mean(0, keepdim=True)  # __setattr__ adds the item too
    first, n, has = out[2] + 1, len(out), "hidden" in out
    print("fields", list(out.keys()), n, has)
    return out, out.pooled * 2, first, out.attentions[0]


case("dict_subclass_output", dict_subclass_output, [lambda: A(T(4, 3, seed=174))],
     graphs=2, breaks=1, tags=("user_class", "dict_subclass", "dataclass", "print"),
     why="an OrderedDict dataclass is constructed in the trace (its exec'd __init__, "
         "__setattr__, __post_init__ and __setitem__ overrides inlined, super() reaching dict's "
         "and object's slots) and read by position; it crosses the print, rebuilt by "
         "OrderedDict.__new__ plus OrderedDict.__setitem__ and object.__setattr__ per entry | "
         "[tanh, sigmoid, mean, add] | print | [mul] on its attribute, read from the rebuilt object")


class _Settings(dict):
    def scaled(self, t):
        return t * self["scale"]


def dict_subclass_across_break(x):
    s = _Settings(scale=3, bias=x.cos())
    s["extra"] = s.get("missing", 1)
    s.tag, s.aux = "v1", x.exp()  # an attribute only the rebuilt object holds
    print("settings", sorted(s), s.tag)
    return s.scaled(x) + s["bias"] - s.aux, s


case("dict_subclass_across_break", dict_subclass_across_break, [lambda: A(T(3, seed=175))],
     graphs=2, breaks=1, tags=("user_class", "dict_subclass", "print"),
     why="a dict subclass made in the trace crosses the print (rebuilt with its items and its "
         "attributes, a graph output among them) and keeps its class's method | [cos, exp] | print | "
         "[mul, add, sub]")


class _IterDict(dict):
    def __iter__(self):
        return iter(sorted(super().keys()))


def dict_subclass_own_iter_breaks(x):
    d = _IterDict(b=x + 1, a=x * 2)
    return d["a"] - d["b"]


case("dict_subclass_own_iter_breaks", dict_subclass_own_iter_breaks, [lambda: A(T(3, seed=176))],
     graphs=2, breaks=1, tags=("user_class", "dict_subclass"),
     why="a dict subclass with its own __iter__ is not modelled (dict's C code would bypass it): "
         "[add, mul] | _IterDict(...) in Python | [sub]")


class _CustomNew:
    def __new__(cls, x):
        o = super().__new__(cls)
        o.x = x
        return o


def custom_new_breaks(x):
    y = x + 1
    c = _CustomNew(y)
    return c.x * 2


case("custom_new_breaks", custom_new_breaks, [lambda: A(T(3, seed=173))],
     graphs=2, breaks=1, tags=("user_class",),
     why="a class with its own __new__ is not constructed by the trace: [add] | _CustomNew(y) "
         "in Python | [mul] on c.x")


def collections_across_break(x):
    groups = collections.defaultdict(list)
    for i, name in enumerate(["a", "b", "a"]):
        groups[name].append(x * (i + 1))
    counts = collections.defaultdict(int, {"seen": 1})
    counts["a"] += len(groups["a"])
    window = collections.deque([x.sin(), x.cos()], maxlen=3)
    window.append(x.exp())
    window.appendleft(x.neg())  # drops exp(x): maxlen keeps the left three
    window.rotate(-1)
    print("groups", sorted(groups), dict(counts), len(window), window.maxlen)
    return sum(groups["a"]) + window[0] * counts["a"], groups, counts, window


case("collections_across_break", collections_across_break, [lambda: A(T(3, seed=177))],
     graphs=2, breaks=1, tags=("collections", "print"),
     why="a defaultdict(list), a defaultdict(int) and a deque with maxlen made in the trace "
         "(missing keys call the factory, appendleft trims the right end, rotate) cross the print, "
         "rebuilt as defaultdict(factory, {...}) and deque([...], maxlen) | [mul, mul, sin, cos, exp, neg] "
         "| print | [add, mul, add]")


# ============================================================ breaks inside grad-mode blocks
# The graph before the break, then the block entered again around the
# instruction Python runs, then a resume function that continues inside
# the block (as torch._dynamo does); the grad mode after each call is state.
def _grad_mode():
    return torch.is_grad_enabled()


def no_grad_block_print(x):
    with torch.no_grad():
        y = x + 1
        print("inside", y.requires_grad)
        y = y * 2
    return y, y.requires_grad, (x * 3).requires_grad


case("no_grad_block_print", no_grad_block_print, [lambda: A(T(3, seed=178, requires_grad=True))],
     graphs=2, breaks=1, tags=("grad_mode", "print"), state=_grad_mode,
     why="a print inside `with torch.no_grad()`: [set_grad_enabled(False), add] | no_grad entered again, "
         "print | [mul, no_grad's exit: set_grad_enabled(True), mul] in the resume function")


def nested_grad_blocks_print(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            print("inner", a.requires_grad, b.requires_grad)
            c = b + a
        d = c * 2
    return a, b, c, d, d.requires_grad


case("nested_grad_blocks_print", nested_grad_blocks_print, [lambda: A(T(3, seed=179, requires_grad=True))],
     graphs=2, breaks=1, tags=("grad_mode", "print"), state=_grad_mode,
     why="a print inside enable_grad inside no_grad: both blocks entered again from the modes they "
         "replaced, outermost first | [mul, mul] | print | [add, exit, mul, exit]")


def grad_block_branch(x):
    with torch.no_grad():
        y = x * 2
        if y.sum() > 0:
            y = y + 1
        else:
            y = y - 1
    return y * 3, y.requires_grad


case("grad_block_branch", grad_block_branch,
     [lambda: A(T(4, seed=181, offset=2.0, requires_grad=True)),
      lambda: A(T(4, seed=181, offset=-2.0, requires_grad=True))],
     graphs=3, breaks=1, tags=("grad_mode", "data_dependent"), state=_grad_mode,
     why="a branch on a tensor inside no_grad: both successors resume inside the block | [mul, sum, gt] "
         "| the jump | [add, exit, mul] or [sub, exit, mul]")


def set_grad_enabled_block_print(x, train):
    with torch.set_grad_enabled(train):
        y = x * 2
        print("grad mode", torch.is_grad_enabled())
        z = y + 1
    return z, z.requires_grad


case("set_grad_enabled_block_print", set_grad_enabled_block_print,
     [lambda: A(T(3, seed=182, requires_grad=True), False), lambda: A(T(3, seed=182, requires_grad=True), True)],
     graphs=4, breaks=1, tags=("grad_mode", "print"), state=_grad_mode,
     why="`with torch.set_grad_enabled(train)` (the mode set when it is made, restored at the exit): "
         "a print inside resumes inside the block, per value of train | [set_grad_enabled, mul] | print | "
         "[add, exit]")


# ---------------------------------------------------------------- the global random generator
def rng_state_between(x):
    y = torch.relu(x) + torch.rand(3)
    state = torch.get_rng_state()
    a = y * torch.rand(3)
    torch.set_rng_state(state)
    torch.manual_seed(7)
    return a + torch.rand(3)


case("rng_state_between", rng_state_between, [lambda: A(T(3, seed=183)), lambda: A(T(3, seed=184))],
     graphs=3, breaks=3, tags=("random",), reset=lambda: torch.manual_seed(0), state=lambda: torch.rand(2),
     why="torch.get_rng_state/set_rng_state/manual_seed each break at the user's call (their state moves "
         "through torch.Generator methods): random ops on either side draw eager's stream | "
         "[relu, rand, add] | get_rng_state | [rand, mul] | set_rng_state | (nothing) | manual_seed | [rand, add]")


# ---------------------------------------------------------------- yield from
def yield_from_delegation(x, k):
    def inner(n):
        for i in range(n):
            yield x * (i + 1)
        return n * k  # StopIteration's value: the result of `yield from`

    def outer(xs):
        made = [t + k for t in xs]  # 3.12 inlines this comprehension under a handler
        got = yield from inner(3)
        yield from made
        yield x * got

    return sum(outer([x, x * 2]))


case("yield_from_delegation", yield_from_delegation, [lambda: A(T(4, seed=185), 2), lambda: A(T(4, seed=186), 3)],
     graphs=2, breaks=0, tags=("generators",),
     why="a generator delegating with `yield from` (its return value included) is inlined like any generator; "
         "k is a constant, so the second call recompiles | [mul, mul, mul, add, add, mul, sum...]")


class _WithParameters(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.norm = torch.nn.LayerNorm(3)
        self.tied = torch.nn.Linear(3, 3)
        self.tied.weight = self.fc.weight  # named_parameters() lists it once (a memo set of tensors)

    def forward(self, x):
        # nn.Module.parameters() / named_parameters() are generators built on
        # `yield from` (nn.Module._named_members).
        first = next(self.parameters())
        count = sum(p.numel() for p in self.parameters())
        names = [n for n, _ in self.named_parameters()]
        modules = [n for n, _ in self.named_modules()]  # its memo: a set() holding modules
        return self.norm(self.fc(x.to(first.dtype))) * count, names, modules


_with_parameters = _WithParameters()


def module_parameters_in_forward(x):
    return _with_parameters(x)


case("module_parameters_in_forward", module_parameters_in_forward, [lambda: A(T(2, 3, seed=187))],
     graphs=1, breaks=0, tags=("generators", "modules"),
     why="next(self.parameters()), sum over them, named_parameters() and named_modules() are traced through "
         "nn.Module's generators (`yield from`, a memo set of modules) | [linear, layer_norm, mul]")


def layout_across_print(x):
    lay = x.layout
    print("layout", lay)
    return torch.zeros(x.shape, layout=lay, dtype=x.dtype) + x


case("layout_across_print", layout_across_print, [lambda: A(T(2, 3, seed=188))],
     graphs=1, breaks=1, tags=("print", "tensor_attributes"),
     why="x.layout (torch.strided) is an op argument, and a value held across the print, rebuilt as "
         "torch.strided by name | [zeros, add]")
