"""Adversarial Python objects through the live shim: every run ends with
eager's result or eager's exception, never a signal, never a different answer.

Each object kind below overrides a protocol the translator reads (container
subclasses with their own __getitem__/__iter__/__len__/__eq__/__hash__,
__getattr__ and properties that raise or return odd types, descriptors,
metaclasses, recursive containers, tensor subclasses); each use reads it the
way model code does (index, iterate, len, attribute, truth, compare, key,
isinstance, call). Every (object, use, placement) triple runs eagerly and
optimized, twice each (the second call is the cached one), with the object
as an argument, a global, a closure cell and a module attribute.

    scripts/python test/python/adversarial_test.py [-v]
"""
import faulthandler
import math
import sys
import types
import warnings

import torch

import dynamo

faulthandler.enable()
warnings.simplefilter("ignore")


# ---------------------------------------------------------------- the objects
class ListItems(list):
    def __getitem__(self, i):
        return super().__getitem__(i) * 2


class ListIter(list):
    def __iter__(self):
        return iter(reversed(list(super().__iter__())))


class ListLen(list):
    def __len__(self):
        return 1


class DictItem(dict):
    def __getitem__(self, k):
        return super().get(k, torch.zeros(2)) + 1


class DictMissing(dict):
    def __missing__(self, k):
        return torch.full((2,), 3.0)


class TupleEq(tuple):
    def __eq__(self, other):
        return True

    __hash__ = tuple.__hash__


class StrWeird(str):
    def __eq__(self, other):
        return False

    def __hash__(self):
        return 7


class RaisingGetattr:
    def __getattr__(self, name):
        raise RuntimeError(f"no {name}")


class OddGetattr:
    def __getattr__(self, name):
        return torch.ones(2) if name.startswith("t") else name


class RaisingProperty:
    @property
    def value(self):
        raise ValueError("property raised")


class OddProperty:
    calls = 0

    @property
    def value(self):
        type(self).calls += 1
        return torch.ones(2) * type(self).calls


class Descriptor:
    def __get__(self, obj, owner):
        return torch.full((2,), 5.0) if obj is not None else self


class WithDescriptor:
    value = Descriptor()


class Meta(type):
    def __getattr__(cls, name):
        return torch.full((2,), 2.0)

    def __len__(cls):
        return 3


class WithMeta(metaclass=Meta):
    pass


class BadBool:
    def __bool__(self):
        raise TypeError("no truth")


class BadHash:
    def __hash__(self):
        raise TypeError("unhashable here")


class BadLen:
    def __len__(self):
        return -1


class Callable:
    def __call__(self, x):
        return x * 3


class Tensorish(torch.Tensor):
    pass


def recursive_list():
    r = [torch.ones(2)]
    r.append(r)
    return r


def recursive_dict():
    d = {"t": torch.ones(2)}
    d["self"] = d
    return d


OBJECTS = {
    "list_getitem": lambda: ListItems([torch.ones(2), torch.ones(2) * 2]),
    "list_iter": lambda: ListIter([torch.ones(2), torch.ones(2) * 2]),
    "list_len": lambda: ListLen([torch.ones(2), torch.ones(2) * 2]),
    "dict_getitem": lambda: DictItem(t=torch.ones(2)),
    "dict_missing": lambda: DictMissing(t=torch.ones(2)),
    "tuple_eq": lambda: TupleEq((torch.ones(2), 1)),
    "str_weird": lambda: StrWeird("t"),
    "raising_getattr": RaisingGetattr,
    "odd_getattr": OddGetattr,
    "raising_property": RaisingProperty,
    "odd_property": OddProperty,
    "descriptor": WithDescriptor,
    "metaclass": lambda: WithMeta,
    "bad_bool": BadBool,
    "bad_hash": BadHash,
    "bad_len": BadLen,
    "callable": Callable,
    "tensor_subclass": lambda: torch.ones(2).as_subclass(Tensorish),
    "recursive_list": recursive_list,
    "recursive_dict": recursive_dict,
}


# ---------------------------------------------------------------- the uses
def use_index(o, x):
    return x + o[0] if not isinstance(o[0], (int, str)) else x * 2


def use_key(o, x):
    return x + o["t"]


def use_iter(o, x):
    for v in o:
        if isinstance(v, torch.Tensor):
            x = x + v
    return x


def use_len(o, x):
    return x * len(o)


def use_attr(o, x):
    return x + o.value


def use_tattr(o, x):
    return x + o.tensor


def use_truth(o, x):
    return x + 1 if o else x - 1


def use_eq(o, x):
    return x + 1 if o == ("t", 1) else x - 1


def use_as_key(o, x):
    d = {o: x}
    return d[o] * 2


def use_isinstance(o, x):
    return x + 1 if isinstance(o, (list, dict, tuple, str)) else x - 1


def use_call(o, x):
    return o(x) + 1


def use_math(o, x):
    return x + math.fsum([1.0, 2.0]) + (o.sum() if isinstance(o, torch.Tensor) else 0)


def use_equal_keys(o, x):
    # Equal keys merge: 1, True and 1.0 are one key holding the last value.
    d = {1: x, True: x + 1, 1.0: x * 3, "k": o if isinstance(o, torch.Tensor) else 0, "k": 2}
    return d[1] + len(d) + d["k"]


USES = [use_equal_keys, use_index, use_key, use_iter, use_len, use_attr, use_tattr, use_truth, use_eq, use_as_key,
        use_isinstance, use_call, use_math]


# ---------------------------------------------------------------- placements
def as_argument(use, make):
    def fn(o, x):
        return use(o, x)
    return fn, lambda x: (make(), x)


def as_global(use, make):
    module = types.ModuleType("adversarial_globals")
    module.use = use
    module.__dict__["OBJ"] = make()
    exec("def fn(x):\n    return use(OBJ, x)\n", module.__dict__)
    return module.fn, lambda x: (x,)


def as_cell(use, make):
    obj = make()

    def fn(x):
        return use(obj, x)
    return fn, lambda x: (x,)


def as_module_attribute(use, make):
    holder = types.ModuleType("adversarial_holder")
    holder.obj = make()

    def fn(x):
        return use(holder.obj, x)
    return fn, lambda x: (x,)


PLACEMENTS = [as_argument, as_global, as_cell, as_module_attribute]


def outcome(fn, args):
    try:
        return ("value", fn(*args))
    except Exception as e:  # noqa: BLE001 - eager's exception is an answer too
        return ("raised", type(e))


def same(a, b):
    if a[0] != b[0]:
        return False
    if a[0] == "raised":
        return a[1] is b[1]
    x, y = a[1], b[1]
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return type(x) is type(y) and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
    return type(x) is type(y) and x == y


def main(verbose):
    failures, runs = [], 0
    for obj_name, make in OBJECTS.items():
        for use in USES:
            for place in PLACEMENTS:
                for call in range(2):
                    # Fresh objects, function and optimize() per run: eager
                    # and optimized see the same state (OddProperty counts).
                    OddProperty.calls = 0
                    fn, make_args = place(use, make)
                    x = torch.arange(2.0)
                    eager = outcome(fn, make_args(x))
                    OddProperty.calls = 0
                    fn, make_args = place(use, make)
                    opt = dynamo.optimize("eager")(fn)
                    for _ in range(call + 1):  # the second run answers from the cache
                        OddProperty.calls = 0
                        got = outcome(opt, make_args(x))
                    runs += 1
                    if not same(eager, got):
                        failures.append(f"{obj_name} / {use.__name__} / {place.__name__} / call {call + 1}: "
                                        f"eager {eager}, optimized {got}")
                    elif verbose:
                        print(f"ok {obj_name} / {use.__name__} / {place.__name__} / call {call + 1}")
    dynamo.reset()
    for f in failures:
        print("FAIL", f)
    print(f"{runs} runs ({len(OBJECTS)} objects x {len(USES)} uses x {len(PLACEMENTS)} placements x 2 calls): "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main("-v" in sys.argv))
