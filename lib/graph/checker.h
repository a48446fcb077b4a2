// Structural validation of the graph IR (proto/dynamo_ir.proto): the
// invariants protobuf cannot express. Every writer runs it before saving and
// every reader after loading, so a broken Capture is reported where it was
// made, not where it crashes.
//
//   dynamo::ir::Capture capture = ...;
//   if (absl::Status s = dynamo::graph::CheckCapture(capture); !s.ok()) {
//     // "graph 'graph_0', node 'add': argument 1 refers to unknown node 'x_'"
//   }
//
// Checked: the IR version is known; node names are unique and non-empty;
// kinds, guard kinds and break reasons are known values; every node reference
// (in args, kwargs, nested lists and graph outputs) names an earlier node;
// every node but OUTPUT carries metadata with a dtype and a value per dim;
// each graph ends with exactly one OUTPUT node and its inputs are its
// placeholders.
#pragma once

#include "absl/status/status.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::graph {

// OK, or InvalidArgument naming the first offending graph/node/field.
[[nodiscard]] absl::Status CheckCapture(const ir::Capture& capture);

// The graph-level part of CheckCapture, for stages that build one graph.
[[nodiscard]] absl::Status CheckGraph(const ir::Graph& graph);

// Checks one TensorMeta (dtype set, every dim and stride has a value).
[[nodiscard]] absl::Status CheckTensorMeta(const ir::TensorMeta& meta);

}  // namespace dynamo::graph
