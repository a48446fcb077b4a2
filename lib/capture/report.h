// A Capture printed for people: what dynamo-inspect shows.
//
//   ORIGINAL BYTECODE   the function's instructions (dis layout)
//   GRAPH graph_0       one table per graph, as torch.fx's print_tabular, with
//                       each node's output metadata
//   GUARDS              kind, source path, expected value
//   GRAPH BREAKS        reason, file:line, the source line, the instruction, a hint
//
//   std::string text = FormatReport(capture);           // from a .pb or a live capture
//   std::string text = FormatReport(capture, listing);  // with a richer bytecode listing
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::capture {

// `original_listing`, when given, replaces the listing rebuilt from
// capture.original_bytecode (a live capture can show nested code objects and
// the exception table too).
[[nodiscard]] std::string FormatReport(const ir::Capture& capture,
                                       const std::string& original_listing = "");

// The capture as a Graphviz DOT picture: one cluster per graph (inputs,
// parameters and the output set apart from the operations, each labelled
// with its op and output dtype/shape, an edge per use of a node), and each
// graph break a note between the graphs it separates, with its reason and
// file:line. Deterministic: the same capture gives the same text.
[[nodiscard]] std::string FormatDot(const ir::Capture& capture);

// The three encodings dynamo-export writes.
enum class CaptureFormat { kBinary, kText, kJson };
// By extension: .pbtxt is text, .json JSON, anything else binary.
[[nodiscard]] CaptureFormat CaptureFormatOf(absl::string_view path);

// Parses an untrusted capture and accepts it only if every consumer can use
// it: it must parse completely, carry an IR version this build reads, and
// pass graph::CheckCapture (no dangling node references, known kinds, one
// output per graph...). Errors are one line that starts with `name`;
// protobuf's own log lines are folded into it instead of reaching stderr.
[[nodiscard]] absl::StatusOr<ir::Capture> ParseCapture(absl::string_view data, CaptureFormat format,
                                                       absl::string_view name);

// Reads a capture written by dynamo-export (.pb, .pbtxt or .json by
// extension) through ParseCapture.
[[nodiscard]] absl::StatusOr<ir::Capture> ReadCapture(const std::string& path);

}  // namespace dynamo::capture
