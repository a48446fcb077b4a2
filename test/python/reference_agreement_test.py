"""dynamo and torch._dynamo on the graph-break corpus (break_cases.py) in one
process, case by case, interleaved: both must equal eager (results, printed
output, mutated arguments, state), and their graph and break counts are
compared. Every case where the counts differ must be listed, with its reason,
in test/reference/agreement_differences.json; a difference not listed fails,
and so does a listed one that no longer differs (the list is kept true).

    scripts/python test/python/reference_agreement_test.py            # the test
    scripts/python test/python/reference_agreement_test.py --write    # regenerate
        test/reference/breaks_dynamo_<torch version>.json (torch._dynamo's record)

Ours runs as dynamo.optimize does (the PEP 523 evaluator: callees are their
own frames); torch._dynamo through torch._dynamo.optimize with a counting
backend. Breaks: distinct break sites for both.
"""
import json
import os
import sys
import warnings

import torch
import torch._dynamo
from torch._dynamo.utils import counters

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE_DIR = os.path.join(HERE, "..", "reference")
sys.path.insert(0, HERE)
import break_cases  # noqa: E402
import break_check  # noqa: E402

import live_runner  # noqa: E402


class Theirs:
    def __init__(self, fn):
        torch._dynamo.reset()
        counters.clear()
        self.graphs = 0

        def backend(gm, example_inputs):
            self.graphs += 1
            return gm.forward
        self.fn = torch._dynamo.optimize(backend)(fn)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def stats(self):
        return {"graphs": self.graphs, "breaks": len(counters["graph_break"])}


def run(case, runner):
    made = []

    def compile_fn(fn):
        made.append(runner(fn))
        return made[-1]
    problems = break_check.run_cases([case], compile_fn)
    wrong = [p for p in problems if ": graphs: expected" not in p and ": breaks: expected" not in p]
    return (made[0].stats() if made else {}), wrong


def main(argv):
    warnings.simplefilter("ignore")
    record = {"torch": torch.__version__, "python": sys.version.split()[0], "cases": {}}
    ours_wrong, rows = [], {}
    for case in break_cases.CASES:
        theirs_stats, theirs_wrong = run(case, Theirs)
        ours_stats, wrong = run(case, live_runner.frame_evaluator)
        record["cases"][case.name] = {**theirs_stats, "equal_to_eager": not theirs_wrong,
                                      "problems": theirs_wrong[:3]}
        ours_wrong += wrong
        rows[case.name] = (ours_stats, theirs_stats)
    n = len(rows)
    graphs_same = [k for k, (o, t) in rows.items() if o.get("graphs") == t.get("graphs")]
    both_same = [k for k, (o, t) in rows.items() if o == t]
    theirs_eq = sum(1 for c in record["cases"].values() if c["equal_to_eager"])
    ours_eq = n - len({w.split(":")[0] for w in ours_wrong})
    print(f"break corpus, {n} cases, torch {torch.__version__}: ours equal to eager on {ours_eq}/{n}, "
          f"torch._dynamo on {theirs_eq}/{n}; graph counts agree on {len(graphs_same)}/{n} "
          f"({100 * len(graphs_same) / n:.0f} %), graph and break counts on {len(both_same)}/{n}")
    if "--write" in argv:
        path = os.path.join(REFERENCE_DIR, f"breaks_dynamo_{torch.__version__.split('+')[0]}.json")
        with open(path, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote", os.path.relpath(path))
    with open(os.path.join(REFERENCE_DIR, "agreement_differences.json")) as f:
        listed = json.load(f)["differences"]
    failures = [f"ours differs from eager: {w}" for w in ours_wrong]
    for name, (o, t) in rows.items():
        if o.get("graphs") != t.get("graphs") and name not in listed:
            failures.append(f"{name}: graphs ours {o.get('graphs')} vs torch._dynamo {t.get('graphs')}, "
                            f"not in agreement_differences.json")
        if o.get("graphs") == t.get("graphs") and name in listed:
            failures.append(f"{name}: listed as a difference but the graph counts now agree "
                            f"({o.get('graphs')}); remove it from agreement_differences.json")
    for name in sorted(set(listed) - set(rows)):
        failures.append(f"{name}: listed in agreement_differences.json but not a corpus case")
    if "--show" in argv:
        for name, (o, t) in rows.items():
            if o.get("graphs") != t.get("graphs"):
                print(f"  {name}: ours {o} torch {t}")
    for f in failures:
        print("FAIL", f)
    print(f"{n - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
