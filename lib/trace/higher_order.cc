// torch.cond in the trace: data-dependent control flow kept in the graph.
//
//   torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))
//
// torch.cond calls torch.ops.higher_order.cond when dynamo is compiling,
// which the trace says it is; that call is what is modelled here, as
// torch._dynamo does:
//  - a Python bool (or int/float) predicate picks its branch now, inlined;
//  - a one-element tensor predicate makes each branch a subgraph of the
//    graph (Graph.subgraphs, read by GET_ATTR nodes), traced on placeholders
//    for the operands, and one node
//      cond = torch.ops.higher_order.cond(pred, cond_true_0, cond_false_0, (x, ...))
//    whose items are the branch's outputs.
// A branch reads tensors of the enclosing graph too (a closure, a
// parameter): each such name becomes an input of both branches, appended to
// the operands. What torch refuses (branches returning different metadata,
// non-tensor outputs, mutation, side effects) is a graph break at the call,
// where Python runs torch.cond itself.
#include <Python.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/ops/proto_conversion.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

using python::Object;

// One branch traced into a subgraph: the graph (operand placeholders first),
// the enclosing graph's nodes it reads (lifted), and its flat outputs.
struct Translator::Branch {
  ir::Graph graph;
  std::vector<std::string> lifted;
  std::vector<ops::TensorMeta> outputs;
  VarKind structure = VarKind::kTensor;  // one tensor, or a tuple / list of them
};

namespace {

void CollectRefs(const ir::Argument& arg, std::vector<std::string>& out) {
  if (arg.has_node()) out.push_back(arg.node());
  for (const ir::Argument& item : arg.list().items()) CollectRefs(item, out);
  for (const ir::Argument& value : arg.dict().values()) CollectRefs(value, out);
  if (arg.has_slice()) {
    for (const std::string* n : {&arg.slice().start_node(), &arg.slice().stop_node(), &arg.slice().step_node()}) {
      if (!n->empty()) out.push_back(*n);
    }
  }
}

// The names a graph's nodes read that it does not define, in first-use order.
std::vector<std::string> FreeNames(const ir::Graph& g) {
  absl::flat_hash_set<std::string> defined, seen;
  std::vector<std::string> free;
  for (const ir::Node& n : g.nodes()) {
    std::vector<std::string> refs;
    for (const ir::Argument& a : n.args()) CollectRefs(a, refs);
    for (const ir::KeywordArgument& k : n.kwargs()) CollectRefs(k.value(), refs);
    for (const std::string& r : refs) {
      if (!defined.contains(r) && seen.insert(r).second) free.push_back(r);
    }
    defined.insert(n.name());
  }
  return free;
}

const ir::Node* FindNode(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<Translator::Branch> Translator::TraceBranch(const VarPtr& fn, const std::vector<VarPtr>& operands) {
  GraphBuilder outer = graph_.Child("subgraph");  // becomes the enclosing graph's builder below
  std::swap(graph_, outer);
  GraphBuilder* const saved_inputs = inputs_graph_;
  if (inputs_graph_ == nullptr) inputs_graph_ = &outer;  // the top graph, where new inputs go
  const auto saved_sizes = size_nodes_;  // size nodes made in the branch are the branch's
  const size_t effects = side_effects_.size();
  const bool grad = grad_enabled_;
  auto restore = [&] {
    std::swap(graph_, outer);
    inputs_graph_ = saved_inputs;
    size_nodes_ = saved_sizes;
  };
  std::vector<VarPtr> args;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::string node = graph_.AddPlaceholder(absl::StrCat("arg", i), operands[i]->meta);
    args.push_back(Var::Tensor(node, operands[i]->meta));
  }
  absl::StatusOr<VarPtr> r = Call(fn, args, {});
  Branch branch;
  std::vector<VarPtr> outs;
  absl::Status status = r.status();
  if (status.ok()) {
    branch.structure = (*r)->kind;
    if ((*r)->is_tensor()) {
      outs = {*r};
    } else if ((*r)->kind == VarKind::kTuple || (*r)->kind == VarKind::kList) {
      outs = (*r)->items;
    }
    bool tensors = !outs.empty() && !(*r)->user_class && !(*r)->is_size;
    for (const VarPtr& o : outs) tensors &= o->is_tensor() && !o->is_ndarray && !o->node.empty();
    if (!tensors) {
      status = Break(ir::GraphBreak::OTHER, absl::StrCat("a torch.cond branch returns ", Describe(**r)),
                     "its branches return a tensor or a tuple or list of tensors");
    } else if (side_effects_.size() != effects) {
      status = Break(ir::GraphBreak::SIDE_EFFECT, "a torch.cond branch has side effects",
                     "its branches may not assign attributes, globals or containers outside them");
    } else if (grad_enabled_ != grad) {
      status = Break(ir::GraphBreak::OTHER, "a torch.cond branch leaves grad mode changed", "");
    }
  }
  if (status.ok()) {
    ir::Argument out;
    out.mutable_list()->set_is_tuple(true);
    for (const VarPtr& o : outs) {
      *out.mutable_list()->add_items() = Ref(o->node);
      branch.outputs.push_back(o->meta);
    }
    graph_.SetOutputs({out});
    EliminateDeadCode();
    auto tags = [&](const ir::Node& n) -> uint32_t {
      const ops::OpEntry* e = n.kind() == ir::Node::CALL_FUNCTION || n.kind() == ir::Node::CALL_METHOD
                                  ? registry_.Find(n.target()) : nullptr;
      return e != nullptr ? e->tags() : 0;
    };
    for (const ir::Node& n : graph_.graph().nodes()) {
      if ((tags(n) & ops::kInplace) != 0) {
        status = Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat("a torch.cond branch runs ", n.target(), " in place"),
                       "its branches may not mutate tensors (torch raises)");
        break;
      }
    }
    // An output may not be an input or a view of one, nor another output
    // (torch raises on aliasing).
    absl::flat_hash_set<std::string> returned;
    for (size_t i = 0; status.ok() && i < outs.size(); ++i) {
      std::string name = outs[i]->node;
      bool aliased = !returned.insert(name).second;
      for (const ir::Node* n = FindNode(graph_.graph(), name); !aliased; n = FindNode(graph_.graph(), name)) {
        if (n == nullptr || n->kind() == ir::Node::PLACEHOLDER) {
          aliased = true;
        } else if ((tags(*n) & ops::kView) != 0 && n->args_size() > 0 && n->args(0).has_node()) {
          name = n->args(0).node();
        } else {
          break;
        }
      }
      if (aliased) {
        status = Break(ir::GraphBreak::OTHER, "a torch.cond branch returns an input, a view of one or one tensor twice",
                       "return x.clone() instead (torch raises on aliasing)");
      }
    }
  }
  ir::Graph graph = std::move(graph_).Finish();
  graph_ = GraphBuilder("subgraph");  // what restore swaps back out
  restore();
  if (!status.ok()) return status;
  branch.lifted = FreeNames(graph);
  branch.graph = std::move(graph);
  return branch;
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallHigherOrder(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                                  const Kwargs& kwargs) {
  using R = absl::StatusOr<VarPtr>;
  if (!fn->object || fn->self || !IsLoadedModuleAttr(fn->object.get(), "torch._higher_order_ops.cond", "cond_op")) return std::nullopt;
  // cond_op(pred, true_fn, false_fn, operands)
  static constexpr const char* kNames[] = {"pred", "true_fn", "false_fn", "operands"};
  VarPtr bound[4];
  if (args.size() > 4) return R(Break(ir::GraphBreak::OTHER, "torch.cond with more than 4 arguments", ""));
  for (size_t i = 0; i < args.size(); ++i) bound[i] = args[i];
  for (const auto& [name, value] : kwargs) {
    size_t i = 0;
    while (i < 4 && name != kNames[i]) ++i;
    if (i == 4 || bound[i]) return R(Break(ir::GraphBreak::OTHER, absl::StrCat("torch.cond given ", name), ""));
    bound[i] = value;
  }
  if (!bound[0] || !bound[1] || !bound[2]) {
    return R(Break(ir::GraphBreak::OTHER, "torch.cond without its predicate and branches", ""));
  }
  const VarPtr& pred = bound[0];
  std::vector<VarPtr> operands;
  if (bound[3]) {
    if (bound[3]->kind != VarKind::kTuple && bound[3]->kind != VarKind::kList) {
      return R(Break(ir::GraphBreak::OTHER, absl::StrCat("torch.cond operands given as ", Describe(*bound[3])),
                     "operands are a tuple or list of tensors"));
    }
    operands = bound[3]->items;
  }
  for (const VarPtr& o : operands) {
    if (!o->is_tensor() || o->is_ndarray || node_sym_sizes_.contains(o->node)) {
      return R(Break(ir::GraphBreak::OTHER, absl::StrCat("a torch.cond operand is ", Describe(*o)),
                     "operands are tensors of static shape"));
    }
  }
  // A Python constant picks its branch now (torch does the same).
  if (pred->is_constant()) {
    PyObject* p = pred->object.get();
    if (!PyBool_Check(p) && !PyLong_CheckExact(p) && !PyFloat_CheckExact(p)) {
      return R(Break(ir::GraphBreak::OTHER, absl::StrCat("torch.cond's predicate is ", Describe(*pred)),
                     "the predicate is a bool or a one-element tensor (torch raises)"));
    }
    absl::StatusOr<bool> t = Truthy(pred);
    if (!t.ok()) return R(t.status());
    return Call(*t ? bound[1] : bound[2], operands, {});
  }
  if (!pred->is_tensor() || pred->is_ndarray || pred->meta.numel() != 1 || node_sym_sizes_.contains(pred->node)) {
    return R(Break(ir::GraphBreak::OTHER, absl::StrCat("torch.cond's predicate is ", Describe(*pred)),
                   "the predicate is a bool or a one-element tensor (torch raises)"));
  }
  absl::StatusOr<Branch> on_true = TraceBranch(bound[1], operands);
  if (!on_true.ok()) return R(on_true.status());
  absl::StatusOr<Branch> on_false = TraceBranch(bound[2], operands);
  if (!on_false.ok()) return R(on_false.status());
  // torch.cond requires the branches to agree on what they return.
  bool same = on_true->outputs.size() == on_false->outputs.size() && on_true->structure == on_false->structure;
  for (size_t i = 0; same && i < on_true->outputs.size(); ++i) {
    const ops::TensorMeta& a = on_true->outputs[i];
    const ops::TensorMeta& b = on_false->outputs[i];
    same = a.dtype == b.dtype && a.sizes == b.sizes && a.device == b.device && !a.data_dependent && !b.data_dependent;
  }
  if (!same) {
    return R(Break(ir::GraphBreak::OTHER, "torch.cond's branches return different structures, shapes or dtypes",
                   "both branches return tensors of the same shapes and dtypes (torch raises)"));
  }
  // Both branches take the operands, then every enclosing-graph tensor
  // either reads, in one order.
  std::vector<std::string> lifted = on_true->lifted;
  for (const std::string& name : on_false->lifted) {
    if (std::find(lifted.begin(), lifted.end(), name) == lifted.end()) lifted.push_back(name);
  }
  const ir::Graph& enclosing = graph_.graph();
  std::vector<ir::ValueMeta> lifted_meta;
  for (const std::string& name : lifted) {
    const ir::Node* n = FindNode(enclosing, name);
    if (n == nullptr && inputs_graph_ != nullptr) n = FindNode(inputs_graph_->graph(), name);
    if (n == nullptr || !n->meta().has_tensor()) {
      return R(Break(ir::GraphBreak::OTHER, "a torch.cond branch reads a value that is not a tensor of the graph",
                     "branches read tensors and Python constants"));
    }
    lifted_meta.push_back(n->meta());
  }
  auto with_inputs = [&](ir::Graph g) {
    // Placeholders: the operands' (first, already there), then the lifted
    // names', under the very names the branch refers to them by.
    google::protobuf::RepeatedPtrField<ir::Node> nodes;
    int i = 0;
    for (; i < g.nodes_size() && g.nodes(i).kind() == ir::Node::PLACEHOLDER; ++i) *nodes.Add() = g.nodes(i);
    g.clear_inputs();
    for (const ir::Node& n : nodes) g.add_inputs(n.name());
    for (size_t k = 0; k < lifted.size(); ++k) {
      ir::Node* p = nodes.Add();
      p->set_name(lifted[k]);
      p->set_kind(ir::Node::PLACEHOLDER);
      p->set_target(lifted[k]);
      *p->mutable_meta() = lifted_meta[k];
      g.add_inputs(lifted[k]);
    }
    for (; i < g.nodes_size(); ++i) *nodes.Add() = g.nodes(i);
    g.mutable_nodes()->Swap(&nodes);
    return g;
  };
  std::string true_node = graph_.AddSubgraph("cond_true", with_inputs(std::move(on_true->graph)));
  std::string false_node = graph_.AddSubgraph("cond_false", with_inputs(std::move(on_false->graph)));
  ir::Argument inputs;
  inputs.mutable_list()->set_is_tuple(true);
  for (const VarPtr& o : operands) *inputs.mutable_list()->add_items() = Ref(o->node);
  for (const std::string& name : lifted) *inputs.mutable_list()->add_items() = Ref(name);
  std::vector<ops::Value> results;
  for (size_t i = 0; i < on_true->outputs.size(); ++i) {
    ops::TensorMeta m = on_true->outputs[i];
    m.requires_grad = m.requires_grad || on_false->outputs[i].requires_grad;
    results.push_back(ops::Value(m));
  }
  ops::Value result = ops::Value::Tuple(std::move(results));
  absl::StatusOr<ir::ValueMeta> meta = ops::ToValueMeta(result);
  if (!meta.ok()) return R(meta.status());
  std::string node = graph_.AddCall(ir::Node::CALL_FUNCTION, "torch.ops.higher_order.cond",
                                    {Ref(pred->node), Ref(true_node), Ref(false_node), inputs}, {}, *meta,
                                    CurrentLocation());
  absl::StatusOr<VarPtr> items = NewVarFromResult(node, result);
  if (!items.ok()) return R(items.status());
  if (on_true->structure == VarKind::kTensor) return R((*items)->items[0]);
  if (on_true->structure == VarKind::kList) return R(Var::List((*items)->items));
  return R(*items);
}

}  // namespace dynamo::trace
