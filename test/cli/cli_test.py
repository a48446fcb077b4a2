"""dynamo-inspect as a user meets it: good scripts give a deterministic
listing that agrees with dis; bad input gives one clear line on stderr and a
non-zero exit, never a crash or a C++/Python traceback.

Run by CTest as: python3.11 cli_test.py PATH/TO/dynamo-inspect
"""
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


def run(*args, cwd=None):
    return subprocess.run([INSPECT, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


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

    def assert_one_line_error(self, result, *fragments):
        self.assertNotEqual(result.returncode, 0, result)
        self.assertLess(result.returncode, 128, f"killed by a signal: {result}")
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, f"expected one line on stderr, got:\n{result.stderr}")
        self.assertTrue(lines[0].startswith("dynamo-inspect: error: "), lines[0])
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
        self.assertNotIn("0x", first.stdout)  # no addresses: listings can be diffed

    def test_no_nested(self):
        result = run(self.good, "--fn", "forward", "--no-nested")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("<lambda> (", result.stdout)

    def test_bundled_example(self):
        example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mlp.py")
        result = run(example, "--fn", "model.forward")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("Disassembly of MLP.forward", result.stdout)


if __name__ == "__main__":
    INSPECT = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
