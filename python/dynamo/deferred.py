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

The table is built in C++ from the capture as the trace left it in memory
(dynamo._C.LiveCapture.forward_table): no serialized proto is parsed and no
Python walks the nodes. Every object a node names is still chosen here, as
dynamo.loader chooses it for a file: call targets from the op registry's list
(loader.call_target), dtypes, devices, layouts and memory formats from their
tables. The FX graph, when read, is built from the capture's proto through
the loader's full checks.
"""
import inspect
import itertools
import linecache

import torch
import torch.fx

from dynamo import _C
from dynamo import trust
from dynamo.loader import (CaptureError, _set_path, call_target, check_paths, dtype_of, fx_graph,
                           memory_format_of, method_name)

_names = itertools.count()


# A node's value in the forward: its name and the slot GraphForward keeps it
# in (a C type: one is made per node of every first call).
_Local = _C.Local


# GraphForward's step kinds (lib/embed/graph_forward.h).
_CALL, _METHOD, _ATTRIBUTES = 0, 1, 2

# (kind, target, inferred_on_meta) -> the callable or method name the
# registry's list gives it: fixed for the process, so resolved once.
_RESOLVED = {}


def _resolver(callables):
    """forward_table's `resolve`: what a call node's target names, as the
    loader resolves a file's (functions put in the graph by
    dynamo.allow_in_graph come from `callables`, never from the cache)."""
    def resolve(kind, target, inferred_on_meta, name):
        if kind == _CALL and callables:
            allowed = callables.get(target)
            if allowed is not None:
                return allowed
        key = (kind, target, inferred_on_meta)
        found = _RESOLVED.get(key)
        if found is None:
            what = f"node {trust.label(name)}"
            found = (call_target(target, inferred_on_meta, None, what) if kind == _CALL
                     else method_name(target, inferred_on_meta, what))
            _RESOLVED[key] = found
        return found
    return resolve


def _constant(kind, value):
    """forward_table's `constant`: a torch object a node's argument names."""
    if kind == "dtype":
        return dtype_of(value)
    if kind == "memory_format":
        return memory_format_of(value)
    if kind == "layout":
        return trust.layout(value, "a layout argument")
    return trust.device_named(value[0] or "cpu", value[1], "a device argument")


def graph_module(live, graph_proto, attributes, callables):
    """The GraphModule for the graph of `live` (a dynamo._C.LiveCapture), or
    None when that graph has subgraphs (torch.cond's branches are FX's to
    build: dynamo.loader.to_graph_module). `attributes` are the capture's
    tensors by target, `callables` the functions dynamo.allow_in_graph put in
    graphs, and graph_proto() the graph's proto, asked for only when the FX
    graph is read."""
    try:
        table = live.forward_table(_Local, _resolver(callables), _constant)
        if table is None:
            return None
        params, steps, output, names, targets, read = table
        values = {}
        for target in read:
            if target not in attributes:
                raise CaptureError(f"get_attr target {trust.show(target)} is none of the capture's attributes")
            values[target] = attributes[target]
        check_paths(values)
        forward = _forward(params, steps, output, names, targets)
        return DeferredGraphModule(graph_proto, values, callables, trust.class_name(live.function_name), forward)
    except CaptureError:
        raise
    except Exception as e:  # noqa: BLE001 -- a table C++ refused, or whatever FX raises: the capture is at fault
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise CaptureError(f"graph 0: not a graph FX can build ({reason})") from None


def _forward(params, steps, output, names, targets):
    """The table as a dynamo._C.GraphForward, named and signed as FX's
    forward would be."""
    # The file of a failing step's traceback entry (_Lines).
    filename = f"<dynamo graph>.{next(_names)}"
    forward = _C.GraphForward(params, steps, output, _Local, _Lines(filename, params, steps, names, targets, output),
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
    __slots__ = ("filename", "params", "steps", "names", "targets", "output")

    def __init__(self, filename, params, steps, names, targets, output):
        self.filename, self.params, self.steps, self.output = filename, params, steps, output
        self.names, self.targets = names, targets

    def __call__(self, index):
        lines = [f"def forward(self{''.join(', ' + p for p in self.params)}):\n"]
        for (kind, target, args, kwargs, _), name, text in zip(self.steps, self.names, self.targets):
            if kind == _ATTRIBUTES:
                text = "self." + ".".join(target)
            else:
                parts = [_text(a) for a in (args[1:] if kind == _METHOD else args)]
                parts += [f"{k}={_text(v)}" for k, v in kwargs.items()]
                function = f"{_text(args[0])}.{target}" if kind == _METHOD else text
                text = f"{function}({', '.join(parts)})"
            lines.append(f"    {name} = {text}\n")
        lines.append(f"    return {_text(self.output)}\n")
        linecache.cache[self.filename] = (sum(map(len, lines)), None, lines, self.filename)


def _place(root, values):
    """Puts each tensor at its dotted path under `root`, each parent a plain
    nn.Module, as dynamo.loader._set_path does one at a time: here without
    nn.Module's per-name checks, which cannot fail on the capture's paths
    (check_paths ran). Registration hooks someone installed, or a path
    through a name GraphModule's class already has, take the checked way."""
    registry = torch.nn.modules.module
    if (registry._global_module_registration_hooks or registry._global_parameter_registration_hooks
            or registry._global_buffer_registration_hooks
            or any(hasattr(type(root), name) for name in {path.partition(".")[0] for path in values})):
        for path, value in values.items():
            _set_path(root, path, value)
        return
    # No closure here: a recursive one is a cycle, which would keep these
    # modules (and the user's tensors) alive until the collector runs.
    # A module's tensors come together: most paths find their parent made.
    modules = {"": root}
    parameter, tensor = torch.nn.Parameter, torch.Tensor
    for path, value in values.items():
        parent, _, leaf = path.rpartition(".")
        module = modules.get(parent)
        if module is None:
            module, prefix = root, ""
            for name in parent.split("."):
                prefix = f"{prefix}.{name}" if prefix else name
                child = modules.get(prefix)
                if child is None:
                    child = module._modules[name] = modules[prefix] = _fresh_module()
                module = child
        # (Parameter's isinstance runs a Python __instancecheck__, which for a
        # plain tensor, a buffer, asks only its `_is_param`: asked here.)
        kind = type(value)
        is_parameter = (kind is parameter or
                        (bool(getattr(value, "_is_param", False)) if kind is tensor else isinstance(value, parameter)))
        (module._parameters if is_parameter else module._buffers)[leaf] = value


_EMPTY_MODULE = None  # (an empty nn.Module's __dict__, the names of its containers)


def _fresh_module():
    """A new plain nn.Module: a copy of an empty one's state (its containers
    fresh), without running nn.Module.__init__ once per parent path."""
    global _EMPTY_MODULE
    if _EMPTY_MODULE is None:
        state = torch.nn.Module().__dict__
        plain = all(isinstance(v, (dict, set, bool, type(None))) for v in state.values())
        # A torch whose Module holds more: run __init__.
        _EMPTY_MODULE = (state, [k for k, v in state.items() if isinstance(v, (dict, set))]) if plain else False
    if _EMPTY_MODULE is False:
        return torch.nn.Module()
    empty, containers = _EMPTY_MODULE
    state = empty.copy()  # in nn.Module's order; each container replaced by a fresh copy below
    for name in containers:
        state[name] = state[name].copy()
    module = object.__new__(torch.nn.Module)
    object.__setattr__(module, "__dict__", state)
    return module


_EMPTY_GRAPH_MODULE = None


def _empty_graph_module_state():
    """The __dict__ GraphModule.__init__ gives a GraphModule of an empty
    graph, less the graph and its code (built on read), when every value is
    plain data (containers, which are copied, and immutable values); False
    for a torch whose GraphModule holds anything else, which then runs its
    __init__ for each one. (Its per-instance class gets forward from us;
    FX's recompile sets the rest on it when the graph is first read.)"""
    global _EMPTY_GRAPH_MODULE
    if _EMPTY_GRAPH_MODULE is None:
        state = dict(torch.fx.GraphModule({}, torch.fx.Graph(), "GraphModule").__dict__)
        del state["_graph"], state["_code"]
        plain = all(isinstance(v, (dict, list, set, bool, int, str, type(None))) and
                    all(isinstance(i, (bool, int, str, type(None))) for i in _items(v)) for v in state.values())
        _EMPTY_GRAPH_MODULE = state if plain else False
    return _EMPTY_GRAPH_MODULE


def _items(value):
    """A container's keys and values (nothing for a scalar)."""
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    return list(value) if isinstance(value, (list, set)) else []


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

    def __init__(self, graph_proto, values, callables, class_name, forward):
        # Everything else a GraphModule holds, as GraphModule's own __init__
        # leaves it on an empty graph: copied from one made once per process
        # (its code generation and compile of nothing cost ~0.1-0.4 ms a
        # capture), or made by it where its state is not plain data.
        state = _empty_graph_module_state()
        if state:
            self.__dict__.update({k: v.copy() if isinstance(v, (dict, list, set)) else v for k, v in state.items()})
            type(self).__name__ = class_name
        else:
            super().__init__({}, torch.fx.Graph(), class_name)
            del self.__dict__["_graph"], self.__dict__["_code"]
        _place(self, values)
        self.__dict__["_dynamo_pending"] = (graph_proto, values, callables)
        type(self).forward = forward

    def _materialize(self):
        pending = self.__dict__.pop("_dynamo_pending", None)
        if pending is not None:
            graph_proto, values, callables = pending
            torch.fx.GraphModule.graph.fset(self, fx_graph(graph_proto(), values, {}, callables))

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

