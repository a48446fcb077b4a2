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

// Reads a capture written by dynamo-export (.pb, .pbtxt or .json by extension)
// and refuses IR versions newer than this build understands.
[[nodiscard]] absl::StatusOr<ir::Capture> ReadCapture(const std::string& path);

}  // namespace dynamo::capture
