// The symbolic interpreter: runs a Python function's bytecode over variable
// trackers instead of values, so that every tensor operation becomes a graph
// node (with metadata from the op registry, never from running a kernel) and
// every Python value the trace relied on becomes a guard.
//
//   TraceRequest request;
//   request.function = fn;                          // a Python function object
//   request.args = {TraceInput::Tensor(meta), TraceInput::Object(FromLong(3))};
//   BreakInfo why;
//   absl::StatusOr<TraceResult> r = Trace(request, registry, &why);
//   // On a construct that needs a graph break, r is an error and `why` says
//   // what, where (file:line and the source text) and what to do about it.
//
// Built-in torch.nn modules are inlined like user modules (their forward is
// traced down to functional ops), so graphs hold call_function/call_method
// nodes and get_attr nodes for parameters and buffers, never call_module.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ops/registry.h"
#include "lib/python/object.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::trace {

// One argument of the traced call: a tensor described by metadata, a real
// Python object, or a container of those.
struct TraceInput {
  enum class Kind { kTensor, kObject, kTuple, kList, kDict };
  Kind kind = Kind::kObject;
  ops::TensorMeta tensor;
  python::Object object;
  std::vector<TraceInput> items;
  std::vector<std::string> keys;  // kDict, parallel to items

  static TraceInput Tensor(ops::TensorMeta meta);
  static TraceInput Object(python::Object object);
  static TraceInput Tuple(std::vector<TraceInput> items);
  static TraceInput List(std::vector<TraceInput> items);
  static TraceInput Dict(std::vector<std::string> keys, std::vector<TraceInput> items);
};

struct TraceRequest {
  python::Object function;  // the Python function whose code is traced
  python::Object self;      // the bound instance of a method, or empty
  std::vector<TraceInput> args;
  std::vector<std::pair<std::string, TraceInput>> kwargs;
};

// A get_attr node's target and the real tensor behind it.
struct GraphAttribute {
  std::string target;  // the get_attr target ("fc1.weight")
  std::string source;  // where it was read ("L['self'].fc1.weight")
  python::Object value;
};

// Why the trace stopped at a construct that needs a graph break.
struct BreakInfo {
  ir::GraphBreak::Reason reason = ir::GraphBreak::OTHER;
  std::string message;
  std::string hint;
  std::string file;
  int line = 0;
  std::string text;    // the source line, stripped
  std::string opcode;
  int offset = 0;
};

struct TraceResult {
  ir::Graph graph;
  std::vector<ir::Guard> guards;
  std::vector<GraphAttribute> attributes;
  std::vector<ir::InputSpec> inputs;  // the placeholders, in order
};

// Traces `request` into one graph. Needs the GIL. On a graph break the status
// is kUnimplemented and `*on_break` (when given) is filled in.
[[nodiscard]] absl::StatusOr<TraceResult> Trace(const TraceRequest& request,
                                                const ops::Registry& registry,
                                                BreakInfo* on_break = nullptr);

// The one-line form of a break: "file:line: message [reason] | text | hint: ...".
std::string FormatBreak(const BreakInfo& info);

}  // namespace dynamo::trace
