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


def _from_environment():
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
