"""libdynamo's Python side, shaped like torch._dynamo: code ports by changing
`import torch._dynamo as dynamo` to `import dynamo`.

    import dynamo
    f = dynamo.optimize("eager")(f)             # or "ts", or any backend(gm, example_inputs)
    model = dynamo.optimize("ts")(model)        # an OptimizedModule (model._orig_mod)
    print(dynamo.explain(f)(x, y))              # graphs, breaks (with their lines), ops, guards
    gm, guards = dynamo.export(model, x)        # one graph, or dynamo.Unsupported at a break
    dynamo.disable(g); dynamo.reset(); dynamo.list_backends(); dynamo.config.cache_size_limit = 16
    dynamo.allow_in_graph(h); dynamo.disallow_in_graph(torch.sub); dynamo.assume_constant_result(k)
    dynamo.run(f); dynamo.skip(g); dynamo.is_compiling()
    dynamo.compiler.disable(g, recursive=False)   # torch.compiler's names (dynamo.compiler)
    dynamo.set_logs(graph_code=True, recompiles=True)  # or DYNAMO_LOGS="graph_code,recompiles" (logs.py)

    from dynamo.loader import load
    gm, capture = load("model.pb")              # an offline capture as a torch.fx.GraphModule
    dynamo.render("model.pb", "model.svg")      # its graphs and breaks drawn (pictures.py)
    dynamo.explain(f)(x).render("f.svg")        # what a live call captured, drawn

Only `config` is imported with the package; the rest (and torch with it)
loads on first use, so `import dynamo._C` and `dynamo.loader` stay light.
"""
from dynamo import config  # noqa: F401

_LAZY = {
    "optimize": "eval_frame", "optimize_assert": "eval_frame", "disable": "eval_frame",
    "reset": "eval_frame", "OptimizedModule": "eval_frame", "compile": "eval_frame", "graph_break": "eval_frame",
    "skip": "eval_frame", "mark_dynamic": "eval_frame", "maybe_mark_dynamic": "eval_frame",
    "mark_static": "eval_frame",
    "allow_in_graph": "decorators", "disallow_in_graph": "decorators", "assume_constant_result": "decorators",
    "is_compiling": "decorators", "run": "decorators",
    "explain": "explain", "export": "explain", "ExplainOutput": "explain", "Guard": "explain",
    "BreakReason": "explain",
    "list_backends": "backends", "register_backend": "backends", "lookup_backend": "backends",
    "InvalidBackend": "backends",
    "Runtime": "runtime",
    "Unsupported": "exc", "BackendCompilerFailed": "exc", "TorchRuntimeError": "exc", "RecompileError": "exc",
    "set_logs": "logs", "set_dump_dir": "logs",
    "to_dot": "pictures", "render": "pictures",
}
_SUBMODULES = ("compiler",)

__all__ = ["config", *_LAZY]


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f"dynamo.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dynamo' has no attribute {name!r}")
    import importlib
    loaded = importlib.import_module(f"dynamo.{module}")
    # Every name of that module at once: importing dynamo.explain binds the
    # package attribute `explain` to the module, and the function must win.
    for other, where in _LAZY.items():
        if where == module:
            globals()[other] = getattr(loaded, other)
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))
