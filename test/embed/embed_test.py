"""dynamo._C as a Python user meets it: imported into a plain python3.11 (the
interpreter is already running; the extension must not start another or link
libpython), its listing agrees with dis, its captures load back through
dynamo.loader and compute what eager torch computes, bad input raises one
Python exception with one line, and `cmake --install` puts the package where
python3.11 finds it.

Run by CTest as:
    python3.11 embed_test.py BUILD_DIR PYTHON_INSTALL_DIR PATH/TO/dynamo-export
with the build's python/ directory on PYTHONPATH.
"""
import dis
import io
import os
import re
import runpy
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import unittest

import torch

from dynamo import _C
from dynamo import dynamo_ir_pb2 as ir
from dynamo.loader import load

BUILD_DIR = None
INSTALL_DIR = None  # relative to the install prefix
EXPORT = None


# --- functions to disassemble (no KW_NAMES: see test_kw_names) --------------

def loop_and_branch(xs, limit):
    total = 0
    for x in xs:
        if x > limit:
            break
        total += x
    else:
        total = -1
    return total


def try_with(path, fallback):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return fallback + f"{e!r:>10}"
    finally:
        fallback = None


def closures(n):
    scale = 2
    square = lambda v: v * v * scale  # noqa: E731
    return [square(i) for i in range(n)], {i: str(i) for i in range(n)}


class Point:
    def norm(self):
        return (self.x ** 2 + self.y ** 2) ** 0.5


def keywords(items):
    return sorted(items, key=len)


def dis_listing(code):
    """dis.dis's recursive listing in libdynamo's layout: code objects without
    addresses ("<code object f, line 3>") and, like ours, a header for the
    top-level code object too."""
    buf = io.StringIO()
    dis.dis(code, file=buf)
    text = re.sub(r'<code object (\S+) at 0x[0-9a-f]+, file "[^"]+", line (\d+)>',
                  r"<code object \1, line \2>", buf.getvalue())
    return f"Disassembly of <code object {code.co_name}, line {code.co_firstlineno}>:\n{text}"


def our_listing(code, **kwargs):
    """_C.disassemble with its headers ("Disassembly of f.<locals>.<lambda> (file,
    line 3):") in dis's words."""
    def header(m):
        return f"Disassembly of <code object {m[1].rsplit('.', 1)[-1]}, line {m[2]}>:"
    return re.sub(r"^Disassembly of (\S+) \(.*, line (\d+)\):$", header,
                  _C.disassemble(code, **kwargs), flags=re.M)


class Disassemble(unittest.TestCase):
    def test_matches_dis(self):
        for fn in (loop_and_branch, try_with, closures, Point.norm):
            with self.subTest(fn.__qualname__):
                self.assertEqual(our_listing(fn.__code__), dis_listing(fn.__code__))

    def test_header_and_nested(self):
        text = _C.disassemble(closures.__code__)
        first = text.splitlines()[0]
        self.assertEqual(first, f"Disassembly of closures ({__file__}, line "
                                f"{closures.__code__.co_firstlineno}):")
        self.assertIn("\nDisassembly of closures.<locals>.<lambda> (", text)
        if sys.version_info < (3, 12):  # 3.12 inlines comprehensions (PEP 709)
            self.assertIn("\nDisassembly of closures.<locals>.<listcomp> (", text)
        flat = _C.disassemble(closures.__code__, nested=False)
        self.assertNotIn("<lambda> (", flat)
        self.assertTrue(text.startswith(flat))
        self.assertIsNone(re.search(r"0x[0-9a-f]{6,}", text), "no memory addresses")

    def test_function_or_code(self):
        self.assertEqual(_C.disassemble(try_with), _C.disassemble(try_with.__code__))
        self.assertEqual(_C.disassemble(Point().norm), _C.disassemble(Point.norm.__code__))

    def test_kw_names(self):
        # The one deliberate difference on these functions: KW_NAMES shows its
        # names, which 3.11's dis leaves unresolved.
        # 3.12's dis resolves them too; 3.13 has no KW_NAMES (the names are a
        # constant CALL_KW takes from the stack): the listings are equal.
        ours = our_listing(keywords.__code__)
        if sys.version_info >= (3, 12):
            self.assertIn("KW_NAMES" if sys.version_info < (3, 13) else "CALL_KW", ours)
            self.assertEqual(ours, dis_listing(keywords.__code__))
            return
        self.assertRegex(ours, r"KW_NAMES +\d+ \(\('key',\)\)\n")
        self.assertEqual(re.sub(r"(KW_NAMES +\d+) \(.*\)", r"\1", ours),
                         dis_listing(keywords.__code__))

    def test_not_code(self):
        with self.assertRaisesRegex(TypeError, "expects a code object or a function, not int"):
            _C.disassemble(42)


SCRIPT = """
    import torch

    def f(x, y):
        return torch.relu(x) * y + x.sin()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x, n: int = 2):
            return torch.tanh(self.fc(x)) * n

    net = Net().eval()

    def examples():
        return (torch.randn(5, 4),)

    def branchy(x):
        if x.sum() > 0:
            return x
        return -x
"""


class Capture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.TemporaryDirectory(prefix="dynamo_embed_")
        cls.dir = cls.scratch.name
        cls.script = cls.write("embed_model.py", SCRIPT)
        cls.eager = runpy.run_path(cls.script)

    @classmethod
    def tearDownClass(cls):
        cls.scratch.cleanup()

    @classmethod
    def write(cls, name, text):
        path = os.path.join(cls.dir, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def load(self, data, name):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return load(path)

    def test_round_trip_against_eager(self):
        data = _C.capture(self.script, "f", ["f32[3,4]", "y=f32[3,4]"])
        self.assertIsInstance(data, bytes)
        gm, capture = self.load(data, "f.pb")
        self.assertEqual(capture.ir_version, _C.ir_version())
        self.assertEqual(capture.function_name, "f")
        x, y = torch.randn(3, 4), torch.randn(3, 4)
        torch.testing.assert_close(gm(x, y), self.eager["f"](x, y))

    def test_module_with_embedded_weights(self):
        data = _C.capture(self.script, "net.forward", ["x=f32[5,4]"], weights="embed")
        gm, _ = self.load(data, "net.pb")  # no root module: the weights are in the capture
        x = torch.randn(5, 4)
        torch.testing.assert_close(gm(x), self.eager["net"](x))

    def test_example_inputs(self):
        data = _C.capture(self.script, "net.forward", example_inputs="examples")
        self.assertEqual(ir.Capture.FromString(data).inputs[0].tensor.sizes[0].size, 5)

    def test_same_bytes_as_dynamo_export(self):
        out = os.path.join(self.dir, "exported.pb")
        subprocess.run([EXPORT, self.script, "--fn", "f", "--input", "f32[3,4]", "f32[3,4]",
                        "-o", out], check=True, capture_output=True, timeout=300)
        with open(out, "rb") as f:
            exported = f.read()
        ours = _C.capture(self.script, "f", ["f32[3,4]", "f32[3,4]"])
        self.assertEqual(ours, exported)
        self.assertEqual(ours, _C.capture(self.script, "f", ("f32[3,4]", "f32[3,4]")))

    def assert_one_line(self, error, *fragments):
        message = str(error)
        self.assertNotIn("\n", message)
        for fragment in fragments:
            self.assertIn(fragment, message)

    def test_graph_break(self):
        with self.assertRaises(_C.GraphBreak) as cm:
            _C.capture(self.script, "branchy", ["f32[3]"])
        e = cm.exception
        self.assertIsInstance(e, _C.CaptureError)
        self.assertIsInstance(e, RuntimeError)
        self.assert_one_line(e, "graph break", "embed_model.py")
        self.assertEqual(e.reason, "DATA_DEPENDENT_BRANCH")
        self.assertEqual(e.filename, self.script)
        self.assertEqual(e.text, "if x.sum() > 0:")
        self.assertGreater(e.lineno, 0)
        self.assertTrue(e.hint)

    def test_bad_input(self):
        cases = [
            (("/nonexistent/dir/model.py", "f", []), "'/nonexistent/dir/model.py' does not exist"),
            ((self.script, "backward", []), "no attribute 'backward'"),
            ((self.script, "f", ["f32[3,"]), "f32[3,"),
            ((self.script, "f", ["q32[3]"]), "q32"),
            ((self.script, "torch", []), "is a module"),
        ]
        for args, fragment in cases:
            with self.subTest(args=args):
                with self.assertRaises(_C.CaptureError) as cm:
                    _C.capture(*args)
                self.assertNotIsInstance(cm.exception, _C.GraphBreak)
                self.assert_one_line(cm.exception, fragment)

    def test_exception_in_script(self):
        bad = self.write("raises_at_import.py", "import os\nraise ValueError('no weights here')\n")
        with self.assertRaises(_C.CaptureError) as cm:
            _C.capture(bad, "f", [])
        self.assert_one_line(cm.exception, "ValueError: no weights here", "raises_at_import.py:2")
        self.assertIn("Traceback (most recent call last)", cm.exception.python_traceback)

    def test_argument_errors(self):
        with self.assertRaisesRegex(TypeError, "not a str"):
            _C.capture(self.script, "f", "f32[3,4]")
        with self.assertRaisesRegex(TypeError, "str specs, not int"):
            _C.capture(self.script, "f", [3])
        with self.assertRaisesRegex(ValueError, "'none' or 'embed'"):
            _C.capture(self.script, "f", [], weights="external")


class Extension(unittest.TestCase):
    def test_built_into_the_package(self):
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        self.assertEqual(os.path.basename(_C.__file__), "_C" + suffix)
        self.assertEqual(os.path.dirname(_C.__file__), os.path.dirname(ir.__file__))

    def test_does_not_link_libpython(self):
        # Python's symbols come from the interpreter that imports it.
        needed = subprocess.run(["readelf", "-d", _C.__file__], check=True, capture_output=True,
                                text=True).stdout
        self.assertIn("(NEEDED)", needed)
        self.assertNotIn("libpython", needed)

    def test_installed_package(self):
        with tempfile.TemporaryDirectory(prefix="dynamo_embed_install_") as prefix:
            done = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", prefix],
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stdout[-2000:] + done.stderr[-2000:])
            package = os.path.join(prefix, INSTALL_DIR, "dynamo")
            names = sorted(os.listdir(package))
            for name in ("__init__.py", "loader.py", "guards.py", "dynamo_ir_pb2.py",
                         "_C" + sysconfig.get_config_var("EXT_SUFFIX")):
                self.assertIn(name, names)
            env = dict(os.environ, PYTHONPATH=os.path.join(prefix, INSTALL_DIR))
            out = subprocess.run(
                [sys.executable, "-c",
                 "import dynamo._C, dynamo.loader; print(dynamo._C.__file__, dynamo._C.ir_version())"],
                check=True, capture_output=True, text=True, env=env, timeout=300).stdout
            self.assertEqual(out.split(), [os.path.join(package, "_C" + sysconfig.get_config_var("EXT_SUFFIX")),
                                           str(_C.ir_version())])


if __name__ == "__main__":
    BUILD_DIR, INSTALL_DIR, EXPORT = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main(verbosity=2)
