"""The GraphModule a live capture hands its backend, built in the time the
backend needs (issue 18's first call).

torch.fx.GraphModule's constructor builds an FX node per operation and then
generates, prints and compiles the forward's source from them: for resnet18
about 30 ms, most of a first call, spent even when the backend only calls
forward (the "eager" backend, a profiler's backend, any backend returning
gm.forward). DeferredGraphModule is a real GraphModule whose forward is
generated straight from the capture's nodes (one line of Python each, no FX
objects), and whose FX graph is built only when something reads it:
`gm.graph`, `gm.code`, printing, copying, pickling, or torch's own compilers
(which read the graph first). From then on it is an ordinary GraphModule, with
FX's own forward.

The forward checks what to_graph_module checks (dynamo.loader: names, call
targets in the registry's list), so no code is chosen by the capture's text.
"""
import builtins
import itertools

import torch
import torch.fx

from dynamo import dynamo_ir_pb2 as ir
from dynamo import trust
from dynamo.loader import CaptureError, _kind_name, _set_path, call_target, checked_nodes, fx_graph, method_name

_names = itertools.count()


class _Local:
    """A node's value in the generated forward: its local variable."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


def _has_local(value):
    if isinstance(value, _Local):
        return True
    if isinstance(value, (tuple, list)):
        return any(_has_local(v) for v in value)
    if isinstance(value, dict):
        return any(_has_local(v) for v in value.values())
    if isinstance(value, slice):
        return any(_has_local(v) for v in (value.start, value.stop, value.step))
    return False


class _Source:
    """The forward's text and the globals it reads (every object it calls or
    passes, by a name of ours: "_k<i>")."""

    def __init__(self):
        # The real builtins: the forward names none of them, but C code
        # that imports a module finds __import__ in the calling frame's
        # (torch's grad-mode binding under a torch function mode such as
        # torch.set_default_device's crashed with an empty dict).
        self.globals = {"__builtins__": builtins}
        self.reads = set()  # the locals the statement being written reads

    def constant(self, value):
        name = f"_k{len(self.globals) - 1}"
        self.globals[name] = value
        return name

    def expression(self, value):
        """Python source that evaluates to `value`: a node's local, a fresh
        list or tuple of them, or a global holding the constant. Lists are
        written out each call (FX's forward makes a new one each call too)."""
        if isinstance(value, _Local):
            self.reads.add(value.name)
            return value.name
        if value is None or isinstance(value, bool) or type(value) is int:
            return repr(value)
        if isinstance(value, list):
            return "[" + ", ".join(self.expression(v) for v in value) + "]"
        if isinstance(value, tuple) and _has_local(value):
            return "(" + "".join(self.expression(v) + ", " for v in value) + ")"
        if isinstance(value, dict) and _has_local(value):
            return "{" + ", ".join(f"{self.constant(k)}: {self.expression(v)}" for k, v in value.items()) + "}"
        if isinstance(value, slice) and _has_local(value):
            parts = ", ".join(self.expression(v) for v in (value.start, value.stop, value.step))
            return f"{self.constant(slice)}({parts})"
        return self.constant(value)

    def call(self, function, args, kwargs):
        text = ", ".join(self.expression(a) for a in args)
        if kwargs:
            # Keyword names are plain identifiers (dynamo.trust), never keywords.
            text += (", " if text else "") + ", ".join(f"{k}={self.expression(v)}" for k, v in kwargs.items())
        return f"{function}({text})"


def _attribute_expression(source, path):
    """`self.a.b`, with getattr for a child index ("layer1.0")."""
    text = "self"
    for part in path.split("."):
        text = f"{text}.{part}" if part.isidentifier() else f"{source.constant(getattr)}({text}, {part!r})"
    return text


def _forward(pb_graph, values, callables):
    """The forward of pb_graph (a graph without subgraphs) as a Python function."""
    source = _Source()
    env = {}
    params = []
    statements = []   # (local or None, text, {locals it reads})
    done = False
    for node, what, args, kwargs in checked_nodes(pb_graph, env):
        # Node names are identifiers, never keywords or dunders; "self", our
        # "_k<i>" globals and our "_v<i>" renames are all they could shadow.
        local = node.name if node.name != "self" and node.name[:2] not in ("_k", "_v") else f"_v{len(env)}"
        if node.kind == ir.Node.PLACEHOLDER:
            params.append(local)
            env[node.name] = _Local(local)
            continue
        source.reads = set()
        if node.kind == ir.Node.GET_ATTR:
            if node.target not in values:
                raise CaptureError(f"{what}: get_attr target {trust.show(node.target)} is none "
                                   "of the capture's attributes")
            text = _attribute_expression(source, node.target)
        elif node.kind == ir.Node.CALL_FUNCTION:
            text = source.call(source.constant(call_target(node, callables, what)), args, kwargs)
        elif node.kind == ir.Node.CALL_METHOD:
            if not args:
                raise CaptureError(f"{what}: a method call without its object")
            name = method_name(node, what)
            text = source.call(f"{source.expression(args[0])}.{name}", args[1:], kwargs)
        elif node.kind == ir.Node.OUTPUT:
            text = "return " + source.expression(args[0] if len(args) == 1 else args)
            local = None
            done = True
        else:
            raise CaptureError(f"{what}: node kind {_kind_name(node.kind)} is not one libdynamo writes")
        statements.append((local, text, source.reads))
        if local is not None:
            env[node.name] = _Local(local)
    if not done:
        raise CaptureError("the graph has no output node")
    # Each value is dropped after its last use, as FX's forward does, so
    # that intermediates are freed as the graph runs.
    last = {}
    for i, (_, _, reads) in enumerate(statements):
        for name in reads:
            last[name] = i
    drops = {}
    for name, i in last.items():
        drops.setdefault(i, []).append(name)
    for i, (local, _, _) in enumerate(statements):
        if local is not None and local not in last:  # never read (an in-place op's result)
            drops.setdefault(i, []).append(local)
    lines = [f"def forward(self{''.join(', ' + p for p in params)}):"]
    for i, (local, text, _) in enumerate(statements):
        lines.append(f"    {local} = {text}" if local is not None else f"    {text}")
        if i in drops and not text.startswith("return "):
            lines.append(f"    {' = '.join(sorted(drops[i]))} = None")
    text = "\n".join(lines) + "\n"
    # The frame evaluator never captures a frame of this name
    # (lib/embed/eval_frame.cc). Tracebacks through the graph show its lines,
    # as for FX's forward: linecache asks the globals' __loader__ for them,
    # and only when a traceback is printed (a name of the form "<...>" would
    # never be asked; nothing is stored for a forward no traceback reads).
    filename = f"<dynamo graph>.{next(_names)}"
    source.globals.update(__name__=filename, __loader__=_Lines(text))
    exec(compile(text, filename, "exec"), source.globals)
    forward = source.globals.pop("forward")
    forward.__qualname__ = "forward"
    return forward


class _Lines:
    """A generated forward's source, for linecache (a module loader's get_source)."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def get_source(self, name):
        return self.text


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

