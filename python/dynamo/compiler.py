"""torch.compiler's names over libdynamo, so code written against
torch.compiler ports by changing the import:

    import dynamo.compiler as compiler          # instead of torch.compiler
    model = compiler.compile(model, backend="eager")     # dynamo.compile
    compiler.disable(fn, recursive=False)       # fn's frames skipped, what it calls captured
    compiler.allow_in_graph(fn); compiler.assume_constant_result(k)
    compiler.is_compiling()                     # True in captured code
    compiler.reset(); compiler.list_backends()

Only what torch 2.14's torch.compiler has and libdynamo implements.
"""
from dynamo.backends import list_backends  # noqa: F401
from dynamo.decorators import allow_in_graph, assume_constant_result, is_compiling  # noqa: F401
from dynamo.eval_frame import compile, disable, reset  # noqa: F401

# torch.compiler.is_dynamo_compiling: the same question for the frontend alone.
is_dynamo_compiling = is_compiling

__all__ = ["allow_in_graph", "assume_constant_result", "compile", "disable", "is_compiling",
           "is_dynamo_compiling", "list_backends", "reset"]
