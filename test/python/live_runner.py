"""compile_fn for break_check.py: each case through one dynamo.runtime.Runtime
with the eager backend (the graphs are torch.fx GraphModules run as they are)."""
import torch

from dynamo.runtime import Runtime


class Compiled:
    def __init__(self, fn, backend=None):
        # A module runs its forward (hooks are not part of these cases).
        self.fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
        self.runtime = Runtime(backend)

    def __call__(self, *args, **kwargs):
        return self.runtime.call(self.fn, args, kwargs)

    def stats(self):
        s = self.runtime.stats()
        return {"graphs": s["graphs"], "breaks": s["breaks"]}


def compile_fn(fn):
    return Compiled(fn)
