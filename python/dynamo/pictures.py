"""Pictures of captures: every graph of a capture and the breaks between them,
as Graphviz DOT or drawn by Graphviz's `dot` — the picture dynamo-inspect
--dot/--svg draws (one renderer, lib/capture's FormatDot, behind both).

    dynamo.to_dot("model.pb")                   # a saved capture, as DOT text
    dynamo.render("model.pb", "model.svg")      # drawn: .svg, .png, .pdf (or .dot, the text)
    out = dynamo.explain(f)(x)
    out.render("f.svg")                         # what one live call captured, breaks included

A capture is a path (.pb, .pbtxt, .json), a dynamo_ir_pb2.Capture, or a list
of them (a live call's captures: its frame and each resume function), drawn
in order as one picture.
"""
import os
import secrets
import shutil
import subprocess

from dynamo import dynamo_ir_pb2 as ir
from dynamo.loader import CaptureError, read_capture

# What each file suffix is drawn as: None is the DOT text itself.
_FORMATS = {".dot": None, ".gv": None, ".svg": "svg", ".png": "png", ".pdf": "pdf"}


def merge(captures):
    """One Capture holding every graph and graph break of `captures`, in
    order; its function name and location are the first one's."""
    captures = list(captures)
    if not captures:
        raise ValueError("no captures to draw")
    merged = ir.Capture()
    merged.CopyFrom(captures[0])
    del merged.graphs[:]
    del merged.graph_breaks[:]
    for c in captures:
        for g in c.graphs:
            graph = merged.graphs.add()
            graph.CopyFrom(g)
            if len(captures) > 1 and c.function_name:
                graph.name = f"{c.function_name}: {g.name}"
        merged.graph_breaks.extend(c.graph_breaks)
    return merged


def _capture(what):
    if isinstance(what, ir.Capture):
        return what
    if isinstance(what, (str, os.PathLike)):
        return read_capture(os.fspath(what))
    if isinstance(what, (list, tuple)) and all(isinstance(c, ir.Capture) for c in what):
        return merge(what)
    raise TypeError(f"expected a capture path, a dynamo_ir_pb2.Capture or a list of them, not {type(what).__name__}")


def to_dot(capture):
    """The capture's graphs and breaks as Graphviz DOT text."""
    from dynamo import _C
    return _C.capture_dot(_capture(capture).SerializeToString())


def draw(dot_text, fmt="svg"):
    """DOT text drawn by Graphviz's `dot` as `fmt` (svg, png, pdf): bytes."""
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("drawing a capture needs Graphviz's dot on PATH (Debian: apt install graphviz)")
    done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, check=False)
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"dot -T{fmt} failed: {reason[0] if reason else f'exit {done.returncode}'}")
    return done.stdout


def render(capture, path):
    """Writes the capture's picture to `path`, drawn as its suffix says
    (.svg, .png, .pdf; .dot or .gv: the DOT text). The file appears whole or
    not at all. Returns the path."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in _FORMATS:
        raise ValueError(f"{path}: cannot tell what to draw from the suffix {suffix or '(none)'}; "
                         f"use one of {', '.join(_FORMATS)}")
    dot_text = to_dot(capture)
    fmt = _FORMATS[suffix]
    data = dot_text.encode() if fmt is None else draw(dot_text, fmt)
    # A fresh name beside the target ("x": never an existing file), so the
    # file gets the umask's mode and os.replace stays on one file system.
    folder, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


__all__ = ["CaptureError", "draw", "merge", "render", "to_dot"]
