"""The GraphModule a live capture hands its backend, built in the time the
backend needs (issue 18's first call).

torch.fx.GraphModule's constructor builds an FX node per operation and then
generates, prints and compiles the forward's source from them: for resnet18
about 30 ms, most of a first call, spent even when the backend only calls
forward (the "eager" backend, a profiler's backend, any backend returning
gm.forward). DeferredGraphModule is a real GraphModule whose forward runs
the capture's nodes from a table in C (dynamo._C.GraphForward: no FX
objects, no source to compile, no frame), and whose FX graph is built only
when something reads it:
`gm.graph`, `gm.code`, printing, copying, pickling, or torch's own compilers
(which read the graph first). From then on it is an ordinary GraphModule, with
FX's own forward.

The forward checks what to_graph_module checks (dynamo.loader: names, call
targets in the registry's list), so no code is chosen by the capture's text.
"""
import inspect
import itertools
import linecache

import torch
import torch.fx

from dynamo import _C
from dynamo import dynamo_ir_pb2 as ir
from dynamo import trust
from dynamo.loader import CaptureError, _kind_name, _set_path, call_target, checked_nodes, fx_graph, method_name

_names = itertools.count()


class _Local:
    """A node's value in the forward: the slot GraphForward keeps it in."""
    __slots__ = ("name", "slot")

    def __init__(self, name, slot):
        self.name = name
        self.slot = slot


# GraphForward's step kinds (lib/embed/graph_forward.h).
_CALL, _METHOD, _ATTRIBUTES = 0, 1, 2


def _forward(pb_graph, values, callables):
    """The forward of pb_graph (a graph without subgraphs) as a
    dynamo._C.GraphForward: one step per node, no Python source to write
    or compile, and no frame of its own when it runs."""
    env = {}
    params = []
    steps = []
    step_nodes = []
    # Placeholders may come after operations (an input only a later node
    # reads): theirs are the first slots all the same.
    n_params = sum(1 for node in pb_graph.nodes if node.kind == ir.Node.PLACEHOLDER)
    output, done = None, False
    for node, what, args, kwargs in checked_nodes(pb_graph, env):
        if node.kind == ir.Node.PLACEHOLDER:
            # The forward's parameter names: "self" is the module's, and
            # our renames are "_v<i>" (names are never keywords or dunders).
            name = node.name if node.name != "self" and node.name[:2] != "_v" else f"_v{len(env)}"
            env[node.name] = _Local(name, len(params))
            params.append(name)
            continue
        if node.kind == ir.Node.OUTPUT:
            output, done = (args[0] if len(args) == 1 else args), True
            continue
        slot = n_params + len(steps)
        if node.kind == ir.Node.GET_ATTR:
            if node.target not in values:
                raise CaptureError(f"{what}: get_attr target {trust.show(node.target)} is none "
                                   "of the capture's attributes")
            steps.append((_ATTRIBUTES, tuple(node.target.split(".")), (), {}, slot))
        elif node.kind == ir.Node.CALL_FUNCTION:
            steps.append((_CALL, call_target(node, callables, what), args, kwargs, slot))
        elif node.kind == ir.Node.CALL_METHOD:
            if not args:
                raise CaptureError(f"{what}: a method call without its object")
            steps.append((_METHOD, method_name(node, what), args, kwargs, slot))
        else:
            raise CaptureError(f"{what}: node kind {_kind_name(node.kind)} is not one libdynamo writes")
        step_nodes.append(node)
        env[node.name] = _Local(node.name, slot)
    if not done:
        raise CaptureError("the graph has no output node")
    # The file of a failing step's traceback entry (_Lines).
    filename = f"<dynamo graph>.{next(_names)}"
    steps = tuple(steps)
    params = tuple(params)
    forward = _C.GraphForward(params, steps, output, _Local, _Lines(filename, params, steps, step_nodes, output),
                              filename)
    forward.__name__ = forward.__qualname__ = "forward"
    forward.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in ("self",) + params])
    return forward


def _text(value):
    """Python source for a step's argument, for a traceback's line."""
    if isinstance(value, _Local):
        return value.name
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + "".join(_text(v) + ", " for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, slice):
        return f"slice({_text(value.start)}, {_text(value.stop)}, {_text(value.step)})"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Lines:
    """A forward's lines, made when a step raises and kept in linecache, so
    that the traceback entry GraphForward adds (line i + 2 for step i) shows
    the node, as a line of FX's generated forward would. Nothing is stored
    for a forward that never raises."""
    __slots__ = ("filename", "params", "steps", "nodes", "output")

    def __init__(self, filename, params, steps, nodes, output):
        self.filename, self.params, self.steps, self.nodes, self.output = filename, params, steps, nodes, output

    def __call__(self, index):
        lines = [f"def forward(self{''.join(', ' + p for p in self.params)}):\n"]
        for (kind, target, args, kwargs, _), node in zip(self.steps, self.nodes):
            if kind == _ATTRIBUTES:
                text = "self." + ".".join(target)
            else:
                parts = [_text(a) for a in (args[1:] if kind == _METHOD else args)]
                parts += [f"{k}={_text(v)}" for k, v in kwargs.items()]
                function = f"{_text(args[0])}.{target}" if kind == _METHOD else node.target
                text = f"{function}({', '.join(parts)})"
            lines.append(f"    {node.name} = {text}\n")
        lines.append(f"    return {_text(self.output)}\n")
        linecache.cache[self.filename] = (sum(map(len, lines)), None, lines, self.filename)


def _built_on_read(name):
    """An attribute GraphModule reads and writes as a plain one, kept in the
    instance's __dict__, whose first read builds the FX graph."""
    def read(self):
        self._materialize()
        return self.__dict__[name]

    def write(self, value):
        self.__dict__[name] = value
    return property(read, write)


class DeferredGraphModule(torch.fx.GraphModule):
    """A GraphModule whose FX graph is built on first use (see the module's
    docstring). `_graph` and `_code` are properties: GraphModule's own
    methods read and write them as attributes, and the first read builds the
    graph and lets FX generate its code (FX's forward then replaces ours)."""

    @classmethod
    def of(cls, pb_graph, values, callables, class_name):
        """The module for pb_graph (without subgraphs: torch.cond's branches
        are FX's to build) holding `values` at their paths."""
        return cls(pb_graph, values, callables, class_name, _forward(pb_graph, values, callables))

    def __init__(self, pb_graph, values, callables, class_name, forward):
        # Everything else a GraphModule holds, set up by GraphModule itself
        # on an empty graph (its code generation of nothing is cheap).
        super().__init__({}, torch.fx.Graph(), class_name)
        del self.__dict__["_graph"], self.__dict__["_code"]
        for path, value in values.items():  # a path is never both a tensor and a parent (the loader checks)
            _set_path(self, path, value)
        self.__dict__["_dynamo_pending"] = (pb_graph, values, callables)
        type(self).forward = forward

    def _materialize(self):
        pending = self.__dict__.pop("_dynamo_pending", None)
        if pending is not None:
            pb_graph, values, callables = pending
            torch.fx.GraphModule.graph.fset(self, fx_graph(pb_graph, values, {}, callables))

    _graph = _built_on_read("_graph")
    _code = _built_on_read("_code")

    # These copy or pickle __dict__, which must hold the graph first.
    def __reduce__(self):
        self._materialize()
        return super().__reduce__()

    def __reduce_package__(self, exporter):
        self._materialize()
        return super().__reduce_package__(exporter)

    def __deepcopy__(self, memo):
        self._materialize()
        return super().__deepcopy__(memo)

