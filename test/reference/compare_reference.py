"""Compares libdynamo's captures of the corpus with torch._dynamo's
(dynamo_reference.py's JSON): per case, the multiset of operations in the
graph, by their last name component (torch.sin / Tensor.sin / sin all count as
"sin"), bookkeeping nodes aside.

    PYTHONPATH=build/python python3 test/reference/compare_reference.py REFERENCE.json PB_DIR
PB_DIR holds case_<index>.pb as test/capture writes them.
"""
import collections
import json
import os
import sys

from dynamo.loader import read_capture

# torch._dynamo keeps torch's API-usage telemetry call (nn.Module.__init__'s)
# as a node; it computes nothing.
IGNORED = {"getitem", "_set_grad_enabled", "size", "_log_api_usage_once"}
# The same operation spelled differently: torch._dynamo writes x.T as
# getattr(x, 'T') (2.11) or aten.numpy_T (2.14) where libdynamo writes the
# permute it is.
ALIASES = {"getattr.T": "permute", "getattr.mT": "transpose", "torch._ops.aten.numpy_T": "permute"}
# x.data is torch._C._autograd._get_data_attr(x) there, the detach() it is here.
LAST_ALIASES = {"_get_data_attr": "detach"}


def _name(target):
    if target in ALIASES:
        return ALIASES[target]
    last = target.split(".")[-1]
    if last.startswith("__") and last.endswith("__"):  # __eq__ is operator.eq
        last = last[2:-2]
    return LAST_ALIASES.get(last, last)


def ours(pb):
    capture = read_capture(pb)
    return collections.Counter(_name(n.target) for n in capture.graphs[0].nodes
                               if n.kind in (3, 4, 5) and _name(n.target) not in IGNORED)


def compare_case(pb, case):
    """Problems comparing one capture with torch._dynamo's record of it."""
    if "graphs" not in case:
        return [f"torch._dynamo failed on it: {case.get('error')}"]
    if case.get("break_count", 0) > 0:
        return [f"torch._dynamo broke the graph: {case.get('break_reasons')}"]
    a, b = ours(pb), theirs(case["graphs"])
    if a == b:
        return []
    return [f"operations differ: libdynamo-only {dict(a - b)}, torch._dynamo-only {dict(b - a)}"]


def theirs(graphs):
    return collections.Counter(_name(t) for g in graphs for _op, t in g if _name(t) not in IGNORED)


def main(reference, pb_dir):
    data = json.load(open(reference))
    same = differ = 0
    for case in data["cases"]:
        pb = os.path.join(pb_dir, f"case_{case['index']}.pb")
        if "graphs" not in case or not os.path.exists(pb):
            print(f"{case['target']}: no comparison ({case.get('error', 'no capture')})")
            continue
        problems = compare_case(pb, case)
        if not problems:
            same += 1
        else:
            differ += 1
            print(f"{case['target']}: {problems}")
    print(f"{same} cases with the same operations as torch._dynamo {data['torch']}, {differ} differ")


if __name__ == "__main__":
    main(*sys.argv[1:])
