#include "lib/trace/graph_builder.h"

#include <cctype>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/ops/proto_conversion.h"

namespace dynamo::trace {
namespace {

// "torch.nn.functional.linear" -> "linear"; "fc1.weight" -> "fc1_weight".
std::string BaseName(absl::string_view target, bool whole_path) {
  absl::string_view base = target;
  if (!whole_path) {
    size_t dot = target.rfind('.');
    if (dot != absl::string_view::npos) base = target.substr(dot + 1);
  }
  std::string out;
  for (char c : base) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

void CollectRefs(const ir::Argument& arg, absl::flat_hash_set<std::string>& out) {
  if (arg.has_node()) out.insert(arg.node());
  if (arg.has_list()) {
    for (const ir::Argument& item : arg.list().items()) CollectRefs(item, out);
  }
  if (arg.has_dict()) {
    for (const ir::Argument& value : arg.dict().values()) CollectRefs(value, out);
  }
  if (arg.has_slice()) {  // bounds that are sizes the graph computes
    for (const std::string* n : {&arg.slice().start_node(), &arg.slice().stop_node(), &arg.slice().step_node()}) {
      if (!n->empty()) out.insert(*n);
    }
  }
}

}  // namespace

ir::Argument Ref(absl::string_view node) {
  ir::Argument a;
  a.set_node(std::string(node));
  return a;
}

GraphBuilder::GraphBuilder(std::string name) { graph_.set_name(std::move(name)); }

std::string GraphBuilder::UniqueName(absl::string_view base) {
  std::string b(base);
  int& next = counters_[b];
  std::string name = next == 0 ? b : absl::StrCat(b, "_", next);
  while (taken_.contains(name)) name = absl::StrCat(b, "_", ++next);
  ++next;
  taken_.insert(name);
  return name;
}

std::string GraphBuilder::AddPlaceholder(absl::string_view name, const ops::TensorMeta& meta) {
  ir::Node* node = graph_.add_nodes();
  node->set_name(UniqueName(BaseName(name, true)));
  node->set_kind(ir::Node::PLACEHOLDER);
  node->set_target(std::string(name));
  *node->mutable_meta()->mutable_tensor() = ops::ToProto(meta);
  graph_.add_inputs(node->name());
  return node->name();
}

std::string GraphBuilder::AddGetAttr(absl::string_view target, const ops::TensorMeta& meta) {
  ir::Node* node = graph_.add_nodes();
  node->set_name(UniqueName(BaseName(target, true)));
  node->set_kind(ir::Node::GET_ATTR);
  node->set_target(std::string(target));
  *node->mutable_meta()->mutable_tensor() = ops::ToProto(meta);
  return node->name();
}

std::string GraphBuilder::AddCall(ir::Node::Kind kind, absl::string_view target,
                                  std::vector<ir::Argument> args,
                                  std::vector<ir::KeywordArgument> kwargs, ir::ValueMeta meta,
                                  const ir::SourceLocation& location) {
  ir::Node* node = graph_.add_nodes();
  node->set_name(UniqueName(BaseName(target, false)));
  node->set_kind(kind);
  node->set_target(std::string(target));
  for (ir::Argument& a : args) *node->add_args() = std::move(a);
  for (ir::KeywordArgument& k : kwargs) *node->add_kwargs() = std::move(k);
  *node->mutable_meta() = std::move(meta);
  *node->mutable_location() = location;
  return node->name();
}

GraphBuilder GraphBuilder::Child(std::string name) const {
  GraphBuilder child(std::move(name));
  child.counters_ = counters_;
  child.taken_ = taken_;
  return child;
}

std::string GraphBuilder::AddSubgraph(absl::string_view base, ir::Graph g) {
  std::string name = UniqueName(BaseName(base, true));
  g.set_name(name);
  *graph_.add_subgraphs() = std::move(g);
  ir::Node* node = graph_.add_nodes();
  node->set_name(name);
  node->set_kind(ir::Node::GET_ATTR);
  node->set_target(name);
  node->mutable_meta()->set_graph(name);
  return name;
}

void GraphBuilder::SetOutputs(std::vector<ir::Argument> outputs) {
  ir::Node* node = graph_.add_nodes();
  node->set_name(UniqueName("output"));
  node->set_kind(ir::Node::OUTPUT);
  node->set_target("output");
  graph_.clear_outputs();
  for (ir::Argument& a : outputs) {
    *graph_.add_outputs() = a;
    *node->add_args() = std::move(a);
  }
}

void GraphBuilder::EliminateDeadCode(const std::function<bool(const ir::Node&)>& has_effects) {
  // Walk backwards: a node is live if a live node (or the output) uses it.
  absl::flat_hash_set<std::string> used;
  std::vector<bool> keep(static_cast<size_t>(graph_.nodes_size()), true);
  for (int i = graph_.nodes_size() - 1; i >= 0; --i) {
    const ir::Node& n = graph_.nodes(i);
    bool live = n.kind() == ir::Node::OUTPUT || n.kind() == ir::Node::PLACEHOLDER ||
                used.contains(n.name()) || has_effects(n);
    keep[static_cast<size_t>(i)] = live;
    if (!live) continue;
    for (const ir::Argument& a : n.args()) CollectRefs(a, used);
    for (const ir::KeywordArgument& k : n.kwargs()) CollectRefs(k.value(), used);
  }
  google::protobuf::RepeatedPtrField<ir::Node> kept;
  for (int i = 0; i < graph_.nodes_size(); ++i) {
    if (keep[static_cast<size_t>(i)]) *kept.Add() = std::move(*graph_.mutable_nodes(i));
  }
  graph_.mutable_nodes()->Swap(&kept);
}

ir::Graph GraphBuilder::Finish() && { return std::move(graph_); }

}  // namespace dynamo::trace
