// libdynamo's facade: a script, a function in it and a description of its
// inputs in; the Capture (graphs, guards, breaks, bytecode) out. This is the
// one call the tools and C++ hosts make.
//
//   dynamo::capture::CaptureOptions options;
//   options.script = "model.py";
//   options.function = "model.forward";
//   options.inputs = {"x=f32[8,3,224,224]"};
//   absl::StatusOr<dynamo::capture::Captured> c = dynamo::capture::CaptureFunction(options);
//   if (!c.ok()) { std::cerr << c.status().message(); }   // one located line
//   c->capture.graphs(0).nodes_size();
//
// The embedded interpreter is started on first use and lives until the
// process exits (CPython and torch cannot be re-initialised); a host that
// started Python itself keeps its interpreter. Calls need no GIL held by the
// caller when libdynamo started Python; hosts that run Python must hold it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::capture {

enum class Weights {
  kNone,      // attributes carry metadata only; the loader needs the root module
  kEmbed,     // values inside the .pb (under protobuf's 2 GB limit)
  kExternal,  // values in a side file (Captured::external_data)
};

struct CaptureOptions {
  std::string script;    // path of the Python script (imported for real)
  std::string function;  // "forward", "Model.forward" or "model.forward"
  bool as_main = false;  // import the script as __main__
  // Input specs (lib/capture/input_spec.h), positional in order or name=spec.
  std::vector<std::string> inputs;
  // Constraints of the symbolic sizes the specs name (--dim B=1..64,
  // T=%8; lib/capture/input_spec.h): the capture holds for every size they
  // and its guards admit.
  std::vector<std::string> dims;
  // Alternatively, a function of the script returning example inputs: a tuple
  // of positional arguments, a dict of keyword arguments, or (tuple, dict).
  // Only their metadata is kept for tensors.
  std::string example_inputs;
  Weights weights = Weights::kNone;
  // Continue past graph breaks: every graph, the rewritten code and the
  // resume functions go into the capture (resume functions whose arguments
  // are known without running anything are traced too). Without it a break
  // is a located error.
  bool allow_breaks = false;
  // For kExternal: the side file's name as the .pb will refer to it.
  std::string external_path = "weights.bin";
};

struct Captured {
  ir::Capture capture;
  std::string external_data;  // the side file's bytes, for Weights::kExternal
};

// A construct that needs a graph break fails with kUnimplemented and one line:
// "file:line: graph break: <what> [REASON] | <source line> | hint: <what to do>";
// GraphBreakOf() gives the same break as data.
[[nodiscard]] absl::StatusOr<Captured> CaptureFunction(const CaptureOptions& options);

// The graph break a failed CaptureFunction carries, if it failed on one.
std::optional<ir::GraphBreak> GraphBreakOf(const absl::Status& status);

// Serialises deterministically (same capture, same bytes).
[[nodiscard]] absl::StatusOr<std::string> Serialize(const ir::Capture& capture,
                                                    absl::string_view format /* pb|pbtxt|json */);

}  // namespace dynamo::capture
