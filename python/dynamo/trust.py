"""What a capture file may name: the checks that keep a .pb data, never code
(README, "Trust model").

A capture is shared like a data file, so every string in it is untrusted. The
loader lets a string reach Python only through these checks:

    identifier(name, what)    node names, keyword names, placeholders
    attribute_path(p, what)   get_attr targets: "layer1.0.weight"
    qualname(q, what)         Capture.function_name: "Model.forward", "f.<locals>.g"
    call_target(t, what)      CALL_FUNCTION targets -> the exact registry object
    method(t, what)           CALL_METHOD targets "Tensor.<name>" -> "<name>"
    layout(l, what)           torch.layout by name
    device(d, what)           torch.device from Device

Each failure is a CaptureError with one line that names the offending field
(the text quoted and cut short). Targets are never resolved by walking the
attributes a file names: the op registry (dynamo._C.op_targets()) lists the
canonical names libdynamo can write, each is resolved once from that trusted
list, and a capture's target is looked up in the result.
"""
import keyword
import math
import operator
import re
import types

import torch

# Limits on what a capture may hold: far beyond anything libdynamo writes,
# small enough that no input drives unbounded recursion or allocation.
MAX_NAME_LENGTH = 256
MAX_PATH_COMPONENTS = 64
MAX_ARGUMENT_DEPTH = 32   # nested lists/tuples/dicts in one argument
MAX_DIMS = 64
MAX_STRING_LENGTH = 1 << 16
MAX_DIM_SIZE = 1 << 62

# ASCII only: Python folds non-ASCII identifiers by NFKC, so "ｓelf" would
# name "self"; nothing libdynamo writes needs more.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INDEX = re.compile(r"(0|[1-9][0-9]{0,17})\Z")        # nn.Sequential children: "layer1.0"
_CODE_NAME = re.compile(r"<[a-z]{1,16}>\Z")            # "<locals>", "<lambda>" in qualnames
_DEVICE_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")

# Targets the graph builder writes itself, outside the op registry
# (lib/trace: the grad-mode switch around a no_grad region).
_GRAPH_BUILDER_TARGETS = ("torch._C._set_grad_enabled",
                          # a torch.autocast block's state changes (lib/trace/autocast.cc)
                          "torch.set_autocast_enabled", "torch.set_autocast_dtype",
                          "torch.set_autocast_cache_enabled", "torch.autocast_increment_nesting",
                          "torch.autocast_decrement_nesting", "torch.clear_autocast_cache",
                          # torch.cond's node (lib/trace/higher_order.cc)
                          "torch.ops.higher_order.cond",
                          # numbers read from tensors (lib/trace/scalars.cc)
                          "Tensor.item", "Tensor.tolist", "torch.sym_int", "torch.sym_float")
# The modules canonical names start from; "Tensor.*" names are methods.
_NAMESPACES = {"torch": torch, "operator": operator, "math": math}
_LAYOUTS = ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc",
            "_mkldnn", "jagged")


class CaptureError(ValueError):
    """The file is not a capture this loader can turn into graphs."""


def show(text, limit=60):
    """`text` quoted for a one-line message: repr escapes newlines and
    control characters, and a long string is cut."""
    if len(text) > limit:
        return repr(text[:limit]) + f"... ({len(text)} characters)"
    return repr(text)


def _dunder(name):
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def label(text):
    """A name for a message: as it is when it is a plain name, else quoted."""
    return text if len(text) <= MAX_NAME_LENGTH and _IDENTIFIER.match(text) else show(text)


def identifier(text, what):
    """A plain Python identifier: ASCII, not a keyword, not a dunder."""
    if (len(text) > MAX_NAME_LENGTH or not _IDENTIFIER.match(text) or keyword.iskeyword(text)
            or _dunder(text)):
        raise CaptureError(f"{what}: {show(text)} is not a plain identifier")
    return text


def generated_name(text, what):
    """A global the rewritten code calls: libdynamo's own "__dynamo_*" names,
    so installing one can never replace a name of the user's module."""
    if len(text) > MAX_NAME_LENGTH or not _IDENTIFIER.match(text) or not text.startswith("__dynamo_"):
        raise CaptureError(f"{what}: {show(text)} is not a name libdynamo generates")
    return text


# One component of an attribute path: a child index, or an identifier that
# is neither a keyword nor a dunder (the rules of identifier()), as one
# pattern: a live capture checks every get_attr target (~100 for resnet18).
_PATH_PART = (r"(?:(?:0|[1-9][0-9]{0,17})|(?!(?:%s)(?:\.|\Z))(?!__[A-Za-z0-9_]+__(?:\.|\Z))[A-Za-z_][A-Za-z0-9_]*)"
              % "|".join(keyword.kwlist))
_PATH = re.compile(rf"{_PATH_PART}(?:\.{_PATH_PART})*\Z")


def attribute_path(text, what):
    """A dotted path of identifiers or child indices ("layer1.0.weight"); no
    dunder component ("__class__"), so walking it reaches only modules and
    their tensors. ("__w" is allowed: a global "_w" becomes that target.)"""
    if len(text) > MAX_NAME_LENGTH * 4 or text.count(".") >= MAX_PATH_COMPONENTS:
        raise CaptureError(f"{what}: {show(text)} is too long a path")
    if not _PATH.match(text):
        raise CaptureError(f"{what}: {show(text)} is not a path of identifiers")
    return text


def qualname(text, what):
    """A function's co_qualname: identifiers and "<locals>"-like markers."""
    if text == "":
        return text
    parts = text.split(".")
    if len(text) > MAX_NAME_LENGTH * 4 or len(parts) > MAX_PATH_COMPONENTS or not all(
            (_IDENTIFIER.match(p) and not keyword.iskeyword(p)) or _CODE_NAME.match(p) for p in parts):
        raise CaptureError(f"{what}: {show(text)} is not a function's qualified name")
    return text


def class_name(function_name):
    """The GraphModule's class name, made from a checked qualname."""
    return re.sub(r"[^A-Za-z0-9_]", "_", function_name) + "_graph"


class _Allowlist:
    functions = None  # canonical name -> the object it names
    methods = None    # Tensor method names


def _load_allowlist():
    if _Allowlist.functions is not None:
        return _Allowlist
    from dynamo import _C
    functions, methods = {}, set()
    for name in tuple(_C.op_targets()) + _GRAPH_BUILDER_TARGETS:
        root, _, rest = name.partition(".")
        if root == "Tensor":
            if _IDENTIFIER.match(rest) and hasattr(torch.Tensor, rest):
                methods.add(rest)
            continue
        obj = _NAMESPACES.get(root)
        # The walk follows the registry's own names, never a file's.
        for part in rest.split(".") if rest else ():
            obj = getattr(obj, part, None)
        if obj is None or isinstance(obj, types.ModuleType) or not callable(obj):
            continue  # an entry this torch lacks: a capture naming it cannot be loaded
        functions[name] = obj
    _Allowlist.functions, _Allowlist.methods = functions, frozenset(methods)
    return _Allowlist


def call_target(text, what):
    """The object a CALL_FUNCTION target names, from the registry's list."""
    obj = _load_allowlist().functions.get(text)
    if obj is None:
        raise CaptureError(f"{what}: call target {show(text)} is not an operation libdynamo knows")
    return obj


def method(text, what):
    """The method name of a CALL_METHOD target "Tensor.<name>"."""
    prefix, _, name = text.partition(".")
    if prefix != "Tensor" or name not in _load_allowlist().methods:
        raise CaptureError(f"{what}: method target {show(text)} is not a Tensor method libdynamo knows")
    return name


def layout(text, what):
    if text not in _LAYOUTS or not isinstance(getattr(torch, text, None), torch.layout):
        raise CaptureError(f"{what}: {show(text)} is not a torch.layout")
    return getattr(torch, text)


_DEVICES = {}  # (type, index) -> torch.device, for those already checked


def device(pb_device, what):
    return device_named(pb_device.type or "cpu", pb_device.index, what)


def device_named(kind, index, what):
    """The torch.device of type `kind` ("cuda") and `index` (-1: none)."""
    known = _DEVICES.get((kind, index))
    if known is not None:
        return known
    made = _new_device(kind, index, what)
    if len(_DEVICES) < 256:  # a file may name many: the cache stays small
        _DEVICES[(kind, index)] = made
    return made


def _new_device(kind, index, what):
    if not _DEVICE_TYPE.match(kind) or not -1 <= index < (1 << 16):
        raise CaptureError(f"{what}: {show(kind)}:{index} is not a device")
    try:
        if index >= 0 and kind != "cpu":
            return torch.device(kind, index)
        return torch.device(kind)
    except (RuntimeError, ValueError):
        raise CaptureError(f"{what}: {show(kind)} is not a device type torch knows") from None


def string(text, what):
    """A str constant: passed to operations as a value (FX prints it with
    repr), only bounded in length."""
    if len(text) > MAX_STRING_LENGTH:
        raise CaptureError(f"{what}: a string constant of {len(text)} characters")
    return text
