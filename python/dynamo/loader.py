"""Turns a libdynamo Capture (.pb) back into torch.fx.GraphModules: the bridge
to every torch backend, and how the tests run captured graphs.

    from dynamo.loader import load
    gm, capture = load("model.pb")                 # weights stored in the capture
    gm, capture = load("model.pb", root=model)     # or taken from the module
    out = gm(x)

Each node keeps the metadata the capture recorded, as node.meta["dynamo_meta"]
(a dict with dtype, sizes, strides, device, requires_grad), so a consumer can
compare it with what running the graph produces.
"""
import operator
import os

import torch
import torch.fx

from dynamo import dynamo_ir_pb2 as ir

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


class CaptureError(ValueError):
    """The file is not a capture this loader can turn into graphs."""


def read_capture(path):
    """Parses a .pb (binary), .pbtxt or .json capture."""
    capture = ir.Capture()
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".pbtxt"):
        from google.protobuf import text_format
        text_format.Parse(data.decode(), capture)
    elif path.endswith(".json"):
        from google.protobuf import json_format
        json_format.Parse(data.decode(), capture)
    else:
        capture.ParseFromString(data)
    if capture.ir_version == ir.IR_VERSION_UNSPECIFIED or capture.ir_version > SUPPORTED_IR_VERSION:
        raise CaptureError(f"{path}: IR version {capture.ir_version} is not supported "
                           f"(this loader reads up to {SUPPORTED_IR_VERSION})")
    return capture


def dtype_of(pb_dtype):
    try:
        return _DTYPES[pb_dtype]
    except KeyError:
        raise CaptureError(f"unknown dtype {ir.DType.Name(pb_dtype)}") from None


def device_of(pb_device):
    if pb_device.index >= 0 and pb_device.type != "cpu":
        return torch.device(pb_device.type, pb_device.index)
    return torch.device(pb_device.type or "cpu")


def _dim(d):
    if d.WhichOneof("value") != "size":
        raise CaptureError(f"symbolic size {d.symbol!r} cannot be materialised")
    return d.size


def meta_dict(pb_meta):
    """TensorMeta as a plain dict, for comparisons (strides [] when untracked)."""
    return {
        "dtype": dtype_of(pb_meta.dtype),
        "sizes": [_dim(d) for d in pb_meta.sizes],
        "strides": [_dim(d) for d in pb_meta.strides],
        "device": device_of(pb_meta.device),
        "requires_grad": pb_meta.requires_grad,
    }


def _resolve(target):
    """A canonical target name ("torch.nn.functional.linear") as an object."""
    parts = target.split(".")
    if parts[0] == "operator":
        obj = operator
    elif parts[0] == "torch":
        obj = torch
    elif parts[0] == "math":
        import math
        obj = math
    else:
        raise CaptureError(f"unknown target namespace in {target!r}")
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def _attribute_tensor(attr, base_dir):
    meta = meta_dict(attr.meta)
    which = attr.WhichOneof("storage")
    if which is None:
        return None
    if which == "data":
        data = bytearray(attr.data)
    else:
        with open(os.path.join(base_dir, attr.external.path), "rb") as f:
            f.seek(attr.external.offset)
            data = bytearray(f.read(attr.external.length))
    numel = 1
    for s in meta["sizes"]:
        numel *= s
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


def _argument(arg, env):
    which = arg.WhichOneof("value")
    if which == "node":
        return env[arg.node]
    if which == "int_value":
        return arg.int_value
    if which == "float_value":
        return arg.float_value
    if which == "bool_value":
        return arg.bool_value
    if which == "string_value":
        return arg.string_value
    if which == "none" or which is None:
        return None
    if which == "list":
        items = [_argument(a, env) for a in arg.list.items]
        return tuple(items) if arg.list.is_tuple else items
    if which == "dict":
        return {k: _argument(v, env) for k, v in zip(arg.dict.keys, arg.dict.values)}
    if which == "dtype":
        return dtype_of(arg.dtype)
    if which == "device":
        return device_of(arg.device)
    if which == "slice":
        s = arg.slice
        return slice(s.start if s.HasField("start") else None,
                     s.stop if s.HasField("stop") else None,
                     s.step if s.HasField("step") else None)
    if which == "ellipsis":
        return Ellipsis
    if which == "memory_format":
        return _MEMORY_FORMATS[arg.memory_format]
    if which == "layout":
        return getattr(torch, arg.layout)
    raise CaptureError(f"unknown argument kind {which}")


def to_graph_module(capture, graph_index=0, root=None, base_dir=".", attributes=None):
    """One graph of the capture as a torch.fx.GraphModule.

    Attribute values come from `attributes` ({target: tensor}, what a live
    capture hands over), else from the capture when it stored them, else from
    `root` (the module the capture was made from) by their target path."""
    pb_graph = capture.graphs[graph_index]
    holder = torch.nn.Module()
    used = {n.target for n in pb_graph.nodes if n.kind == ir.Node.GET_ATTR}
    for attr in capture.attributes:
        if attr.target not in used:
            continue
        tensor = attributes.get(attr.target) if attributes else None
        if tensor is None:
            tensor = _attribute_tensor(attr, base_dir)
        if tensor is None:
            if root is None:
                raise CaptureError(f"attribute {attr.target} ({attr.source}) has no stored "
                                   "value: export with --weights embed or pass root=")
            tensor = _get_path(root, attr.target)
        _set_path(holder, attr.target, tensor)

    graph = torch.fx.Graph()
    env = {}
    for node in pb_graph.nodes:
        args = tuple(_argument(a, env) for a in node.args)
        kwargs = {k.name: _argument(k.value, env) for k in node.kwargs}
        if node.kind == ir.Node.PLACEHOLDER:
            fx_node = graph.placeholder(node.name)
        elif node.kind == ir.Node.GET_ATTR:
            fx_node = graph.get_attr(node.target)
        elif node.kind == ir.Node.CALL_FUNCTION:
            fx_node = graph.call_function(_resolve(node.target), args, kwargs)
        elif node.kind == ir.Node.CALL_METHOD:
            fx_node = graph.call_method(node.target.split(".", 1)[1], args, kwargs)
        elif node.kind == ir.Node.CALL_MODULE:
            fx_node = graph.call_module(node.target, args, kwargs)
        elif node.kind == ir.Node.OUTPUT:
            graph.output(args[0] if len(args) == 1 else args)
            continue
        else:
            raise CaptureError(f"node {node.name}: unknown kind {node.kind}")
        fx_node.name = node.name
        kind = node.meta.WhichOneof("kind")
        if kind == "tensor":
            fx_node.meta["dynamo_meta"] = meta_dict(node.meta.tensor)
        env[node.name] = fx_node
    graph.lint()
    return torch.fx.GraphModule(holder, graph, class_name=f"{capture.function_name.replace('.', '_')}_graph")


def load(path, root=None, graph_index=0):
    """(GraphModule, Capture) for the capture at `path`."""
    capture = read_capture(path)
    if not capture.graphs:
        raise CaptureError(f"{path}: the capture has no graphs")
    gm = to_graph_module(capture, graph_index, root, os.path.dirname(os.path.abspath(path)))
    return gm, capture


def load_program(capture, function, root=None, base_dir="."):
    """A callable that runs a capture made with graph breaks (dynamo-export
    --allow-breaks) the way the live shim would: the rewritten code, with each
    graph as a torch.fx.GraphModule and each resume function bound under the
    global name the code calls it by (installed in `function`'s globals).
    Resume functions traced offline run their own rewritten code; the others
    run as the plain Python they are."""
    import marshal
    import types

    if not capture.rewritten_code:
        raise CaptureError("the capture has no rewritten code (it was made without graph breaks)")
    g = function.__globals__
    for i, graph in enumerate(capture.graphs):
        g[graph.name] = to_graph_module(capture, i, root=root, base_dir=base_dir).forward

    def resume(r):
        code = marshal.loads(r.rewritten_code if r.traced else r.code)

        def call(*args):
            closure = None
            if r.takes_closure:
                closure, args = args[0], args[1:]
            return types.FunctionType(code, g, code.co_name, None, closure)(*args)
        return call

    for r in capture.resume_functions:
        g[r.name] = resume(r)
    target = function.__func__ if isinstance(function, types.MethodType) else function
    rewritten = types.FunctionType(marshal.loads(capture.rewritten_code), g, target.__name__,
                                   target.__defaults__, target.__closure__)
    rewritten.__kwdefaults__ = target.__kwdefaults__
    if isinstance(function, types.MethodType):
        return types.MethodType(rewritten, function.__self__)
    return rewritten
