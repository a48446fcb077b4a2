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
// Device arguments (device="cuda") become "meta" too; the results' device is
// that argument's, else the tensor arguments' one, else the CPU (a factory
// without tensor arguments runs under torch.device("meta"), so nothing is
// allocated and no random number is drawn at capture time).
//
// What cannot be known on meta is an error, never a guess: a callable that
// reads tensor data (.item(), printing values), raises, returns an object
// that is not a tensor, constant or tuple/list of those, returns a
// data-dependent size, or takes tensors on several devices.
//
// Which callables are torch operators (TorchOperatorName): the ATen
// bindings, the functions and methods generated from torch's operator
// schemas, each of which has a meta kernel or says it has none:
//   torch.<name>          a builtin of torch._C._VariableFunctions (what
//                         torch.* and most of torch.nn.functional export)
//   torch._C._nn.<name>, torch._C._linalg.<name>, torch._C._fft.<name>,
//   torch._C._special.<name>
//                         builtins of those modules (torch.nn.functional's,
//                         torch.linalg's, torch.fft's, torch.special's)
//   Tensor.<name>         a method of torch._C.TensorBase that torch.Tensor
//                         does not override in Python (no dunders)
//   torch.ops.aten.<op>[.<overload>]
//                         an OpOverloadPacket / OpOverload of namespace aten
// Excluded: bindings whose effect leaves the tensors (torch.from_file,
// aten::save, torch._print). The canonical name resolves back to the very
// object by the same rule
// (TorchOperator), never by walking arbitrary attributes. Python functions
// (torch.functional.*, F.relu, user code) are none of these: the translator
// inlines them down to operators.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "lib/ops/value.h"
#include "lib/python/object.h"

namespace dynamo::trace {

// Autocast on one device type as the trace has it where a call is.
struct AutocastDevice {
  std::string device_type;  // "cpu", "cuda"
  bool enabled = false;
  ops::DType dtype = ops::DType::kBFloat16;
};

struct MetaOptions {
  bool grad_enabled = true;  // the grad mode the call runs under
  // Every tensor argument a view at storage offset 1 of a larger storage
  // (same sizes, strides, dtype): a second run with it tells whether a
  // Python-value result reads storage state the trace does not model.
  bool offset_storage = false;
  // Set (with `autocast`): the call runs on fake tensors of the inputs' own
  // devices made in this torch FakeTensorMode, not on meta tensors, with
  // torch's autocast state set to `autocast` for its length. Autocast acts
  // through a tensor's device (it never touches meta tensors), so its own
  // kernels then decide which inputs are cast and the results' dtypes.
  python::Object fake_mode;
  std::vector<AutocastDevice> autocast;
};

struct MetaCall {
  ops::Value result;          // tensors described on the inputs' device
  bool mutates_input = false;  // some input's version counter moved (in place)
  // Some input's sizes, strides, dtype or requires_grad changed (resize_,
  // t_, requires_grad_): the trace's view of that tensor would be stale.
  bool changes_input_metadata = false;
  // A torch.return_types result's field names ("values", "indices").
  std::vector<std::string> fields;
};

// Needs the GIL. Runs `fn(*args, **kwargs)` with every tensor argument a
// meta tensor of its metadata; the interpreter's grad mode is put back
// after. An error status's message says why the call cannot be inferred.
[[nodiscard]] absl::StatusOr<MetaCall> InferOnMeta(const python::Object& fn, const std::vector<ops::Value>& args,
                                                   const std::vector<ops::Kwarg>& kwargs,
                                                   const MetaOptions& options);

// `value` as Python objects for a call that runs for real: each tensor an
// uninitialized tensor of its metadata (torch.empty_strided, on its own
// device), the rest as ToPython gives them. For code that reads only its
// arguments' metadata and whose effect is wanted (a lazy module inferring
// its parameters). Needs the GIL.
[[nodiscard]] absl::StatusOr<python::Object> RealExample(const ops::Value& value);

// The canonical name of a torch operator (the rule above), or nullopt for
// any other callable. Needs the GIL.
[[nodiscard]] std::optional<std::string> TorchOperatorName(PyObject* fn);

// The operator a canonical name stands for, by the same rule; a null Object
// for any other name (registry names of Python functions included). Needs
// the GIL.
[[nodiscard]] python::Object TorchOperator(absl::string_view name);

// True for a torch.ops operator (an OpOverload, or a packet of one
// overload) whose schema returns nothing and writes into an argument
// (`(Tensor(a!) x) -> ()`): what a call does to the trace's tensors needs
// no kernel to describe. Needs the GIL.
[[nodiscard]] bool WritesAndReturnsNothing(PyObject* op);

}  // namespace dynamo::trace
