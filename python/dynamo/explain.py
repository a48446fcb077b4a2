"""dynamo.explain and dynamo.export: what a capture made of a function, and
the function as one standalone graph.

    out = dynamo.explain(fn)(x, y)          # runs fn once, through a fresh Runtime
    print(out)                              # counts, each break with its line and hint, ops per graph
    out.graph_count, out.break_reasons[0].user_stack, out.out_guards

    gm, guards = dynamo.export(model, x)    # raises dynamo.Unsupported at a graph break
    gm(x)                                   # == model(x)
"""
import inspect
import re
import sys
import time
import traceback
import types
import warnings

import torch
import torch.fx

from dynamo import dynamo_ir_pb2 as ir
from dynamo.eval_frame import capture_target
from dynamo.guards import _constant, frame_for_call, resolve_source
from dynamo.loader import _get_path, _set_path, meta_dict
from dynamo.runtime import Runtime, Unsupported, capture_proto, format_break


# ----------------------------------------------------------------- guards
class Guard:
    """One guard of a capture, readable: `str(g)` is "L['x']: TENSOR_MATCH
    float32[4] strides [1] cpu"; `.proto` is the dynamo_ir_pb2.Guard."""

    def __init__(self, proto):
        self.proto = proto
        self.kind = ir.Guard.Kind.Name(proto.kind)
        self.source = proto.source
        # torch._dynamo's Guard spells these name (the guarded value's
        # source) and guard_types / create_fn_name (what is checked).
        self.name = proto.source
        self.guard_types = [self.kind]
        self.create_fn_name = self.kind
        self.reason = proto.reason
        which = proto.WhichOneof("expected")
        if which == "tensor":
            m = meta_dict(proto.tensor, symbolic=True)
            dtype = str(m["dtype"]).removeprefix("torch.")
            self.expected = (f"{dtype}{m['sizes']} strides {m['strides']} {m['device']}"
                             + (" requires_grad" if m["requires_grad"] else ""))
        elif which == "value":
            value = _constant(proto.value)
            self.expected = value if isinstance(value, str) else repr(value)
        elif proto.kind == ir.Guard.SHAPE_ENV:
            env = proto.shape_env
            ranges = [f"{s.name} = {s.source}.size({s.dim}) in [{s.min}, {s.max or 'inf'}]" for s in env.symbols]
            self.expected = "; ".join(ranges + list(env.relations))
        else:
            self.expected = "None" if proto.kind == ir.Guard.IS_NONE else ""

    def __str__(self):
        return f"{self.source}: {self.kind} {self.expected}".rstrip()

    __repr__ = __str__


# ----------------------------------------------------------------- explain
class BreakReason:
    """One graph break: `reason` (the message and its category), `location`
    ("file:line"), `text` (the source line), `hint`, `user_stack` (a list of
    one traceback.FrameSummary, as torch gives), `proto` (the GraphBreak)."""

    def __init__(self, proto, function_name):
        self.proto = proto
        self.category = ir.GraphBreak.Reason.Name(proto.reason)
        self.reason = f"{proto.message} [{self.category}]"
        self.location = f"{proto.location.file}:{proto.location.line}"
        self.text = proto.location.text
        self.hint = proto.hint
        self.opcode = proto.opcode
        self.offset = proto.offset
        self.user_stack = [traceback.FrameSummary(proto.location.file, proto.location.line, function_name,
                                                  line=proto.location.text or None)]

    def __str__(self):
        return format_break(self.proto)

    __repr__ = __str__


def _target_name(node):
    target = node.target
    if node.op == "call_function":
        try:
            return torch.fx.node._get_qualified_name(target).replace("_operator.", "operator.")
        except Exception:  # noqa: BLE001 - any callable prints somehow
            return getattr(target, "__name__", repr(target))
    return str(target)


_OPS = ("call_function", "call_method", "call_module")


class ExplainOutput:
    """What one call of a function made: graphs (torch.fx.GraphModules, in
    the order the backend got them), graph_count, graph_break_count,
    break_reasons ([BreakReason]), op_count, ops_per_graph (per graph, the
    targets of its call nodes), inferred_on_meta (per graph, the targets of
    the nodes whose metadata came from torch's meta kernels because the op
    registry has no entry for them), out_guards ([Guard] over every
    capture), guard_counts (per capture, its number of guards; the head-to-
    head benchmark sets them beside torch._dynamo's), compile_times (seconds:
    the whole explained call, captures included), phase_times (per capture,
    seconds in trace, rewrite, graph and backend) and captures (the
    dynamo_ir_pb2.Captures made: the frame's and each resume function's).
    to_dot() and render(path) draw them (pictures.py)."""

    def __init__(self, graphs, break_reasons, out_guards, compile_times, captures=(), phase_times=()):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.break_reasons = break_reasons
        self.graph_break_count = len(break_reasons)
        self.ops_per_graph = [[n.target for n in gm.graph.nodes if n.op in _OPS] for gm in graphs]
        self.op_count = sum(len(ops) for ops in self.ops_per_graph)
        self.inferred_on_meta = [[n.meta["dynamo_inferred_on_meta"] for n in gm.graph.nodes
                                  if n.op in _OPS and n.meta.get("dynamo_inferred_on_meta")] for gm in graphs]
        self.out_guards = out_guards
        self.compile_times = compile_times
        self.captures = list(captures)
        self.guard_counts = [len(c.guards) for c in self.captures]
        self.phase_times = list(phase_times)

    def to_dot(self):
        """Every graph captured and the breaks between them, as Graphviz DOT."""
        from dynamo import pictures
        return pictures.to_dot(self.captures)

    def render(self, path):
        """Draws the captures to `path` (.svg, .png, .pdf, or .dot for the text)."""
        from dynamo import pictures
        return pictures.render(self.captures, path)

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        inferred = [t for ops in self.inferred_on_meta for t in ops]
        if inferred:
            names = ", ".join(sorted(set(inferred)))
            lines.append(f"Ops Inferred on Meta: {len(inferred)} of {self.op_count} "
                         f"(no op-registry entry; torch's meta kernels): {names}")
        if self.break_reasons:
            lines.append("Break Reasons:")
            for i, b in enumerate(self.break_reasons, 1):
                lines.append(f"  Break Reason {i}: {b.reason}")
                lines.append(f"    at {b.location}: {b.text}" if b.text else f"    at {b.location}")
                if b.hint:
                    lines.append(f"    hint: {b.hint}")
        lines.append("Ops per Graph:")
        for i, gm in enumerate(self.graphs, 1):
            lines.append(f"  Ops {i}:")
            lines.extend(f"    {_target_name(n)}" + ("  (inferred on meta)" if n.meta.get("dynamo_inferred_on_meta") else "")
                         for n in gm.graph.nodes if n.op in _OPS)
        counts = ", ".join(str(n) for n in self.guard_counts)
        lines.append(f"Out Guards: {len(self.out_guards)}" + (f" (per capture: {counts})" if len(self.guard_counts) > 1 else ""))
        lines.extend(f"  {g}" for g in self.out_guards)
        if self.compile_times is not None:
            lines.append(f"Compile Times: {self.compile_times * 1e3:.1f} ms (the explained call, captures included)")
        for i, p in enumerate(self.phase_times, 1):
            lines.append(f"  Capture {i}: " + ", ".join(f"{k} {p[k] * 1e3:.1f} ms" for k in ("trace", "rewrite", "graph", "backend")))
        return "\n".join(lines)

    __repr__ = __str__


def _target_or_raise(fn, what):
    target = capture_target(fn)
    if target is None:
        raise TypeError(f"dynamo.{what}: {fn!r} has no Python code to capture")
    return target


def _run_explain(fn, args, kwargs):
    target = _target_or_raise(fn, "explain")
    graphs = []

    def recording(gm, example_inputs):
        graphs.append(gm)
        return gm

    runtime = Runtime(backend=recording)
    start = time.perf_counter()
    runtime.call(target, tuple(args), dict(kwargs))
    elapsed = time.perf_counter() - start
    name = getattr(target, "__qualname__", getattr(target, "__name__", "<fn>"))
    reasons = [BreakReason(b, name) for b in runtime.break_records]
    guards = [Guard(g) for c in runtime.captures_made for g in c.guards]
    return ExplainOutput(graphs, reasons, guards, elapsed, [capture_proto(c) for c in runtime.captures_made],
                         runtime.phase_times)


def explain(fn, *extra_args, **extra_kwargs):
    """explain(fn)(*args, **kwargs) -> ExplainOutput: runs fn once through a
    fresh Runtime (eager backend) and reports its graphs, breaks and guards.
    torch's older form explain(fn, *args, **kwargs) runs it at once."""
    if extra_args or extra_kwargs:
        warnings.warn("dynamo.explain(fn, *args) is deprecated; use dynamo.explain(fn)(*args)",
                      DeprecationWarning, stacklevel=2)
        return _run_explain(fn, extra_args, extra_kwargs)

    def inner(*args, **kwargs):
        return _run_explain(fn, args, kwargs)

    return inner


# ----------------------------------------------------------------- export
_ROOT = re.compile(r"^L\['((?:[^'\\]|\\.)*)'\]")


def _identifier(text):
    name = re.sub(r"\W", "_", text)
    return name if name and not name[0].isdigit() else f"_{name}"


def _module_path(source):
    """"layer1.0.bn1.running_mean" for "L['self'].layer1[0].bn1.running_mean"
    (the module's own attribute path), else None."""
    if not source.startswith("L['self']"):
        return None
    path = re.sub(r"\[(\d+)\]", r".\1", source.removeprefix("L['self']"))
    path = re.sub(r"\['([A-Za-z_]\w*)'\]", r".\1", path)
    if re.fullmatch(r"(\.\w+)+", path):
        return path[1:]
    return None


def _tensor_leaves(name, value, out):
    if isinstance(value, torch.Tensor):
        out.append((name, value))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _tensor_leaves(f"{name}_{i}", v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _tensor_leaves(f"{name}_{k}", v, out)


def _index_of(value, items):
    return next((i for i, item in enumerate(items) if item is value), None)


_CONSTANTS = (int, float, bool, str, type(None), torch.dtype, torch.device)


def _output_node(value, outputs, output_nodes, inputs, input_nodes, used):
    """The fx value giving `value` (the function's return value) from the
    graph's outputs, its inputs or constants; None where nothing does."""
    if isinstance(value, torch.Tensor):
        i = _index_of(value, outputs)
        if i is not None:
            used.add(i)
            return output_nodes[i]
        i = _index_of(value, inputs)
        return input_nodes[i] if i is not None else None
    if type(value) in (tuple, list):
        items = [_output_node(v, outputs, output_nodes, inputs, input_nodes, used) for v in value]
        if any(item is None and v is not None for item, v in zip(items, value)):
            return None
        return type(value)(items)
    if type(value) is dict:
        items = {k: _output_node(v, outputs, output_nodes, inputs, input_nodes, used) for k, v in value.items()}
        if any(items[k] is None and v is not None for k, v in value.items()):
            return None
        return items
    if isinstance(value, _CONSTANTS):
        return value
    return None


def export(fn, *args, aten_graph=False, decomposition_table=None, **kwargs):
    """(graph_module, guards) for fn(*args, **kwargs) captured as one graph.

    aten_graph=True: graph_module is traced again by torch's make_fx into
    ATen operators (torch.ops.aten.*), through decomposition_table (a dict
    from ATen ops to Python decompositions, e.g. from
    torch._decomp.get_decompositions) when one is given.

    fn (a function, bound method or nn.Module) runs once, through a nopython
    Runtime: a graph break raises dynamo.Unsupported with its location
    ("file:line: message [REASON] | source line | hint: ..."), and so does a
    call that makes no graph.

    graph_module is a torch.fx.GraphModule whose forward takes the tensors
    among fn's arguments, flattened in order (positional, then keyword;
    lists, tuples and dicts in order) and returns what fn returns, in the
    same structure (`gm(x)` equals `model(x)`). Python scalars are
    specialised into the graph (the guards record their values). Module
    parameters and buffers, and other tensors fn reads from its closure or
    globals, are attributes of graph_module: the same tensor objects, so
    in-place buffer updates (BatchNorm in training) reach the original
    module. Side effects the live runtime replays outside the graph
    (attribute or global stores of Python values) are not part of it; a
    warning says when graph outputs are dropped for that reason.

    guards is a list of Guard (readable; `.proto` is the IR message): the
    conditions under which the graph stands for fn."""
    target = _target_or_raise(fn, "export")
    recorded = []

    def recording(gm, example_inputs):
        record = {"gm": gm, "outputs": None}
        recorded.append(record)

        def run(*flat):
            record["outputs"] = gm(*flat)
            return record["outputs"]

        return run

    runtime = Runtime(backend=recording, nopython=True)
    result = runtime.call(target, tuple(args), dict(kwargs))
    name = getattr(target, "__qualname__", repr(target))
    if len(recorded) != 1 or len(runtime.captures_made) != 1:
        raise Unsupported(f"dynamo.export: {name} must produce exactly one graph; "
                          f"it produced {len(recorded)}")
    capture = capture_proto(runtime.captures_made[0])
    gm, outputs = recorded[0]["gm"], recorded[0]["outputs"]
    guards = [Guard(g) for g in capture.guards]
    graph_module = _standalone(gm, capture, target, args, kwargs, result, outputs, name)
    if aten_graph:
        graph_module = _aten_graph(graph_module, args, kwargs, decomposition_table)
    _tag_placeholders(graph_module, args, kwargs)
    return graph_module, guards


def _tag_placeholders(graph_module, args, kwargs):
    """Each input placeholder the graph reads carries its tensor's Python
    attributes (`node.meta["tensor_dict"]`, as torch._dynamo.export gives
    them: from the values it traced), so tags set on the example inputs
    survive into the graph."""
    flat = []
    for i, value in enumerate(args):
        _tensor_leaves(f"a{i}", value, flat)
    for key, value in kwargs.items():
        _tensor_leaves(key, value, flat)
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    for node, (_, tensor) in zip(placeholders, flat):
        if tensor.__dict__ and node.users:
            node.meta["tensor_dict"] = dict(tensor.__dict__)


def _aten_graph(graph_module, args, kwargs, decomposition_table):
    """graph_module re-traced to ATen ops by torch's make_fx, on the flat
    tensors it takes."""
    from torch.fx.experimental.proxy_tensor import make_fx
    flat = []
    for i, value in enumerate(args):
        _tensor_leaves(f"a{i}", value, flat)
    for key, value in kwargs.items():
        _tensor_leaves(key, value, flat)
    tensors = [t for _, t in flat]
    return make_fx(graph_module, decomposition_table=decomposition_table or {}, tracing_mode="real")(*tensors)


def _standalone(gm, capture, target, args, kwargs, result, outputs, name):
    sources = [spec.name for spec in capture.inputs if spec.WhichOneof("value") == "tensor"]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(sources) != len(placeholders):
        raise Unsupported(f"dynamo.export: {name}: {len(placeholders)} graph inputs, {len(sources)} sources")
    frame = frame_for_call(target, args, kwargs)
    func = target.__func__ if isinstance(target, types.MethodType) else target
    bound = inspect.signature(target).bind(*args, **kwargs)
    bound.apply_defaults()
    leaves = []
    for pname, value in bound.arguments.items():
        _tensor_leaves(pname, value, leaves)

    graph = torch.fx.Graph()
    taken = set()

    def fresh(base):
        base, n = _identifier(base), 1
        candidate = base
        while candidate in taken:
            n += 1
            candidate = f"{base}_{n}"
        taken.add(candidate)
        return candidate

    leaf_nodes = [graph.placeholder(fresh(pname)) for pname, _ in leaves]
    leaf_values = [value for _, value in leaves]
    env = {}
    for node, source in zip(placeholders, sources):
        value = resolve_source(source, frame, func.__globals__)
        root = _ROOT.match(source)
        if root and root.group(1) in bound.arguments:
            i = _index_of(value, leaf_values)
            if i is None:
                raise Unsupported(f"dynamo.export: {name}: graph input {source} is not a tensor argument "
                                  "(a tensor inside another object cannot be an export input)")
            env[node] = leaf_nodes[i]
            continue
        # State (self.<path>, closure, globals): an attribute of the module.
        path = _module_path(source)
        if path is None:
            path = fresh(f"_state_{source}")
        try:
            existing = _get_path(gm, path)
        except AttributeError:
            existing = None
        if existing is not None and existing is not value:
            path = fresh(f"_state_{source}")
        if existing is not value:
            _set_path(gm, path, value)
        env[node] = graph.get_attr(path)

    state = [(n, _get_path(gm, n.target)) for n in env.values() if n.op == "get_attr"]
    output_nodes = ()
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            output_nodes = tuple(env[n] for n in node.args[0])
            break
        env[node] = graph.node_copy(node, lambda n: env[n])
    used = set()
    returned = _output_node(result, list(outputs), output_nodes, leaf_values + [v for _, v in state],
                            leaf_nodes + [n for n, _ in state], used)
    if returned is None and result is not None:
        raise Unsupported(f"dynamo.export: {name} returns a {type(result).__name__} that its graph does not "
                          "produce (only tensors, constants and lists, tuples and dicts of them can be returned)")
    dropped = sorted(set(range(len(output_nodes))) - used)
    if dropped:
        warnings.warn(f"dynamo.export: {name}: graph outputs {dropped} are not returned by the function "
                      "(values the runtime stores outside the graph); the exported graph drops them")
    graph.output(returned)
    graph.lint()
    return torch.fx.GraphModule(gm, graph, class_name=f"{_identifier(name)}_export")


class _CallableModule(types.ModuleType):
    """`import dynamo.explain` binds dynamo.explain to this module; calling
    it calls explain(), so `dynamo.explain(fn)` works however it was reached."""

    def __call__(self, fn, *args, **kwargs):
        return explain(fn, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
