#include "tools/export/export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tools/common/output_file.h"
#include "tools/common/supervise.h"

namespace dynamo::tools {
namespace {

namespace fs = std::filesystem;

// The side file's path, beside the output.
std::string SidePath(const std::string& output, const std::string& side_file) {
  return (fs::path(output).parent_path() / side_file).string();
}

// The capture (and side file) made in this process: the part of the export
// that runs the user's script.
absl::StatusOr<std::vector<std::string>> Produce(const ExportOptions& options, const std::string& side_file) {
  capture::CaptureOptions capture_options = options.capture;
  capture_options.external_path = side_file;
  absl::StatusOr<capture::Captured> captured = capture::CaptureFunction(capture_options);
  if (!captured.ok()) return captured.status();
  absl::StatusOr<std::string> bytes = capture::Serialize(captured->capture, options.format);
  if (!bytes.ok()) return bytes.status();
  return std::vector<std::string>{*std::move(bytes), std::move(captured->external_data)};
}

}  // namespace

absl::Status RunExport(const ExportOptions& options) {
  if (options.format != "pb" && options.format != "pbtxt" && options.format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --format '", options.format, "' (pb, pbtxt, json)"));
  }
  if (!(options.timeout_seconds >= 0)) {
    return absl::InvalidArgumentError("the timeout must be a number of seconds, 0 for none");
  }
  // Output paths are checked before the script runs: a wrong -o costs no import.
  if (absl::Status s = CheckWritableDirectory(options.output); !s.ok()) return s;
  if (absl::Status s = CheckOutputPath(options.output); !s.ok()) return s;
  const bool external = options.capture.weights == capture::Weights::kExternal;
  std::string side_file = absl::StrCat(fs::path(options.output).filename().string(), ".weights");
  std::string side_path = SidePath(options.output, side_file);
  if (external) {
    if (absl::Status s = CheckOutputPath(side_path); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<std::string>> files = RunSupervised(
      [&] { return Produce(options, side_file); }, {.timeout_seconds = options.timeout_seconds, .what = "the export"});
  if (!files.ok()) return files.status();
  if (files->size() != 2) return absl::InternalError("the export sent back an unexpected result");
  if (external) {
    if (absl::Status s = WriteAtomically(side_path, (*files)[1]); !s.ok()) return s;
    if (absl::Status s = WriteAtomically(options.output, (*files)[0]); !s.ok()) {
      unlink(side_path.c_str());
      return s;
    }
    return absl::OkStatus();
  }
  return WriteAtomically(options.output, (*files)[0]);
}

}  // namespace dynamo::tools
