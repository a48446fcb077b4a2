// What dynamo.optimize(...) calls on every call, as C callables: a warm call
// goes from the user's call to the frame evaluator with at most one Python
// frame of ours (a module's: none).
//
//   dynamo._C.OptimizedFunction(callback, target, config)
//       Calling it is run_with_eval_frame(callback, config.cache_size_limit,
//       target, *args, **kwargs). optimize() wraps it in a Python function
//       (functools.wraps): FunctionType is what torch.fx and inspect want.
//   dynamo._C.ModuleCall(slow)
//       OptimizedModule.__call__: when neither the wrapper nor the original
//       module nor torch's global hook lists have hooks, and the wrapper has
//       a `_dynamo_callback`, it runs original.forward(*args, **kwargs)
//       under that callback; otherwise slow(self, *args, **kwargs), the
//       Python path that runs the hooks.
#pragma once

#include <Python.h>

#include "absl/status/status.h"

namespace dynamo::embed {

// Adds both types to the module dynamo._C.
absl::Status AddCallerTypes(PyObject* module);

}  // namespace dynamo::embed
