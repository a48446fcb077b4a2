// Graph breaks as code: turns a trace that stopped (lib/trace, TraceRequest::
// allow_breaks) into bytecode that runs the graph, rebuilds the frame's live
// values, replays the side effects, lets Python run what the translator could
// not, and continues in resume functions.
//
//   trace::TraceResult r = *trace::Trace(request_with_allow_breaks, registry);
//   rewrite::Rewritten w = *rewrite::Rewrite(r, {.id = 7});
//   // Install in the function's globals: w.graph_name -> the compiled graph,
//   // each w.resumes[i].global_name -> a callable running that resume code,
//   // then run w.code with the original arguments.
//
// The rewritten code has the original's signature and cells. It reads the
// arguments only before it assigns anything, so values rebuilt from their
// sources (L['x'], L['self'].fc.weight, G['cfg']) are the ones the trace saw.
// Names it calls are globals "<prefix>_graph_<id>" and "<prefix>_resume_<id>_<k>"
// so the code stays marshal-able (no live objects among its constants).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/python/object.h"
#include "lib/trace/translator.h"

namespace dynamo::rewrite {

// A generated function that continues the original code at one instruction:
// its arguments are the values on the stack there, then the bound locals.
struct ResumeFunction {
  std::string global_name;  // what the rewritten code calls
  python::Object code;      // the resume function's code object
  int offset = 0;           // byte offset in the original code where it goes on
  // False: the rest of the function holds a break in a loop or a with/try
  // block, so it runs as plain Python (no capture would make progress).
  bool capture = true;
  // The first argument is the tuple of cells for the code's free variables
  // (the original's cells and free variables, shared, not copied).
  bool takes_closure = false;
  // What its arguments (after the closure) will be, as the trace knew them:
  // a null entry is a result of the instruction Python runs, unknown until
  // it runs. Lets a capture without running anything trace it too.
  std::vector<trace::VarPtr> arguments;
  // The instruction Python runs before calling it (CALL, POP_JUMP_..., or
  // empty when the rest of the function runs in Python), and for a CALL the
  // callable it calls.
  std::string after_opcode;
  trace::VarPtr called;
};

struct Rewritten {
  python::Object code;      // runs instead of the traced function's code
  std::string graph_name;   // the global called with the graph's inputs; empty: no graph
  std::vector<ResumeFunction> resumes;
  // With RewriteOptions::live_objects: classes no import path names (one the
  // trace made), by the global the code reads each from.
  std::vector<std::pair<std::string, python::Object>> objects;
};

struct RewriteOptions {
  std::string prefix = "__dynamo";
  int id = 0;  // distinguishes the globals of rewrites sharing a module
  // Code run in this process only (a live capture) may read a class no
  // import path names from a global the caller installs (Rewritten::objects);
  // without it (code that is exported) such a class fails the rewrite.
  bool live_objects = false;
};

// Needs the GIL. Fails (FailedPrecondition) when a live value cannot be
// rebuilt in bytecode; the caller then runs the function unchanged.
[[nodiscard]] absl::StatusOr<Rewritten> Rewrite(const trace::TraceResult& result,
                                                const RewriteOptions& options = {});

}  // namespace dynamo::rewrite
