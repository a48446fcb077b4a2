// dynamo-inspect as a library call: everything the tool does, minus argument
// parsing and exit codes (main.cc).
//
//   InspectOptions o{.script = "model.py", .function = "model.forward",
//                    .inputs = {"x=f32[1,3,224,224]"}};
//   absl::StatusOr<InspectReport> r = RunInspect(o);   // r->text, r->breaks
//
// Without inputs it lists the bytecode only (tracing needs input metadata);
// with them it captures and reports the graph, the guards and any break; a
// saved capture (.pb, .pbtxt, .json) is reported as it was written.
//
//   absl::StatusOr<DiffReport> d = RunDiff({.a = "old.pb", .b = "new.pb"});  // d->text, d->equal
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dynamo::tools {

struct InspectOptions {
  std::string script;    // a Python script, or a saved capture
  std::string function;  // dotted target inside the script
  std::vector<std::string> inputs;  // input specs, as dynamo-export takes them
  std::string example_inputs;       // or a function of the script returning examples
  bool as_main = false;  // import the script as __main__
  bool nested = true;    // also list nested code objects
  bool json = false;     // the capture as JSON instead of text
  double timeout_seconds = 0;  // stop a script's inspection after this long; 0: no limit
  bool picture = false;  // also draw the capture (InspectReport::dot)
};

struct InspectReport {
  std::string text;
  int breaks = 0;  // graph breaks in the capture (for --max-breaks)
  std::string dot;  // with InspectOptions::picture: the capture in Graphviz DOT (FormatDot)
};

// On failure nothing of the report is returned, so nothing half-written
// reaches the user. A script is imported and captured in a child process
// (tools/common/supervise.h): one that ends the process or outlives the
// timeout is an error. Control characters in the report are escaped.
[[nodiscard]] absl::StatusOr<InspectReport> RunInspect(const InspectOptions& options);

struct DiffOptions {
  std::string a, b;   // two saved captures (.pb, .pbtxt, .json)
  bool json = false;  // the diff as JSON instead of text
};

struct DiffReport {
  std::string text;   // capture::FormatDiff's (or FormatDiffJson's) text
  bool equal = true;  // nothing that the diff compares differs
};

// What changed from capture `a` to capture `b` (lib/capture/diff.h). Both are
// read as saved captures are for a report; a path that is not one, or does
// not parse, is an error that names it. Control characters are escaped.
[[nodiscard]] absl::StatusOr<DiffReport> RunDiff(const DiffOptions& options);

// DOT text drawn as SVG by Graphviz's `dot` (found on PATH); an error that
// says how to get it when it is missing.
[[nodiscard]] absl::StatusOr<std::string> RenderSvg(const std::string& dot);

// True for paths dynamo-inspect reads as a saved capture.
bool IsCaptureFile(const std::string& path);

}  // namespace dynamo::tools
