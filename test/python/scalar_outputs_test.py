"""Numbers read from tensors kept in the graph (issue 15's capture_scalar_outputs;
issue 22's item/tolist tests): Tensor.item(), tolist() and int()/float() of a
one-element tensor under nopython=True (fullgraph) or config.capture_scalar_outputs.

- CAPTURED: each function over three inputs with different values: one
  capture, the number read inside the graph (an item/tolist node), every
  result equal to eager in value and Python type.
- NEEDS_VALUE: every use that needs the number's value (a branch, a
  comparison, a size, an index, a dict key, str(), range(), ...): with
  breaks allowed, a graph break and eager's result; under nopython=True,
  dynamo.Unsupported naming the use, never a guessed value or a crash.
- OFF: without the switch, item() breaks the graph as before.
- RAISES: item() of a tensor with two elements raises what eager raises
  (under nopython, dynamo.TorchRuntimeError: the op fails on the traced inputs).
- BACKENDS: aot_eager and inductor compile a graph holding item()/tolist().
- OFFLINE: dynamo._C.capture (dynamo-export) keeps item() in the graph with
  scalar metadata; the loaded graph equals eager.

    scripts/python test/python/scalar_outputs_test.py [-v]
"""
import math
import os
import sys
import tempfile
import warnings

import torch

import dynamo
from dynamo import _C
from dynamo import dynamo_ir_pb2 as ir
from dynamo.loader import to_graph_module

warnings.simplefilter("ignore")
VERBOSE = "-v" in sys.argv
FAILURES = []


def fail(name, message):
    FAILURES.append(f"{name}: {message}")
    print(f"FAIL {name}: {message}")


def same(a, b):
    """Equal in value and in Python type, through containers."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            torch.allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
    return a == b


class Counter:
    """A backend that counts graphs and keeps the last one."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm


def reads(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_method" and n.target in ("item", "tolist")]


def helper(v, k):
    return v * k + 1


# (name, function, inputs per call): each call's inputs have other values.
F = torch.tensor
CAPTURED = [
    ("max_int_item", lambda x: torch.max(x).int().item(),
     [(F([[10.6, 11.7, -2.2]]),), (F([[1.0, 60.3, 3.0]]),), (F([[-4.0, -3.5, -9.0]]),)]),
    ("float_arithmetic", lambda x, y: (y * x.sum().item() + x.sum().item() / 2, -x.sum().item(),
                                       abs(x.sum().item()), x.sum().item() ** 2, x.mean().item() // 0.5,
                                       x.mean().item() % 0.25),
     [(torch.randn(4), torch.randn(4)) for _ in range(3)]),
    ("int_arithmetic", lambda x: (lambda n: (n * 3 - 1, n // 2, n % 5, -n, abs(n), ~n, n & 3, n | 8, n ^ 5,
                                             n / 4, n ** 2, n ** True, n + 0.5, n * True))(x.sum().item()),
     [(F([3, 4]),), (F([-7, 2]),), (F([10, 21]),)]),
    ("bool_item", lambda x: (lambda b: (b & True, b | False, b ^ True, b + b, -b, int(b), float(b)))(
        (x > 0).all().item()),
     [(F([1.0, 2.0]),), (F([1.0, -2.0]),), (F([3.0, 4.0]),)]),
    ("int_and_float_of_tensors", lambda x, i, b: (float(x + 1), int(x * 3), int(i), float(i), int(b), float(b),
                                                  float(x.half()), int(x.to(torch.uint8))),
     [(F([1.25]), F([7]), F([True])), (F([-3.75]), F([-2]), F([False])), (F([100.5]), F([0]), F([True]))]),
    ("int_of_negative_float_item", lambda x: (int(x.item()), int(-x.item()), float(x.int().item())),
     [(F(2.7),), (F(-2.7),), (F(0.2),)]),
    ("tolist_0d", lambda x: [x.tolist() * 4], [(F(42),), (F(-3),), (F(0),)]),
    ("tolist_1d_iterated", lambda x: [i * 4 for i in x.tolist()], [(F([2, 1]),), (F([5, -6]),), (F([0, 9]),)]),
    ("tolist_kd_rows", lambda x: [row * 2 for row in x.tolist()],
     [(F([[[2, 1], [2, 1]], [[3, 4], [5, 6]]]),), (F([[[0, 0], [1, 1]], [[7, 7], [8, 8]]]),),
      (F([[[9, 1], [2, 3]], [[4, 5], [6, 7]]]),)]),
    ("tolist_elements", lambda x: (lambda l: (l[0][1] + l[1][0], l[1][1] * 0.5, len(l), l[-1]))(x.tolist()),
     [(torch.randn(2, 2),) for _ in range(3)]),
    ("into_pointwise_ops", lambda x: (lambda s: (x * s, torch.clamp(x, max=s), x.add(s, alpha=2), torch.pow(x, s),
                                                 x.masked_fill(x > 0, s), torch.full((2, 3), s),
                                                 x.new_full((3,), s), s - x))(x.max().item()),
     [(torch.randn(5),) for _ in range(3)]),
    ("int_into_int_tensor_op", lambda x: (lambda n: (x + n, x * n, torch.full((2,), n), x // (abs(n) + 1)))(
        x.sum().item()),
     [(F([1, 2, 3]),), (F([-5, 2, 1]),), (F([7, 7, 7]),)]),
    ("into_tensor_data", lambda x: (torch.tensor([x.sum().item(), 1.0]), torch.tensor(x.max().item()),
                                    torch.tensor([[int(x.min().item())], [2]], dtype=torch.float64)),
     [(torch.randn(3),) for _ in range(3)]),
    ("in_containers", lambda x: {"s": x.sum().item(), "l": [x.max().item(), (x.min().item(),)]},
     [(torch.randn(3),) for _ in range(3)]),
    ("through_inlined_call", lambda x: helper(x.sum().item(), 3) + helper(x.max().item(), 0.5),
     [(torch.randn(3),) for _ in range(3)]),
    ("sum_of_list", lambda x: sum(x.tolist()) * 2, [(torch.randn(4),) for _ in range(3)]),
    # One key: the dict is built without comparing it (a second key would
    # need its value, and break).
    ("dict_keyed_by_number", lambda x: {x.max().int().item(): x + 1},
     [(F([1.0, 2.0]),), (F([5.0, -1.0]),), (F([0.0, 0.5]),)]),
    ("isinstance_of_number", lambda x: (lambda s, n: (isinstance(s, float), isinstance(n, int), isinstance(n, float),
                                                      s, n))(x.item(), x.int().item()),
     [(F(1.5),), (F(2.5),), (F(-1.0),)]),
]


def needs_value_cases():
    def branch(x):
        if x.sum().item() > 0:
            return x + 1
        return x - 1

    def equality(x):
        return x.max().int().item() == 1, x * 2

    def truth(x):
        return (x * 3 if x.sum().item() else x), bool(x.max().item())

    def not_(x):
        return not x.sum().item(), x + 1

    def range_of(x):
        return [i for i in range(x.max().int().item())], x

    def list_index(x):
        return [10, 20, 30][x.max().int().item()], x * 2

    def dict_keys_that_may_be_equal(x):
        return {x.max().int().item(): 1, 2: 3}, x  # one entry when the number is 2

    def text(x):
        return str(x.sum().item()), f"{x.sum().item():.3f}", x

    def size(x):
        return torch.ones(x.max().int().item()), x.expand(x.max().int().item(), 3)

    def tensor_index(x):
        return x[x.max().int().item()]

    def math_floor(x):
        return math.floor(x.sum().item()), round(x.sum().item(), 2), x

    def min_of(x):
        return min(x.sum().item(), 0.5), max(x.tolist())

    def method_of(x):
        return x.sum().item().is_integer(), x.sum().item().real

    def membership(x):
        return x.max().int().item() in (1, 2), x

    def two_scalars(x):
        return x[0].item() < x[1].item(), x.int()[0].item() ** x.int()[1].item()

    def int_power_of_int(x):
        return 2 ** x.max().int().item()

    def type_and_hash(x):
        return type(x.sum().item()) is float, hash(x.max().int().item())

    def split_sizes(x, i):
        a, b = i.tolist()
        return x.split([a, b])

    # (name, function, inputs): inputs valid in eager for every case.
    return [(f.__name__, f, (F([1.0, 2.0, 0.5]),)) for f in
            (branch, equality, truth, not_, range_of, list_index, dict_keys_that_may_be_equal, text, size, tensor_index,
             math_floor, min_of, method_of, membership, two_scalars, int_power_of_int, type_and_hash)] + \
        [("split_sizes", split_sizes, (torch.randn(9), F([3, 6])))]


def run_captured():
    for mode in ("nopython", "config"):
        for name, fn, calls in CAPTURED:
            label = f"captured/{mode}/{name}"
            counter = Counter()
            dynamo.reset()
            dynamo.config.capture_scalar_outputs = mode == "config"
            try:
                compiled = dynamo.optimize(counter, nopython=mode == "nopython")(fn)
                for args in calls:
                    want = fn(*args)
                    got = compiled(*args)
                    if not same(want, got):
                        fail(label, f"eager {want!r} != compiled {got!r}")
                        break
            except Exception as e:  # noqa: BLE001
                fail(label, f"{type(e).__name__}: {str(e)[:300]}")
                continue
            finally:
                dynamo.config.capture_scalar_outputs = False
            if len(counter.graphs) != 1:
                fail(label, f"{len(counter.graphs)} graphs over {len(calls)} calls (want 1)")
            elif not reads(counter.graphs[0]):
                fail(label, "the graph reads no number (no item/tolist node)")
            elif VERBOSE:
                print(f"ok {label}: {reads(counter.graphs[0])}")


def run_needs_value():
    for name, fn, args in needs_value_cases():
        label = f"needs_value/{name}"
        want = fn(*args)
        dynamo.reset()
        dynamo.config.capture_scalar_outputs = True
        try:
            explanation = dynamo.explain(fn)(*args)
            got = dynamo.optimize("eager")(fn)(*args)
        except Exception as e:  # noqa: BLE001
            fail(label, f"with breaks allowed: {type(e).__name__}: {str(e)[:300]}")
            continue
        finally:
            dynamo.config.capture_scalar_outputs = False
        if not same(want, got):
            fail(label, f"eager {want!r} != compiled {got!r}")
        if explanation.graph_break_count < 1:
            fail(label, "no graph break where the value is needed")
        dynamo.reset()
        try:
            dynamo.optimize("eager", nopython=True)(fn)(*args)
            fail(label, "nopython=True ran without the value it needs")
        except dynamo.Unsupported as e:
            if VERBOSE:
                print(f"ok {label}: {str(e).splitlines()[0][:160]}")
        except Exception as e:  # noqa: BLE001
            fail(label, f"nopython=True raised {type(e).__name__} (want dynamo.Unsupported): {str(e)[:200]}")


def run_off_and_raises():
    def fn(x):
        return (x + 1).sum().item() * 2

    x = torch.randn(4)
    dynamo.reset()
    explanation = dynamo.explain(fn)(x)
    if explanation.graph_break_count != 1:
        fail("off", f"{explanation.graph_break_count} breaks without capture_scalar_outputs (want 1)")
    if not same(fn(x), dynamo.optimize("eager")(fn)(x)):
        fail("off", "not equal to eager")

    def two(x):
        return x.item()

    for nopython in (True, False):
        compiled = dynamo.optimize("eager", nopython=nopython)(two)
        dynamo.reset()
        dynamo.config.capture_scalar_outputs = True
        try:
            compiled(torch.randn(2))
            fail("raises", "item() of two elements returned")
        except dynamo.TorchRuntimeError:
            if not nopython:  # with breaks allowed Python runs it: eager's own error
                fail("raises", "TorchRuntimeError with breaks allowed")
        except (RuntimeError, ValueError) as e:
            try:
                two(torch.randn(2))
            except Exception as eager:  # noqa: BLE001
                if type(eager) is not type(e):
                    fail("raises", f"{type(e).__name__} where eager raises {type(eager).__name__}")
        finally:
            dynamo.config.capture_scalar_outputs = False


def run_backends():
    def fn(x, y):
        s = x.sum().item()
        first, second = x.tolist()[:2]
        return y * s + s / 2 + first - second

    for backend in ("aot_eager", "inductor"):
        dynamo.reset()
        try:
            compiled = dynamo.optimize(backend, nopython=True)(fn)
            for _ in range(2):
                x, y = torch.randn(3), torch.randn(3)
                if not same(fn(x, y), compiled(x, y)):
                    fail(f"backend/{backend}", "not equal to eager")
        except Exception as e:  # noqa: BLE001
            fail(f"backend/{backend}", f"{type(e).__name__}: {str(e)[:300]}")


SCRIPT = """
import torch

def scaled(x, y):
    s = x.abs().max().item()
    return y / s + s, s
"""


def run_offline():
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "scaled.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        capture = ir.Capture.FromString(_C.capture(script, "scaled", ["x=f32[4]", "y=f32[4]"]))
        items = [n for n in capture.graphs[0].nodes if n.target == "Tensor.item"]
        if len(items) != 1 or items[0].meta.WhichOneof("kind") != "scalar" or \
                items[0].meta.scalar.type != ir.ScalarMeta.FLOAT:
            fail("offline", f"no Tensor.item node with float scalar metadata: {items}")
            return
        gm = to_graph_module(capture)
        sys.path.insert(0, d)
        try:
            import scaled as module
        finally:
            sys.path.remove(d)
        for _ in range(3):
            x, y = torch.randn(4), torch.randn(4)
            want = module.scaled(x, y)
            got = gm(x, y)
            if not same(list(want), list(got)):
                fail("offline", f"eager {want!r} != loaded graph {got!r}")


def main():
    run_captured()
    run_needs_value()
    run_off_and_raises()
    run_backends()
    run_offline()
    if FAILURES:
        print(f"{len(FAILURES)} failure(s)")
        sys.exit(1)
    print(f"scalar_outputs_test: {len(CAPTURED) * 2} captured, {len(needs_value_cases())} needing the value, "
          "off, raises, 2 backends, offline: all passed")


if __name__ == "__main__":
    main()
