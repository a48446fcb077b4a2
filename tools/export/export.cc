#include "tools/export/export.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace dynamo::tools {
namespace {

namespace fs = std::filesystem;

absl::Status CheckWritableDirectory(const std::string& output) {
  fs::path dir = fs::path(output).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("cannot write '", output, "': directory '",
                                            dir.string(), "' does not exist"));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write '", output, "': ", std::strerror(errno)));
  }
  if (fs::is_directory(output, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write '", output, "': it is a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteAtomically(const std::string& path, const std::string& data) {
  std::string temp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string error = std::strerror(errno);
      close(fd);
      unlink(temp.c_str());
      return absl::DataLossError(absl::StrCat("writing '", path, "': ", error));
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    unlink(temp.c_str());
    return absl::DataLossError(absl::StrCat("writing '", path, "': ", std::strerror(errno)));
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    std::string error = std::strerror(errno);
    unlink(temp.c_str());
    return absl::DataLossError(absl::StrCat("writing '", path, "': ", error));
  }
  return absl::OkStatus();
}

absl::Status RunExport(const ExportOptions& options) {
  if (options.format != "pb" && options.format != "pbtxt" && options.format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --format '", options.format, "' (pb, pbtxt, json)"));
  }
  if (absl::Status s = CheckWritableDirectory(options.output); !s.ok()) return s;
  capture::CaptureOptions capture_options = options.capture;
  std::string side_file = absl::StrCat(fs::path(options.output).filename().string(), ".weights");
  capture_options.external_path = side_file;
  absl::StatusOr<capture::Captured> captured = capture::CaptureFunction(capture_options);
  if (!captured.ok()) return captured.status();
  absl::StatusOr<std::string> bytes = capture::Serialize(captured->capture, options.format);
  if (!bytes.ok()) return bytes.status();
  if (options.capture.weights == capture::Weights::kExternal) {
    std::string side_path = (fs::path(options.output).parent_path() / side_file).string();
    if (absl::Status s = WriteAtomically(side_path, captured->external_data); !s.ok()) return s;
    if (absl::Status s = WriteAtomically(options.output, *bytes); !s.ok()) {
      unlink(side_path.c_str());
      return s;
    }
    return absl::OkStatus();
  }
  return WriteAtomically(options.output, *bytes);
}

}  // namespace dynamo::tools
