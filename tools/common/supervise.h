// Runs a tool's work in a child process and reports what really happened.
//
// The tools import a user's script into an interpreter embedded in their own
// process, so the script can end that process: os._exit(0) while being
// imported would otherwise make dynamo-export exit 0 with no file and no
// message, and a call that never returns would hang a CI job. The work runs
// in a forked child (before any interpreter starts) that sends its result
// back over a pipe; the parent alone prints and writes files, so
//
//   - a child that ends without a complete result (os._exit, sys.exit,
//     a signal, a crash) is an error that says how it ended;
//   - a child still running after the timeout is killed and reported;
//   - a result is all or nothing: a child cut short leaves no partial output.
//
//   absl::StatusOr<std::vector<std::string>> out = RunSupervised(
//       [&]() -> absl::StatusOr<std::vector<std::string>> { return Work(); },
//       {.timeout_seconds = 60, .what = "the export"});
//
// A failed status keeps its code, message and payloads (the Python traceback
// that --traceback prints) across the process boundary.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dynamo::tools {

struct SuperviseOptions {
  double timeout_seconds = 0;  // 0: no limit
  std::string what = "the run";  // for messages: "<what> did not finish ..."
};

using ChildWork = std::function<absl::StatusOr<std::vector<std::string>>()>;

// Forks, runs `work` in the child and returns its result in the parent. Call
// it before anything starts threads or an interpreter in this process.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> RunSupervised(const ChildWork& work,
                                                                     const SuperviseOptions& options);

}  // namespace dynamo::tools
