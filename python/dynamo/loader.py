"""Turns a libdynamo Capture (.pb) back into torch.fx.GraphModules: the bridge
to every torch backend, and how the tests run captured graphs.

    from dynamo.loader import load
    gm, capture = load("model.pb")                 # weights stored in the capture
    gm, capture = load("model.pb", root=model)     # or taken from the module
    out = gm(x)

Each node keeps the metadata the capture recorded, as node.meta["dynamo_meta"]
(a dict with dtype, sizes, strides, device, requires_grad), so a consumer can
compare it with what running the graph produces.

A capture file is data (README, "Trust model"): loading one builds a graph of
the op registry's operations and the capture's tensors, and nothing else.
Names are checked and call targets looked up in the registry's list
(dynamo.trust); a side file is read only beside the capture. Only
load_program runs code a capture carries, and only with trusted=True.
"""
import os
import re
import stat
import types

import torch
import torch.fx
from google.protobuf import message

from dynamo import dynamo_ir_pb2 as ir
from dynamo import trust
from dynamo.trust import CaptureError

SUPPORTED_IR_VERSION = ir.IR_VERSION_CURRENT

_DTYPES = {
    ir.DTYPE_BOOL: torch.bool, ir.DTYPE_UINT8: torch.uint8, ir.DTYPE_INT8: torch.int8,
    ir.DTYPE_INT16: torch.int16, ir.DTYPE_INT32: torch.int32, ir.DTYPE_INT64: torch.int64,
    ir.DTYPE_FLOAT16: torch.float16, ir.DTYPE_BFLOAT16: torch.bfloat16,
    ir.DTYPE_FLOAT32: torch.float32, ir.DTYPE_FLOAT64: torch.float64,
    ir.DTYPE_COMPLEX64: torch.complex64, ir.DTYPE_COMPLEX128: torch.complex128,
}
_MEMORY_FORMATS = {
    ir.MEMORY_FORMAT_CONTIGUOUS: torch.contiguous_format,
    ir.MEMORY_FORMAT_CHANNELS_LAST: torch.channels_last,
    ir.MEMORY_FORMAT_CHANNELS_LAST_3D: torch.channels_last_3d,
    ir.MEMORY_FORMAT_PRESERVE: torch.preserve_format,
}


# Torch operators a node flagged inferred_on_meta may name (the rule of
# lib/trace/meta_fallback.h): each name resolves in one fixed namespace, one
# identifier at a time, and the object must be an operator of that
# namespace's kind; nothing else a file names is looked up.
_OPERATOR_MODULES = {"_nn": torch._C._nn, "_linalg": torch._C._linalg, "_fft": torch._C._fft,
                     "_special": torch._C._special}
# Bindings whose effect leaves the tensors (files, printing): never a target.
_NOT_OPERATORS = frozenset({"from_file", "save", "_print"})
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


def _plain(part):
    return bool(_PLAIN.match(part)) and not (part.startswith("__") and part.endswith("__"))


def torch_operator(text):
    """What a fallback node's target names: the builtin or OpOverload(Packet)
    for a function target, the method name for "Tensor.<name>"; None when
    the text names no torch operator."""
    parts = text.split(".")
    if len(text) > trust.MAX_NAME_LENGTH or len(parts) < 2 or not all(_plain(p) for p in parts[1:]):
        return None
    if parts[0] == "Tensor" and len(parts) == 2:
        m = getattr(torch.Tensor, parts[1], None)
        ok = isinstance(m, types.MethodDescriptorType) and m.__objclass__ is torch._C.TensorBase
        return parts[1] if ok else None
    if parts[0] != "torch" or _NOT_OPERATORS.intersection(parts):
        return None
    if len(parts) == 2:
        f = getattr(torch._C._VariableFunctions, parts[1], None)
        return f if isinstance(f, types.BuiltinFunctionType) else None
    if len(parts) == 4 and parts[1] == "_C" and parts[2] in _OPERATOR_MODULES:
        f = getattr(_OPERATOR_MODULES[parts[2]], parts[3], None)
        return f if isinstance(f, types.BuiltinFunctionType) else None
    if len(parts) in (4, 5) and parts[1] == "ops" and parts[2] == "aten":
        try:
            op = getattr(torch.ops.aten, parts[3])
            if not isinstance(op, torch._ops.OpOverloadPacket):
                return None
            if len(parts) == 5:
                op = getattr(op, parts[4])
                if not isinstance(op, torch._ops.OpOverload):
                    return None
            return op
        except (AttributeError, RuntimeError):
            return None
    return None


_SHADOWED = {}


def _unshadowed(op):
    """FX prints a torch builtin as torch.<name>, and for a few (torch.functional's
    broadcast_tensors, meshgrid, ...) that name is a Python wrapper with
    another signature: the graph calls the builtin through a function of
    ours, which FX keeps as an object."""
    if getattr(torch, op.__name__, None) is op:
        return op
    if op.__name__ not in _SHADOWED:
        def call(*args, **kwargs):
            return op(*args, **kwargs)
        call.__name__ = call.__qualname__ = f"_VF_{op.__name__}"
        _SHADOWED[op.__name__] = call
    return _SHADOWED[op.__name__]


def _operator_target(text, what):
    op = torch_operator(text)
    if op is None or isinstance(op, str):
        raise CaptureError(f"{what}: call target {trust.show(text)} is no torch operator "
                           "(a node inferred on meta names one)")
    return _unshadowed(op) if text.count(".") == 1 else op


def _operator_method(text, what):
    name = torch_operator(text) if text.startswith("Tensor.") else None
    if name is None:
        raise CaptureError(f"{what}: method target {trust.show(text)} is no Tensor method that is a torch operator")
    return name


def read_capture(path):
    """Parses a .pb (binary), .pbtxt or .json capture. Anything that is not a
    capture, nested past protobuf's limits included, is one CaptureError."""
    capture = ir.Capture()
    with open(path, "rb") as f:
        data = f.read()
    try:
        if path.endswith(".pbtxt"):
            from google.protobuf import text_format
            text_format.Parse(data.decode(), capture)
        elif path.endswith(".json"):
            from google.protobuf import json_format
            json_format.Parse(data.decode(), capture)
        else:
            capture.ParseFromString(data)
    except (message.Error, ValueError, RecursionError, MemoryError) as e:
        # message.Error: protobuf's DecodeError and both ParseErrors.
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise CaptureError(f"{path}: not a libdynamo capture ({reason})") from None
    if capture.ir_version == ir.IR_VERSION_UNSPECIFIED or capture.ir_version > SUPPORTED_IR_VERSION:
        raise CaptureError(f"{path}: IR version {capture.ir_version} is not supported "
                           f"(this loader reads up to {SUPPORTED_IR_VERSION})")
    return capture


def dtype_of(pb_dtype):
    try:
        return _DTYPES[pb_dtype]
    except KeyError:
        raise CaptureError(f"unknown dtype {pb_dtype}") from None


def memory_format_of(pb_format, what="memory format"):
    try:
        return _MEMORY_FORMATS[pb_format]
    except KeyError:
        raise CaptureError(f"{what}: unknown memory format {pb_format}") from None


def device_of(pb_device, what="device"):
    return trust.device(pb_device, what)


def _dim(d):
    if d.WhichOneof("value") != "size":
        text = d.symbol or d.expr
        raise CaptureError(f"symbolic size {trust.show(text)} cannot be materialised")
    return d.size


def _dim_or_symbol(d):
    """A size, or the text of a symbolic one ("s0", "2*s0 + 1")."""
    which = d.WhichOneof("value")
    if which == "size":
        return d.size
    return trust.string(d.symbol if which == "symbol" else d.expr, "a symbolic size")


def meta_dict(pb_meta, what="tensor", symbolic=False):
    """TensorMeta as a plain dict, for comparisons (strides [] when untracked).
    With `symbolic`, a symbolic size or stride is its text ("s0", "768*s1")."""
    if len(pb_meta.sizes) > trust.MAX_DIMS or len(pb_meta.strides) > trust.MAX_DIMS:
        raise CaptureError(f"{what}: more than {trust.MAX_DIMS} dimensions")
    dim = _dim_or_symbol if symbolic else _dim
    sizes = [dim(d) for d in pb_meta.sizes]
    if any(isinstance(s, int) and (s < 0 or s > trust.MAX_DIM_SIZE) for s in sizes):
        raise CaptureError(f"{what}: sizes {sizes} are not tensor sizes")
    return {
        "dtype": dtype_of(pb_meta.dtype),
        "sizes": sizes,
        "strides": [dim(d) for d in pb_meta.strides],
        "device": device_of(pb_meta.device, what),
        "requires_grad": pb_meta.requires_grad,
    }


def _external_bytes(attr, nbytes, base_dir, what):
    """The attribute's bytes from its side file: a plain file name in the
    capture's own directory (no path, no link), the range inside the file."""
    ext = attr.external
    name = ext.path
    if (not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name
            or len(name) > trust.MAX_NAME_LENGTH):
        raise CaptureError(f"{what}: external data {trust.show(name)} is not a file name "
                           "beside the capture")
    if ext.offset < 0 or ext.length != nbytes:
        raise CaptureError(f"{what}: external data range {ext.offset}+{ext.length} does not "
                           f"hold {nbytes} bytes")
    try:
        fd = os.open(os.path.join(base_dir, name), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise CaptureError(f"{what}: external data {trust.show(name)}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or ext.offset + nbytes > info.st_size:
            raise CaptureError(f"{what}: external data {trust.show(name)} is not a regular file "
                               f"holding bytes {ext.offset}..{ext.offset + nbytes}")
        f.seek(ext.offset)
        return bytearray(f.read(nbytes))


def _attribute_tensor(attr, base_dir):
    what = f"attribute {attr.target}"
    meta = meta_dict(attr.meta, what)
    which = attr.WhichOneof("storage")
    if which is None:
        return None
    numel = 1
    for s in meta["sizes"]:
        numel *= s
    nbytes = numel * meta["dtype"].itemsize
    if which == "data":
        if len(attr.data) != nbytes:
            raise CaptureError(f"{what}: {len(attr.data)} bytes of data for {nbytes} bytes of "
                               f"{meta['dtype']}{meta['sizes']}")
        data = bytearray(attr.data)
    else:
        data = _external_bytes(attr, nbytes, base_dir, what)
    if numel == 0:
        tensor = torch.empty(meta["sizes"], dtype=meta["dtype"])
    else:
        tensor = torch.frombuffer(data, dtype=meta["dtype"]).reshape(meta["sizes"]).clone()
    tensor = tensor.to(meta["device"])
    if meta["requires_grad"]:
        return torch.nn.Parameter(tensor)
    return tensor


def _set_path(module, path, value):
    *parents, leaf = path.split(".")
    for p in parents:
        child = getattr(module, p, None)
        if child is None:
            child = torch.nn.Module()
            module.add_module(p, child)
        module = child
    if isinstance(value, torch.nn.Parameter):
        module.register_parameter(leaf, value)
    else:
        module.register_buffer(leaf, value)


def _get_path(module, path):
    obj = module
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


def _get_path_or_none(module, path):
    try:
        return _get_path(module, path)
    except AttributeError:
        return None


def _argument(arg, env, what, depth=0):
    if depth > trust.MAX_ARGUMENT_DEPTH:
        raise CaptureError(f"{what}: arguments nested deeper than {trust.MAX_ARGUMENT_DEPTH}")
    which = arg.WhichOneof("value")
    if which == "node":
        try:
            return env[arg.node]
        except KeyError:
            raise CaptureError(f"{what}: argument {trust.show(arg.node)} is no earlier node") from None
    if which == "int_value":
        return arg.int_value
    if which == "float_value":
        return arg.float_value
    if which == "bool_value":
        return arg.bool_value
    if which == "string_value":
        return trust.string(arg.string_value, what)
    if which == "none" or which is None:
        return None
    if which == "list":
        items = [_argument(a, env, what, depth + 1) for a in arg.list.items]
        return tuple(items) if arg.list.is_tuple else items
    if which == "dict":
        if len(arg.dict.keys) != len(arg.dict.values):
            raise CaptureError(f"{what}: a dict with {len(arg.dict.keys)} keys and "
                               f"{len(arg.dict.values)} values")
        return {trust.string(k, what): _argument(v, env, what, depth + 1)
                for k, v in zip(arg.dict.keys, arg.dict.values)}
    if which == "dtype":
        return dtype_of(arg.dtype)
    if which == "device":
        return device_of(arg.device, what)
    if which == "slice":
        s = arg.slice

        def bound(field):
            node = getattr(s, field + "_node")
            if node:  # a size the graph computes (dynamic shapes)
                try:
                    return env[node]
                except KeyError:
                    raise CaptureError(f"{what}: slice bound {trust.show(node)} is no earlier node") from None
            return getattr(s, field) if s.HasField(field) else None
        return slice(bound("start"), bound("stop"), bound("step"))
    if which == "ellipsis":
        return Ellipsis
    if which == "memory_format":
        return memory_format_of(arg.memory_format, what)
    if which == "layout":
        return trust.layout(arg.layout, what)
    raise CaptureError(f"{what}: unknown argument kind {which}")


def _attribute_values(capture, pb_graph, root, base_dir, attributes):
    """{target: tensor} for each attribute the graph's get_attr nodes read:
    from `attributes`, the capture or `root`. FX's GraphModule takes the
    dict as its root and places each at its dotted path."""
    used = set()
    for n in pb_graph.nodes:
        if n.kind == ir.Node.GET_ATTR:
            used.add(trust.attribute_path(n.target, f"node {trust.label(n.name)}"))
    values = {}
    for attr in capture.attributes:
        if attr.target not in used or attr.target in values:
            continue
        what = f"attribute {attr.target}"
        tensor = attributes.get(attr.target) if attributes else None
        if tensor is None:
            tensor = _attribute_tensor(attr, base_dir)
        if tensor is None:
            if root is None:
                raise CaptureError(f"{what} ({trust.show(attr.source)}) has no stored "
                                   "value: export with --weights embed or pass root=")
            tensor = _get_path_or_none(root, attr.target)
        if not isinstance(tensor, torch.Tensor):
            raise CaptureError(f"{what}: {type(tensor).__name__} is not a tensor")
        values[attr.target] = tensor
    check_paths(values)
    return values


def check_paths(values):
    """One path of `values` may not be both a tensor and the parent of another."""
    for target in values:
        parent = target.rpartition(".")[0]
        while parent:
            if parent in values:
                raise CaptureError(f"attribute {target}: {parent} is a tensor, not a module")
            parent = parent.rpartition(".")[0]


def _kind_name(kind):
    return ir.Node.Kind.Name(kind) if kind in ir.Node.Kind.values() else str(kind)


def to_graph_module(capture, graph_index=0, root=None, base_dir=".", attributes=None, callables=None, lint=True):
    """One graph of the capture as a torch.fx.GraphModule.

    Attribute values come from `attributes` ({target: tensor}, what a live
    capture hands over), else from the capture when it stored them, else from
    `root` (the module the capture was made from) by their target path.
    `callables` ({target: callable}) is what a live capture's caller hands
    over for nodes that call functions put in the graph with
    dynamo.allow_in_graph; the file's text never picks code to run.

    Every name is checked and every call target is looked up in the op
    registry's list (dynamo.trust) before FX sees it: a capture names
    operations and tensors, never code (README, "Trust model"). `lint=False`
    skips FX's own consistency walk of the graph, for a capture this
    process just made (the checks above still run). A live capture's
    backend gets a dynamo.deferred.DeferredGraphModule instead, built from
    the capture in memory."""
    if not 0 <= graph_index < len(capture.graphs):
        raise CaptureError(f"the capture has no graph {graph_index}")
    pb_graph = capture.graphs[graph_index]
    trust.qualname(capture.function_name, "function name")
    values = _attribute_values(capture, pb_graph, root, base_dir, attributes)
    class_name = trust.class_name(capture.function_name)
    try:
        return _graph_module(pb_graph, values, callables, class_name, lint, 0)
    except CaptureError:
        raise
    except Exception as e:  # noqa: BLE001 -- whatever FX raises, the capture is at fault
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise CaptureError(f"graph {graph_index}: not a graph FX can build ({reason})") from None


def call_target(target, inferred_on_meta, callables, what):
    """The callable a CALL_FUNCTION node's target names: a function the live
    capture put in the graph (`callables`), torch._numpy's, a torch operator
    for a node inferred on meta, else one of the registry's list
    (dynamo.trust)."""
    allowed = callables.get(target) if callables else None
    if allowed is None and target.startswith("allow_in_graph."):
        raise CaptureError(f"{what}: call target {trust.show(target)} is a function put in the graph "
                           "by dynamo.allow_in_graph: only the live capture that made it can call it")
    if allowed is None and target.startswith("torch._numpy."):
        # NumPy on tensors (dynamo.numpy_bridge): torch._numpy's own
        # functions, methods and operators, by name.
        from dynamo import numpy_bridge
        allowed = numpy_bridge.resolve(target)
        if allowed is None:
            raise CaptureError(f"{what}: call target {trust.show(target)} names nothing in torch._numpy")
    if allowed is None:
        allowed = _operator_target(target, what) if inferred_on_meta else trust.call_target(target, what)
    return allowed


def method_name(target, inferred_on_meta, what):
    """The Tensor method a CALL_METHOD node's target calls, by name."""
    return _operator_method(target, what) if inferred_on_meta else trust.method(target, what)


# How deep subgraphs may nest (torch.cond in a branch of one); the checker's bound.
MAX_SUBGRAPH_DEPTH = 32


def _graph_module(pb_graph, values, callables, class_name, lint, depth):
    """pb_graph as a GraphModule whose root holds `values` and, under their
    names, its subgraphs' GraphModules (torch.cond's branches), built first."""
    if depth > MAX_SUBGRAPH_DEPTH:
        raise CaptureError(f"graph {trust.label(pb_graph.name)}: subgraphs nest deeper than {MAX_SUBGRAPH_DEPTH}")
    subgraphs = {}
    for sub in pb_graph.subgraphs:
        what = f"subgraph {trust.label(sub.name)}"
        trust.identifier(sub.name, what)
        if sub.name in subgraphs or sub.name in values:
            raise CaptureError(f"{what}: a second attribute of that name")
        subgraphs[sub.name] = _graph_module(sub, values, callables, class_name, lint, depth + 1)
    graph = fx_graph(pb_graph, values, subgraphs, callables)
    if lint:
        graph.lint()
    # FX generates the forward's source here; a node it cannot print (an
    # operator given the wrong number of arguments) fails here too.
    return torch.fx.GraphModule(dict(values, **subgraphs) if subgraphs else values, graph, class_name=class_name)


class _NodeLabel:
    """"node <name>" for a message, made only when one is written (a live
    capture checks every node; none of its checks fails)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"node {trust.label(self.name)}"

    def __format__(self, spec):
        return format(str(self), spec)


def checked_nodes(pb_graph, env):
    """(node, what, args, kwargs) for each node of pb_graph: its name checked
    (a plain identifier, not seen before, not after the output node) and its
    arguments read, a node's name standing for env[name] -- which the caller
    fills in as it builds each node."""
    done = False
    for node in pb_graph.nodes:
        what = _NodeLabel(node.name)
        trust.identifier(node.name, what)
        if done:
            raise CaptureError(f"{what}: comes after the output node")
        if node.name in env:
            raise CaptureError(f"{what}: a second node of that name")
        args = tuple(_argument(a, env, what) for a in node.args)
        kwargs = {}
        for k in node.kwargs:
            trust.identifier(k.name, f"{what}: keyword")
            kwargs[k.name] = _argument(k.value, env, f"{what}: keyword {k.name}")
        done = node.kind == ir.Node.OUTPUT
        yield node, what, args, kwargs


def fx_graph(pb_graph, values, subgraphs, callables):
    """pb_graph's nodes as a torch.fx.Graph, each name checked and each call
    target resolved (call_target); `values` are the attribute tensors and
    `subgraphs` the GraphModules get_attr nodes may name."""
    graph = torch.fx.Graph()
    env = {}
    for node, what, args, kwargs in checked_nodes(pb_graph, env):
        if node.kind == ir.Node.PLACEHOLDER:
            fx_node = graph.placeholder(node.name)
        elif node.kind == ir.Node.GET_ATTR and node.meta.WhichOneof("kind") == "graph":
            if node.target not in subgraphs or node.meta.graph != node.target:
                raise CaptureError(f"{what}: get_attr target {trust.show(node.target)} is none of the graph's "
                                   "subgraphs")
            fx_node = graph.get_attr(node.target)
        elif node.kind == ir.Node.GET_ATTR:
            # FX would print a missing path as code that fails only when called.
            if node.target not in values:
                raise CaptureError(f"{what}: get_attr target {trust.show(node.target)} is none "
                                   "of the capture's attributes")
            fx_node = graph.get_attr(node.target)
        elif node.kind == ir.Node.CALL_FUNCTION:
            fx_node = graph.call_function(call_target(node.target, node.inferred_on_meta, callables, what), args, kwargs)
        elif node.kind == ir.Node.CALL_METHOD:
            if not args:
                raise CaptureError(f"{what}: a method call without its object")
            fx_node = graph.call_method(method_name(node.target, node.inferred_on_meta, what), args, kwargs)
        elif node.kind == ir.Node.OUTPUT:
            graph.output(args[0] if len(args) == 1 else args)
            continue
        else:
            # CALL_MODULE included: libdynamo inlines modules down to
            # operations and never writes one, and a loaded capture has no
            # modules to call.
            raise CaptureError(f"{what}: node kind {_kind_name(node.kind)} is not one libdynamo writes")
        fx_node.name = node.name
        if node.inferred_on_meta:
            fx_node.meta["dynamo_inferred_on_meta"] = node.target  # the canonical name
        kind = node.meta.WhichOneof("kind")
        if kind == "tensor":
            fx_node.meta["dynamo_meta"] = meta_dict(node.meta.tensor, what, symbolic=True)
        env[node.name] = fx_node
    return graph


def load(path, root=None, graph_index=0):
    """(GraphModule, Capture) for the capture at `path`."""
    capture = read_capture(path)
    if not capture.graphs:
        raise CaptureError(f"{path}: the capture has no graphs")
    gm = to_graph_module(capture, graph_index, root, os.path.dirname(os.path.abspath(path)))
    return gm, capture


def load_program(capture, function, root=None, base_dir=".", *, trusted=False):
    """A callable that runs a capture made with graph breaks (dynamo-export
    --allow-breaks) the way the live shim would: the rewritten code, with each
    graph as a torch.fx.GraphModule and each resume function bound under the
    global name the code calls it by (installed in `function`'s globals).

    The capture's code objects are code, so this refuses any capture unless
    the caller says it is trusted (README, "Trust model"). Even then no byte
    of the file's code is run: on the first call, libdynamo captures
    `function` again on that call's arguments (dynamo._C.capture_call, the
    same trace and rewrite that wrote the file) and the regenerated code must
    equal the file's, marshalled byte for byte, or CaptureError is raised;
    what runs is the regenerated code. A resume function is checked the same
    way when it is first called (its own rewritten code on its real
    arguments); one the capture did not trace runs as the plain Python its
    regenerated code is."""
    import types

    if not capture.rewritten_code:
        raise CaptureError("the capture has no rewritten code (it was made without graph breaks)")
    if trusted is not True:
        raise CaptureError("load_program runs code a capture carries: pass trusted=True only for a "
                           "capture you made or vouch for (see the README's trust model)")
    target = function.__func__ if isinstance(function, types.MethodType) else function
    code = getattr(target, "__code__", None)
    if code is None:
        raise CaptureError(f"{function!r} is not a Python function")
    if capture.function_name != code.co_qualname or capture.source_file != code.co_filename:
        raise CaptureError(f"the capture is of {trust.show(capture.function_name)} in "
                           f"{trust.show(capture.source_file)}, not of {code.co_qualname} in "
                           f"{code.co_filename}")
    g = target.__globals__
    graphs = {}
    for i, graph in enumerate(capture.graphs):
        name = trust.generated_name(graph.name, f"graph {i}")
        graphs[name] = to_graph_module(capture, i, root=root, base_dir=base_dir).forward
    resumes = {}
    for r in capture.resume_functions:
        trust.generated_name(r.name, "resume function")
        if r.caller:
            trust.generated_name(r.caller, f"resume function {r.name}: caller")
        resumes[r.name] = r
    g.update(graphs)
    return _Program(capture, g, resumes).callable(function, target)


class _Program:
    """The code of a trusted capture, regenerated and compared as it runs."""

    def __init__(self, capture, g, resumes):
        self.capture, self.g, self.resumes = capture, g, resumes
        # The inputs' symbolic sizes (dynamic shapes): the regenerating
        # capture makes the same dimensions symbolic, or its code would be
        # that of one size.
        dims = {}
        for spec in capture.inputs:
            if spec.WhichOneof("value") == "tensor":
                symbolic = [d for d, dim in enumerate(spec.tensor.sizes) if dim.WhichOneof("value") != "size"]
                if symbolic:
                    dims[spec.name] = symbolic
        self.dynamic = {"dims": dims} if dims else None

    def regenerate(self, fn, self_obj, args, kwargs, rewrite_id, expected, what):
        """libdynamo's rewritten code for this call, checked against the file."""
        import marshal

        from dynamo import _C
        result = _C.capture_call(fn, self_obj, tuple(args), dict(kwargs), rewrite_id, self.dynamic)
        if result["code"] is None or marshal.dumps(result["code"]) != expected:
            raise CaptureError(f"{what}: the capture's code does not match what libdynamo produces "
                               f"for {fn.__code__.co_qualname} on these arguments; not running it")
        for name, code, _capture, _takes_closure, _offset in result["resumes"]:
            r = self.resumes.get(name)
            if r is None or marshal.dumps(code) != r.code:
                raise CaptureError(f"{what}: resume function {name}: the capture's code does not "
                                   "match what libdynamo produces; not running it")
            self.g[name] = self.resume(r, code)
        return result["code"]

    def rewrite_id(self, r):
        """The id the exporter rewrote resume function `r` with: its graph's
        or its own resume functions' names carry it ("__dynamo_graph_3")."""
        import re
        if 0 <= r.graph_index < len(self.capture.graphs):
            m = re.fullmatch(r"__dynamo_graph_(\d+)", self.capture.graphs[r.graph_index].name)
            if m:
                return int(m.group(1))
        for other in self.resumes.values():
            m = re.fullmatch(r"__dynamo_resume_(\d+)_\d+", other.name)
            if other.caller == r.name and m:
                return int(m.group(1))
        return None

    def resume(self, r, code):
        import types
        rewrite_id = self.rewrite_id(r) if r.traced and r.rewritten_code else None
        state = {}

        def call(*args):
            closure = None
            if r.takes_closure:
                closure, args = args[0], args[1:]
            plain = types.FunctionType(code, self.g, code.co_name, None, closure)
            if rewrite_id is None:
                return plain(*args)
            if "code" not in state:
                state["code"] = self.regenerate(plain, None, args, {}, rewrite_id, r.rewritten_code,
                                                f"resume function {r.name}")
            return types.FunctionType(state["code"], self.g, code.co_name, None, closure)(*args)
        return call

    def callable(self, function, target):
        import functools
        import types
        state = {}
        self_obj = function.__self__ if isinstance(function, types.MethodType) else None

        @functools.wraps(target)
        def program(*args, **kwargs):
            if "fn" not in state:
                code = self.regenerate(target, self_obj, args, kwargs, 0, self.capture.rewritten_code,
                                       "the rewritten code")
                fn = types.FunctionType(code, self.g, target.__name__, target.__defaults__,
                                        target.__closure__)
                fn.__kwdefaults__ = target.__kwdefaults__
                state["fn"] = fn
            if self_obj is not None:
                return state["fn"](self_obj, *args, **kwargs)
            return state["fn"](*args, **kwargs)
        return program
