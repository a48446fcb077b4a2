// Dynamic shapes in the translator: which input sizes are symbols, size ints
// (x.shape[0], x.size(1) * 4) as graph values, decisions on sizes as guards,
// and the symbolic sizes of every op's outputs (lib/ops/sym_shapes.h).
//
// The rules that keep a trace honest:
//  - A size int is a kSymInt: its expression and its example value. Used as
//    a plain Python int (a range bound, a list index, a call the trace
//    evaluates, what Python holds after a break) it is specialised: the
//    ShapeEnv records `expr == value` and the trace holds for that value
//    only (AsInt, ToValue, ToPython all go through ShapeEnv::Specialize).
//  - Arithmetic on size ints is a graph node (operator.mul, ...), so the
//    graph computes the value for every call; comparisons are decided from
//    the example values and guarded (ShapeEnv::Decide).
//  - An op without a symbolic rule specialises its inputs' sizes.
#include <Python.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "lib/ops/infer_helpers.h"
#include "lib/ops/proto_conversion.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

using python::Object;

namespace {

// The dims a live tensor's own marks name: torch._dynamo.mark_dynamic and
// dynamo.mark_dynamic set `_dynamo_dynamic_indices` (a set of ints).
std::vector<int64_t> MarkedDims(PyObject* tensor, const char* attribute) {
  std::vector<int64_t> dims;
  if (tensor == nullptr) return dims;
  Object marks = Object::Steal(PyObject_GetAttrString(tensor, attribute));
  if (!marks) {
    python::ClearError();
    return dims;
  }
  Object it = Object::Steal(PyObject_GetIter(marks.get()));
  if (!it) {
    python::ClearError();
    return dims;
  }
  while (Object item = Object::Steal(PyIter_Next(it.get()))) {
    long long d = PyLong_AsLongLong(item.get());
    if (d == -1 && PyErr_Occurred()) {
      python::ClearError();
      continue;
    }
    dims.push_back(d);
  }
  python::ClearError();
  return dims;
}

// How a tensor's strides follow from its sizes, when they do: dims ordered
// innermost first, each stride the product of the sizes inside it, except
// expanded dims (stride 0) and size-1 dims (any stride, kept as seen).
// nullopt for a layout that is no such function of the sizes (a slice of a
// larger tensor): that input stays static.
struct StridePlan {
  std::vector<size_t> order;  // innermost first, expanded dims left out
};
std::optional<StridePlan> PlanStrides(const ops::TensorMeta& meta) {
  if (!meta.has_strides()) return std::nullopt;
  StridePlan plan;
  for (size_t d = 0; d < meta.sizes.size(); ++d) {
    if (meta.strides[d] != 0 || meta.sizes[d] < 2) plan.order.push_back(d);
  }
  // Ties (size-1 dims) keep the later dim inner, as contiguous strides do.
  std::stable_sort(plan.order.begin(), plan.order.end(), [&meta](size_t a, size_t b) {
    if (meta.strides[a] != meta.strides[b]) return meta.strides[a] < meta.strides[b];
    return a > b;
  });
  int64_t running = 1;
  for (size_t d : plan.order) {
    if (meta.sizes[d] >= 2 && meta.strides[d] != running) return std::nullopt;
    if (meta.sizes[d] >= 2 || meta.strides[d] == running) running *= meta.sizes[d];
  }
  return plan;
}

std::vector<ops::SymExpr> PlannedStrides(const ops::TensorMeta& meta, const StridePlan& plan,
                                         const std::vector<ops::SymExpr>& sizes) {
  std::vector<ops::SymExpr> strides(sizes.size(), ops::SymExpr(0));
  ops::SymExpr running(1);
  int64_t running_hint = 1;
  for (size_t d : plan.order) {
    if (meta.sizes[d] < 2 && meta.strides[d] != running_hint) {
      strides[d] = ops::SymExpr(meta.strides[d]);  // a size-1 dim's stride is free
      continue;
    }
    strides[d] = running;
    running = running * sizes[d];
    running_hint *= meta.sizes[d];
  }
  return strides;
}

// An int constant that fits in 64 bits (a bigger one is Python's business).
bool IsPlainInt(const VarPtr& v) {
  if (!v->is_constant() || !PyLong_CheckExact(v->object.get())) return false;
  int overflow = 0;
  PyLong_AsLongLongAndOverflow(v->object.get(), &overflow);
  return overflow == 0;
}

bool IsSizeOperand(const VarPtr& v) { return v->kind == VarKind::kSymInt || IsPlainInt(v); }

// A size operand (IsSizeOperand) as a SymInt.
ops::SymInt SymIntOf(const VarPtr& v) {
  if (v->kind == VarKind::kSymInt) return v->sym;
  return ops::SymInt(static_cast<int64_t>(PyLong_AsLongLong(v->object.get())));
}

ir::ValueMeta IntMeta(int64_t hint) {
  ir::ValueMeta meta;
  meta.mutable_constant()->set_int_value(hint);
  return meta;
}

}  // namespace

std::vector<ops::SymExpr> Translator::InputSymbols(const SourcePtr& source, PyObject* tensor,
                                                   const ops::TensorMeta& meta,
                                                   const std::vector<std::string>& names,
                                                   std::vector<ops::SymExpr>* strides) {
  strides->clear();
  if (dynamic_.none || !source) return {};
  const std::string label = source->ToString();
  std::vector<bool> dynamic(meta.sizes.size(), false);
  auto mark = [&dynamic](int64_t d, bool value) {
    if (d < 0) d += static_cast<int64_t>(dynamic.size());
    if (d >= 0 && d < static_cast<int64_t>(dynamic.size())) dynamic[static_cast<size_t>(d)] = value;
  };
  if (dynamic_.all) std::fill(dynamic.begin(), dynamic.end(), true);
  for (const auto& [where, dims] : dynamic_.dims) {
    if (where != label) continue;
    for (int64_t d : dims) mark(d, true);
  }
  for (int64_t d : MarkedDims(tensor, "_dynamo_dynamic_indices")) mark(d, true);
  for (int64_t d : MarkedDims(tensor, "_dynamo_static_indices")) mark(d, false);
  for (size_t d = 0; d < names.size() && d < dynamic.size(); ++d) dynamic[d] = !names[d].empty();
  if (std::none_of(dynamic.begin(), dynamic.end(), [](bool b) { return b; })) return {};

  for (size_t d = 0; d < dynamic.size(); ++d) dynamic[d] = dynamic[d] && meta.sizes[d] >= 2;
  if (std::none_of(dynamic.begin(), dynamic.end(), [](bool b) { return b; })) return {};
  // A layout the expressions cannot describe (a slice of a larger tensor):
  // this input stays static. Decided before any symbol is made, so every
  // symbol is bound by the input it was made for.
  std::optional<StridePlan> plan = PlanStrides(meta);
  if (!plan && meta.has_strides()) return {};

  std::vector<ops::SymExpr> sizes;
  bool any = false;
  for (size_t d = 0; d < meta.sizes.size(); ++d) {
    const int64_t hint = meta.sizes[d];
    // Sizes 0 and 1 stay static: so much code branches on them.
    if (!dynamic[d]) {
      sizes.emplace_back(hint);
      continue;
    }
    ops::SymExpr symbol;
    const std::string name = d < names.size() ? names[d] : "";
    if (!name.empty() && shape_env_.hint(name)) {
      // A name given twice (ids=i64[B,T], mask=i64[B,T]) is one symbol; the
      // TENSOR_MATCH guards check both places agree.
      if (*shape_env_.hint(name) != hint) {
        sizes.emplace_back(hint);
        continue;
      }
      symbol = ops::SymExpr::Symbol(name);
    } else {
      const DynamicShapes::Constraint* constraint = nullptr;
      for (const DynamicShapes::Constraint& c : dynamic_.constraints) {
        if (c.name == name) constraint = &c;
      }
      ops::Range range{2, ops::kInf};
      if (constraint != nullptr) range = {constraint->min, constraint->max == 0 ? ops::kInf : constraint->max};
      absl::StatusOr<ops::SymInt> made = name.empty() ? absl::StatusOr<ops::SymInt>(shape_env_.NewSymbol(hint))
                                                      : shape_env_.NewNamedSymbol(name, hint, range);
      if (!made.ok()) {
        sizes.emplace_back(hint);
        continue;
      }
      symbol = made->expr();
      symbol_sources_.push_back({*symbol.symbol_name(), SymbolSource{label, static_cast<int>(d)}});
      if (constraint != nullptr && constraint->multiple > 1) {
        // Declared, so the trace may rely on it; the SHAPE_ENV guard says so.
        absl::StatusOr<ops::SymExpr> rem = ops::Mod(symbol, constraint->multiple);
        if (rem.ok()) (void)shape_env_.Decide(ops::RelKind::kEq, *rem, 0);
      }
    }
    sizes.push_back(symbol);
    any = true;
  }
  if (!any) return {};
  if (plan) *strides = PlannedStrides(meta, *plan, sizes);
  return sizes;
}

absl::StatusOr<VarPtr> Translator::SizeOf(const VarPtr& tensor, int64_t dim) {
  const int64_t ndim = tensor->meta.dim();
  absl::StatusOr<int64_t> d = ops::WrapDim(dim, ndim);
  if (!d.ok() || ndim == 0) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("size(", dim, ") of a ", ndim, "-d tensor"),
                 "the call would raise IndexError");
  }
  const size_t i = static_cast<size_t>(*d);
  if (tensor->sym_sizes.empty() || tensor->sym_sizes[i].is_constant()) {
    return Var::Constant(python::FromLong(tensor->meta.sizes[i]));
  }
  const std::string key = absl::StrCat(tensor->node, "#", *d);
  if (auto it = size_nodes_.find(key); it != size_nodes_.end() && it->second->kind == VarKind::kSymInt) return it->second;
  ir::Argument index;
  index.set_int_value(*d);
  std::string node = graph_.AddCall(ir::Node::CALL_METHOD, "Tensor.size", {Ref(tensor->node), index}, {},
                                    IntMeta(tensor->meta.sizes[i]), CurrentLocation());
  VarPtr v = Var::SymInt(ops::SymInt::Symbolic(tensor->meta.sizes[i], tensor->sym_sizes[i]), &shape_env_);
  v->node = node;
  // An input's size: Python rebuilds it after a break as x.shape[d], so a
  // graph need not return it.
  if (tensor->source) v->source = Source::Item(Source::Attr(tensor->source, "shape"), *d);
  size_nodes_[key] = v;
  return v;
}

absl::StatusOr<VarPtr> Translator::ShapeOf(const VarPtr& tensor) {
  std::vector<VarPtr> items;
  for (int64_t d = 0; d < tensor->meta.dim(); ++d) {
    absl::StatusOr<VarPtr> s = SizeOf(tensor, d);
    if (!s.ok()) return s.status();
    items.push_back(*s);
  }
  VarPtr size = Var::Tuple(std::move(items));
  size->is_size = true;
  return size;
}

std::optional<absl::StatusOr<VarPtr>> Translator::SymbolicSizeCall(const std::string& target,
                                                                   const std::vector<VarPtr>& args,
                                                                   const Kwargs& kwargs) {
  if (args.empty() || !args[0]->is_tensor() || args[0]->sym_sizes.empty() || args[0]->is_ndarray) return std::nullopt;
  const VarPtr& t = args[0];
  if (target == "Tensor.size") {
    VarPtr dim = args.size() > 1 ? args[1] : nullptr;
    for (const auto& kv : kwargs) {
      if (kv.first == "dim") dim = kv.second;
    }
    if (args.size() > 2 || (kwargs.size() > (dim && args.size() == 1 ? 1u : 0u))) return std::nullopt;
    if (!dim || dim->is_none()) return ShapeOf(t);
    absl::StatusOr<int64_t> d = AsInt(dim);
    if (!d.ok()) return std::nullopt;  // the registry words the error
    return SizeOf(t, *d);
  }
  if ((target == "Tensor.numel" || target == "torch.numel" || target == "Tensor.nelement") && args.size() == 1 &&
      kwargs.empty()) {
    VarPtr n = Var::Constant(python::FromLong(1));
    for (int64_t d = 0; d < t->meta.dim(); ++d) {
      absl::StatusOr<VarPtr> s = SizeOf(t, d);
      if (!s.ok()) return s;
      if (std::optional<absl::StatusOr<VarPtr>> p = SymArithmetic("mul", n, *s)) {
        if (!p->ok()) return p;
        n = **p;
      } else {
        absl::StatusOr<int64_t> a = AsInt(n);
        absl::StatusOr<int64_t> b = a.ok() ? AsInt(*s) : a.status();
        if (!b.ok()) return absl::StatusOr<VarPtr>(b.status());
        n = Var::Constant(python::FromLong(*a * *b));
      }
    }
    return n;
  }
  return std::nullopt;
}

void Translator::SpecializeShape(const VarPtr& t) {
  if (t && t->is_tensor() && !t->sym_sizes.empty()) ops::SpecializeAll({ops::SymValue::Tensor(t->sym_sizes)}, shape_env_);
}

void Translator::AttachSymSizes(const VarPtr& out, const ops::SymValue& sym) {
  if (out->is_tensor()) {
    if (sym.sizes.size() != static_cast<size_t>(out->meta.dim())) return;
    out->sym_sizes = sym.sizes;
    if (!out->node.empty()) node_sym_sizes_[out->node] = sym.sizes;
    return;
  }
  if (!out->is_sequence() || sym.items.size() != out->items.size()) return;
  for (size_t i = 0; i < out->items.size(); ++i) AttachSymSizes(out->items[i], sym.items[i]);
}

std::optional<absl::StatusOr<VarPtr>> Translator::SymArithmetic(const std::string& op, const VarPtr& a,
                                                                const VarPtr& b) {
  if (a->kind != VarKind::kSymInt && b->kind != VarKind::kSymInt) return std::nullopt;
  if (!IsSizeOperand(a) || !IsSizeOperand(b)) return std::nullopt;
  static const std::pair<const char*, ops::SymOp> kOps[] = {
      {"add", ops::SymOp::kAdd},      {"sub", ops::SymOp::kSub}, {"mul", ops::SymOp::kMul},
      {"floordiv", ops::SymOp::kFloorDiv}, {"mod", ops::SymOp::kMod}};
  const std::string plain = op[0] == 'i' ? op.substr(1) : op;  // iadd: ints have no in-place slot
  for (const auto& [name, sym_op] : kOps) {
    if (plain != name) continue;
    if ((sym_op == ops::SymOp::kFloorDiv || sym_op == ops::SymOp::kMod)) {
      // A divisor that may be 0 or negative: Python's rules on a value the
      // trace does not know; decide its sign (guarded).
      absl::StatusOr<bool> positive = shape_env_.Decide(ops::RelKind::kGt, SymIntOf(b).expr(), 0);
      if (!positive.ok()) return absl::StatusOr<VarPtr>(positive.status());
      if (!*positive) return std::nullopt;  // Python raises or floors toward -inf: let it
    }
    absl::StatusOr<ops::SymInt> r = ops::Apply(sym_op, SymIntOf(a), SymIntOf(b));
    if (!r.ok()) return std::nullopt;  // overflow or division by zero: Python's own path says it
    absl::StatusOr<ir::Argument> lhs = ToArgument(a);
    absl::StatusOr<ir::Argument> rhs = lhs.ok() ? ToArgument(b) : lhs.status();
    if (!rhs.ok()) return absl::StatusOr<VarPtr>(rhs.status());
    if (r->is_static()) return absl::StatusOr<VarPtr>(Var::Constant(python::FromLong(r->hint())));
    std::string node = graph_.AddCall(ir::Node::CALL_FUNCTION, absl::StrCat("operator.", plain), {*lhs, *rhs}, {},
                                      IntMeta(r->hint()), CurrentLocation());
    VarPtr v = Var::SymInt(*r, &shape_env_);
    v->node = node;
    return absl::StatusOr<VarPtr>(v);
  }
  return std::nullopt;
}

std::optional<absl::StatusOr<VarPtr>> Translator::SymCompare(const std::string& op, const VarPtr& a,
                                                             const VarPtr& b) {
  if (a->kind != VarKind::kSymInt && b->kind != VarKind::kSymInt) return std::nullopt;
  if (!IsSizeOperand(a) || !IsSizeOperand(b)) return std::nullopt;
  static const std::pair<const char*, ops::RelKind> kRels[] = {
      {"==", ops::RelKind::kEq}, {"!=", ops::RelKind::kNe}, {"<", ops::RelKind::kLt},
      {"<=", ops::RelKind::kLe}, {">", ops::RelKind::kGt},  {">=", ops::RelKind::kGe}};
  for (const auto& [symbol, kind] : kRels) {
    if (op != symbol) continue;
    absl::StatusOr<bool> answer = shape_env_.Decide(kind, SymIntOf(a).expr(), SymIntOf(b).expr());
    if (!answer.ok()) return absl::StatusOr<VarPtr>(answer.status());
    return absl::StatusOr<VarPtr>(Var::Constant(python::FromBool(*answer)));
  }
  return std::nullopt;
}

absl::StatusOr<bool> Translator::SymTruth(const VarPtr& v) {
  return shape_env_.Decide(ops::RelKind::kNe, v->sym.expr(), 0);
}

ops::SymValue Translator::SymOf(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kTensor:
      return ops::SymValue::Tensor(v->sym_sizes);
    case VarKind::kSymInt:
      return ops::SymValue::Int(v->sym.expr());
    case VarKind::kTuple:
    case VarKind::kList:
    case VarKind::kSlice: {
      std::vector<ops::SymValue> items;
      bool symbolic = false;
      for (const VarPtr& item : v->items) {
        items.push_back(item ? SymOf(item) : ops::SymValue());
        symbolic |= !items.back().is_static();
      }
      return symbolic ? ops::SymValue::List(std::move(items)) : ops::SymValue();
    }
    default:
      return ops::SymValue();
  }
}

absl::StatusOr<ops::SymValue> Translator::InferSymbolicResult(const ops::OpEntry& entry,
                                                              const std::vector<ops::Value>& values,
                                                              const std::vector<ops::Kwarg>& kw,
                                                              const std::vector<VarPtr>& args, const Kwargs& kwargs,
                                                              const ops::Value& result) {
  if (!has_symbols()) return ops::SymValue();
  std::vector<ops::SymValue> sym_args, sym_kwargs;
  bool symbolic = false;
  for (const VarPtr& a : args) {
    sym_args.push_back(SymOf(a));
    symbolic |= !sym_args.back().is_static();
  }
  for (const auto& kv : kwargs) {
    sym_kwargs.push_back(SymOf(kv.second));
    symbolic |= !sym_kwargs.back().is_static();
  }
  if (!symbolic) return ops::SymValue();
  absl::StatusOr<ops::SymValue> sym = ops::InferSymbolic(entry, values, sym_args, kw, sym_kwargs, result, shape_env_);
  if (sym.ok()) return sym;
  // No rule, or a combination its rule does not model: this call holds for
  // the sizes it saw. (An Internal answer is a rule that disagreed with the
  // registry: specialising is still right.)
  ops::SpecializeAll(sym_args, shape_env_);
  ops::SpecializeAll(sym_kwargs, shape_env_);
  if (specialized_by_.size() < 64) specialized_by_.push_back(absl::StrCat(entry.name(), ": ", sym.status().message()));
  return ops::SymValue();
}

void Translator::FinishShapes(google::protobuf::RepeatedPtrField<ir::Guard>& guards, ir::Graph& graph) {
  if (!has_symbols()) return;
  // Node metadata: what each symbolic size is, in the symbols of the inputs.
  auto simplified = [this](const std::vector<ops::SymExpr>& exprs) {
    std::vector<ops::SymExpr> out;
    for (const ops::SymExpr& e : exprs) {
      absl::StatusOr<ops::SymExpr> s = shape_env_.Simplify(e);
      out.push_back(s.ok() ? *s : e);
    }
    return out;
  };
  for (ir::Node& n : *graph.mutable_nodes()) {
    auto it = node_sym_sizes_.find(n.name());
    if (it == node_sym_sizes_.end() || !n.meta().has_tensor()) continue;
    ops::SetSymDims(simplified(it->second), n.mutable_meta()->mutable_tensor()->mutable_sizes());
  }
  ir::Guard& g = *guards.Add();
  g.set_kind(ir::Guard::SHAPE_ENV);
  g.set_source("shape_env");
  g.set_reason("relations between input sizes the trace relied on");
  ir::ShapeEnvGuard* env = g.mutable_shape_env();
  for (const auto& [name, where] : symbol_sources_) {
    ir::SizeSymbol* s = env->add_symbols();
    s->set_name(name);
    s->set_hint(shape_env_.hint(name).value_or(0));
    s->set_source(where.source);
    s->set_dim(where.dim);
    for (const ops::SymbolInfo& info : shape_env_.symbols()) {
      if (info.name != name) continue;
      s->set_min(info.declared.lo == ops::kNegInf ? 0 : info.declared.lo);
      s->set_max(info.declared.hi == ops::kInf ? 0 : info.declared.hi);
    }
  }
  for (const ops::SymRelation& r : shape_env_.guards()) env->add_relations(r.ToString());
  for (const std::string& why : specialized_by_) env->add_specialized(why);
}

}  // namespace dynamo::trace
