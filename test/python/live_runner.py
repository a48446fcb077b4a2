"""compile_fn for break_check.py: each case through one dynamo.runtime.Runtime
with the eager backend (the graphs are torch.fx GraphModules run as they are)."""
import torch

from dynamo.runtime import Runtime


class Compiled:
    def __init__(self, fn, backend=None, evaluate_frames=False):
        # A module runs its forward (hooks are not part of these cases).
        # The plain runner: the called function and its resume functions
        # are captured, what they call runs in Python (the corpus' counts
        # are for this; under the frame evaluator callees are captured too).
        self.fn = fn.forward if isinstance(fn, torch.nn.Module) else fn
        # evaluate_frames=True: the PEP 523 evaluator, as dynamo.optimize runs.
        self.runtime = Runtime(backend, evaluate_frames=evaluate_frames)

    def __call__(self, *args, **kwargs):
        return self.runtime.call(self.fn, args, kwargs)

    def stats(self):
        s = self.runtime.stats()
        return {"graphs": s["graphs"], "breaks": s["breaks"]}


def compile_fn(fn):
    return Compiled(fn)


def frame_evaluator(fn):
    """compile_fn under the frame evaluator (callees are their own frames)."""
    return Compiled(fn, evaluate_frames=True)
