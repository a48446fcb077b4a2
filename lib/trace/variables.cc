#include "lib/trace/variables.h"

#include <Python.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/python/error.h"

namespace dynamo::trace {

VarPtr Var::Null() { return OfKind(VarKind::kNull, python::Object()); }

VarPtr Var::Constant(python::Object object, SourcePtr source) {
  return OfKind(VarKind::kConstant, std::move(object), std::move(source));
}

VarPtr Var::Tensor(std::string node, ops::TensorMeta meta, SourcePtr source) {
  VarPtr v = OfKind(VarKind::kTensor, python::Object(), std::move(source));
  v->node = std::move(node);
  v->meta = std::move(meta);
  return v;
}

VarPtr Var::Tuple(std::vector<VarPtr> items, SourcePtr source) {
  VarPtr v = OfKind(VarKind::kTuple, python::Object(), std::move(source));
  v->items = std::move(items);
  return v;
}

VarPtr Var::List(std::vector<VarPtr> items, SourcePtr source) {
  VarPtr v = OfKind(VarKind::kList, python::Object(), std::move(source));
  v->items = std::move(items);
  return v;
}

VarPtr Var::Dict(std::vector<VarPtr> keys, std::vector<VarPtr> values, SourcePtr source) {
  VarPtr v = OfKind(VarKind::kDict, python::Object(), std::move(source));
  v->keys = std::move(keys);
  v->items = std::move(values);
  return v;
}

VarPtr Var::Iterator(std::vector<VarPtr> items) {
  VarPtr v = OfKind(VarKind::kIterator, python::Object());
  v->items = std::move(items);
  return v;
}

VarPtr Var::Method(VarPtr self, std::string name) {
  VarPtr v = OfKind(VarKind::kMethod, python::Object());
  v->self = std::move(self);
  v->name = std::move(name);
  return v;
}

VarPtr Var::Cell(VarPtr contents) {
  VarPtr v = OfKind(VarKind::kCell, python::Object());
  v->value = std::move(contents);
  return v;
}

VarPtr Var::OfKind(VarKind kind, python::Object object, SourcePtr source) {
  auto v = std::make_shared<Var>();
  v->kind = kind;
  v->object = std::move(object);
  v->source = std::move(source);
  return v;
}

VarPtr Var::SymInt(const ops::SymInt& value, ops::ShapeEnv* env) {
  if (value.is_static() || env == nullptr) return Constant(python::FromLong(value.hint()));
  auto v = std::make_shared<Var>();
  v->kind = VarKind::kSymInt;
  v->sym = value;
  v->shape_env = env;
  return v;
}

bool Var::is_none() const { return kind == VarKind::kConstant && object.get() == Py_None; }

bool IsGradModeExit(const VarPtr& var) {
  return var && var->kind == VarKind::kMethod && var->name == "__exit__" && var->self &&
         var->self->kind == VarKind::kGradMode;
}

bool IsAutocastExit(const VarPtr& var) {
  return var && var->kind == VarKind::kMethod && var->name == "__exit__" && var->self &&
         var->self->kind == VarKind::kAutocast;
}

std::string Describe(const Var& var) {
  switch (var.kind) {
    case VarKind::kNull: return "NULL";
    case VarKind::kConstant: return absl::StrCat("constant ", python::Repr(var.object));
    case VarKind::kSymInt: return absl::StrCat("size ", var.sym.ToString(), " (", var.sym.hint(), " now)");
    case VarKind::kScalar: return absl::StrCat(var.name, " read from a tensor when the graph runs");
    case VarKind::kTensor: return absl::StrCat(var.is_ndarray ? "numpy.ndarray " : "tensor ", ops::ToString(var.meta));
    case VarKind::kTuple: return absl::StrCat(var.is_size ? "torch.Size" : "tuple", " of ", var.items.size());
    case VarKind::kList: return absl::StrCat(var.container_class ? "deque" : "list", " of ", var.items.size());
    case VarKind::kDict:
      if (var.instance_dict) return absl::StrCat("new ", python::TypeName(var.object), " object");
      return absl::StrCat(var.default_factory ? "defaultdict" : "dict", " of ", var.items.size());
    case VarKind::kSlice: return "slice";
    case VarKind::kRange: return absl::StrCat("range(", var.start, ", ", var.stop, ", ", var.step, ")");
    case VarKind::kIterator: return "iterator";
    case VarKind::kGenerator: return "generator";
    case VarKind::kPartial: return absl::StrCat("functools.partial of ", Describe(*var.self));
    case VarKind::kDType: return absl::StrCat("torch.", ops::DTypeName(var.dtype));
    case VarKind::kDevice: return absl::StrCat("device ", ops::DeviceName(var.device));
    case VarKind::kModule: return absl::StrCat("module ", python::Repr(var.object));
    case VarKind::kOp: return var.name;
    case VarKind::kBuiltin: return absl::StrCat("builtin ", var.name);
    case VarKind::kFunction: return absl::StrCat("function ", python::Repr(var.object));
    case VarKind::kNNModule: return absl::StrCat("module ", python::TypeName(var.object));
    case VarKind::kMethod: return absl::StrCat("method ", var.name, " of ", Describe(*var.self));
    case VarKind::kGradMode: return var.grad_enabled ? "torch.enable_grad()" : "torch.no_grad()";
    case VarKind::kAutocast: return python::Repr(var.object);
    case VarKind::kCell: return "cell";
    case VarKind::kClass: return absl::StrCat("class ", python::Repr(var.object));
    case VarKind::kDictView: return absl::StrCat("dict_", var.name, " view");
    case VarKind::kOpaque: return absl::StrCat("object of type ", python::TypeName(var.object));
    case VarKind::kUserObject: return absl::StrCat("new ", python::TypeName(var.object), " object");
    case VarKind::kSet: return absl::StrCat(var.name, " of ", var.items.size());
  }
  return "?";
}

namespace {

absl::StatusOr<ops::Value> ConstantValue(PyObject* o) {
  if (o == Py_None) return ops::Value();
  if (o == Py_Ellipsis) return ops::Value(ops::EllipsisValue{});
  if (PyBool_Check(o)) return ops::Value(o == Py_True);
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) return absl::OutOfRangeError("integer too large for a tensor argument");
    return ops::Value(static_cast<int64_t>(v));
  }
  if (PyFloat_Check(o)) return ops::Value(PyFloat_AS_DOUBLE(o));
  if (PyUnicode_Check(o)) {
    absl::StatusOr<std::string> s = python::AsString(python::Object::Borrow(o));
    if (!s.ok()) return s.status();
    return ops::Value(*s);
  }
  if (std::string(Py_TYPE(o)->tp_name) == "torch.layout") {
    // The registry's layout parameters take the name ("strided"); the
    // graph's argument is the IR's layout (Translator::ToArgument).
    python::Object text = python::Object::Steal(PyObject_Str(o));
    absl::StatusOr<std::string> name = text ? python::AsString(text) : python::FetchError("str(layout)");
    if (!name.ok()) return name.status();
    return ops::Value(std::string(absl::StripPrefix(*name, "torch.")));
  }
  if (python::IsNumpyNumber(o)) {  // as torch's argument parser reads it: the Python number it holds
    python::Object item = python::Object::Steal(PyObject_CallMethod(o, "item", nullptr));
    if (!item) return python::FetchError("numpy scalar item()");
    // Not numpy.bool_: torch reads it as a float (int_tensor * np.bool_(True)
    // is a float tensor), not as the bool it holds.
    if (!PyBool_Check(item.get()) && !python::IsNumpyNumber(item.get())) return ConstantValue(item.get());
  }
  if (PyTuple_Check(o)) {
    std::vector<ops::Value> items;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
      absl::StatusOr<ops::Value> item = ConstantValue(PyTuple_GET_ITEM(o, i));
      if (!item.ok()) return item.status();
      items.push_back(*std::move(item));
    }
    return ops::Value::Tuple(std::move(items));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("a ", Py_TYPE(o)->tp_name, " constant cannot be a tensor-op argument"));
}

}  // namespace

absl::StatusOr<ops::Value> ToValue(const VarPtr& var, bool specialize) {
  switch (var->kind) {
    case VarKind::kTensor:
      if (var->is_ndarray) {
        // torch's operations do not take arrays (torch.sin(a) raises), and
        // torch's rules (promotion, indexing) are not NumPy's.
        return absl::InvalidArgumentError("a numpy.ndarray cannot be passed to a tensor operation");
      }
      return ops::Value(var->meta);
    case VarKind::kConstant:
      return ConstantValue(var->object.get());
    case VarKind::kRange: {  // torch.tensor(range(n)): the ints it holds
      std::vector<int64_t> ints;
      for (int64_t i = var->start; var->step > 0 ? i < var->stop : i > var->stop; i += var->step) {
        if (ints.size() >= (1u << 16)) return absl::InvalidArgumentError("a range of more than 65536 ints");
        ints.push_back(i);
      }
      return ops::Value::IntList(ints);
    }
    case VarKind::kSymInt:
      // A size as a plain int: this trace holds for this value only.
      if (!specialize) return ops::Value(var->sym.hint());
      return ops::Value(var->shape_env->Specialize(var->sym).hint());
    case VarKind::kDType:
      return ops::Value(var->dtype);
    case VarKind::kDevice:
      return ops::Value(var->device);
    case VarKind::kTuple:
    case VarKind::kList: {
      std::vector<ops::Value> items;
      for (const VarPtr& item : var->items) {
        absl::StatusOr<ops::Value> v = ToValue(item, specialize);
        if (!v.ok()) return v.status();
        items.push_back(*std::move(v));
      }
      return var->kind == VarKind::kTuple ? ops::Value::Tuple(std::move(items))
                                          : ops::Value::List(std::move(items));
    }
    case VarKind::kSlice: {
      ops::Slice s;
      std::optional<int64_t>* parts[] = {&s.start, &s.stop, &s.step};
      for (size_t i = 0; i < 3; ++i) {
        if (var->items[i]->is_none()) continue;
        absl::StatusOr<int64_t> v = !specialize && var->items[i]->kind == VarKind::kSymInt
                                        ? absl::StatusOr<int64_t>(var->items[i]->sym.hint())
                                        : AsInt(var->items[i]);
        if (!v.ok()) return v.status();
        *parts[i] = *v;
      }
      return ops::Value(s);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(Describe(*var), " cannot be passed to a tensor operation"));
  }
}

python::Object SpecializedInt(const VarPtr& var) {
  if (var->kind != VarKind::kSymInt) return python::Object();
  return python::FromLong(var->shape_env->Specialize(var->sym).hint());
}

absl::StatusOr<int64_t> AsInt(const VarPtr& var) {
  if (var->kind == VarKind::kSymInt) return var->shape_env->Specialize(var->sym).hint();
  if (var->kind != VarKind::kConstant || !PyLong_Check(var->object.get())) {
    return absl::InvalidArgumentError(absl::StrCat("expected an int, got ", Describe(*var)));
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(var->object.get(), &overflow);
  if (overflow != 0) return absl::OutOfRangeError("integer out of range");
  return static_cast<int64_t>(v);
}

bool ContainsTensor(const VarPtr& var) {
  if (var->kind == VarKind::kTensor) return true;
  for (const VarPtr& item : var->items) {
    if (item && ContainsTensor(item)) return true;
  }
  return false;
}

bool ContainsNdarray(const VarPtr& var) {
  if (var->kind == VarKind::kTensor) return var->is_ndarray;
  for (const VarPtr& item : var->items) {
    if (item && ContainsNdarray(item)) return true;
  }
  return false;
}

}  // namespace dynamo::trace
