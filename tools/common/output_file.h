// Writing a tool's output file so that a user never finds a half-written
// one, nor one written through a link they did not name.
//
//   if (absl::Status s = CheckWritableDirectory(path); !s.ok()) ...  // before the work
//   if (absl::Status s = WriteAtomically(path, bytes); !s.ok()) ...  // after it
#pragma once

#include <string>

#include "absl/status/status.h"

namespace dynamo::tools {

// OK when the directory `output` would be written in exists and is writable.
[[nodiscard]] absl::Status CheckWritableDirectory(const std::string& output);

// OK when `path` does not exist or is a regular file; an error naming what
// it is otherwise (a symbolic link is refused, not followed).
[[nodiscard]] absl::Status CheckOutputPath(const std::string& path);

// Writes `data` to `path` through a fresh temporary file (mkstemp) in the
// same directory and a rename, so readers never see a partial file; `path`
// must pass CheckOutputPath, before and just before the rename.
[[nodiscard]] absl::Status WriteAtomically(const std::string& path, const std::string& data);

}  // namespace dynamo::tools
