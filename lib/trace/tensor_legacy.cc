// Tensor's legacy constructors and type names, as torch's Python binding
// (python_variable_methods.cpp, tensor_new.cpp) resolves them:
//
//   x.new(5, 8), x.new(y.size()), x.new()   an uninitialised tensor of x's
//                                           dtype and device: new_empty
//   x.type()                                "torch.FloatTensor" (a constant)
//   x.type(torch.float16), x.type("torch.HalfTensor"), x.type(torch.HalfTensor)
//                                           x itself when nothing changes,
//                                           else x.to(dtype)
//
// x.new(sequence) (data), x.new(tensor) (an alias) and a change of device
// by name stay graph breaks.
#include <Python.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

constexpr ops::DType kLegacyDTypes[] = {
    ops::DType::kBool,    ops::DType::kUInt8,    ops::DType::kInt8,      ops::DType::kInt16,
    ops::DType::kInt32,   ops::DType::kInt64,    ops::DType::kFloat16,   ops::DType::kBFloat16,
    ops::DType::kFloat32, ops::DType::kFloat64,  ops::DType::kComplex64, ops::DType::kComplex128};

// torch.empty(0, dtype=d).type() on the CPU ("torch.FloatTensor"), asked of
// torch once; empty where torch has no name.
std::string CpuTypeName(ops::DType d) {
  static auto* names = new absl::flat_hash_map<int, std::string>();
  if (auto it = names->find(static_cast<int>(d)); it != names->end()) return it->second;
  std::string name;
  PyObject* result = nullptr;
  if (python::Object torch = python::Object::Steal(PyImport_ImportModule("torch"))) {
    std::string dtype_name(ops::DTypeName(d));
    python::Object dtype = python::Object::Steal(PyObject_GetAttrString(torch.get(), dtype_name.c_str()));
    python::Object empty = python::Object::Steal(PyObject_GetAttrString(torch.get(), "empty"));
    if (dtype && empty) {
      python::Object args = python::Object::Steal(Py_BuildValue("(i)", 0));
      // device= given: under torch.set_default_device("cuda") an empty
      // would be a torch.cuda.*Tensor.
      python::Object kwargs =
          python::Object::Steal(Py_BuildValue("{s:O,s:s}", "dtype", dtype.get(), "device", "cpu"));
      python::Object t = python::Object::Steal(PyObject_Call(empty.get(), args.get(), kwargs.get()));
      if (t) result = PyObject_CallMethod(t.get(), "type", nullptr);
    }
  }
  python::Object r = python::Object::Steal(result);
  if (r && PyUnicode_Check(r.get())) name = python::AsString(r).value_or("");
  python::ClearError();
  (*names)[static_cast<int>(d)] = name;
  return name;
}

// "torch.cuda.HalfTensor" -> (float16, "cuda"); nothing for other names.
std::optional<std::pair<ops::DType, std::string>> ParseTypeName(const std::string& name) {
  std::string device = "cpu";
  std::string cpu_name = name;
  if (absl::StartsWith(name, "torch.cuda.")) {
    device = "cuda";
    cpu_name = "torch." + name.substr(11);
  }
  for (ops::DType d : kLegacyDTypes) {
    std::string n = CpuTypeName(d);
    if (!n.empty() && n == cpu_name) return std::make_pair(d, device);
  }
  return std::nullopt;
}

}  // namespace

std::optional<absl::StatusOr<VarPtr>> Translator::CallLegacyTensorMethod(const VarPtr& self, const std::string& name,
                                                                         const std::vector<VarPtr>& args,
                                                                         const Kwargs& kwargs) {
  const ops::TensorMeta& m = self->meta;
  if (name == "new" && kwargs.empty()) {
    std::vector<VarPtr> sizes;
    if (args.size() == 1 && args[0]->kind == VarKind::kTuple && args[0]->is_size) {
      sizes = args[0]->items;
    } else {
      for (const VarPtr& a : args) {
        if (!a->is_constant() || !PyLong_Check(a->object.get()) || PyBool_Check(a->object.get())) {
          return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("Tensor.new(", Describe(*a), ")"),
                       "Tensor.new is traced with sizes (ints or a torch.Size); use new_tensor/new_empty");
        }
      }
      sizes = args;
      if (sizes.empty()) sizes.push_back(Var::Constant(python::FromLong(0)));  // new(): empty, 1-d
    }
    return CallOp("Tensor.new_empty", ir::Node::CALL_METHOD, {self, Var::Tuple(std::move(sizes))}, {});
  }
  if (name != "type" || !kwargs.empty() || args.size() > 1) return std::nullopt;
  if (m.device.type != "cpu" && m.device.type != "cuda") return std::nullopt;
  std::string cpu_name = CpuTypeName(m.dtype);
  if (cpu_name.empty()) return std::nullopt;
  if (args.empty()) {
    std::string full = m.device.type == "cuda" ? "torch.cuda." + cpu_name.substr(6) : cpu_name;
    return absl::StatusOr<VarPtr>(Var::Constant(python::FromString(full)));
  }
  const VarPtr& target = args[0];
  std::optional<ops::DType> dtype;
  if (target->kind == VarKind::kDType) {
    dtype = target->dtype;
  } else {
    std::string type_name;
    if (target->is_constant() && PyUnicode_Check(target->object.get())) {
      type_name = python::AsString(target->object).value_or("");
    } else if (target->kind == VarKind::kClass) {  // torch.HalfTensor (guarded by identity)
      python::Object module = python::Object::Steal(PyObject_GetAttrString(target->object.get(), "__module__"));
      python::Object n = python::Object::Steal(PyObject_GetAttrString(target->object.get(), "__name__"));
      python::ClearError();
      if (module && n) {
        type_name = absl::StrCat(python::AsString(module).value_or(""), ".", python::AsString(n).value_or(""));
      }
    }
    std::optional<std::pair<ops::DType, std::string>> parsed = ParseTypeName(type_name);
    if (!parsed) return std::nullopt;
    if (parsed->second != m.device.type) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("Tensor.type('", type_name, "') moves the tensor"),
                   "use Tensor.to(device, dtype)");
    }
    dtype = parsed->first;
  }
  if (*dtype == m.dtype) return absl::StatusOr<VarPtr>(self);  // torch returns the tensor itself
  absl::StatusOr<VarPtr> as_dtype = FromValue(ops::Value(*dtype));
  if (!as_dtype.ok()) return absl::StatusOr<VarPtr>(as_dtype.status());
  return CallOp("Tensor.to", ir::Node::CALL_METHOD, {self, *as_dtype}, {});
}

}  // namespace dynamo::trace
