// dynamo-export as a library call: capture, serialise, write atomically.
//
//   ExportOptions o;
//   o.capture.script = "model.py"; o.capture.function = "model.forward";
//   o.capture.inputs = {"x=f32[1,3,224,224]"};
//   o.output = "model.pb";
//   absl::Status s = RunExport(o);   // on failure no file is left behind
#pragma once

#include <string>

#include "absl/status/status.h"
#include "lib/capture/capture.h"

namespace dynamo::tools {

struct ExportOptions {
  capture::CaptureOptions capture;
  std::string output;         // path of the .pb (or .pbtxt / .json)
  std::string format = "pb";  // pb | pbtxt | json
};

[[nodiscard]] absl::Status RunExport(const ExportOptions& options);

// Writes `data` to `path` through a temporary file in the same directory and
// a rename, so readers never see a partial file.
[[nodiscard]] absl::Status WriteAtomically(const std::string& path, const std::string& data);

}  // namespace dynamo::tools
