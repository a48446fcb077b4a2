#include "lib/graph/checker.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/ops/sym.h"

namespace dynamo::graph {
namespace {

using NameSet = absl::flat_hash_set<std::string>;

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// Node references must point backwards: FX graphs are in execution order, so
// a reference to a later node is as broken as one to a missing node.
absl::Status CheckArgument(const ir::Argument& arg, const NameSet& defined,
                           absl::string_view where) {
  switch (arg.value_case()) {
    case ir::Argument::kNode:
      if (!defined.contains(arg.node())) {
        return Invalid(where, absl::StrCat("refers to unknown node '", arg.node(), "'"));
      }
      return absl::OkStatus();
    case ir::Argument::kSlice:
      for (const std::string* bound : {&arg.slice().start_node(), &arg.slice().stop_node(), &arg.slice().step_node()}) {
        if (!bound->empty() && !defined.contains(*bound)) {
          return Invalid(where, absl::StrCat("slice bound refers to unknown node '", *bound, "'"));
        }
      }
      return absl::OkStatus();
    case ir::Argument::kList: {
      int i = 0;
      for (const ir::Argument& item : arg.list().items()) {
        absl::Status s = CheckArgument(item, defined, absl::StrCat(where, "[", i++, "]"));
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
    case ir::Argument::kDict: {
      if (arg.dict().keys_size() != arg.dict().values_size()) {
        return Invalid(where, "dict argument has a different number of keys and values");
      }
      for (int i = 0; i < arg.dict().values_size(); ++i) {
        absl::Status s = CheckArgument(arg.dict().values(i), defined,
                                       absl::StrCat(where, "['", arg.dict().keys(i), "']"));
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
    case ir::Argument::kDtype:
      if (!ir::DType_IsValid(arg.dtype()) || arg.dtype() == ir::DTYPE_UNSPECIFIED) {
        return Invalid(where, absl::StrCat("unknown dtype ", arg.dtype()));
      }
      return absl::OkStatus();
    case ir::Argument::VALUE_NOT_SET:
      return Invalid(where, "argument has no value");
    default:
      return absl::OkStatus();
  }
}

absl::Status CheckDims(const google::protobuf::RepeatedPtrField<ir::Dim>& dims,
                       absl::string_view what) {
  int i = 0;
  for (const ir::Dim& d : dims) {
    if (d.value_case() == ir::Dim::VALUE_NOT_SET) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", i, " has no value"));
    }
    if (d.value_case() == ir::Dim::kSize && d.size() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", i, " is negative (", d.size(), ")"));
    }
    if (d.value_case() == ir::Dim::kSymbol) {
      absl::StatusOr<ops::SymExpr> e = ops::ParseSymExpr(d.symbol());
      if (!e.ok() || !e->symbol_name()) {
        return absl::InvalidArgumentError(absl::StrCat(what, " ", i, " is no symbol name: '", d.symbol(), "'"));
      }
    }
    if (d.value_case() == ir::Dim::kExpr) {
      absl::StatusOr<ops::SymExpr> e = ops::ParseSymExpr(d.expr());
      if (!e.ok()) return absl::InvalidArgumentError(absl::StrCat(what, " ", i, ": ", e.status().message()));
    }
    ++i;
  }
  return absl::OkStatus();
}

absl::Status CheckValueMeta(const ir::ValueMeta& meta) {
  switch (meta.kind_case()) {
    case ir::ValueMeta::kTensor:
      return CheckTensorMeta(meta.tensor());
    case ir::ValueMeta::kTuple:
      for (const ir::ValueMeta& item : meta.tuple().items()) {
        absl::Status s = CheckValueMeta(item);
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    case ir::ValueMeta::kConstant:
      if (meta.constant().value_case() == ir::Argument::VALUE_NOT_SET) {
        return absl::InvalidArgumentError("constant metadata has no value");
      }
      if (meta.constant().value_case() == ir::Argument::kNode) {
        return absl::InvalidArgumentError("constant metadata cannot refer to a node");
      }
      return absl::OkStatus();
    case ir::ValueMeta::kScalar:
      if (meta.scalar().type() == ir::ScalarMeta::TYPE_UNSPECIFIED || !ir::ScalarMeta::Type_IsValid(meta.scalar().type())) {
        return absl::InvalidArgumentError("scalar metadata has no type");
      }
      return absl::OkStatus();
    case ir::ValueMeta::kGraph:  // resolved against the graph's subgraphs by CheckGraph
      if (meta.graph().empty()) return absl::InvalidArgumentError("subgraph metadata has no name");
      return absl::OkStatus();
    case ir::ValueMeta::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("missing metadata");
}

// How deep subgraphs may nest (torch.cond inside a branch of one): far
// beyond what programs write, and a bound on the checker's recursion.
constexpr int kMaxSubgraphDepth = 32;

absl::Status CheckGraphAt(const ir::Graph& graph, int depth);

}  // namespace

absl::Status CheckTensorMeta(const ir::TensorMeta& meta) {
  if (!ir::DType_IsValid(meta.dtype()) || meta.dtype() == ir::DTYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor metadata has no valid dtype (", meta.dtype(), ")"));
  }
  if (absl::Status s = CheckDims(meta.sizes(), "size"); !s.ok()) return s;
  if (absl::Status s = CheckDims(meta.strides(), "stride"); !s.ok()) return s;
  if (!meta.strides().empty() && meta.strides_size() != meta.sizes_size()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor metadata has ", meta.sizes_size(),
                                                   " sizes but ", meta.strides_size(), " strides"));
  }
  if (meta.device().type().empty()) {
    return absl::InvalidArgumentError("tensor metadata has no device");
  }
  return absl::OkStatus();
}

absl::Status CheckGraph(const ir::Graph& graph) { return CheckGraphAt(graph, 0); }

namespace {

absl::Status CheckGraphAt(const ir::Graph& graph, int depth) {
  const std::string g = absl::StrCat("graph '", graph.name(), "'");
  if (graph.name().empty()) return Invalid("graph", "has no name");
  if (depth > kMaxSubgraphDepth) return Invalid(g, absl::StrCat("subgraphs nest deeper than ", kMaxSubgraphDepth));
  NameSet subgraphs;
  for (const ir::Graph& sub : graph.subgraphs()) {
    if (!subgraphs.insert(sub.name()).second) {
      return Invalid(absl::StrCat(g, ", subgraph '", sub.name(), "'"), "name is not unique");
    }
    if (absl::Status s = CheckGraphAt(sub, depth + 1); !s.ok()) return s;
  }
  NameSet defined;
  NameSet placeholders;
  int outputs = 0;
  for (int n = 0; n < graph.nodes_size(); ++n) {
    const ir::Node& node = graph.nodes(n);
    if (node.name().empty()) return Invalid(g, absl::StrCat("node #", n, " has no name"));
    const std::string where = absl::StrCat(g, ", node '", node.name(), "'");
    if (defined.contains(node.name())) return Invalid(where, "name is not unique");
    if (!ir::Node::Kind_IsValid(node.kind()) || node.kind() == ir::Node::KIND_UNSPECIFIED) {
      return Invalid(where, absl::StrCat("unknown kind ", static_cast<int>(node.kind())));
    }
    if (node.target().empty()) return Invalid(where, "has no target");
    if (outputs > 0) return Invalid(where, "comes after the OUTPUT node");
    for (int i = 0; i < node.args_size(); ++i) {
      absl::Status s = CheckArgument(node.args(i), defined, absl::StrCat(where, ", argument ", i));
      if (!s.ok()) return s;
    }
    for (const ir::KeywordArgument& kw : node.kwargs()) {
      if (kw.name().empty()) return Invalid(where, "keyword argument with no name");
      absl::Status s =
          CheckArgument(kw.value(), defined, absl::StrCat(where, ", keyword '", kw.name(), "'"));
      if (!s.ok()) return s;
    }
    if (node.kind() == ir::Node::OUTPUT) {
      ++outputs;
    } else if (absl::Status s = CheckValueMeta(node.meta()); !s.ok()) {
      return Invalid(where, s.message());
    }
    if (node.meta().has_graph() &&
        (node.kind() != ir::Node::GET_ATTR || node.target() != node.meta().graph() ||
         !subgraphs.contains(node.target()))) {
      return Invalid(where, "subgraph metadata on a node that is not the GET_ATTR of one of the graph's subgraphs");
    }
    if (node.kind() == ir::Node::PLACEHOLDER) placeholders.insert(node.name());
    defined.insert(node.name());
  }
  if (outputs != 1) return Invalid(g, absl::StrCat("has ", outputs, " OUTPUT nodes, expected 1"));
  for (const std::string& input : graph.inputs()) {
    if (!placeholders.contains(input)) {
      return Invalid(g, absl::StrCat("input '", input, "' is not a placeholder node"));
    }
  }
  for (int i = 0; i < graph.outputs_size(); ++i) {
    absl::Status s = CheckArgument(graph.outputs(i), defined, absl::StrCat(g, ", output ", i));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCapture(const ir::Capture& capture) {
  if (capture.ir_version() == ir::IR_VERSION_UNSPECIFIED) {
    return Invalid("capture", "ir_version is not set");
  }
  if (!ir::IrVersion_IsValid(capture.ir_version()) ||
      capture.ir_version() > ir::IR_VERSION_CURRENT) {
    return Invalid("capture",
                   absl::StrCat("ir_version ", capture.ir_version(), " is newer than this reader (",
                                ir::IR_VERSION_CURRENT, ")"));
  }
  NameSet graph_names;
  for (const ir::Graph& graph : capture.graphs()) {
    if (!graph_names.insert(graph.name()).second) {
      return Invalid(absl::StrCat("graph '", graph.name(), "'"), "name is not unique");
    }
    if (absl::Status s = CheckGraph(graph); !s.ok()) return s;
  }
  for (const ir::InputSpec& input : capture.inputs()) {
    const std::string where = absl::StrCat("input '", input.name(), "'");
    if (input.name().empty()) return Invalid("input", "has no name");
    if (input.has_tensor()) {
      if (absl::Status s = CheckTensorMeta(input.tensor()); !s.ok())
        return Invalid(where, s.message());
    } else if (!input.has_constant()) {
      return Invalid(where, "has neither tensor metadata nor a constant");
    }
  }
  for (int i = 0; i < capture.guards_size(); ++i) {
    const ir::Guard& guard = capture.guards(i);
    const std::string where = absl::StrCat("guard ", i, " ('", guard.source(), "')");
    if (!ir::Guard::Kind_IsValid(guard.kind()) || guard.kind() == ir::Guard::KIND_UNSPECIFIED) {
      return Invalid(where, absl::StrCat("unknown kind ", static_cast<int>(guard.kind())));
    }
    if (guard.source().empty()) return Invalid(where, "has no source");
    if (guard.kind() == ir::Guard::SHAPE_ENV) {
      for (const ir::SizeSymbol& sym : guard.shape_env().symbols()) {
        absl::StatusOr<ops::SymExpr> name = ops::ParseSymExpr(sym.name());
        if (!name.ok() || !name->symbol_name()) return Invalid(where, absl::StrCat("'", sym.name(), "' is no symbol name"));
        if (sym.max() != 0 && sym.max() < sym.min()) return Invalid(where, absl::StrCat(sym.name(), "'s range is empty"));
      }
      for (const std::string& r : guard.shape_env().relations()) {
        absl::StatusOr<ops::SymRelation> rel = ops::ParseSymRelation(r);
        if (!rel.ok()) return Invalid(where, rel.status().message());
      }
    }
  }
  for (int i = 0; i < capture.graph_breaks_size(); ++i) {
    const ir::GraphBreak& br = capture.graph_breaks(i);
    const std::string where = absl::StrCat("graph break ", i);
    if (!ir::GraphBreak::Reason_IsValid(br.reason()) ||
        br.reason() == ir::GraphBreak::REASON_UNSPECIFIED) {
      return Invalid(where, absl::StrCat("unknown reason ", static_cast<int>(br.reason())));
    }
    if (br.message().empty()) return Invalid(where, "has no message");
  }
  return absl::OkStatus();
}

}  // namespace dynamo::graph
