"""The code-object corpus the bytecode tests and benchmark run over.

Every .py file of the target interpreter's standard library and of the torch
and torchvision packages is loaded with its loader's get_code() (from the
cached .pyc when one is fresh, else compiled from source): the module's own
code object, from which every nested code object is reachable through
co_consts. Nothing is executed, so modules with import-time side effects or
missing optional dependencies are still covered. Files that cannot be
compiled (test data with deliberate syntax errors) are counted as skipped.

DYNAMO_BYTECODE_CORPUS selects roots (comma-separated; default
"stdlib,torch,torchvision,numpy,scipy"); DYNAMO_BYTECODE_CORPUS_LIMIT caps the number of
files per root (for sanitizer runs).
"""
import dis
import importlib.machinery
import importlib.util
import io
import os
import re
import sys
import sysconfig

sys.dont_write_bytecode = True  # never write .pyc files into system directories

DEFAULT_ROOTS = "stdlib,torch,torchvision,numpy,scipy"


def _root_dirs(root):
    if root == "stdlib":
        stdlib = sysconfig.get_paths()["stdlib"]
        return [(stdlib, "")]
    spec = importlib.util.find_spec(root)
    if spec is None or not spec.submodule_search_locations:
        return []
    return [(d, root) for d in spec.submodule_search_locations]


def _skip_dir(path, name):
    return name in ("site-packages", "dist-packages", "__pycache__") or name.startswith(".")


def files(roots=None):
    """Yields (root, module_name, path) for every source file of the roots."""
    roots = roots or os.environ.get("DYNAMO_BYTECODE_CORPUS", DEFAULT_ROOTS)
    limit = int(os.environ.get("DYNAMO_BYTECODE_CORPUS_LIMIT", "0") or 0)
    for root in [r.strip() for r in roots.split(",") if r.strip()]:
        count = 0
        for base, prefix in _root_dirs(root):
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if not _skip_dir(dirpath, d))
                rel = os.path.relpath(dirpath, base)
                package = [] if rel == "." else rel.split(os.sep)
                for fn in sorted(filenames):
                    if not fn.endswith(".py"):
                        continue
                    parts = ([prefix] if prefix else []) + package
                    if fn != "__init__.py":
                        parts.append(fn[:-3])
                    yield root, ".".join(parts) or fn[:-3], os.path.join(dirpath, fn)
                    count += 1
                    if limit and count >= limit:
                        break
                if limit and count >= limit:
                    break


def load(roots=None):
    """Returns (codes, skipped): codes is a list of (module_name, code); skipped
    is a list of (path, reason) for files whose code could not be obtained."""
    codes, skipped = [], []
    for _root, name, path in files(roots):
        try:
            code = importlib.machinery.SourceFileLoader(name, path).get_code(name)
        except Exception as e:  # noqa: BLE001 -- every failure is counted and reported
            skipped.append((path, f"{type(e).__name__}: {e}"))
            continue
        if code is None:
            skipped.append((path, "no code object"))
        else:
            codes.append((name, code))
    return codes, skipped


def walk(code):
    """Every code object reachable from `code` through co_consts, depth first,
    parent before children, children in co_consts order."""
    yield code
    for c in code.co_consts:
        if isinstance(c, type(code)):
            yield from walk(c)


def dis_records(code):
    """What dis reports for one code object, with EXTENDED_ARG folded the way
    libdynamo folds it: one tuple per real instruction,
    (offset, opcode_offset, opname, arg, argval, argrepr, starts_line,
     is_jump_target, lineno, end_lineno, col, end_col)."""
    out = []
    prefix_offset = None
    prefix_line = None
    prefix_target = None
    for ins in dis.get_instructions(code):
        if ins.opname == "EXTENDED_ARG":
            if prefix_offset is None:
                prefix_offset, prefix_target = ins.offset, ins.is_jump_target
            if prefix_line is None:
                prefix_line = _starts_line(ins)
            continue
        offset = ins.offset if prefix_offset is None else prefix_offset
        starts = _starts_line(ins) if prefix_line is None else prefix_line
        target = ins.is_jump_target if prefix_target is None else prefix_target
        p = ins.positions
        out.append((offset, ins.offset, ins.opname, ins.arg, ins.argval, ins.argrepr,
                    starts, target, p.lineno, p.end_lineno, p.col_offset, p.end_col_offset))
        prefix_offset = prefix_line = prefix_target = None
    return out


def _starts_line(ins):
    """The line number if a source line starts at `ins`, else None. Up to
    3.12 dis's starts_line is that number; 3.13 makes it a bool beside
    line_number (which is None where a run without a line starts)."""
    if isinstance(ins.starts_line, bool):
        return ins.line_number if ins.starts_line else None
    return ins.starts_line


def dis_text(code):
    """dis.disassemble's listing of one code object (not its children), with
    code-object constants written without their address, as libdynamo's
    listing writes them."""
    buf = io.StringIO()
    dis.disassemble(code, file=buf)
    return re.sub(r'<code object (.+?) at 0x[0-9a-f]+, file "[^"]*", line (\d+)>',
                  r"<code object \1, line \2>", buf.getvalue())


def exception_entries(code):
    return [(e.start, e.end, e.target, e.depth, e.lasti)
            for e in dis._parse_exception_table(code)]


def all_code_objects(roots=None):
    """Every code object of the corpus, flattened (the benchmark's input)."""
    codes, _ = load(roots)
    return [c for _name, module in codes for c in walk(module)]


def dis_everything(code_objects):
    """Python's own decoding of each code object: the benchmark's peer."""
    n = 0
    for co in code_objects:
        n += len(list(dis.get_instructions(co)))
    return n
