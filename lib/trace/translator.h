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

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ops/registry.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/opcodes.h"
#include "lib/python/object.h"
#include "lib/trace/variables.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::trace {

// 3.13 pushes a callable below its NULL-or-self slot (LOAD_GLOBAL, LOAD_ATTR,
// CALL, CALL_FUNCTION_EX); 3.11 and 3.12 push the NULL (or the method below
// self) first. The translator's stacks and the rewrite's code follow it.
inline constexpr bool kCallableFirst = bytecode::generated::kPythonMinor >= 13;

// One argument of the traced call: a tensor described by metadata, a real
// Python object, or a container of those.
struct TraceInput {
  enum class Kind { kTensor, kObject, kTuple, kList, kDict };
  Kind kind = Kind::kObject;
  ops::TensorMeta tensor;
  // kTensor: a symbol name per dim ("B"; empty: static), for offline
  // captures with symbolic sizes; empty when all are static.
  std::vector<std::string> dim_symbols;
  python::Object object;
  std::vector<TraceInput> items;
  std::vector<std::string> keys;  // kDict, parallel to items

  static TraceInput Tensor(ops::TensorMeta meta);
  static TraceInput Object(python::Object object);
  static TraceInput Tuple(std::vector<TraceInput> items);
  static TraceInput List(std::vector<TraceInput> items);
  static TraceInput Dict(std::vector<std::string> keys, std::vector<TraceInput> items);
};

// Which input sizes are symbolic (dynamic shapes). A dimension of size 0 or
// 1 stays static whatever is asked, as in torch, and so does every dimension
// of a tensor whose layout is not dense (a slice, an expanded tensor).
struct DynamicShapes {
  // Every dimension of every tensor input (dynamic=True).
  bool all = false;
  // Nothing dynamic, mark_dynamic included (dynamic=False).
  bool none = false;
  // Dimensions by input source ("L['x']"): automatic dynamic's choice.
  // A live tensor's own marks count too (torch's mark_dynamic and
  // mark_static attributes: _dynamo_dynamic_indices, _dynamo_static_indices).
  std::vector<std::pair<std::string, std::vector<int64_t>>> dims;
  // Named symbols' constraints (offline --dim): the declared range and a
  // modulus, which the trace may rely on (recorded with the guards).
  struct Constraint {
    std::string name;
    int64_t min = 2;
    int64_t max = 0;  // 0: unbounded
    int64_t multiple = 1;
  };
  std::vector<Constraint> constraints;
};

struct TraceRequest {
  python::Object function;  // the Python function whose code is traced
  python::Object self;      // the bound instance of a method, or empty
  std::vector<TraceInput> args;
  std::vector<std::pair<std::string, TraceInput>> kwargs;
  // With breaks allowed, a construct that needs a graph break does not fail
  // the trace: the result stops there (TraceResult::stop) so that lib/rewrite
  // can emit code that runs the graph, the unsupported part in Python, and a
  // resume function.
  bool allow_breaks = false;
  // Tensor.item(), tolist() and int()/float() of a tensor stay in the graph
  // as numbers it computes (kScalar, scalars.cc) instead of breaking it:
  // torch._dynamo's capture_scalar_outputs, which fullgraph implies.
  bool capture_scalar_outputs = false;
  DynamicShapes dynamic;
  // Internal to Trace(): stop before this top-frame instruction index the
  // first time it is reached.
  int stop_at = -1;
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

// A mutation of Python state the trace saw. It is not in the graph: the
// rewritten bytecode applies it after the graph runs, in program order.
struct SideEffect {
  enum class Kind {
    kStoreGlobal,   // <globals>[name] = value (the traced function's module)
    kStoreAttr,     // target.name = value
    kStoreCell,     // the free variable in top-frame slot `slot` = value
    kListContents,  // target[:] = target's final items (a list from a source)
    kDictContents,  // target.clear(); target.update(final items)
    // target.__setstate__(its final position): a tuple's iterator read from
    // the frame (WrapTupleIterator) that the trace advanced.
    kIteratorPosition,
  };
  Kind kind = Kind::kStoreGlobal;
  VarPtr target;
  std::string name;
  int slot = -1;
  VarPtr value;
};

// Where a trace with breaks allowed stopped, and the frame there.
struct StopState {
  enum class Kind {
    // Stopped before an instruction that Python must run (a call the
    // translator cannot trace, a jump on a tensor): the graph so far, then
    // that instruction, then a resume function after it (one per successor).
    kInstruction,
    // Stopped at the entry of a loop, `with` or `try` block that holds a
    // break: the rest of the function runs in Python from here.
    kRegion,
    // The function returned, but with side effects to replay (or a value the
    // graph cannot return): the graph, the replay, then the return.
    kReturn,
  };
  Kind kind = Kind::kInstruction;
  size_t index = 0;             // top-frame instruction index
  std::vector<VarPtr> stack;    // the top frame's value stack there
  std::vector<VarPtr> locals;   // its localsplus slots (null: unbound)
  VarPtr kw_names;              // KW_NAMES set for a CALL stopped at
  // The grad mode there. Inside `with torch.no_grad()` blocks (their
  // __exit__ on the stack, IsGradModeExit) the rewrite re-enters each block
  // from the mode it replaced, then sets this one.
  bool grad_enabled = true;
  // False when the graph is empty and nothing is to be replayed: rewriting
  // would gain nothing, the function may as well run as it is.
  bool progress = true;
};

struct TraceResult {
  ir::Graph graph;
  google::protobuf::RepeatedPtrField<ir::Guard> guards;  // (a capture Swaps them in)
  std::vector<GraphAttribute> attributes;
  std::vector<ir::InputSpec> inputs;  // the placeholders, in order

  // --- set when the trace stopped or has effects (allow_breaks) ---
  std::optional<StopState> stop;
  std::optional<BreakInfo> break_info;     // why it stopped (kInstruction/kRegion)
  std::vector<SideEffect> side_effects;    // in program order
  std::vector<SourcePtr> placeholder_sources;  // per graph placeholder, in order
  // Placeholders (indices into placeholder_sources) whose source is a
  // numpy.ndarray: the graph takes torch.as_tensor of it.
  std::vector<size_t> array_placeholders;
  // With `stop`: the graph's output is one tuple of these call nodes' values
  // (every tensor the frame still holds that the graph computed).
  std::vector<std::string> output_nodes;
  std::shared_ptr<const bytecode::DecodedCode> code;  // the top frame's code
  python::Object globals;                             // the traced function's globals
};

// Traces `request` into one graph. Needs the GIL. On a graph break the status
// is kUnimplemented and `*on_break` (when given) is filled in.
[[nodiscard]] absl::StatusOr<TraceResult> Trace(const TraceRequest& request,
                                                const ops::Registry& registry,
                                                BreakInfo* on_break = nullptr);

// The one-line form of a break: "file:line: message [reason] | text | hint: ...".
std::string FormatBreak(const BreakInfo& info);

}  // namespace dynamo::trace
