// dynamo-inspect as a library call: everything the tool does, minus argument
// parsing and exit codes (main.cc).
//
//   InspectOptions o{.script = "examples/add.py", .function = "forward"};
//   std::string report;
//   absl::Status s = RunInspect(o, report);
#pragma once

#include <string>

#include "absl/status/status.h"

namespace dynamo::tools {

struct InspectOptions {
  std::string script;    // path of the Python script to import
  std::string function;  // dotted target inside it: f, Model.forward, model.forward
  bool as_main = false;  // import the script as __main__
  bool nested = true;    // also list nested code objects
};

// Builds the whole report into `out`; on failure `out` is left untouched, so
// nothing half-written reaches the user.
[[nodiscard]] absl::Status RunInspect(const InspectOptions& options, std::string& out);

}  // namespace dynamo::tools
