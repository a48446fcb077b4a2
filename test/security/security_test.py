"""The trust model (README, "Trust model") tried as an attacker would: a
capture file is data, never code, and the tools never report a success they
did not have.

Each finding of the security issue has a test here. Hostile captures are
loaded through every reader (dynamo.loader.load, to_graph_module,
load_program, read_capture, dynamo-inspect) while an audit hook records every
process, exec of a file, write and import, and the payloads would each leave a
marker file: a pass means a one-line error and no side effect.

Run by CTest as: python security_test.py PATH/TO/dynamo-inspect PATH/TO/dynamo-export
(with the build's python/ directory on PYTHONPATH).
"""
import contextlib
import marshal
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import types
import unittest

import torch

from dynamo import dynamo_ir_pb2 as ir
from dynamo import loader, trust
from dynamo.loader import CaptureError

INSPECT = None
EXPORT = None
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MLP = os.path.join(REPO, "examples", "mlp.py")
BREAKS = os.path.join(REPO, "examples", "breaks.py")


# ---------------------------------------------------------------------------
# Side-effect detection: an audit hook (installed once; hooks cannot be
# removed) records what a reader must never do while it is armed.
_FORBIDDEN_EVENTS = {
    "os.system", "subprocess.Popen", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn",
    "os.spawn", "os.startfile", "os.kill", "os.remove", "os.rename", "os.unlink", "os.rmdir",
    "os.mkdir", "shutil.rmtree", "socket.connect", "socket.bind", "ctypes.dlopen",
    "ctypes.call_function", "webbrowser.open", "urllib.Request", "pty.spawn",
    "marshal.loads", "marshal.load",
}


class _Audit:
    armed = False
    events = []
    allow_marshal = False


def _from_import_system():
    """marshal.loads called by the import system (a .pyc) is an import, which
    the sys.modules check reports; any other caller is a reader's."""
    f = sys._getframe(2)
    return f is not None and f.f_code.co_filename.startswith("<frozen importlib")


def _hook(event, args):
    if not _Audit.armed:
        return
    if event == "os.mkdir" and os.path.basename(str(args[0])).startswith("torchinductor_"):
        return  # torch's own cache directory, made by torch whatever the capture says
    if event in _FORBIDDEN_EVENTS:
        if event.startswith("marshal.") and (_Audit.allow_marshal or _from_import_system()):
            return
        _Audit.events.append((event, repr(args)[:200]))
    elif event == "open":
        path, mode = args[0], args[1]
        writing = isinstance(mode, str) and any(c in mode for c in "wax+")
        if isinstance(mode, int):
            writing = bool(mode & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if writing:
            _Audit.events.append((event, repr(args)[:200]))


sys.addaudithook(_hook)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import warm_up  # noqa: E402

warm_up.warm_up()


@contextlib.contextmanager
def watched(test, marker_dir, allow_marshal=False):
    """Asserts that the block ran no process, wrote no file, imported no new
    module and left no marker file in marker_dir."""
    modules = set(sys.modules)
    before = set(os.listdir(marker_dir))
    _Audit.events = []
    _Audit.allow_marshal = allow_marshal
    _Audit.armed = True
    try:
        yield
    finally:
        _Audit.armed = False
        events = list(_Audit.events)
        new_modules = sorted(set(sys.modules) - modules)
        after = set(os.listdir(marker_dir))
        test.assertEqual(events, [], "a reader did something a capture must never make it do")
        test.assertEqual(new_modules, [], "a reader imported modules")
        test.assertEqual(sorted(after - before), [], "a payload ran (marker files appeared)")


def payloads(marker):
    """Strings that run `touch marker` if any reader pastes them into code,
    evaluates them or resolves them as attribute paths."""
    cmd = f"touch {marker}"
    return [
        f"__import__('os').system({cmd!r})",
        f'a=__import__("os").system("{cmd}")',
        f'x")or __import__("os").system("{cmd}")or getattr(self,"x',
        f"x;__import__('os').system({cmd!r})",
        f"x\n__import__('os').system({cmd!r})\n",
        f"relu(x) or __import__('os').system({cmd!r}) or x.relu",
        "torch.os.system", "os.system", "builtins.eval", "torch.__builtins__", "torch._C.os",
        "__class__", "x.__class__.__init__.__globals__", "..", "../../../etc/passwd", "/etc/passwd",
        "", " ", "1x", "import", "self", "\x1b[2J", "a" * 5000,
    ]


# ---------------------------------------------------------------------------
# A small valid capture, built here (no export needed), and ways to spoil it.

def tensor_meta(pb, sizes=(2, 3)):
    pb.dtype = ir.DTYPE_FLOAT32
    for s in sizes:
        pb.sizes.add().size = s
    pb.device.type = "cpu"
    pb.device.index = -1


def base_capture():
    c = ir.Capture()
    c.ir_version = ir.IR_VERSION_CURRENT
    c.function_name = "forward"
    c.source_file = "model.py"
    g = c.graphs.add()
    g.name = "graph_0"
    x = g.nodes.add()
    x.name, x.kind, x.target = "x", ir.Node.PLACEHOLDER, "x"
    tensor_meta(x.meta.tensor)
    g.inputs.append("x")
    w = g.nodes.add()
    w.name, w.kind, w.target = "w", ir.Node.GET_ATTR, "layer.weight"
    tensor_meta(w.meta.tensor)
    a = c.attributes.add()
    a.target, a.source = "layer.weight", "L['self'].layer.weight"
    tensor_meta(a.meta)
    a.data = torch.ones(2, 3).numpy().tobytes()
    add = g.nodes.add()
    add.name, add.kind, add.target = "add", ir.Node.CALL_FUNCTION, "torch.add"
    add.args.add().node = "x"
    add.args.add().node = "w"
    k = add.kwargs.add()
    k.name = "alpha"
    k.value.int_value = 2
    tensor_meta(add.meta.tensor)
    relu = g.nodes.add()
    relu.name, relu.kind, relu.target = "relu", ir.Node.CALL_METHOD, "Tensor.relu"
    relu.args.add().node = "add"
    tensor_meta(relu.meta.tensor)
    out = g.nodes.add()
    out.name, out.kind, out.target = "output", ir.Node.OUTPUT, "output"
    out.args.add().node = "relu"
    g.outputs.add().node = "relu"
    return c


def node(c, name):
    return next(n for n in c.graphs[0].nodes if n.name == name)


def rename_node(c, old, new):
    """Renames a node and every reference to it."""
    def fix(arg):
        which = arg.WhichOneof("value")
        if which == "node" and arg.node == old:
            arg.node = new
        elif which == "list":
            for a in arg.list.items:
                fix(a)
    g = c.graphs[0]
    for n in g.nodes:
        if n.name == old:
            n.name = new
            if n.kind == ir.Node.PLACEHOLDER:
                n.target = new
        for a in n.args:
            fix(a)
        for k in n.kwargs:
            fix(k.value)
    for a in g.outputs:
        fix(a)
    for i, name in enumerate(g.inputs):
        if name == old:
            g.inputs[i] = new


def hostile_variants(marker):
    """(what, capture) pairs: each string field of the IR that a reader
    consumes, set to each payload."""
    out = []
    for p in payloads(marker):
        c = base_capture(); node(c, "add").target = p; out.append((f"call target {p!r}", c))
        c = base_capture(); node(c, "relu").target = "Tensor." + p; out.append((f"method {p!r}", c))
        c = base_capture(); node(c, "add").kwargs[0].name = p; out.append((f"kwarg name {p!r}", c))
        c = base_capture(); rename_node(c, "add", p); out.append((f"node name {p!r}", c))
        c = base_capture(); rename_node(c, "x", p); out.append((f"placeholder {p!r}", c))
        c = base_capture(); node(c, "w").target = p; c.attributes[0].target = p
        out.append((f"attribute path {p!r}", c))
        c = base_capture(); c.graphs[0].name = p; out.append((f"graph name {p!r}", c))
        c = base_capture(); c.function_name = p; out.append((f"function name {p!r}", c))
        c = base_capture(); a = node(c, "add").kwargs.add(); a.name = "out"; a.value.layout = p
        out.append((f"layout {p!r}", c))
        c = base_capture(); a = node(c, "add").kwargs.add(); a.name = "device"; a.value.device.type = p
        out.append((f"device {p!r}", c))
        c = base_capture(); a = c.attributes[0]; a.ClearField("data")
        a.external.path, a.external.offset, a.external.length = p, 0, 24
        out.append((f"external path {p!r}", c))
        c = base_capture(); d = node(c, "add").kwargs.add(); d.name = "alpha2"
        d.value.dict.keys.append(p); d.value.dict.values.add().int_value = 1
        out.append((f"dict key {p!r}", c))
    return out


class Scratch:
    def __init__(self, test):
        self._dir = tempfile.TemporaryDirectory(prefix="dynamo_security_")
        test.addCleanup(self._dir.cleanup)
        self.dir = self._dir.name

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text, mode="w"):
        with open(self.path(name), mode) as f:
            f.write(textwrap.dedent(text) if isinstance(text, str) else text)
        return self.path(name)


def one_line(result):
    return result.stderr.strip().splitlines()


class CaptureIsData(unittest.TestCase):
    """Findings 1-2 (targets, names) and the other string fields."""

    def setUp(self):
        self.scratch = Scratch(self)
        self.marker = self.scratch.path("PWNED")
        self.x = torch.randn(2, 3)

    def load_and_call(self, capture):
        """Everything a user does with a capture: read it from disk in every
        format, build the GraphModule, print its code, call it."""
        from google.protobuf import json_format, text_format
        results = []
        for ext, data in (("pb", capture.SerializeToString()),
                          ("pbtxt", text_format.MessageToString(capture).encode()),
                          ("json", json_format.MessageToJson(capture).encode())):
            path = self.scratch.path(f"c.{ext}")
            _Audit.armed = False
            with open(path, "wb") as f:
                f.write(data)
            with watched(self, self.scratch.dir):
                try:
                    gm, _ = loader.load(path)
                except CaptureError as e:
                    results.append(str(e))
                    continue
                gm.code
                try:
                    gm(self.x)
                except Exception:  # noqa: BLE001 -- known ops may fail on these values
                    pass
                results.append(None)
        return results

    def test_valid_base_capture_runs(self):
        with watched(self, self.scratch.dir):
            gm = loader.to_graph_module(base_capture())
            got = gm(self.x)
        self.assertTrue(torch.equal(got, torch.relu(self.x + 2 * torch.ones(2, 3))))

    def test_hostile_call_target_is_refused(self):
        c = base_capture()
        n = node(c, "add")
        n.target = "torch.os.system"
        del n.args[:]
        n.args.add().string_value = f"touch {self.marker}"
        del n.kwargs[:]
        errors = self.load_and_call(c)
        for e in errors:
            self.assertIsNotNone(e, "torch.os.system was resolved")
            self.assertIn("node add", e)
            self.assertIn("torch.os.system", e)
            self.assertNotIn("\n", e)

    def test_targets_outside_the_allowlist(self):
        for target in ("torch.os.system", "torch.load", "torch.hub.load", "torch.save",
                       "operator.attrgetter", "operator.methodcaller", "math.os",
                       "torch.nn.functional.torch.os.system", "torch._C._set_grad_enabled.__self__",
                       "torch.Tensor.register_hook", "builtins.exec"):
            c = base_capture()
            node(c, "add").target = target
            with watched(self, self.scratch.dir), self.assertRaises(CaptureError) as e:
                loader.to_graph_module(c)
            self.assertIn(f"node add: call target '{target}'", str(e.exception))

    def test_targets_of_nodes_inferred_on_meta(self):
        """A node flagged inferred_on_meta names a torch operator by the rule of
        lib/trace/meta_fallback.h: one fixed namespace, one identifier, and
        an ATen binding there; file and print bindings, Python functions,
        other namespaces and attribute walks are refused."""
        for target in ("torch.os.system", "torch.load", "torch.from_file", "torch._print", "torch.save",
                       "torch.ops.aten.save", "torch.ops.aten.from_file.default", "torch.ops.mylib.foo",
                       "torch.broadcast_tensors.__call__", "torch._C._nn.__class__", "torch._C.os.system",
                       "torch._C._nn.os", "torch.functional.broadcast_tensors", "torch.nn.functional.relu",
                       "torch.ops.aten.__getattr__", "torch.ops.aten.outer.__call__", "torch.Tensor.add",
                       "torch.ops.aten.outer.default.default", "Tensor.add", "torch", "builtins.exec",
                       "torch.ops.aten.outer.default.__globals__"):
            c = base_capture()
            n = node(c, "add")
            n.target, n.inferred_on_meta = target, True
            with watched(self, self.scratch.dir), self.assertRaises(CaptureError) as e:
                loader.to_graph_module(c)
            self.assertIn(f"node add: call target '{target}' is no torch operator", str(e.exception))
        for method in ("Tensor.register_hook", "Tensor.__reduce_ex__", "Tensor.relu.__globals__", "Tensor.storage",
                       "Tensor.split", "relu", "torch.relu"):
            c = base_capture()
            n = node(c, "relu")
            n.target, n.inferred_on_meta = method, True
            with watched(self, self.scratch.dir), self.assertRaises(CaptureError) as e:
                loader.to_graph_module(c)
            self.assertIn("node relu: method target", str(e.exception))
        # Operators do load: the graph is the same computation.
        for target in ("torch.add", "torch.ops.aten.add", "torch.ops.aten.add.Tensor"):
            c = base_capture()
            n = node(c, "add")
            n.target, n.inferred_on_meta = target, True
            with watched(self, self.scratch.dir):
                got = loader.to_graph_module(c)(self.x)
            self.assertTrue(torch.equal(got, torch.relu(self.x + 2 * torch.ones(2, 3))), target)

    def test_method_outside_the_allowlist(self):
        for method in ("Tensor.register_hook", "Tensor.__reduce_ex__", "Tensor.numpy",
                       "Tensor.relu.__globals__", "Tensor.apply_", "Tensor.share_memory_", "relu"):
            c = base_capture()
            node(c, "relu").target = method
            with watched(self, self.scratch.dir), self.assertRaises(CaptureError) as e:
                loader.to_graph_module(c)
            self.assertIn("node relu", str(e.exception))

    def test_call_module_is_refused(self):
        c = base_capture()
        n = node(c, "relu")
        n.kind, n.target = ir.Node.CALL_MODULE, "layer"
        with self.assertRaises(CaptureError) as e:
            loader.to_graph_module(c)
        self.assertIn("node relu", str(e.exception))

    def test_hostile_names_in_every_string_field(self):
        for what, c in hostile_variants(self.marker):
            with self.subTest(what=what):
                for e in self.load_and_call(c):
                    if e is not None:
                        self.assertNotIn("\n", e)
        self.assertFalse(os.path.exists(self.marker))

    def test_hostile_kwarg_name_is_a_one_line_error(self):
        c = base_capture()
        node(c, "add").kwargs[0].name = f"alpha=__import__('os').system('touch {self.marker}')"
        with watched(self, self.scratch.dir), self.assertRaises(CaptureError) as e:
            loader.to_graph_module(c)(self.x)
        self.assertIn("node add", str(e.exception))
        self.assertIn("keyword", str(e.exception))

    def test_hostile_attribute_path(self):
        c = base_capture()
        p = f'x")or __import__("os").system("touch {self.marker}")or getattr(self,"x'
        node(c, "w").target = p
        c.attributes[0].target = p
        with watched(self, self.scratch.dir), self.assertRaises(CaptureError) as e:
            loader.to_graph_module(c)(self.x)
        self.assertIn("node w", str(e.exception))

    def test_paths_libdynamo_writes_still_load(self):
        # A global "_w" becomes the get_attr target "__w"; children are indices.
        for target in ("__w", "layer1.0.weight", "_x.y"):
            c = base_capture()
            node(c, "w").target = target
            c.attributes[0].target = target
            self.assertTrue(torch.equal(loader.to_graph_module(c).get_buffer(target), torch.ones(2, 3)))

    def test_a_tensor_path_is_no_parent_path(self):
        t = torch.ones(1)
        for values in ({"a": t, "a.b": t}, {"a.b.c.d": t, "a.b": t}, {"x.y": t, "x.y.z": t, "w": t}):
            with self.subTest(values=list(values)), self.assertRaises(CaptureError) as e:
                loader.check_paths(values)
            self.assertIn("is a tensor, not a module", str(e.exception))
        # Sharing text is not sharing a parent.
        loader.check_paths({"a.b": t, "a.c": t, "ab.c": t, "a.bc": t, "b": t})

    def test_root_attribute_walk_is_bounded_to_the_path_grammar(self):
        c = base_capture()
        node(c, "w").target = "__class__.__init__"
        c.attributes[0].target = "__class__.__init__"
        c.attributes[0].ClearField("data")
        with self.assertRaises(CaptureError):
            loader.to_graph_module(c, root=torch.nn.Linear(3, 2))

    def test_external_data_stays_beside_the_capture(self):
        secret = self.scratch.write("secret.bin", b"\0" * 24, "wb")
        sub = os.path.join(self.scratch.dir, "sub")
        os.mkdir(sub)
        for path in (secret, "../secret.bin", "/etc/passwd", "sub/../../secret.bin"):
            c = base_capture()
            a = c.attributes[0]
            a.ClearField("data")
            a.external.path, a.external.offset, a.external.length = path, 0, 24
            with self.assertRaises(CaptureError) as e:
                loader.to_graph_module(c, base_dir=sub)
            self.assertIn("external", str(e.exception))

    def test_attribute_data_must_match_its_metadata(self):
        for data in (b"", b"\0" * 7, b"\0" * 4096):
            c = base_capture()
            c.attributes[0].data = data
            with self.assertRaises(CaptureError) as e:
                loader.to_graph_module(c)
            self.assertIn("layer.weight", str(e.exception))
        c = base_capture()
        c.attributes[0].meta.sizes[0].size = -5
        with self.assertRaises(CaptureError):
            loader.to_graph_module(c)

    def test_subgraphs_are_read_only_by_their_own_name(self):
        # torch.cond's branches: a get_attr with subgraph metadata reads a
        # subgraph of its graph, never an attribute path or a module of the
        # file's choosing; nesting is bounded.
        c = base_capture()
        g = c.graphs[0]
        sub = g.subgraphs.add()
        sub.CopyFrom(base_capture().graphs[0])
        sub.name = "branch"
        for target in ("layer.weight", "__class__", "nowhere"):
            c2 = ir.Capture()
            c2.CopyFrom(c)
            w = node(c2, "w")
            w.ClearField("meta")
            w.meta.graph = target
            w.target = target
            errors = self.load_and_call(c2)
            self.assertTrue(all(e for e in errors), (target, errors))
        deep = ir.Graph()
        deep.CopyFrom(base_capture().graphs[0])
        for depth in range(40):
            parent = ir.Graph()
            parent.CopyFrom(base_capture().graphs[0])
            parent.name = f"level_{depth}"
            deep.name = f"inner_{depth}"
            parent.subgraphs.add().CopyFrom(deep)
            deep = parent
        c3 = base_capture()
        c3.graphs[0].subgraphs.add().CopyFrom(deep)
        errors = self.load_and_call(c3)
        self.assertTrue(all(e and "deeper than 32" in e for e in errors), errors)

    def test_deeply_nested_capture(self):
        c = base_capture()
        arg = node(c, "add").kwargs.add()
        arg.name = "deep"
        v = arg.value
        for _ in range(90):  # within protobuf's own parse limit, beyond ours
            v = v.list.items.add()
        v.int_value = 1
        with self.assertRaises(CaptureError) as e:
            loader.to_graph_module(c)
        self.assertIn("deep", str(e.exception))
        # Past protobuf's limit: the reader's error, in one line.
        path = self.scratch.path("deep.pb")
        data = b""
        inner = ir.Argument(int_value=1).SerializeToString()
        for _ in range(20000):
            inner = b"\x3a" + _varint(len(inner) + 2) + b"\x0a" + _varint(len(inner)) + inner
            if len(inner) > 1 << 20:
                break
        data = inner
        with open(path, "wb") as f:
            f.write(data)
        with self.assertRaises(CaptureError):
            loader.read_capture(path)

    def test_guard_checker_calls_no_named_function(self):
        from dynamo.guards import check_guards
        c = base_capture()
        for name in ("seed", "manual_seed", "set_num_threads", "_C._set_grad_enabled"):
            g = c.guards.add()
            g.kind, g.source = ir.Guard.GLOBAL_STATE, name
            g.value.bool_value = True
        state = torch.random.get_rng_state()
        with watched(self, self.scratch.dir):
            failed = check_guards(c, lambda x: x, (self.x,))
        self.assertIn("unknown global state", failed[1])
        self.assertTrue(torch.equal(state, torch.random.get_rng_state()), "torch.seed() ran")

    def test_untrusted_names_never_reach_generated_source(self):
        gm = loader.to_graph_module(base_capture())
        self.assertIn("torch.add", gm.code)
        self.assertIn("alpha = 2", gm.code)


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


class CodeOnlyWhenTrusted(unittest.TestCase):
    """Finding 3: load_program and the capture's code objects."""

    def setUp(self):
        self.scratch = Scratch(self)
        self.marker = self.scratch.path("PWNED")

    def export_breaks(self):
        out = self.scratch.path("n.pb")
        r = subprocess.run([EXPORT, BREAKS, "--fn", "normalize", "-i", "f32[4,8]", "-i", "f32[8]",
                            "-o", out, "--allow-breaks"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return loader.read_capture(out)

    def module(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("breaks_example_sec", BREAKS)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        return m

    def hostile_code(self):
        src = f"def normalize(x, scale):\n    __import__('os').system('touch {self.marker}')\n    return x\n"
        return marshal.dumps(compile(src, BREAKS, "exec").co_consts[0])

    def test_untrusted_refuses_code(self):
        capture = self.export_breaks()
        capture.rewritten_code = self.hostile_code()
        m = self.module()
        before = dict(m.__dict__)
        with watched(self, self.scratch.dir), self.assertRaises(CaptureError) as e:
            loader.load_program(capture, m.normalize)
        self.assertIn("trusted=True", str(e.exception))
        self.assertEqual(set(m.__dict__), set(before), "globals were changed")
        # Even an unmodified capture is refused without trust: the loader
        # cannot tell it from a hostile one.
        with self.assertRaises(CaptureError):
            loader.load_program(self.export_breaks(), m.normalize)

    def test_trusted_refuses_code_libdynamo_did_not_make(self):
        m = self.module()
        for field in ("rewritten_code", "resume"):
            capture = self.export_breaks()
            if field == "rewritten_code":
                capture.rewritten_code = self.hostile_code()
            else:
                capture.resume_functions[0].code = self.hostile_code()
            program = loader.load_program(capture, m.normalize, trusted=True)
            with watched(self, self.scratch.dir, allow_marshal=True), \
                    self.assertRaises(CaptureError) as e:
                program(torch.randn(4, 8), torch.rand(8))
            self.assertIn("does not match", str(e.exception))

    def test_trusted_refuses_other_function(self):
        capture = self.export_breaks()
        capture.function_name = "something_else"
        with self.assertRaises(CaptureError):
            loader.load_program(capture, self.module().normalize, trusted=True)

    def test_trusted_genuine_capture_runs(self):
        import io
        m = self.module()
        program = loader.load_program(self.export_breaks(), m.normalize, trusted=True)
        for sign in (1.0, -1.0):
            x, scale = torch.randn(4, 8) * sign, torch.rand(8)
            with contextlib.redirect_stdout(io.StringIO()):
                got = program(x, scale)
                want = m.normalize(x, scale)
            self.assertTrue(torch.equal(got, want))

    def test_trusted_must_be_a_keyword(self):
        with self.assertRaises(TypeError):
            loader.load_program(self.export_breaks(), self.module().normalize, None, ".", True)


class ToolCase(unittest.TestCase):
    def setUp(self):
        self.scratch = Scratch(self)

    def run_tool(self, exe, *args, timeout=300):
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self.scratch.dir)

    def assert_one_line_error(self, result, tool, *fragments):
        shown = f"exit {result.returncode}, stderr {result.stderr[-500:]!r}"
        self.assertNotEqual(result.returncode, 0, shown)
        self.assertGreater(result.returncode, 0, f"killed by a signal: {shown}")
        self.assertLess(result.returncode, 128, f"killed by a signal: {shown}")
        lines = one_line(result)
        self.assertEqual(len(lines), 1, f"expected one line on stderr, got:\n{result.stderr}")
        self.assertTrue(lines[0].startswith(f"{tool}: error: "), lines[0])
        for f in fragments:
            self.assertIn(f, lines[0])


class BoundedParsers(ToolCase):
    """Finding 4 (and inspect's readers)."""

    def test_deep_input_spec(self):
        out = self.scratch.path("o.pb")
        spec = "[" * 20000 + "f32[4,16]" + "]" * 20000
        r = self.run_tool(EXPORT, MLP, "--fn", "model.forward", "-i", spec, "-o", out)
        self.assert_one_line_error(r, "dynamo-export", "nested")
        self.assertFalse(os.path.exists(out))

    def test_huge_specs(self):
        out = self.scratch.path("o.pb")
        for spec in ("f32[" + ",".join(["1"] * 100) + "]", "f32[99999999999999999999]",
                     "[" + ",".join(["f32[1]"] * 10000) + "]"):
            r = self.run_tool(EXPORT, MLP, "--fn", "model.forward", "-i", spec, "-o", out)
            self.assert_one_line_error(r, "dynamo-export")
            self.assertFalse(os.path.exists(out))

    def test_inspect_reads_hostile_files(self):
        # A text capture nested far past any sane depth.
        deep = self.scratch.write("deep.pbtxt", "ir_version: IR_VERSION_CURRENT\ngraphs { nodes { args { "
                                  + "list { items { " * 50000 + "int_value: 1" + " } }" * 50000
                                  + " } } }\n")
        r = self.run_tool(INSPECT, deep)
        self.assert_one_line_error(r, "dynamo-inspect")
        # Terminal escapes in strings are shown, not obeyed.
        c = base_capture()
        c.function_name = "f\x1b]0;owned\x07\x1b[2J"
        node(c, "add").location.text = "\x1b[31mred"
        path = self.scratch.write("esc.pb", c.SerializeToString(), "wb")
        r = self.run_tool(INSPECT, path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("\x1b", r.stdout)
        self.assertNotIn("\x07", r.stdout)

    def test_inspect_refuses_captures_the_checker_refuses(self):
        """Issue 16: what fails graph::CheckCapture is refused by
        dynamo-inspect (and inspect --diff) with one line, as by the loader,
        and the binary parser's own log lines (invalid UTF-8) do not leak."""
        from google.protobuf import text_format
        dangling = base_capture()
        dangling.graphs[0].outputs[0].node = "nowhere"
        no_kind = base_capture()
        node(no_kind, "add").kind = 0
        for name, c in (("dangling", dangling), ("no_kind", no_kind)):
            for ext, data, mode in (("pb", c.SerializeToString(), "wb"),
                                    ("pbtxt", text_format.MessageToString(c), "w")):
                path = self.scratch.write(f"{name}.{ext}", data, mode)
                self.assert_one_line_error(self.run_tool(INSPECT, path), "dynamo-inspect",
                                           "is not a valid libdynamo capture")
                good = self.scratch.write("good.pb", base_capture().SerializeToString(), "wb")
                self.assert_one_line_error(self.run_tool(INSPECT, "--diff", good, path), "dynamo-inspect")
        utf8 = bytearray(base_capture().SerializeToString())
        name = base_capture().function_name.encode()
        at = bytes(utf8).find(name)
        utf8[at:at + 2] = b"\xff\xfe"
        path = self.scratch.write("utf8.pb", bytes(utf8), "wb")
        r = self.run_tool(INSPECT, path)
        self.assert_one_line_error(r, "dynamo-inspect", "invalid UTF-8")
        self.assertNotIn("libprotobuf", r.stderr)
        truncated = self.scratch.write("short.pb", base_capture().SerializeToString()[:20], "wb")
        self.assert_one_line_error(self.run_tool(INSPECT, truncated), "dynamo-inspect")


class HonestExitCodes(ToolCase):
    """Finding 5."""

    def test_os_exit_during_import(self):
        script = self.scratch.write("exits.py", "import os\nos._exit(0)\n")
        out = self.scratch.path("o.pb")
        r = self.run_tool(EXPORT, script, "--fn", "f", "-i", "f32[2]", "-o", out)
        self.assert_one_line_error(r, "dynamo-export", "exit")
        self.assertFalse(os.path.exists(out))
        r = self.run_tool(INSPECT, script, "--fn", "f")
        self.assert_one_line_error(r, "dynamo-inspect", "exit")
        self.assertEqual(r.stdout, "")

    def test_sys_exit_and_kill_during_import(self):
        for body in ("import sys\nsys.exit(0)\n", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
                     "import threading, os\nthreading.Thread(target=lambda: os._exit(0)).start()\n"
                     "import time\ntime.sleep(5)\n"):
            script = self.scratch.write("exits.py", body)
            out = self.scratch.path("o.pb")
            r = self.run_tool(EXPORT, script, "--fn", "f", "-i", "f32[2]", "-o", out)
            self.assert_one_line_error(r, "dynamo-export")
            self.assertFalse(os.path.exists(out))

    def test_target_that_never_returns(self):
        script = self.scratch.write("hangs.py", """
            import time
            def make():
                while True:
                    time.sleep(1)
            def f(x):
                return x + 1
        """)
        out = self.scratch.path("o.pb")
        r = self.run_tool(EXPORT, script, "--fn", "f", "--example-inputs", "make", "-o", out,
                          "--timeout", "3", timeout=60)
        self.assert_one_line_error(r, "dynamo-export", "3")
        self.assertFalse(os.path.exists(out))

    def test_nonsense_numbers(self):
        r = self.run_tool(INSPECT, BREAKS, "--fn", "normalize", "-i", "f32[4,8]", "-i", "f32[8]",
                          "--max-breaks", "-1")
        self.assert_one_line_error(r, "dynamo-inspect", "--max-breaks")
        for value in ("-1", "0", "nan", "abc"):
            r = self.run_tool(EXPORT, MLP, "--fn", "model.forward", "-i", "x=f32[4,16]",
                              "-o", self.scratch.path("o.pb"), "--timeout", value)
            self.assert_one_line_error(r, "dynamo-export", "--timeout")

    def test_good_export_still_works_supervised(self):
        out = self.scratch.path("o.pb")
        r = self.run_tool(EXPORT, MLP, "--fn", "model.forward", "-i", "x=f32[4,16]", "-o", out,
                          "--timeout", "300")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(stat.S_ISREG(os.lstat(out).st_mode))
        self.assertEqual(sorted(os.listdir(self.scratch.dir)), ["o.pb"], "a temporary file was left")


class OutputPaths(ToolCase):
    """Finding 6."""

    def export_to(self, out):
        return self.run_tool(EXPORT, MLP, "--fn", "model.forward", "-i", "x=f32[4,16]", "-o", out)

    def test_fifo(self):
        fifo = self.scratch.path("fifo.pb")
        os.mkfifo(fifo)
        r = self.export_to(fifo)
        self.assert_one_line_error(r, "dynamo-export", "not a regular file")
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def test_device_node(self):
        dev = self.scratch.path("null.pb")
        try:
            os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            self.skipTest("mknod needs privileges")
        r = self.export_to(dev)
        self.assert_one_line_error(r, "dynamo-export", "not a regular file")
        self.assertTrue(stat.S_ISCHR(os.lstat(dev).st_mode))

    def test_symlink(self):
        target = self.scratch.write("real.pb", "keep")
        link = self.scratch.path("link.pb")
        os.symlink(target, link)
        r = self.export_to(link)
        self.assert_one_line_error(r, "dynamo-export", "symbolic link")
        self.assertTrue(os.path.islink(link))
        with open(target) as f:
            self.assertEqual(f.read(), "keep")

    def test_directory(self):
        d = self.scratch.path("dir.pb")
        os.mkdir(d)
        r = self.export_to(d)
        self.assert_one_line_error(r, "dynamo-export", "directory")

    def test_weights_side_file_is_checked_too(self):
        out = self.scratch.path("w.pb")
        os.mkfifo(out + ".weights")
        r = self.run_tool(EXPORT, MLP, "--fn", "model.forward", "-i", "x=f32[4,16]", "-o", out,
                          "--weights", "external")
        self.assert_one_line_error(r, "dynamo-export", "not a regular file")
        self.assertFalse(os.path.exists(out))

    def test_regular_file_is_replaced(self):
        out = self.scratch.write("old.pb", "old")
        r = self.export_to(out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(loader.read_capture(out).graphs)
        self.assertEqual(sorted(os.listdir(self.scratch.dir)), ["old.pb"])

    def test_temporary_name_is_not_followed(self):
        # A planted symlink at any guessable temporary name must not be written through.
        victim = self.scratch.write("victim", "keep")
        out = self.scratch.path("o.pb")
        for pid in range(os.getpid(), os.getpid() + 200):
            with contextlib.suppress(FileExistsError):
                os.symlink(victim, f"{out}.tmp.{pid}")
        r = self.export_to(out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "keep")


if __name__ == "__main__":
    INSPECT = os.path.abspath(sys.argv.pop(1))
    EXPORT = os.path.abspath(sys.argv.pop(1))
    unittest.main()
