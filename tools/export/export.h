// dynamo-export as a library call: capture, serialise, write atomically.
//
//   ExportOptions o;
//   o.capture.script = "model.py"; o.capture.function = "model.forward";
//   o.capture.inputs = {"x=f32[1,3,224,224]"};
//   o.output = "model.pb";
//   absl::Status s = RunExport(o);   // on failure no file is left behind
//
// The capture runs in a child process (tools/common/supervise.h): a script
// that ends the process while it is imported, or a call that outlives
// `timeout_seconds`, is an error, never a silent exit 0. Only regular files
// are written: an output that is a symbolic link, a FIFO, a device or a
// directory is refused.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "lib/capture/capture.h"

namespace dynamo::tools {

struct ExportOptions {
  capture::CaptureOptions capture;
  std::string output;         // path of the .pb (or .pbtxt / .json)
  std::string format = "pb";  // pb | pbtxt | json
  double timeout_seconds = 0;  // stop the capture after this long; 0: no limit
};

[[nodiscard]] absl::Status RunExport(const ExportOptions& options);

}  // namespace dynamo::tools
