"""What the live runtime does, logged the way torch users set TORCH_LOGS:

    DYNAMO_LOGS="graph_code,guards,bytecode,recompiles,graph_breaks" python train.py
    dynamo.set_logs(graph_code=True, recompiles=True)     # from Python; replaces the set
    dynamo.set_logs("all")                                 # every artifact; set_logs() turns all off

Each artifact is a logger under "dynamo" ("dynamo.graph_code", ...) that
writes at INFO through Python's logging, so a program routes and filters
them as it does torch's:

  graph_code    the captured graph's Python code (torch.fx), per graph
  guards        the guards a capture holds under, one per line
  bytecode      ORIGINAL BYTECODE and MODIFIED BYTECODE of each captured frame
  recompiles    each recompile, with the guard that failed
  graph_breaks  each graph break: reason, file:line, source line and hint

DYNAMO_DUMP_DIR=DIR (or set_dump_dir(DIR)) writes, per captured frame, the
files a user reads and diffs after a run (depyf's dump folders are the model):

  DIR/0003_MyModel.forward.pb            the capture (dynamo-inspect reads it)
  DIR/0003_MyModel.forward.graph.py      each graph's FX code
  DIR/0003_MyModel.forward.bytecode.txt  ORIGINAL and MODIFIED BYTECODE
  DIR/0003_MyModel.forward.guards.txt    the guards, one per line, and the breaks

numbered in capture order, so two runs of the same program dump the same
names.

When artifacts are turned on here (or by DYNAMO_LOGS at import) and the
"dynamo" logger has no handler of the program's, one writing to stderr is
added, as TORCH_LOGS does. Nothing is formatted unless its artifact is on,
and nothing runs on a cached call: artifacts are emitted when a frame is
captured or recaptured.
"""
import logging
import os
import sys
import warnings

ARTIFACTS = ("graph_code", "guards", "bytecode", "recompiles", "graph_breaks")

_enabled = set()
_handler = None
_dump = {"dir": None, "count": 0}


def set_logs(*names, **flags):
    """Turns on exactly the artifacts named (positionally, or as name=True);
    "all" names every one. Unknown names raise ValueError listing the
    known ones."""
    wanted = set()
    for name in list(names) + [k for k, v in flags.items() if v]:
        if name == "all":
            wanted.update(ARTIFACTS)
        elif name in ARTIFACTS:
            wanted.add(name)
        else:
            raise ValueError(f"dynamo.set_logs: unknown artifact {name!r}; known: all, {', '.join(ARTIFACTS)}")
    for name in flags:
        if name != "all" and name not in ARTIFACTS:
            raise ValueError(f"dynamo.set_logs: unknown artifact {name!r}; known: all, {', '.join(ARTIFACTS)}")
    _enabled.clear()
    _enabled.update(wanted)
    _install_handler()


def enabled(artifact):
    return artifact in _enabled


def emit(artifact, message):
    """Logs message (a string, or a callable making one: only called when
    the artifact is on) under dynamo.<artifact>."""
    if artifact not in _enabled:
        return
    logging.getLogger(f"dynamo.{artifact}").info(message() if callable(message) else message)


def _install_handler():
    global _handler
    root = logging.getLogger("dynamo")
    if not _enabled:
        return
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    if _handler is None and not root.handlers:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        root.addHandler(_handler)
        root.propagate = False  # as torch's loggers: once, not again through the root logger


def set_dump_dir(path):
    """Dumps every capture made from now on into `path` (created if need
    be); None stops dumping. Numbering starts again at 0."""
    if path is not None:
        os.makedirs(path, exist_ok=True)
    _dump["dir"] = path
    _dump["count"] = 0


def dumping():
    return _dump["dir"] is not None


def dump_capture(qualname, capture_bytes, capture, graph_codes, guard_lines, break_lines):
    """Writes one capture's files (see the module's docstring)."""
    index = _dump["count"]
    _dump["count"] += 1
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in qualname)
    base = os.path.join(_dump["dir"], f"{index:04d}_{safe}")
    with open(base + ".pb", "wb") as f:
        f.write(capture_bytes)
    with open(base + ".graph.py", "w") as f:
        f.write("\n\n".join(graph_codes) if graph_codes else "# no graph\n")
    with open(base + ".bytecode.txt", "w") as f:
        f.write(f"ORIGINAL BYTECODE {qualname}\n{format_listing(capture.original_bytecode)}\n\n")
        if capture.rewritten_bytecode.instructions:
            f.write(f"MODIFIED BYTECODE {qualname}\n{format_listing(capture.rewritten_bytecode)}\n")
    with open(base + ".guards.txt", "w") as f:
        f.write("GUARDS\n" + "".join(f"  {g}\n" for g in guard_lines))
        f.write("GRAPH BREAKS\n" + "".join(f"  {b}\n" for b in break_lines))


def _from_environment():
    if os.environ.get("DYNAMO_DUMP_DIR"):
        try:
            set_dump_dir(os.environ["DYNAMO_DUMP_DIR"])
        except OSError as e:
            warnings.warn(f"DYNAMO_DUMP_DIR: cannot use {os.environ['DYNAMO_DUMP_DIR']!r}: {e}; not dumping")
    value = os.environ.get("DYNAMO_LOGS", "").strip()
    if not value:
        return
    names = [n.strip().lstrip("+") for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n != "all" and n not in ARTIFACTS]
    if unknown:
        warnings.warn(f"DYNAMO_LOGS: unknown artifact(s) {', '.join(unknown)} ignored; known: all, "
                      f"{', '.join(ARTIFACTS)}")
    set_logs(*[n for n in names if n not in unknown])


def format_listing(listing):
    """A BytecodeListing (the capture's original or rewritten bytecode) as
    dis prints it: line, offset, opname, argument."""
    lines = []
    for i in listing.instructions:
        line = f"{i.line:>5}" if i.line else "     "
        arg = f"{i.arg:<5}" if i.arg or i.argrepr else ""
        text = f"{line} {i.offset:>6} {i.opname:<28}{arg}"
        if i.argrepr:
            text += f" ({i.argrepr})"
        lines.append(text.rstrip())
    return "\n".join(lines)


_from_environment()
