// Builds one ir::Graph node by node with FX's naming (the target's last
// component, then _1, _2, ...), so the same trace always gives the same
// names and the .pb is byte-identical run to run.
//
//   GraphBuilder g("graph_0");
//   std::string x = g.AddPlaceholder("x", meta);
//   std::string y = g.AddCall(ir::Node::CALL_FUNCTION, "torch.sin", {Ref(x)}, {}, out, loc);
//   g.SetOutputs({Ref(y)});
//   g.EliminateDeadCode(has_effects);
//   ir::Graph graph = std::move(g).Finish();
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "lib/ops/meta.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::trace {

// An argument that refers to a node.
ir::Argument Ref(absl::string_view node);

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name);

  std::string AddPlaceholder(absl::string_view name, const ops::TensorMeta& meta);
  std::string AddGetAttr(absl::string_view target, const ops::TensorMeta& meta);
  std::string AddCall(ir::Node::Kind kind, absl::string_view target,
                      std::vector<ir::Argument> args, std::vector<ir::KeywordArgument> kwargs,
                      ir::ValueMeta meta, const ir::SourceLocation& location);
  void SetOutputs(std::vector<ir::Argument> outputs);

  // A builder for a subgraph of this graph (a torch.cond branch): empty, but
  // never naming a node as one of this graph's, so a reference it holds to
  // a name it did not make is one to this graph (lifted as an input).
  GraphBuilder Child(std::string name) const;
  // Adds `g` as a subgraph under a unique name and a GET_ATTR node that
  // reads it (node name = target = the subgraph's name); returns the name.
  std::string AddSubgraph(absl::string_view base, ir::Graph g);
  // Flags the last node added (ir::Node.inferred_on_meta): its metadata came
  // from torch's meta kernels, not the op registry.
  void MarkLastInferredOnMeta() {
    if (graph_.nodes_size() > 0) graph_.mutable_nodes(graph_.nodes_size() - 1)->set_inferred_on_meta(true);
  }

  // Removes the last node when it is a call of `target` (one the caller
  // found to be undone at once); true if it did.
  bool DropLastCall(absl::string_view target) {
    if (graph_.nodes_size() == 0) return false;
    const ir::Node& last = graph_.nodes(graph_.nodes_size() - 1);
    if (last.kind() != ir::Node::CALL_FUNCTION || last.target() != target) return false;
    graph_.mutable_nodes()->RemoveLast();
    return true;
  }

  // Drops nodes whose results nothing uses, unless `has_effects` says the
  // node must stay anyway.
  void EliminateDeadCode(const std::function<bool(const ir::Node&)>& has_effects);

  [[nodiscard]] ir::Graph Finish() &&;
  const ir::Graph& graph() const { return graph_; }

 private:
  std::string UniqueName(absl::string_view base);
  ir::Graph graph_;
  absl::flat_hash_map<std::string, int> counters_;  // base name -> next suffix
  absl::flat_hash_set<std::string> taken_;
};

}  // namespace dynamo::trace
