// Python numbers read from tensor values (Tensor.item(), tolist(), int() and
// float() of a tensor) kept in the graph, where the capture asks for scalar
// outputs (torch._dynamo's capture_scalar_outputs, on by itself under
// fullgraph). Such a number is a kScalar: a graph value of a known Python
// type and an unknown value. What may be done with it is what needs only
// its type:
//  - arithmetic with ints, floats, bools and other kScalars (+ - * / // %
//    ** & | ^, unary - + ~, abs): operator nodes, typed by Python's rules;
//  - an argument of a pointwise tensor op (x * s, torch.clamp(x, max=s)), of
//    torch.full / fill_ / new_full (the fill value), whose output metadata
//    depends on the number's type only;
//  - int() / float() of it (torch.sym_int / torch.sym_float nodes);
//  - storing it in containers, returning it, passing it to inlined code.
// Everything that would need its value (a branch, a comparison, a size, a
// dict key, printing) is a DATA_DEPENDENT_BRANCH break, never a guess.
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;

// tolist() of more elements is a break: a node per element.
constexpr int64_t kMaxListedElements = 1024;

// The ScalarMeta type of a Python type name ("int", "float", "bool").
ir::ScalarMeta::Type ScalarType(const std::string& python_type) {
  if (python_type == "float") return ir::ScalarMeta::FLOAT;
  if (python_type == "bool") return ir::ScalarMeta::BOOL;
  return ir::ScalarMeta::INT;
}

ir::ValueMeta ScalarMetaOf(const std::string& python_type) {
  ir::ValueMeta meta;
  meta.mutable_scalar()->set_type(ScalarType(python_type));
  return meta;
}

// The Python type of Tensor.item() of a dtype; empty where it is no
// int/float/bool (complex).
std::string ItemType(ops::DType dtype) {
  if (dtype == ops::DType::kBool) return "bool";
  if (ops::IsIntegral(dtype, /*include_bool=*/false)) return "int";
  if (ops::IsFloating(dtype)) return "float";
  return "";
}

// The Python type of a number operand: a kScalar's, or a constant's; empty
// for anything else.
std::string NumberType(const VarPtr& v) {
  if (v->kind == VarKind::kScalar) return v->name;
  if (!v->is_constant()) return "";
  PyObject* o = v->object.get();
  if (PyBool_Check(o)) return "bool";
  if (PyLong_CheckExact(o)) return "int";
  if (PyFloat_CheckExact(o)) return "float";
  return "";
}

// The type Python gives `a op b` for numbers of these types; empty where it
// depends on the values (int ** int is a float for a negative exponent,
// unless the exponent is a constant known not to be).
std::string ResultType(const std::string& op, const std::string& a, const std::string& b,
                       bool constant_nonnegative_b) {
  const bool any_float = a == "float" || b == "float";
  if (op == "truediv") return "float";
  if (op == "and_" || op == "or_" || op == "xor") {
    if (any_float) return "";  // TypeError: let Python say it
    return a == "bool" && b == "bool" ? "bool" : "int";
  }
  if (op == "pow" && !any_float && !constant_nonnegative_b) return "";
  return any_float ? "float" : "int";
}

}  // namespace

VarPtr Translator::NewScalar(const std::string& node, const std::string& python_type) {
  VarPtr v = Var::OfKind(VarKind::kScalar, Object());
  v->node = node;
  v->name = python_type;
  return v;
}

absl::Status Translator::ScalarValueNeeded(const VarPtr& v, absl::string_view what) {
  return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH,
               absl::StrCat(what, " needs the value of ", Describe(*v)),
               "the number is read from a tensor when the graph runs; keep using it in arithmetic and "
               "tensor operations, or compute the decision with tensors (torch.where)");
}

absl::StatusOr<VarPtr> Translator::TensorItem(const VarPtr& self, const std::string& method) {
  SpecializeShape(self);  // numel() == 1 is decided on the sizes seen
  if (self->meta.numel() != 1) {
    return Break(ir::GraphBreak::OP_FAILS,
                 absl::StrCat("Tensor.", method, "() of a ", ops::ToString(self->meta), " tensor"),
                 "a tensor with one element only has a Python number: the call would raise");
  }
  const std::string type = ItemType(self->meta.dtype);
  if (type.empty()) {
    return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH,
                 absl::StrCat("Tensor.", method, "() of a ", ops::ToString(self->meta), " tensor"),
                 "complex numbers read from tensors are not kept in graphs");
  }
  absl::StatusOr<ir::Argument> arg = ToArgument(self);
  if (!arg.ok()) return arg.status();
  std::string node = graph_.AddCall(ir::Node::CALL_METHOD, "Tensor.item", {*arg}, {}, ScalarMetaOf(type),
                                    CurrentLocation());
  return NewScalar(node, type);
}

absl::StatusOr<VarPtr> Translator::TensorToList(const VarPtr& self) {
  if (self->meta.dim() == 0) return TensorItem(self, "tolist");
  SpecializeShape(self);  // the list's structure is the sizes seen
  const std::string type = ItemType(self->meta.dtype);
  if (type.empty() || self->meta.numel() > kMaxListedElements) {
    return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH,
                 absl::StrCat("Tensor.tolist() of a ", ops::ToString(self->meta), " tensor"),
                 absl::StrCat("tolist() is kept in graphs for int, float and bool tensors of at most ",
                              kMaxListedElements, " elements"));
  }
  absl::StatusOr<ir::Argument> arg = ToArgument(self);
  if (!arg.ok()) return arg.status();
  // One Tensor.tolist node, and a getitem node per list and element: the
  // nested lists are built by the trace, so code can index and iterate them.
  std::function<ir::ValueMeta(size_t)> meta_of = [&](size_t dim) {
    if (dim == self->meta.sizes.size()) return ScalarMetaOf(type);
    ir::ValueMeta m;
    for (int64_t i = 0; i < self->meta.sizes[dim]; ++i) *m.mutable_tuple()->add_items() = meta_of(dim + 1);
    return m;
  };
  std::string root = graph_.AddCall(ir::Node::CALL_METHOD, "Tensor.tolist", {*arg}, {}, meta_of(0),
                                    CurrentLocation());
  std::function<VarPtr(const std::string&, size_t)> build = [&](const std::string& node, size_t dim) {
    if (dim == self->meta.sizes.size()) return NewScalar(node, type);
    std::vector<VarPtr> items;
    const ir::ValueMeta item_meta = meta_of(dim + 1);
    for (int64_t i = 0; i < self->meta.sizes[dim]; ++i) {
      ir::Argument index;
      index.set_int_value(i);
      std::string item = graph_.AddCall(ir::Node::CALL_FUNCTION, "operator.getitem", {Ref(node), index}, {},
                                        item_meta, CurrentLocation());
      items.push_back(build(item, dim + 1));
    }
    return Var::List(std::move(items));
  };
  return build(root, 0);
}

std::optional<absl::StatusOr<VarPtr>> Translator::ScalarArithmetic(const std::string& op, const VarPtr& a,
                                                                  const VarPtr& b) {
  if (a->kind != VarKind::kScalar && b->kind != VarKind::kScalar) return std::nullopt;
  if (a->is_tensor() || b->is_tensor()) return std::nullopt;  // a tensor op taking a number
  const std::string plain = op[0] == 'i' && op != "invert" ? op.substr(1) : op;  // numbers have no in-place slot
  static const char* const kOps[] = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and_", "or_", "xor"};
  bool known = false;
  for (const char* name : kOps) known |= plain == name;
  const std::string ta = NumberType(a), tb = NumberType(b);
  const bool nonnegative_b = b->is_constant() && PyLong_Check(b->object.get()) &&
                             PyObject_RichCompareBool(b->object.get(), python::FromLong(0).get(), Py_GE) == 1;
  const std::string type = known && !ta.empty() && !tb.empty() ? ResultType(plain, ta, tb, nonnegative_b) : "";
  if (type.empty()) {
    return absl::StatusOr<VarPtr>(ScalarValueNeeded(a->kind == VarKind::kScalar ? a : b,
                                                    absl::StrCat("'", op, "' with ", Describe(*a), " and ",
                                                                 Describe(*b))));
  }
  absl::StatusOr<ir::Argument> lhs = ToArgument(a);
  absl::StatusOr<ir::Argument> rhs = lhs.ok() ? ToArgument(b) : lhs.status();
  if (!rhs.ok()) return absl::StatusOr<VarPtr>(rhs.status());
  std::string node = graph_.AddCall(ir::Node::CALL_FUNCTION, absl::StrCat("operator.", plain), {*lhs, *rhs}, {},
                                    ScalarMetaOf(type), CurrentLocation());
  return absl::StatusOr<VarPtr>(NewScalar(node, type));
}

std::optional<absl::StatusOr<VarPtr>> Translator::ScalarUnary(const std::string& op, const VarPtr& v) {
  if (v->kind != VarKind::kScalar) return std::nullopt;
  std::string type = v->name;
  if (op == "neg" || op == "pos" || op == "abs") {
    if (type == "bool") type = "int";
  } else if (op == "invert" && type != "float") {
    type = "int";
  } else {
    return absl::StatusOr<VarPtr>(ScalarValueNeeded(v, absl::StrCat("'", op, "'")));
  }
  absl::StatusOr<ir::Argument> arg = ToArgument(v);
  if (!arg.ok()) return absl::StatusOr<VarPtr>(arg.status());
  std::string node = graph_.AddCall(ir::Node::CALL_FUNCTION, absl::StrCat("operator.", op), {*arg}, {},
                                    ScalarMetaOf(type), CurrentLocation());
  return absl::StatusOr<VarPtr>(NewScalar(node, type));
}

std::optional<absl::StatusOr<VarPtr>> Translator::ScalarConversion(const std::string& builtin, const VarPtr& v) {
  if (builtin != "int" && builtin != "float") return std::nullopt;
  VarPtr number = v;
  if (v->is_tensor() && !v->is_ndarray && capture_scalars_) {
    absl::StatusOr<VarPtr> item = TensorItem(v, builtin == "int" ? "__int__" : "__float__");
    if (!item.ok()) return absl::StatusOr<VarPtr>(item.status());
    number = *item;
  }
  if (number->kind != VarKind::kScalar) return std::nullopt;
  if (number->name == builtin) return absl::StatusOr<VarPtr>(number);
  // int(x) truncates a float and makes a bool 0 or 1; float(x) widens: what
  // torch.sym_int / torch.sym_float do to a Python number.
  absl::StatusOr<ir::Argument> arg = ToArgument(number);
  if (!arg.ok()) return absl::StatusOr<VarPtr>(arg.status());
  std::string node = graph_.AddCall(ir::Node::CALL_FUNCTION, absl::StrCat("torch.sym_", builtin), {*arg}, {},
                                    ScalarMetaOf(builtin), CurrentLocation());
  return absl::StatusOr<VarPtr>(NewScalar(node, builtin));
}

std::optional<absl::StatusOr<VarPtr>> Translator::TensorOfScalars(const std::string& target,
                                                                   const std::vector<VarPtr>& args,
                                                                   const Kwargs& kwargs) {
  if (target != "torch.tensor" || args.size() != 1 || !HoldsScalar(args[0])) return std::nullopt;
  const ops::OpEntry* entry = registry_.Find(target);
  if (entry == nullptr) return std::nullopt;
  // The registry says the dtype and sizes, from the data's Python types
  // and nesting (a stand-in per number) and the keywords.
  absl::StatusOr<ops::Value> data = StandIn(args[0]);
  if (!data.ok()) return absl::StatusOr<VarPtr>(data.status());
  std::vector<ops::Kwarg> kw;
  Kwargs where;  // dtype and device, for each piece
  for (const auto& [name, value] : kwargs) {
    absl::StatusOr<ops::Value> v = ToValue(value, /*specialize=*/false);
    // dtype and device are given to each piece; requires_grad=True and
    // pin_memory=True have no piecewise form.
    const bool off = v.ok() && v->is_bool() && !v->as_bool();
    if (!v.ok() || (name != "dtype" && name != "device" && !off)) {
      return absl::StatusOr<VarPtr>(ScalarValueNeeded(args[0], absl::StrCat(target, "(", name, "=)")));
    }
    kw.push_back({name, *v});
    if (name == "device") where.push_back({name, value});
  }
  absl::StatusOr<ops::Value> result = entry->Infer({*std::move(data)}, kw);
  if (!result.ok() || !result->is_tensor()) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OP_FAILS,
                                        absl::StrCat(target, " would raise: ", result.status().message()),
                                        "the data's lists must nest evenly"));
  }
  absl::StatusOr<VarPtr> dtype = FromValue(ops::Value(result->as_tensor().dtype));
  if (!dtype.ok()) return absl::StatusOr<VarPtr>(dtype.status());
  where.push_back({"dtype", *dtype});
  // torch.tensor copies Python numbers: a number the graph computes is a
  // 0-d torch.full of it, and lists are stacks of their items. torch's
  // compilers trace these again on fake tensors, which torch.tensor of an
  // unknown number defeats.
  std::function<absl::StatusOr<VarPtr>(const VarPtr&)> build = [&](const VarPtr& v) -> absl::StatusOr<VarPtr> {
    if (v->kind != VarKind::kList && v->kind != VarKind::kTuple) {
      return CallOp("torch.full", ir::Node::CALL_FUNCTION, {Var::Constant(Object::Steal(PyTuple_New(0))), v}, where);
    }
    std::vector<VarPtr> items;
    for (const VarPtr& item : v->items) {
      absl::StatusOr<VarPtr> t = build(item);
      if (!t.ok()) return t;
      items.push_back(*t);
    }
    VarPtr list = Var::OfKind(VarKind::kList, Object());
    list->items = std::move(items);
    return CallOp("torch.stack", ir::Node::CALL_FUNCTION, {list}, {});
  };
  return build(args[0]);
}

bool Translator::HoldsScalar(const VarPtr& v) {
  if (v->kind == VarKind::kScalar) return true;
  if (v->kind != VarKind::kList && v->kind != VarKind::kTuple) return false;
  for (const VarPtr& item : v->items) {
    if (HoldsScalar(item)) return true;
  }
  return false;
}

absl::StatusOr<ops::Value> Translator::StandIn(const VarPtr& v) {
  // A number the graph computes: one of its Python type (1, 1.0 or True).
  if (v->kind == VarKind::kScalar) {
    if (v->name == "float") return ops::Value(1.0);
    if (v->name == "bool") return ops::Value(true);
    return ops::Value(int64_t{1});
  }
  if (!HoldsScalar(v)) return ToValue(v, /*specialize=*/false);
  ops::ValueList list{{}, v->kind == VarKind::kTuple};
  for (const VarPtr& item : v->items) {
    absl::StatusOr<ops::Value> s = StandIn(item);
    if (!s.ok()) return s.status();
    list.items.push_back(*std::move(s));
  }
  return ops::Value(std::move(list));
}

absl::Status Translator::ScalarOperands(const ops::OpEntry& entry, const std::vector<VarPtr>& args,
                                        const Kwargs& kwargs, std::vector<ops::Value>& values,
                                        std::vector<ops::Kwarg>& kw) {
  // The fill value of these is data, as a pointwise op's number is: the
  // output metadata depends on its type alone.
  static const char* const kFillOps[] = {"torch.full", "torch.full_like", "Tensor.new_full", "Tensor.fill_",
                                         "torch.fill", "Tensor.masked_fill", "Tensor.masked_fill_",
                                         "torch.masked_fill"};
  bool by_type = (entry.tags() & ops::kPointwise) != 0;
  for (const char* name : kFillOps) by_type |= entry.name() == name;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!HoldsScalar(args[i])) continue;
    if (args[i]->kind != VarKind::kScalar) return ScalarValueNeeded(args[i], entry.name());
    if (!by_type) return ScalarValueNeeded(args[i], entry.name());
    absl::StatusOr<ops::Value> v = StandIn(args[i]);
    if (!v.ok()) return v.status();
    values[i] = *std::move(v);
  }
  for (size_t i = 0; i < kwargs.size(); ++i) {
    if (kwargs[i].second->kind != VarKind::kScalar) continue;
    if (!by_type) return ScalarValueNeeded(kwargs[i].second, absl::StrCat(entry.name(), "(", kwargs[i].first, "=)"));
    absl::StatusOr<ops::Value> v = StandIn(kwargs[i].second);
    if (!v.ok()) return v.status();
    kw[i].value = *std::move(v);
  }
  return absl::OkStatus();
}

}  // namespace dynamo::trace
