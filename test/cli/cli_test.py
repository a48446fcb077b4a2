"""dynamo-inspect and dynamo-export as a user meets them: good scripts give
deterministic output (a listing that agrees with dis, a .pb that loads and
runs); bad input gives one clear line on stderr and a non-zero exit, never a
crash, a C++/Python traceback, or a file left behind.

Run by CTest as: python3.11 cli_test.py PATH/TO/dynamo-inspect PATH/TO/dynamo-export
(with the build's python/ directory on PYTHONPATH for the loader).
"""
import contextlib
import dis
import io
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

INSPECT = None
EXPORT = None


def run(*args, cwd=None):
    return subprocess.run([INSPECT, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def export(*args, cwd=None):
    return subprocess.run([EXPORT, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


class Scratch:
    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="dynamo_cli_")

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path


GOOD = """
    import torch

    def helper(v):
        return [i * 2 for i in range(v)]

    def forward(x, n=3):
        try:
            y = torch.sin(x) + n
        except RuntimeError:
            y = None
        f = lambda z: z + 1
        return f(y), helper(n)

    class Model(torch.nn.Module):
        def forward(self, x):
            return x.relu()

    model = Model()
"""


class BadInput(unittest.TestCase):
    def setUp(self):
        self.scratch = Scratch()
        self.good = self.scratch.write("good.py", GOOD)

    tool = "dynamo-inspect"

    def assert_one_line_error(self, result, *fragments):
        self.assertNotEqual(result.returncode, 0, result)
        self.assertLess(result.returncode, 128, f"killed by a signal: {result}")
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"expected one line on stderr, got:\n{result.stderr}")
        self.assertTrue(lines[0].startswith(f"{self.tool}: error: "), lines[0])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])
        for leak in ("Traceback", "terminate called", "what():", "Aborted"):
            self.assertNotIn(leak, result.stderr)
        self.assertEqual(result.stdout, "", "no partial report on failure")

    def test_missing_script(self):
        self.assert_one_line_error(run("/nonexistent/dir/model.py", "--fn", "f"),
                                   "'/nonexistent/dir/model.py' does not exist")

    def test_directory_instead_of_script(self):
        self.assert_one_line_error(run(self.scratch.dir.name, "--fn", "f"), "not a regular file")

    def test_syntax_error(self):
        bad = self.scratch.write("bad.py", "def f(x):\n    return x +\n")
        self.assert_one_line_error(run(bad, "--fn", "f"), "SyntaxError", "bad.py", "line 2")

    def test_exception_at_import(self):
        bad = self.scratch.write("raises.py", "import os\nraise ValueError('no weights here')\n")
        self.assert_one_line_error(run(bad, "--fn", "f"), "ValueError: no weights here",
                                   "raises.py:2")

    def test_missing_import_in_script(self):
        bad = self.scratch.write("imports.py", "import definitely_not_a_module_xyz\n")
        self.assert_one_line_error(run(bad, "--fn", "f"), "ModuleNotFoundError",
                                   "definitely_not_a_module_xyz")

    def test_unknown_fn(self):
        self.assert_one_line_error(run(self.good, "--fn", "backward"),
                                   "the script has no attribute 'backward'")

    def test_unknown_method(self):
        self.assert_one_line_error(run(self.good, "--fn", "Model.backward"),
                                   "'Model' has no attribute 'backward'")

    def test_not_a_function(self):
        self.assert_one_line_error(run(self.good, "--fn", "torch"), "is a module")
        self.assert_one_line_error(run(self.good, "--fn", "model"), "did you mean 'model.forward'")
        self.assert_one_line_error(run(self.good, "--fn", "torch.sin"), "built-in")

    def test_missing_fn_flag(self):
        result = run(self.good)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--fn", result.stderr)

    def test_traceback_on_request(self):
        bad = self.scratch.write("raises.py", "raise ValueError('x')\n")
        result = run(bad, "--fn", "f", "--traceback")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("Traceback (most recent call last)", result.stderr)


class GoodInput(unittest.TestCase):
    def setUp(self):
        self.scratch = Scratch()
        self.good = self.scratch.write("good.py", GOOD)

    def test_listing_matches_dis(self):
        result = run(self.good, "--fn", "forward")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout
        self.assertIn("Disassembly of forward (", out)
        self.assertIn("Disassembly of forward.<locals>.<lambda> (", out)
        self.assertIn("ExceptionTable:", out)
        # The top-level listing is dis's, verbatim, once dis's code-object
        # addresses are normalised away.
        sys.path.insert(0, self.scratch.dir.name)
        import good  # noqa: E402  -- the script under test
        buf = io.StringIO()
        dis.dis(good.forward.__code__, file=buf, depth=0)
        expected = re.sub(r'<code object (\S+) at 0x[0-9a-f]+, file "[^"]+", line (\d+)>',
                          r"<code object \1, line \2>", buf.getvalue())
        ours = out.split("Disassembly of forward (", 1)[1].split("\n", 1)[1]
        ours = ours.split("\nDisassembly of ", 1)[0]
        self.assertEqual(ours.rstrip("\n"), expected.rstrip("\n"))

    def test_bound_method_and_deterministic(self):
        first = run(self.good, "--fn", "model.forward")
        second = run(self.good, "--fn", "model.forward")
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout)
        self.assertIn("Disassembly of Model.forward", first.stdout)
        # No memory addresses, so listings can be diffed.
        self.assertIsNone(re.search(r"0x[0-9a-f]{6,}", first.stdout), first.stdout)

    def test_no_nested(self):
        result = run(self.good, "--fn", "forward", "--no-nested")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("<lambda> (", result.stdout)

    def test_bundled_example(self):
        example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mlp.py")
        result = run(example, "--fn", "model.forward")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("Disassembly of MLP.forward", result.stdout)


MODEL = """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.fc = nn.Linear(4, 3)

        def forward(self, x, n: int = 2):
            return torch.relu(self.fc(x)) * n

    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    def examples():
        return (torch.randn(5, 4),)

    net = Net().eval()
"""


class Export(BadInput):
    tool = "dynamo-export"

    def setUp(self):
        super().setUp()
        self.model = self.scratch.write("model.py", MODEL)
        self.out = os.path.join(self.scratch.dir.name, "out.pb")

    def assert_no_output(self):
        self.assertEqual(sorted(os.listdir(self.scratch.dir.name)),
                         sorted(f for f in os.listdir(self.scratch.dir.name) if f.endswith(".py")))

    def assert_export_error(self, result, *fragments):
        self.assert_one_line_error(result, *fragments)
        self.assert_no_output()

    # BadInput's inspect-specific cases, run through dynamo-export.
    def test_missing_script(self):
        self.assert_export_error(export("/nonexistent/dir/model.py", "--fn", "f", "-o", self.out),
                                 "does not exist")

    def test_directory_instead_of_script(self):
        self.assert_export_error(export(self.scratch.dir.name, "--fn", "f", "-o", self.out),
                                 "not a regular file")

    def test_syntax_error(self):
        bad = self.scratch.write("bad.py", "def f(x):\n    return x +\n")
        self.assert_export_error(export(bad, "--fn", "f", "-o", self.out), "SyntaxError", "line 2")

    def test_exception_at_import(self):
        bad = self.scratch.write("raises.py", "raise ValueError('no weights here')\n")
        self.assert_export_error(export(bad, "--fn", "f", "-o", self.out), "ValueError: no weights here")

    def test_missing_import_in_script(self):
        bad = self.scratch.write("imports.py", "import definitely_not_a_module_xyz\n")
        self.assert_export_error(export(bad, "--fn", "f", "-o", self.out), "ModuleNotFoundError")

    def test_unknown_fn(self):
        self.assert_export_error(export(self.model, "--fn", "backward", "-i", "f32[4]", "-o", self.out),
                                 "no attribute 'backward'")

    def test_unknown_method(self):
        self.assert_export_error(export(self.model, "--fn", "net.backward", "-o", self.out),
                                 "'net' has no attribute 'backward'")

    def test_not_a_function(self):
        self.assert_export_error(export(self.model, "--fn", "net", "-o", self.out),
                                 "did you mean 'net.forward'")

    def test_missing_fn_flag(self):
        result = export(self.model, "-o", self.out)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--fn", result.stderr)
        self.assert_no_output()

    def test_traceback_on_request(self):
        bad = self.scratch.write("raises.py", "raise ValueError('x')\n")
        result = export(bad, "--fn", "f", "-o", self.out, "--traceback")
        self.assertIn("Traceback (most recent call last)", result.stderr)

    def test_malformed_specs(self):
        for spec, fragment in [("f32[2,?]", "position 7"), ("f33[2]", "a dtype"), ("f32[2", "']'"),
                               ("[f32[2],", "a value or ']'"), ("i64[2]:grad", "floating point"),
                               ("int:x", "an int"), ("f32[2]@nowhere:7", "device type at start of device string"),
                               ("f32[2]@cuda:01", "Invalid device string"), ("f32[2]@cuda:128", "Invalid device string"),
                               ("f32[2]@CPU", "a device (cpu, cuda or meta")]:
            with self.subTest(spec=spec):
                self.assert_export_error(
                    export(self.model, "--fn", "net.forward", "-i", spec, "-o", self.out), fragment)

    def test_malformed_dims(self):
        for dims, fragment in [(["B=5..3"], "no size >= 2"), (["B=0..4"], "at least 1"), (["B"], "NAME=CONSTRAINTS"),
                               (["B=%0"], "N >= 1"), (["B=2..3,%4"], "no multiple of 4"), (["B=x"], "unknown constraint"),
                               (["B=2..9,ex=12"], "outside the constraints"), (["C=2..8"], "no --input names a size C"),
                               (["B=2..8", "B=4.."], "given twice"), (["1B=2..8"], "identifier")]:
            with self.subTest(dims=dims):
                args = [a for d in dims for a in ("--dim", d)]
                self.assert_export_error(
                    export(self.model, "--fn", "net.forward", "-i", "x=f32[B,4]", *args, "-o", self.out), fragment)

    def test_symbolic_sizes(self):
        result = export(self.model, "--fn", "net.forward", "-i", "x=f32[B,4]", "--dim", "B=1..64,%2", "-o", self.out)
        self.assertEqual(result.returncode, 0, result.stderr)
        shown = run(self.out)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        self.assertIn("float32[B, 4]", shown.stdout)
        self.assertIn("B = L['x'].size(0) in [1, 64] (8 seen)", shown.stdout)
        self.assertIn("B % 2 == 0", shown.stdout)

    def test_wrong_argument_count(self):
        self.assert_export_error(export(self.model, "--fn", "net.forward", "-o", self.out),
                                 "missing required argument 'x'")
        self.assert_export_error(
            export(self.model, "--fn", "net.forward", "-i", "f32[5,4]", "-i", "int:2", "-i", "int:3",
                   "-o", self.out), "positional arguments but 4 were given")
        self.assert_export_error(
            export(self.model, "--fn", "net.forward", "-i", "f32[5,4]", "-i", "y=int:3", "-o", self.out),
            "unexpected keyword argument 'y'")

    def test_unwritable_output(self):
        self.assert_export_error(
            export(self.model, "--fn", "net.forward", "-i", "f32[5,4]", "-o", "/nonexistent/out.pb"),
            "does not exist")
        self.assert_export_error(
            export(self.model, "--fn", "net.forward", "-i", "f32[5,4]", "-o", self.scratch.dir.name),
            "is a directory")

    def test_graph_break_is_a_located_error(self):
        self.assert_export_error(export(self.model, "--fn", "branchy", "-i", "f32[3]", "-o", self.out),
                                 "model.py:15: graph break:", "DATA_DEPENDENT_BRANCH",
                                 "if x.sum() > 0:", "hint: ")

    def test_deterministic_and_loadable(self):
        args = ["--fn", "net.forward", "-i", "x=f32[5,4]", "--weights", "embed"]
        first = export(self.model, *args, "-o", self.out)
        self.assertEqual(first.returncode, 0, first.stderr)
        again = os.path.join(self.scratch.dir.name, "again.pb")
        second = export(self.model, *args, "-o", again)
        self.assertEqual(second.returncode, 0, second.stderr)
        with open(self.out, "rb") as a, open(again, "rb") as b:
            self.assertEqual(a.read(), b.read(), "the same export twice must be byte-identical")
        import torch
        from dynamo.loader import load
        sys.path.insert(0, self.scratch.dir.name)
        import model  # noqa: E402  -- the script under test
        gm, capture = load(self.out)
        x = torch.randn(5, 4)
        self.assertTrue(torch.allclose(gm(x), model.net(x)))
        self.assertEqual(capture.function_name, "Net.forward")
        self.assertEqual(capture.python_version.split(".")[:2], ["3", "11"])

    def test_formats_and_external_weights(self):
        for fmt in ("pbtxt", "json"):
            out = os.path.join(self.scratch.dir.name, f"out.{fmt}")
            result = export(self.model, "--fn", "net.forward", "--example-inputs", "examples",
                            "--format", fmt, "-o", out)
            self.assertEqual(result.returncode, 0, result.stderr)
            with open(out) as f:
                text = f.read()
            self.assertIn("torch.nn.functional.linear", text)
        result = export(self.model, "--fn", "net.forward", "-i", "f32[5,4]", "--weights", "external",
                        "-o", self.out)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(os.path.exists(self.out + ".weights"))
        import torch
        from dynamo.loader import load
        gm, _ = load(self.out)
        self.assertEqual(gm.fc.weight.shape, torch.Size([3, 4]))


class InspectReport(unittest.TestCase):
    """The full report: graph table, guards, breaks; saved captures; the CI gate."""

    def setUp(self):
        self.scratch = Scratch()
        self.model = self.scratch.write("model.py", MODEL)

    def test_report_sections(self):
        result = run(self.model, "--fn", "net.forward", "-i", "x=f32[5,4]")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout
        for section in ("CAPTURE Net.forward", "ORIGINAL BYTECODE", "INPUTS", "GRAPH graph_0",
                        "GUARDS (", "GRAPH BREAKS (0)"):
            self.assertIn(section, out)
        self.assertRegex(out, r"call_function\s+linear\s+torch.nn.functional.linear\s+\(x, fc_weight, fc_bias\)")
        self.assertRegex(out, r"TENSOR_MATCH\s+L\['x'\]\s+float32\[5, 4\] strides \[4, 1\] cpu")
        self.assertRegex(out, r"EQUALS_MATCH\s+L\['n'\]\s+2")

    def test_break_report_and_gate(self):
        result = run(self.model, "--fn", "branchy", "-i", "f32[3]")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("GRAPH BREAKS (1)", result.stdout)
        self.assertIn("model.py:15  DATA_DEPENDENT_BRANCH at POP_JUMP_FORWARD_IF_FALSE", result.stdout)
        self.assertIn("if x.sum() > 0:", result.stdout)
        self.assertIn("hint: ", result.stdout)
        gated = run(self.model, "--fn", "branchy", "-i", "f32[3]", "--max-breaks", "0")
        self.assertEqual(gated.returncode, 1)
        self.assertIn("GRAPH BREAKS (1)", gated.stdout)  # the report still shows why
        self.assertEqual(gated.stderr.strip(),
                         "dynamo-inspect: error: 1 graph break, more than --max-breaks 0")
        self.assertEqual(run(self.model, "--fn", "branchy", "-i", "f32[3]", "--max-breaks", "1").returncode, 0)

    def test_saved_capture_and_json(self):
        out = os.path.join(self.scratch.dir.name, "net.pb")
        self.assertEqual(export(self.model, "--fn", "net.forward", "-i", "f32[5,4]", "-o", out).returncode, 0)
        text = run(out)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("GRAPH graph_0", text.stdout)
        self.assertIn("LOAD_FAST", text.stdout)
        import json
        doc = json.loads(run(out, "--json").stdout)
        self.assertEqual(doc["function_name"], "Net.forward")
        self.assertEqual(len(doc["graphs"]), 1)
        live = json.loads(run(self.model, "--fn", "net.forward", "-i", "f32[5,4]", "--json").stdout)
        self.assertEqual(live["graphs"], doc["graphs"])

    def test_bad_capture_files(self):
        bad = self.scratch.write("bad.pb", "not a capture")
        for path, fragment in [(bad, "is not a libdynamo capture"),
                               (os.path.join(self.scratch.dir.name, "none.pb"), "cannot read")]:
            result = run(path)
            self.assertNotEqual(result.returncode, 0)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertIn(fragment, result.stderr)
            self.assertEqual(result.stdout, "")


REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BREAKS = os.path.join(REPO, "examples", "breaks.py")
GOLDEN = os.path.join(REPO, "test", "cli", "golden", "inspect_breaks.txt")
BREAK_INPUTS = ["-i", "f32[4,8]", "-i", "f32[8]"]


class BreaksTest(unittest.TestCase):
    """Graph breaks offline: the full report is a checked-in golden file (so
    format changes are deliberate), and --allow-breaks writes a program that
    runs like the function."""

    def test_inspect_golden(self):
        result = run(BREAKS, "--fn", "normalize", *BREAK_INPUTS)
        self.assertEqual(result.returncode, 0, result.stderr)
        text = result.stdout.replace(REPO, "<repo>")
        # The header names the interpreter and torch the capture ran with; the
        # golden holds placeholders so that it does not change with them.
        versions = re.compile(r"— Python (\d+\.\d+\.\d+\S*), torch (\S+), ")
        self.assertRegex(text.splitlines()[0], versions)
        text = versions.sub("— Python <python>, torch <torch>, ", text, count=1)
        if os.environ.get("DYNAMO_UPDATE_GOLDEN"):
            with open(GOLDEN, "w") as f:
                f.write(text)
        with open(GOLDEN) as f:
            self.assertEqual(text, f.read(), "re-run with DYNAMO_UPDATE_GOLDEN=1 if the change is deliberate")
        for section in ("ORIGINAL BYTECODE", "MODIFIED BYTECODE", "RESUME FUNCTION", "GUARDS",
                        "GRAPH BREAKS (2)", "print(\"normalizing\"", "if h.sum() > 0:"):
            self.assertIn(section, text)

    def test_pictures(self):
        """--dot and --svg: one cluster per graph, a node per graph node and
        per break, an edge per use of a node plus the dashed chain from graph
        to break to graph; the SVG drawn by Graphviz has the same counts."""
        import shutil
        from dynamo.loader import read_capture
        with tempfile.TemporaryDirectory() as d:
            pb = os.path.join(d, "n.pb")
            self.assertEqual(export(BREAKS, "--fn", "normalize", *BREAK_INPUTS, "-o", pb,
                                    "--allow-breaks").returncode, 0)
            capture = read_capture(pb)
            dot, svg = os.path.join(d, "n.dot"), os.path.join(d, "n.svg")
            args = [pb, "--dot", dot] + (["--svg", svg] if shutil.which("dot") else [])
            result = run(*args)
            self.assertEqual(result.returncode, 0, result.stderr)
            with open(dot) as f:
                text = f.read()

            def reads(arg):
                kind = arg.WhichOneof("value")
                if kind == "node":
                    return 1
                if kind == "list":
                    return sum(reads(a) for a in arg.list.items)
                if kind == "dict":
                    return sum(reads(v) for v in arg.dict.values)
                return 0
            nodes = sum(len(g.nodes) for g in capture.graphs) + len(capture.graph_breaks)
            uses = sum(reads(a) for g in capture.graphs for n in g.nodes for a in n.args) + \
                sum(reads(k.value) for g in capture.graphs for n in g.nodes for k in n.kwargs)
            chain = len(capture.graphs) + len(capture.graph_breaks) - 1
            self.assertEqual(text.count("subgraph cluster_"), len(capture.graphs))
            self.assertEqual(len(re.findall(r"^\s+\"[^\"]+\" \[label=", text, re.M)), nodes)
            self.assertEqual(len(re.findall(r"^\s+\"[^\"]+\" -> \"", text, re.M)), uses + chain)
            self.assertEqual(text.count("style=dashed"), chain)
            self.assertIn("graph break: print() is not traced", text)
            if shutil.which("dot"):
                with open(svg) as f:
                    drawn = f.read()
                self.assertEqual(drawn.count('class="node"'), nodes)
                self.assertEqual(drawn.count('class="edge"'), uses + chain)
                self.assertEqual(drawn.count('class="cluster"'), len(capture.graphs))
        # Bad requests: one line, a non-zero exit, nothing written.
        no_capture = run(BREAKS, "--fn", "normalize", "--dot", os.path.join(d, "x.dot"))
        self.assertEqual(no_capture.returncode, 2)
        self.assertIn("--dot and --svg draw a capture", no_capture.stderr)
        into_dir = run(BREAKS, "--fn", "normalize", *BREAK_INPUTS, "--dot", REPO)
        self.assertEqual(into_dir.returncode, 1)
        self.assertEqual(len(into_dir.stderr.strip().splitlines()), 1, into_dir.stderr)

    def test_max_breaks_gate(self):
        self.assertNotEqual(run(BREAKS, "--fn", "normalize", *BREAK_INPUTS, "--max-breaks", "1").returncode, 0)
        self.assertEqual(run(BREAKS, "--fn", "normalize", *BREAK_INPUTS, "--max-breaks", "2").returncode, 0)

    def test_export_allow_breaks_runs(self):
        import marshal
        import importlib.util
        import torch
        from dynamo.loader import load_program, read_capture
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "n.pb")
            refused = export(BREAKS, "--fn", "normalize", *BREAK_INPUTS, "-o", out)
            self.assertNotEqual(refused.returncode, 0)
            self.assertIn("graph break", refused.stderr)
            self.assertFalse(os.path.exists(out))
            done = export(BREAKS, "--fn", "normalize", *BREAK_INPUTS, "-o", out, "--allow-breaks")
            self.assertEqual(done.returncode, 0, done.stderr)
            capture = read_capture(out)
        # relu*scale, then sum>0 after the print, then each branch's tail.
        self.assertEqual(len(capture.graphs), 4)
        self.assertEqual(len(capture.graph_breaks), 2)
        for r in capture.resume_functions:
            self.assertTrue(r.code)
            code = marshal.loads(r.code)
            list(dis.get_instructions(code))
            dis._parse_exception_table(code)
        spec = importlib.util.spec_from_file_location("breaks_example", BREAKS)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        program = load_program(capture, module.normalize, trusted=True)
        for sign in (1.0, -1.0):
            x, scale = torch.randn(4, 8) * sign, torch.rand(8)
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                got = program(x, scale)
            want = module.normalize(x, scale)
            self.assertTrue(torch.equal(got, want))
            self.assertIn("normalizing (4, 8)", printed.getvalue())


STEP = """
    import torch

    def step(x):
        y = torch.sin(x)
        return y + 1
"""
STEP_EXTRA_OP = STEP.replace("        return y + 1", "        y = torch.relu(y)\n        return y + 1")
STEP_PRINTS = STEP.replace("        return y + 1", "        print('step')\n        return y + 1")
RESNET = """
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
"""
MLP = os.path.join(REPO, "examples", "mlp.py")


class DiffTest(unittest.TestCase):
    """dynamo-inspect --diff A.pb B.pb: what changed between two saved
    captures, exit 0 when equal and 1 when not (a CI job watching a model's
    graphs across commits)."""

    tool = "dynamo-inspect"
    assert_one_line_error = BadInput.assert_one_line_error

    @classmethod
    def setUpClass(cls):
        cls.scratch = Scratch()
        cls.pb = {}

        def capture(name, script, *args):
            out = os.path.join(cls.scratch.dir.name, f"{name}.pb")
            result = export(script, *args, "-o", out)
            assert result.returncode == 0, result.stderr
            cls.pb[name] = out

        # The same script in two directories: as two checkouts of a model.
        for tag, text in [("one", STEP), ("two", STEP), ("op", STEP_EXTRA_OP), ("print", STEP_PRINTS)]:
            os.makedirs(os.path.join(cls.scratch.dir.name, tag))
            script = cls.scratch.write(os.path.join(tag, "model.py"), text)
            capture(f"step_{tag}", script, "--fn", "step", "-i", "x=f32[4]", "--allow-breaks")
        capture("mlp_1", MLP, "--fn", "model.forward", "-i", "x=f32[1,16]")
        capture("mlp_1_again", MLP, "--fn", "model.forward", "-i", "x=f32[1,16]")
        capture("mlp_2", MLP, "--fn", "model.forward", "-i", "x=f32[2,16]")
        resnet = cls.scratch.write("resnet.py", RESNET)
        for name, batch in [("resnet_1", 1), ("resnet_1_again", 1), ("resnet_2", 2)]:
            capture(name, resnet, "--fn", "model.forward", "-i", f"x=f32[{batch},3,224,224]")

    @classmethod
    def tearDownClass(cls):
        cls.scratch.dir.cleanup()

    def diff(self, a, b, *args, differs=True):
        result = run("--diff", self.pb[a], self.pb[b], *args)
        self.assertEqual(result.returncode, 1 if differs else 0, result)
        self.assertEqual(result.stderr, "")
        return result.stdout

    def test_same_capture_is_equal(self):
        self.assertEqual(self.diff("mlp_1", "mlp_1_again", differs=False), "captures are equal\n")
        # Exported from another directory: paths are compared relative to it.
        self.assertEqual(self.diff("step_one", "step_two", differs=False), "captures are equal\n")

    def test_input_shape_change(self):
        out = self.diff("mlp_1", "mlp_2")
        lines = out.splitlines()
        self.assertEqual(lines[:2], [f"--- {self.pb['mlp_1']}", f"+++ {self.pb['mlp_2']}"])
        self.assertIn("inputs\n  ~ L['x']: float32[1, 16] -> float32[2, 16]\n", out)
        self.assertIn("  ~ placeholder x: float32[1, 16] -> float32[2, 16]", lines)
        self.assertIn("  ~ outputs: float32[1, 16] grad -> float32[2, 16] grad", lines)
        self.assertRegex(out, r"guards\n  ~ TENSOR_MATCH L\['x'\]: float32\[1, 16\] strides \[16, 1\] cpu -> "
                              r"float32\[2, 16\] strides \[16, 1\] cpu\n")
        # The same operations: only their shapes changed.
        self.assertFalse([l for l in lines if l.startswith(("  + ", "  - "))], out)
        self.assertRegex(lines[-1], r"^captures differ: \d+ changes \(inputs 1, graph_0 \d+, guards 1\)$")

    def test_added_op(self):
        out = self.diff("step_one", "step_op")
        self.assertRegex(out, r"\n  ~ nodes: 4 -> 5\n")
        # The relu is new, and the add reads it now: the add's old line is
        # removed, then the two new lines are added, after the unchanged sin.
        self.assertIn("\n    call_function sin = torch.sin(x): float32[4]\n"
                      "  - call_function add = operator.add(sin, 1): float32[4]\n"
                      "  + call_function relu = torch.relu(sin): float32[4]\n"
                      "  + call_function add = operator.add(relu, 1): float32[4]\n"
                      "    output add\n", out)
        self.assertIn("\nguards\n  + ID_MATCH G['torch'].relu: ", out)
        self.assertIn("original bytecode\n", out)
        self.assertNotIn("source file", out)  # model.py in both, in other directories
        self.assertNotIn("graph breaks", out)

    def test_graph_break(self):
        out = self.diff("step_one", "step_print")
        self.assertIn("metadata\n  ~ graphs: 1 -> 2\n", out)
        self.assertRegex(out, r"\ngraph breaks\n  \+ model\.py:6 UNSUPPORTED_CALL at CALL: print\(\) is not traced\n")
        # A broken function's graphs are named after the globals that call them.
        self.assertIn("\ngraph_0 -> __dynamo_graph_0\n  ~ name: graph_0 -> __dynamo_graph_0\n"
                      "  ~ nodes: 4 -> 3\n  ~ outputs: float32[4] -> (float32[4],)\n", out)
        self.assertIn("\n__dynamo_graph_1\n  + graph __dynamo_graph_1 (3 nodes)\n  + placeholder y: float32[4]\n"
                      "  + call_function add = operator.add(y, 1): float32[4]\n", out)
        self.assertRegex(out, r"\nresume functions\n  \+ __dynamo_resume_\w+: continues at offset \d+")
        back = self.diff("step_print", "step_one")
        self.assertRegex(back, r"\ngraph breaks\n  - model\.py:6 UNSUPPORTED_CALL at CALL: print\(\) is not traced\n")
        self.assertIn("metadata\n  ~ graphs: 2 -> 1\n", back)

    def test_resnet18(self):
        self.assertEqual(self.diff("resnet_1", "resnet_1_again", differs=False), "captures are equal\n")
        out = self.diff("resnet_1", "resnet_2")
        lines = out.splitlines()
        self.assertIn("inputs\n  ~ L['x']: float32[1, 3, 224, 224] -> float32[2, 3, 224, 224]\n", out)
        self.assertIn("  ~ outputs: float32[1, 1000] grad -> float32[2, 1000] grad", lines)
        self.assertIn("  ~ call_function conv2d = torch.nn.functional.conv2d(x, conv1_weight, None, (2, 2), (3, 3), "
                      "(1, 1), 1): float32[1, 64, 112, 112] grad -> float32[2, 64, 112, 112] grad", lines)
        self.assertIn("  ~ call_function linear = torch.nn.functional.linear(flatten, fc_weight, fc_bias): "
                      "float32[1, 1000] grad -> float32[2, 1000] grad", lines)
        # Parameters do not depend on the batch: their lines are context.
        self.assertIn("    get_attr fc_weight = fc.weight: float32[1000, 512] grad", lines)
        self.assertFalse([l for l in lines if l.startswith(("  + ", "  - "))], "no op added or removed")
        self.assertFalse([l for l in lines if "get_attr" in l and l.startswith("  ~ ")], "parameters unchanged")
        self.assertNotIn("parameters\n", out)
        self.assertRegex(out, r"guards\n  ~ TENSOR_MATCH L\['x'\]: float32\[1, 3, 224, 224\]")
        import json
        doc = json.loads(run("--diff", self.pb["resnet_1"], self.pb["resnet_2"], "--json").stdout)
        self.assertFalse(doc["equal"])
        self.assertEqual([s["title"] for s in doc["sections"]], ["inputs", "graph_0", "guards"])
        self.assertEqual(doc["sections"][0]["changes"],
                         [{"kind": "changed", "text": "L['x']", "before": "float32[1, 3, 224, 224]",
                           "after": "float32[2, 3, 224, 224]"}])
        same = run("--diff", self.pb["resnet_1"], self.pb["resnet_1_again"], "--json")
        self.assertEqual(same.returncode, 0, same.stderr)
        self.assertEqual(json.loads(same.stdout), {"a": self.pb["resnet_1"], "b": self.pb["resnet_1_again"],
                                                   "equal": True, "sections": []})

    def test_bad_arguments(self):
        a = self.pb["step_one"]
        garbage = self.scratch.write("garbage.pb", "not a capture")
        empty = self.scratch.write("empty.pb", "")
        script = os.path.join(self.scratch.dir.name, "one", "model.py")
        for args, code, fragment in [
                (["--diff", a], 2, "--diff"),
                (["--diff", a, a, "--fn", "step"], 2, "--fn excludes --diff"),
                (["--diff", a, a, "-i", "f32[3]"], 2, "--input excludes --diff"),
                ([a, "--diff", a, a], 2, "script excludes --diff"),
                ([], 2, "give a script or a saved capture, or --diff A.pb B.pb"),
                (["--diff", a, "/nonexistent/x.pb"], 2, "cannot read '/nonexistent/x.pb'"),
                (["--diff", garbage, a], 2, f"'{garbage}' is not a libdynamo capture"),
                (["--diff", a, empty], 2, f"'{empty}' is not a libdynamo capture (no IR version)"),
                (["--diff", a, script], 2, f"--diff compares saved captures (.pb, .pbtxt or .json), not '{script}'")]:
            with self.subTest(args=args):
                result = run(*args)
                self.assert_one_line_error(result, fragment)
                self.assertEqual(result.returncode, code, result)


if __name__ == "__main__":
    INSPECT = os.path.abspath(sys.argv.pop(1))
    EXPORT = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
