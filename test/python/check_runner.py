"""The loop the plain-script Python tests share: run each check (a function
that raises on failure), print ok/FAIL per check and the closing
'N passed, N failed' line, and give the exit status.

    sys.exit(check_runner.run(TESTS, sys.argv[1:]))   # names pick a subset
"""
import warnings


def run(tests, names=()):
    warnings.simplefilter("ignore")
    chosen = [t for t in tests if not names or t.__name__ in names]
    failed = 0
    for t in chosen:
        try:
            t()
            print(f"ok   {t.__name__}")
        except Exception as e:  # reported, counted
            failed += 1
            print(f"FAIL {t.__name__}: {type(e).__name__}: {e}")
    print(f"{len(chosen) - failed} passed, {failed} failed")
    return 1 if failed else 0
