"""Runs the capture corpus through the reference system, torch._dynamo (the
venv's torch, in this process), and records what it captures: graphs,
breaks and the ops of each graph. capture_test calls record() in its own
run and compares every case with it (compare_reference.py); main() writes
the record for people to read and diff:

    scripts/python test/reference/dynamo_reference.py test/reference/dynamo_2.14.1.json
"""
import json
import os
import sys

import torch
import torch._dynamo

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import capture_cases  # noqa: E402


def _resolve(target):
    obj = capture_cases
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _targets(gm):
    out = []
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            t = node.target
            name = t if isinstance(t, str) else f"{getattr(t, '__module__', '')}.{getattr(t, '__name__', t)}"
            if name.endswith(".getattr") and len(node.args) > 1:
                name = f"getattr.{node.args[1]}"  # x.T is getattr(x, 'T') in dynamo's graphs
            out.append([node.op, name])
    return out


def record():
    """{"torch": version, "python": version, "cases": [...]}: torch._dynamo's
    graphs, breaks and errors on every case of capture_cases.CASES."""
    results = []
    for index, (target, _inputs, make) in enumerate(capture_cases.CASES):
        fn = _resolve(target)
        args = make()
        kwargs = {}
        if hasattr(args, "kwargs"):
            args, kwargs = args.args, args.kwargs
        torch._dynamo.reset()
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(_targets(gm))
            return gm.forward

        entry = {"index": index, "target": target}
        try:
            explanation = torch._dynamo.explain(fn)(*args, **kwargs)
            entry["graph_count"] = explanation.graph_count
            entry["break_count"] = explanation.graph_break_count
            entry["break_reasons"] = [str(r.reason) for r in explanation.break_reasons]
            torch._dynamo.reset()
            torch.compile(fn, backend=backend)(*args, **kwargs)
            entry["graphs"] = graphs
        except Exception as e:  # noqa: BLE001 -- recorded, not hidden
            entry["error"] = f"{type(e).__name__}: {e}"[:500]
        results.append(entry)
    torch._dynamo.reset()
    return {"torch": torch.__version__, "python": sys.version.split()[0], "cases": results}


def main(out_path):
    data = record()
    for entry in data["cases"]:
        print(entry["index"], entry["target"], entry.get("graph_count"), entry.get("break_count"),
              entry.get("error", ""))
    with open(out_path, "w") as f:
        json.dump(data, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
