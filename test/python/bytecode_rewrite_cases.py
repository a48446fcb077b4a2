"""Functions whose rewritten code objects must behave exactly like the
originals (test/bytecode/rewrite_test.cc), and the checker that runs both.

Each case is (function, [argument tuples]); the arguments are deep-copied per
call so mutations of arguments are compared too.
"""
import contextlib
import copy
import dis
import types


def loops(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        if i > 40:
            break
        total += i
    k = 0
    while k < n:
        k += 2
        total -= 1
    return total, k


def nested_loops(rows):
    out = []
    for r in rows:
        acc = 0
        for v in r:
            if v < 0:
                break
            acc += v
        else:
            acc = -acc
        out.append(acc)
    return out


def try_except_finally(xs):
    log = []
    for x in xs:
        try:
            log.append(10 // x)
        except ZeroDivisionError as e:
            log.append(str(e))
            continue
        except (TypeError, ValueError):
            log.append("type")
        else:
            log.append("else")
        finally:
            log.append("finally")
    try:
        raise KeyError(len(log))
    except KeyError as e:
        log.append(e.args[0])
    return log


def reraises(x):
    try:
        try:
            return 1 / x
        finally:
            x = x + 1
    except ZeroDivisionError:
        raise RuntimeError("wrapped") from None


class Suppress:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(("exit", exc[0].__name__ if exc[0] else None))
        return True


@contextlib.contextmanager
def tagged(log, tag):
    log.append(f"<{tag}>")
    try:
        yield tag.upper()
    finally:
        log.append(f"</{tag}>")


def with_blocks(xs):
    log = []
    for x in xs:
        with Suppress(log):
            if x < 0:
                raise ValueError(x)
            log.append(x)
        with tagged(log, "b") as t, tagged(log, "i"):
            log.append(t * x)
    return log


def comprehensions(n):
    squares = [i * i for i in range(n) if i % 2]
    table = {i: [j for j in range(i)] for i in range(n)}
    letters = {chr(97 + i % 26) for i in range(n)}
    gen = sum(x for x in squares if x > 3)
    return squares, table, sorted(letters), gen


def closures(n):
    count = 0

    def bump(k=1):
        nonlocal count
        count += k
        return count

    adders = [lambda x, i=i: x + i for i in range(n)]
    for f in adders:
        bump(f(1))
    return count, [f(10) for f in adders]


def generator(n):
    try:
        for i in range(n):
            sent = yield i * 2
            if sent:
                yield sent
    finally:
        pass


def exception_groups(k):
    seen = []
    try:
        raise ExceptionGroup("eg", [ValueError(k), TypeError(k + 1)])
    except* ValueError as e:
        seen.append(("value", len(e.exceptions)))
    except* TypeError as e:
        seen.append(("type", len(e.exceptions)))
    return seen


def matching(value):
    match value:
        case {"kind": "point", "x": x, "y": y}:
            return ("point", x + y)
        case [first, *rest] if len(rest) > 1:
            return ("seq", first, len(rest))
        case int(n) | float(n):
            return ("num", n * 2)
        case str() as s:
            return ("str", f"{s!r:>10}")
        case _:
            return ("other",)


def calls(*args, **kwargs):
    def inner(a, b=2, *rest, c, d=4, **more):
        return a, b, rest, c, d, sorted(more.items())
    return inner(*args, c=3, **kwargs), inner(1, c=0), f"{len(args):03d}|{kwargs!s}"


def mutates(items, mapping):
    items.append(len(items))
    items.sort(reverse=True)
    mapping["n"] = mapping.get("n", 0) + 1
    del items[0]
    return items[:2]


def long_branches(x):
    # Large enough that the compiler itself emits EXTENDED_ARG.
    r = 0
    if x == 0: r = sum(range(10)) + len("a" * 3) + abs(-x) + max(1, 2) + min(3, 4)
    elif x == 1: r = sum(range(11)) + len("b" * 3) + abs(-x) + max(2, 2) + min(3, 5)
    elif x == 2: r = sum(range(12)) + len("c" * 3) + abs(-x) + max(3, 2) + min(3, 6)
    elif x == 3: r = sum(range(13)) + len("d" * 3) + abs(-x) + max(4, 2) + min(3, 7)
    elif x == 4: r = sum(range(14)) + len("e" * 3) + abs(-x) + max(5, 2) + min(3, 8)
    elif x == 5: r = sum(range(15)) + len("f" * 3) + abs(-x) + max(6, 2) + min(3, 9)
    elif x == 6: r = sum(range(16)) + len("g" * 3) + abs(-x) + max(7, 2) + min(3, 10)
    elif x == 7: r = sum(range(17)) + len("h" * 3) + abs(-x) + max(8, 2) + min(3, 11)
    else: r = -1
    for i in range(3):
        r += i
    return r


CASES = [
    (loops, [(0,), (7,), (100,)]),
    (nested_loops, [([[1, 2, -1, 5], [3, 4], []],)]),
    (try_except_finally, [([1, 0, "x", 5],), ([],)]),
    (reraises, [(2,), (0,)]),
    (with_blocks, [([1, -2, 3],)]),
    (comprehensions, [(0,), (9,)]),
    (closures, [(0,), (4,)]),
    (generator, [(5,)]),
    (exception_groups, [(1,)]),
    (matching, [({"kind": "point", "x": 1, "y": 2},), ([1, 2, 3],), ([1],), (3,), (2.5,),
                ("hey",), (None,)]),
    (calls, [(1,), (1, 2, 3, 4), (5,)]),
    (mutates, [([3, 1, 2], {}), ([], {"n": 4})]),
    (long_branches, [(0,), (5,), (9,)]),
]


def _outcome(fn, args):
    args = copy.deepcopy(args)
    try:
        result = fn(*args)
        if isinstance(result, types.GeneratorType):
            values = [next(result)]
            try:
                values.append(result.send("ping"))
                values.extend(result)
            except StopIteration:
                pass
            result = values
        return ("ok", repr(result), repr(args))
    except Exception as e:  # noqa: BLE001 -- the exception is part of the outcome
        cause = type(e.__cause__).__name__ if e.__cause__ else None
        return ("raised", type(e).__name__, str(e), cause, repr(args))


def check(fn, new_code, arg_sets):
    """Runs fn and a copy of it with new_code on every argument set; returns a
    list of problems (empty when the rewritten code behaves identically and
    passes CPython's own readers)."""
    problems = []
    try:
        list(dis.get_instructions(new_code))
        list(new_code.co_lines())
        list(new_code.co_positions())
        dis._parse_exception_table(new_code)
    except Exception as e:  # noqa: BLE001
        problems.append(f"{fn.__name__}: CPython cannot read the code: {e!r}")
        return problems
    clone = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__,
                               fn.__closure__)
    clone.__kwdefaults__ = fn.__kwdefaults__
    for args in arg_sets:
        # Twice each: the second run sees the specialised (quickened) code.
        for _ in range(2):
            want, got = _outcome(fn, args), _outcome(clone, args)
            if want != got:
                problems.append(f"{fn.__name__}{args!r}: eager {want!r} != rewritten {got!r}")
                break
    return problems
