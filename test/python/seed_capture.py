"""The shared seed corpus (../shared/corpus/seed_cases.py, read in place and
not copied into the project) as targets for the offline capture test.

ENTRIES: (target, example-inputs function, case name, make_inputs); each
target is "seed_cases.<fn>" or a module built here, each example-inputs
function materialises one of the case's argument sets.
"""
import os
import sys

SEED_DIR = os.environ.get("DYNAMO_SEED_CORPUS") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "corpus"))
sys.path.insert(0, SEED_DIR)
import seed_cases  # noqa: E402

# Cases whose code needs a graph break (the corpus README's table): offline
# export must refuse them with a located message. seed_from_numpy may either
# break or capture (both are correct per the README); a wrong result is not.
MUST_BREAK = {"seed_data_dependent", "seed_three_graphs", "seed_print_breaks", "seed_scipy_dct"}
MAY_BREAK = {"seed_from_numpy"}

ENTRIES = []


def _maker(call):
    return lambda: tuple(seed_cases.materialize(s) for s in call)


for _case in seed_cases.CASES:
    for _i, _call in enumerate(_case["calls"]):
        _name = f"inputs_{_case['name']}_{_i}"
        globals()[_name] = _maker(_call)
        ENTRIES.append((f"seed_cases.{_case['name']}", _name, _case["name"], globals()[_name]))

for _mname, (_cls, _calls) in seed_cases.MODULES.items():
    globals()[_mname] = seed_cases.build_module(_cls)
    for _i, _call in enumerate(_calls):
        _name = f"inputs_{_mname}_{_i}"
        globals()[_name] = _maker(_call)
        ENTRIES.append((f"{_mname}.forward", _name, _mname, globals()[_name]))
