"""The live API's costs, measured against eager PyTorch in the same run:
warm-call overhead (µs per call over eager) and first-call capture time for a
trivial two-tensor function and for torchvision's resnet18 (eval, no_grad)
under dynamo.optimize("eager"), and the "ts" backend's speedup over eager on
resnet18 inference. One table; no assertions (benchmarks are not tests).

    scripts/python bench/live_bench.py [--quick]
"""
import sys

import torch

import time
import timeit
import warnings

import torchvision

import dynamo

QUICK = "--quick" in sys.argv


def best_per_call(fns, number, repeat):
    """Seconds per call of each of fns: the minimum over `repeat` runs of
    `number` calls, the runs of the peers interleaved so that a busy machine
    slows them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], timeit.timeit(fn, number=number) / number)
    return best


def first_call(make, *args):
    """Seconds of the first call of a freshly optimized callable."""
    fn = make()
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def resnet18():
    torch.manual_seed(0)
    return torchvision.models.resnet18().eval()


def main():
    torch.set_num_threads(2)
    warnings.simplefilter("ignore")
    rows = []

    # A trivial function: the cost of the machinery itself.
    a, b = torch.randn(1), torch.randn(1)
    add = lambda a, b: a + b  # noqa: E731 - the function the benchmark is about
    number, repeat = (2000, 3) if QUICK else (20000, 7)
    capture = first_call(lambda: dynamo.optimize("eager")(add), a, b)
    opt_add = dynamo.optimize("eager")(add)
    opt_add(a, b)
    eager_s, opt_s = best_per_call([lambda: add(a, b), lambda: opt_add(a, b)], number, repeat)
    rows.append(("a + b, 1-element tensors", eager_s, opt_s, capture))

    # resnet18 inference at 224x224.
    model = resnet18()
    x = torch.randn(1, 3, 224, 224)
    number, repeat = (3, 2) if QUICK else (10, 5)
    with torch.no_grad():
        model(x)  # warm torch's own caches first
        capture = first_call(lambda: dynamo.optimize("eager")(model), x)
        opt_model = dynamo.optimize("eager")(model)
        opt_model(x)
        ts_compile = first_call(lambda: dynamo.optimize("ts")(model), x)
        ts_model = dynamo.optimize("ts")(model)
        for _ in range(3):  # the JIT's profiling runs
            ts_model(x)
        eager_r, opt_r, ts_r = best_per_call([lambda: model(x), lambda: opt_model(x), lambda: ts_model(x)],
                                             number, repeat)
        rows.append(("resnet18 eval 1x3x224x224", eager_r, opt_r, capture))

        # The machinery alone on resnet18's capture (its ~500 guards, the
        # wrapper, the rewritten code): a backend whose graph returns a
        # stored output, so no tensor work hides the cost.
        def stored_output(gm, example_inputs):
            out = gm(*example_inputs)
            return lambda *args: out

        machinery = dynamo.optimize(stored_output)(model)
        machinery(x)
        (machinery_r,) = best_per_call([lambda: machinery(x)], number * 100, repeat)
        ts_ok = torch.allclose(ts_model(x), model(x), rtol=1e-4, atol=1e-4)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU"
          f"{' (quick run)' if QUICK else ''}; min of {repeat} runs")
    print(f"{'case':28s} {'eager':>12s} {'optimize(eager)':>16s} {'overhead':>14s} {'first call':>12s}")
    for name, eager_t, opt_t, first in rows:
        print(f"{name:28s} {eager_t * 1e6:10.1f}us {opt_t * 1e6:14.1f}us {(opt_t - eager_t) * 1e6:+11.1f}us/call "
              f"{first * 1e3:9.1f}ms")
    print(f"{'resnet18, machinery only':28s} {'':12s} {machinery_r * 1e6:14.1f}us "
          f"{'(guards, wrapper, rewritten code; the graph returns a stored output)'}")
    print(f"{'resnet18 eval, ts backend':28s} {eager_r * 1e3:10.2f}ms {ts_r * 1e3:14.2f}ms "
          f"{'speedup':>8s} {eager_r / ts_r:4.2f}x {ts_compile * 1e3:9.1f}ms  (equal to eager: {ts_ok})")


if __name__ == "__main__":
    main()
