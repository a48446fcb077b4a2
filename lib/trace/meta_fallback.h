// Output metadata from torch itself: a callable run on meta-device tensors
// that carry the inputs' metadata (torch.empty_strided(..., device="meta")),
// its results read back. The registry's inference is written per op; this
// path asks torch's own meta kernels (and, for a Python function, runs the
// function on them), so it serves calls the registry has no entry for:
// functions the user put in the graph with dynamo.allow_in_graph, and torch
// ops without an entry.
//
//   absl::StatusOr<MetaCall> r = InferOnMeta(fn, {ops::Value(x_meta), ops::Value(int64_t{1})}, {},
//                                            {.grad_enabled = true});
//   // r->result: the output's dtype, sizes, strides, requires_grad; its
//   // device is the inputs' (meta mapped back), never "meta".
//
// What cannot be known on meta is an error, never a guess: a callable that
// reads tensor data (.item(), printing values), raises, returns an object
// that is not a tensor, constant or tuple/list of those, returns a
// data-dependent size, or takes tensors on several devices.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "lib/ops/value.h"
#include "lib/python/object.h"

namespace dynamo::trace {

struct MetaOptions {
  bool grad_enabled = true;  // the grad mode the call runs under
};

struct MetaCall {
  ops::Value result;          // tensors described on the inputs' device
  bool mutates_input = false;  // some input's version counter moved (in place)
  // Some input's sizes, strides, dtype or requires_grad changed (resize_,
  // t_, requires_grad_): the trace's view of that tensor would be stale.
  bool changes_input_metadata = false;
};

// Needs the GIL. Runs `fn(*args, **kwargs)` with every tensor argument a
// meta tensor of its metadata; the interpreter's grad mode is put back
// after. An error status's message says why the call cannot be inferred.
[[nodiscard]] absl::StatusOr<MetaCall> InferOnMeta(const python::Object& fn, const std::vector<ops::Value>& args,
                                                   const std::vector<ops::Kwarg>& kwargs,
                                                   const MetaOptions& options);

}  // namespace dynamo::trace
