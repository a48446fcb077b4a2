#!/usr/bin/env bash
# TorchDynamo's own tests (../shared/peer-tests: test_functions, test_misc,
# test_global from PyTorch) against torch._dynamo and against this build, with
# the project's venv; then the gate: a test that crashes the process or gives
# a wrong result under dynamo fails the run, unless test/peer/known_failures.txt
# lists it (each line there is an open defect, to be fixed and removed).
#
#   scripts/peer_tests.sh            # both modes (~4 min on 2 cores)
#   scripts/peer_tests.sh project    # reuse the last reference run
# PEER_WORK (default build/peer-tests) holds summary.txt and results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${DYNAMO_SHARED:-../shared}
if [ ! -x "$shared/peer-tests/run.sh" ]; then
  echo "peer_tests: no $shared/peer-tests/run.sh (the shared folder beside the checkout)" >&2; exit 1
fi
venv=${DYNAMO_VENV:-$HOME/.cache/libdynamo/venv-3.11}
export PEER_WORK=${PEER_WORK:-$PWD/build/peer-tests}
# pytest takes the checkout's pyproject.toml (pip install .) for its config
# file and the checkout for its rootdir, which would make the harness's test
# ids relative to the checkout rather than to the tests' folder.
export PYTEST_ADDOPTS="--rootdir=$PEER_WORK/tests ${PYTEST_ADDOPTS:-}"
mode=${1:-both}
if [ "$mode" = project ] && [ ! -d "$PEER_WORK/reference" ]; then mode=both; fi
"$shared/peer-tests/run.sh" "$venv/bin/python" build/python "$mode"
"$venv/bin/python" - "$PEER_WORK/results.json" test/peer/known_failures.txt <<'PY'
import json, sys
results, known_path = sys.argv[1:]
known = {l.split("#")[0].strip() for l in open(known_path)} - {""}
bad = [t for t in json.load(open(results))["tests"]
       if t["project"] == "crash" or t.get("category") in ("crash", "coexistence crash", "wrong result")]
new = [t for t in bad if t["id"] not in known]
fixed = sorted(known - {t["id"] for t in bad})
for t in bad:
    print(f"{'KNOWN' if t['id'] in known else 'NEW  '} {t.get('category', t['project'])}: {t['id']}")
if fixed:
    print("fixed, remove from test/peer/known_failures.txt:", *fixed, sep="\n  ")
print(f"peer gate: {len(new)} new crash or wrong result, {len(bad) - len(new)} known")
# A run in which the tests did not run at all (pytest refusing its
# arguments, a harness failure) has no crash and no wrong result either:
# it must not pass the gate.
tests = json.load(open(results))["tests"]
for mode in ("reference", "project"):
    ran = [t for t in tests if t[mode] in ("pass", "fail", "pass-fallback", "crash")]
    if len(ran) < len(tests) // 2:
        print(f"peer gate: only {len(ran)} of {len(tests)} tests ran in {mode} mode: the run itself failed")
        sys.exit(1)
sys.exit(1 if new else 0)
PY
