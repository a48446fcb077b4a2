// Live capture: one call's real arguments in; the graph, its guards and the
// code to run instead of the function out. The base of the Python module's
// optimize() and of running rewritten code in an embedded interpreter.
//
//   absl::StatusOr<LiveCapture> c = CaptureCall(fn, self, args, kwargs, /*id=*/3);
//   if (c.ok() && c->code) { /* install c->graph_name and c->resumes, run c->code */ }
//   else { /* run fn as it is (c->skip_reason says why) */ }
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/python/object.h"
#include "lib/rewrite/rewrite.h"
#include "lib/trace/translator.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::capture {

struct LiveCapture {
  // graphs(0) when there is a graph, the guards, the break (if any) and the
  // original and rewritten bytecode listings.
  ir::Capture capture;
  // The tensors behind the graph's get_attr nodes, by target.
  std::vector<std::pair<std::string, python::Object>> attributes;
  // Runs instead of the function's code; empty: run the function as it is.
  python::Object code;
  std::string graph_name;  // global for the compiled graph; empty: no graph
  std::vector<rewrite::ResumeFunction> resumes;
  // Globals `code` reads objects from (a class made during the trace).
  std::vector<std::pair<std::string, python::Object>> objects;
  std::string skip_reason;  // why `code` is empty
  // Set when the rewritten code would only call the graph on arguments and
  // return some of its outputs (no break, no side effects): the frame
  // evaluator then calls the graph itself. Localsplus slots of the graph's
  // inputs, in order; the outputs returned (one, or a tuple of them).
  bool direct = false;
  std::vector<int> direct_slots;
  std::vector<int> direct_outputs;
  bool direct_tuple = false;
  // Seconds spent tracing (the symbolic execution, its graph and guards) and
  // rewriting (the new bytecode, resume functions and listings): the first
  // call's phases, as dynamo.runtime reports them.
  double trace_seconds = 0;
  double rewrite_seconds = 0;
};

// Traces `function` on the real `args` (a tuple) and `kwargs` (a dict or
// null) with graph breaks allowed, and rewrites it. `self` is the bound
// instance of a method (its attributes get short get_attr targets) or null.
// `id` makes the rewrite's global names unique in the function's module.
// `dynamic` says which input sizes are symbols; `capture_scalars` keeps
// Tensor.item() and the like in the graph (TraceRequest). Needs the GIL.
[[nodiscard]] absl::StatusOr<LiveCapture> CaptureCall(const python::Object& function,
                                                      const python::Object& self,
                                                      const python::Object& args,
                                                      const python::Object& kwargs, int id,
                                                      const trace::DynamicShapes& dynamic = {},
                                                      bool capture_scalars = false);

// The listing of a code object (dis layout fields), as the IR records it.
void ListBytecode(const python::Object& code, ir::BytecodeListing* out);

// A break as the IR records it.
ir::GraphBreak ToProto(const trace::BreakInfo& info);

}  // namespace dynamo::capture
