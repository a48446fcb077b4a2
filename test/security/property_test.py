"""Property: whatever strings a capture holds, loading it and calling the
GraphModule runs nothing but the graph's operations.

Hypothesis builds random small captures (placeholders, attributes, calls on
allowlisted and hostile targets, constants, lists and dicts) and puts hostile
or random text into every string field; loading each capture through
dynamo.loader and calling the result must either work or raise, while an audit
hook sees no process, no file written, no code unmarshalled and no new module
imported, and no payload's marker file appears.

Run by CTest as: python property_test.py (with the build's python/ on PYTHONPATH).
"""
import atexit
import os
import shutil
import sys
import tempfile
import unittest

import torch
from hypothesis import HealthCheck, event, given, settings, strategies as st

from dynamo import dynamo_ir_pb2 as ir
from dynamo import loader, trust

MARKER_DIR = tempfile.mkdtemp(prefix="dynamo_property_")
atexit.register(shutil.rmtree, MARKER_DIR, ignore_errors=True)
MARKER = os.path.join(MARKER_DIR, "PWNED")
with open(os.path.join(MARKER_DIR, "w.weights"), "wb") as _f:
    _f.write(bytes(64))  # the side file a capture may name (24 bytes of it)

_FORBIDDEN = {"os.system", "subprocess.Popen", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn",
              "os.spawn", "os.kill", "os.remove", "os.rename", "os.unlink", "os.mkdir",
              "socket.connect", "ctypes.dlopen", "marshal.loads", "marshal.load", "pty.spawn"}
_armed = False
_seen = []


def _from_import_system():
    """marshal.loads called by the import system (a .pyc) is an import, which
    the sys.modules check reports; any other caller is a reader's."""
    f = sys._getframe(2)
    return f is not None and f.f_code.co_filename.startswith("<frozen importlib")


def _hook(event, args):
    if not _armed:
        return
    if event == "os.mkdir" and os.path.basename(str(args[0])).startswith("torchinductor_"):
        return  # torch's own cache directory, made by torch whatever the capture says
    if event in _FORBIDDEN:
        if not (event.startswith("marshal.") and _from_import_system()):
            _seen.append(event)
    elif event == "open":
        mode = args[1]
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(mode, int) and mode & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)):
            _seen.append(f"open {args[0]!r} for writing")


sys.addaudithook(_hook)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import warm_up  # noqa: E402

warm_up.warm_up()

PAYLOADS = [
    f"__import__('os').system('touch {MARKER}')",
    f'a=__import__("os").system("touch {MARKER}")',
    f'x")or __import__("os").system("touch {MARKER}")or getattr(self,"x',
    f"x;__import__('os').system('touch {MARKER}')",
    f"x\n__import__('os').system('touch {MARKER}')",
    "torch.os.system", "os.system", "builtins.exec", "torch.__builtins__", "__class__",
    "x.__class__.__init__.__globals__", "../../etc/passwd", "/etc/passwd", "self", "import",
]
SAFE_TARGETS = ["torch.add", "torch.mul", "torch.relu", "torch.nn.functional.relu", "operator.add",
                "operator.getitem", "torch.sin"]
METHODS = ["Tensor.relu", "Tensor.add", "Tensor.sum", "Tensor.view"]

hostile = st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=40),
                    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True))


def sometimes_hostile(draw, good):
    """Mostly a good value, hostile one time in 25: a capture has some twenty
    string fields, so many captures load and run while each field is still
    attacked on its own."""
    return draw(hostile) if draw(st.integers(0, 24)) == 0 else draw(good)


@st.composite
def name(draw):
    return sometimes_hostile(draw, st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True))


@st.composite
def path(draw):
    return sometimes_hostile(draw, st.from_regex(r"[a-z]{1,5}(\.[a-z]{1,5}){0,2}", fullmatch=True))


@st.composite
def either(draw, good):
    return sometimes_hostile(draw, good)


def _meta(pb, sizes):
    pb.dtype = ir.DTYPE_FLOAT32
    for s in sizes:
        pb.sizes.add().size = s
    pb.device.type = "cpu"
    pb.device.index = -1


@st.composite
def constant(draw, refs, depth=0):
    kind = draw(st.sampled_from(["node", "int", "float", "str", "none", "list", "dict", "layout",
                                 "device", "dtype"] if depth < 3 else ["int", "str", "node"]))
    a = ir.Argument()
    if kind == "node":
        a.node = draw(either(st.sampled_from(refs))) if refs else draw(name())
    elif kind == "int":
        a.int_value = draw(st.integers(-3, 3))
    elif kind == "float":
        a.float_value = draw(st.floats(allow_nan=False, width=32))
    elif kind == "str":
        a.string_value = draw(either(st.sampled_from(["relu", "mean", ""])))
    elif kind == "none":
        a.none.SetInParent()
    elif kind == "list":
        for _ in range(draw(st.integers(0, 3))):
            a.list.items.add().CopyFrom(draw(constant(refs, depth + 1)))
        a.list.is_tuple = draw(st.booleans())
    elif kind == "dict":
        for _ in range(draw(st.integers(0, 2))):
            a.dict.keys.append(draw(either(st.sampled_from(["a", "logits"]))))
            a.dict.values.add().CopyFrom(draw(constant(refs, depth + 1)))
    elif kind == "layout":
        a.layout = draw(either(st.just("strided")))
    elif kind == "device":
        a.device.type = draw(either(st.just("cpu")))
        a.device.index = -1
    else:
        a.dtype = ir.DTYPE_FLOAT32
    return a


@st.composite
def captures(draw):
    c = ir.Capture()
    c.ir_version = ir.IR_VERSION_CURRENT
    c.function_name = draw(either(st.just("forward")))
    c.source_file = draw(hostile)
    g = c.graphs.add()
    g.name = draw(either(st.just("graph_0")))
    refs = []
    for _ in range(draw(st.integers(1, 2))):
        n = g.nodes.add()
        n.name = draw(either(st.just(f"v{len(g.nodes)}")))
        n.kind = ir.Node.PLACEHOLDER
        n.target = draw(either(st.just(n.name)))
        _meta(n.meta.tensor, [2, 3])
        g.inputs.append(n.name)
        refs.append(n.name)
    if draw(st.booleans()):
        n = g.nodes.add()
        n.name = draw(either(st.just(f"v{len(g.nodes)}")))
        n.kind = ir.Node.GET_ATTR
        n.target = draw(path())
        _meta(n.meta.tensor, [2, 3])
        a = c.attributes.add()
        a.target = n.target if draw(st.booleans()) else draw(path())
        a.source = draw(hostile)
        _meta(a.meta, [2, 3])
        if draw(st.booleans()):
            a.data = bytes(24)
        else:
            a.external.path = draw(either(st.just("w.weights")))
            a.external.offset = draw(st.sampled_from([0, 0, 8, 8, -1, 60]))
            a.external.length = draw(st.sampled_from([24, 24, 24, -1, 1 << 40]))
        refs.append(n.name)
    for _ in range(draw(st.integers(1, 4))):
        n = g.nodes.add()
        n.name = draw(either(st.just(f"v{len(g.nodes)}")))
        n.kind = draw(st.sampled_from([ir.Node.CALL_FUNCTION] * 5 + [ir.Node.CALL_METHOD] * 4
                                            + [ir.Node.CALL_MODULE]))
        if n.kind == ir.Node.CALL_FUNCTION:
            n.target = draw(either(st.sampled_from(SAFE_TARGETS)))
        elif n.kind == ir.Node.CALL_METHOD:
            n.target = draw(either(st.sampled_from(METHODS)))
        else:
            n.target = draw(path())
        n.args.add().node = draw(st.sampled_from(refs))
        for _ in range(draw(st.integers(0, 2))):
            n.args.add().CopyFrom(draw(constant(refs)))
        for _ in range(draw(st.integers(0, 2))):
            k = n.kwargs.add()
            k.name = draw(name())
            k.value.CopyFrom(draw(constant(refs)))
        _meta(n.meta.tensor, [2, 3])
        n.location.text = draw(either(st.just("y = x + 1")))
        refs.append(n.name)
    out = g.nodes.add()
    out.name = draw(either(st.just("output")))
    out.kind = ir.Node.OUTPUT
    out.target = "output"
    out.args.add().node = refs[-1]
    return c


class NothingButTheGraph(unittest.TestCase):
    @settings(max_examples=int(os.environ.get("DYNAMO_PROPERTY_EXAMPLES", "400")), deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(captures())
    def test_loading_and_calling_runs_only_graph_ops(self, capture):
        global _armed
        modules = set(sys.modules)
        del _seen[:]
        x = torch.randn(2, 3)
        _armed = True
        try:
            try:
                gm = loader.to_graph_module(capture, base_dir=MARKER_DIR)
            except loader.CaptureError as e:
                self.assertNotIn("\n", str(e))
                event("refused: " + str(e).split(":")[-1].strip()[:40])
                return
            event("loaded")
            gm.code
            nargs = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
            try:
                gm(*[x] * nargs)
            except Exception:
                pass  # a graph of known ops may still fail on these values
        finally:
            _armed = False
            self.assertEqual(_seen, [])
            self.assertEqual(sorted(set(sys.modules) - modules), [])
            self.assertFalse(os.path.exists(MARKER), "a payload ran")


if __name__ == "__main__":
    unittest.main()
