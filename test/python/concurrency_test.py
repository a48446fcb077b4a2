"""Optimized callables called from eight threads at once, in a fresh
process: the first captures of every thread race (each trace starts by
looking up process-wide tables made by imports, which release the GIL),
then recompiles (new shapes, new constants), graph breaks and
dynamo.reset() happen while other threads run compiled code and torch
releases the GIL inside its kernels. Every result must equal eager's, no
thread may raise, and the process may neither crash nor hang: a hang is
reported with every thread's stack and a non-zero exit (faulthandler).

Before the fix this test found, a function-local static whose initializer
imported torch._numpy deadlocked the first captures: one thread held the
static's lock with the GIL released inside the import, another held the
GIL waiting on the lock (lib/python/lazy.h).

    scripts/python test/python/concurrency_test.py [--threads 8] [--calls 300]
"""
import argparse
import faulthandler
import random
import sys
import threading
import warnings

import torch

import dynamo

HANG_SECONDS = 300


def data_dependent(x, n):
    y = torch.relu(x) * n
    if y.sum() > 0:  # a graph break: resumes in either branch
        y = y + 1
    return y.mean(dim=0) + x.shape[0]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 256)
        self.b = torch.nn.Linear(256, 64)

    def forward(self, x):
        h = torch.relu(self.a(x))  # kernels big enough to run with the GIL released
        print_free = len(x)
        return self.b(h) * print_free


def with_numpy(x):
    # The graph runs torch's tanh for NumPy's: they may differ in the last
    # bit, and + 1 near tanh = -1 leaves that bit at 1e-7 absolute.
    import numpy as np
    return torch.from_numpy(np.tanh(x.numpy())) + 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    warnings.simplefilter("ignore")  # recompile warnings, one per new shape
    torch.set_num_threads(1)
    dynamo.config.cache_size_limit = 64
    torch.manual_seed(0)
    net = Net().eval()
    programs = [
        (dynamo.optimize("eager")(data_dependent), data_dependent, lambda r, x: (x, r.choice([1, 2, 3]))),
        (dynamo.optimize("eager")(net), net, lambda r, x: (torch.cat([x] * 8, dim=1),)),
        (dynamo.optimize("eager")(with_numpy), with_numpy, lambda r, x: (x,)),
    ]
    start = threading.Barrier(args.threads)
    failures = []
    resets = [0]

    def worker(seed):
        rnd = random.Random(seed)
        try:
            start.wait()  # every thread's first capture at once
            for i in range(args.calls):
                x = torch.randn(rnd.choice([1, 2, 3, 4, 5]), 8,
                                generator=torch.Generator().manual_seed(seed * 100000 + i))
                compiled, eager, make_args = programs[(seed + i) % len(programs)]
                call_args = make_args(rnd, x)
                with torch.no_grad():
                    got, want = compiled(*call_args), eager(*call_args)
                if got.dtype != want.dtype or got.shape != want.shape or not torch.allclose(got, want, atol=1e-6):
                    failures.append(f"thread {seed} call {i}: {eager.__name__ if hasattr(eager, '__name__') else 'Net'}"
                                    f"{[tuple(a.shape) if torch.is_tensor(a) else a for a in call_args]} "
                                    f"differs from eager: {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
                                    f"{'' if got.shape != want.shape else f', max error {(got - want).abs().max():.3g}'}")
                if rnd.random() < 0.005:
                    dynamo.reset()
                    resets[0] += 1
        except BaseException as e:  # noqa: BLE001 - every failure is reported
            failures.append(f"thread {seed}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    faulthandler.cancel_dump_traceback_later()
    for f in failures[:20]:
        print(f)
    print(f"{args.threads} threads x {args.calls} calls, {resets[0]} resets: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
