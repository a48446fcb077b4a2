"""Settings of the live shim, read at call time (like torch._dynamo.config).

    import dynamo
    dynamo.config.cache_size_limit = 16
"""
# Compiled entries kept per code object; past it the code runs eagerly (one
# warning says so).
cache_size_limit = 8
# Print each capture, its graph and the reason for each recompile.
verbose = False
# Warn when a guard fails and a function is captured again.
warn_recompiles = True
# Raise dynamo.RecompileError instead (torch._dynamo's option of that name):
# for programs that must never pay for a second capture.
error_on_recompile = False
# A backend that raises makes the call raise dynamo.BackendCompilerFailed
# (torch._dynamo's default); True: warn and run the frame eagerly instead.
suppress_errors = False
# Dynamic shapes: after a recapture caused by a new size, the dimensions
# whose sizes changed become symbolic (torch._dynamo's automatic dynamic), so
# the next new size needs no capture. False: every new size is a new capture
# (unless optimize(dynamic=True) or mark_dynamic says otherwise).
automatic_dynamic_shapes = True
# Tensor.item(), Tensor.tolist() and int()/float() of a one-element tensor
# stay in the graph as numbers it computes, usable in arithmetic and tensor
# operations, instead of breaking it (torch._dynamo's option of the same
# name). A branch or a size that needs such a number's value still breaks.
# nopython=True (fullgraph) and export imply it, as in torch._dynamo.
capture_scalar_outputs = False
# torch.fx.symbolic_trace of an optimized function or module raises
# RuntimeError (torch._dynamo's default): FX would record the original
# code's ops and silently drop the capture. False: the optimized code steps
# aside and FX traces the original.
error_on_nested_fx_trace = True
