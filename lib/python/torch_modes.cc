#include "lib/python/torch_modes.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/python/error.h"
#include "lib/python/object.h"

namespace dynamo::python {
namespace {

// torch._C's stack accessors, looked up once torch is imported (nothing is
// on the stack before that, and nothing here imports torch).
struct StackAccess {
  Object length;    // torch._C._len_torch_function_stack()
  Object at;        // torch._C._get_function_stack_at(i)
  Object cuda_get;  // torch._C._cuda_getDevice(), absent on builds without CUDA
};

const StackAccess* Access() {
  static StackAccess* access = nullptr;  // leaked on purpose: holds Python objects past main()
  if (access != nullptr) return access;
  PyObject* torch_c = PyImport_GetModule(Object::Steal(PyUnicode_FromString("torch._C")).get());
  if (torch_c == nullptr) {
    ClearError();
    return nullptr;
  }
  Object c = Object::Steal(torch_c);
  auto* made = new StackAccess{Object::Steal(PyObject_GetAttrString(c.get(), "_len_torch_function_stack")),
                               Object::Steal(PyObject_GetAttrString(c.get(), "_get_function_stack_at")),
                               Object::Steal(PyObject_GetAttrString(c.get(), "_cuda_getDevice"))};
  ClearError();
  if (!made->length || !made->at) {
    delete made;
    return nullptr;
  }
  access = made;
  return access;
}

// One mode's entry. DeviceContext is recognised by its class's module and
// name (importing torch.utils._device to compare would import from a guard).
absl::StatusOr<std::string> Describe(const Object& mode, const StackAccess& access) {
  PyTypeObject* type = Py_TYPE(mode.get());
  absl::StatusOr<Object> module = GetAttr(Object::Borrow(reinterpret_cast<PyObject*>(type)), "__module__");
  absl::StatusOr<std::string> module_name = module.ok() ? AsString(*module) : module.status();
  absl::StatusOr<Object> qualname = GetAttr(Object::Borrow(reinterpret_cast<PyObject*>(type)), "__qualname__");
  absl::StatusOr<std::string> name = qualname.ok() ? AsString(*qualname) : qualname.status();
  if (!module_name.ok()) return module_name.status();
  if (!name.ok()) return name.status();
  if (*module_name != "torch.utils._device" || *name != "DeviceContext") {
    return absl::StrCat("mode=", *module_name, ".", *name);
  }
  absl::StatusOr<Object> device = GetAttr(mode, "device");
  if (!device.ok()) return device.status();
  absl::StatusOr<Object> kind = GetAttr(*device, "type");
  absl::StatusOr<std::string> kind_name = kind.ok() ? AsString(*kind) : kind.status();
  absl::StatusOr<Object> index = GetAttr(*device, "index");
  if (!kind_name.ok()) return kind_name.status();
  if (!index.ok()) return index.status();
  std::string out = absl::StrCat("device=", *kind_name);
  if (index->get() != Py_None) {
    absl::StatusOr<long long> i = AsLong(*index);
    if (!i.ok()) return i.status();
    absl::StrAppend(&out, ":", *i);
  } else if (*kind_name == "cuda" && access.cuda_get) {
    // set_default_device("cuda") allocates on the current device, whichever
    // it is when the factory runs.
    absl::StatusOr<Object> current = Call(access.cuda_get);
    absl::StatusOr<long long> i = current.ok() ? AsLong(*current) : current.status();
    if (!i.ok()) return i.status();
    absl::StrAppend(&out, ":", *i);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> TorchFunctionModes() {
  const StackAccess* access = Access();
  if (access == nullptr) return std::string();
  // The common case (no mode) costs one call of a torch builtin: guards
  // read this on every call of every capture.
  Object length = Object::Steal(PyObject_CallNoArgs(access->length.get()));
  if (!length) return FetchError("torch._C._len_torch_function_stack()");
  absl::StatusOr<long long> n = AsLong(length);
  if (!n.ok()) return n.status();
  if (*n == 0) return std::string();
  std::vector<std::string> entries;
  for (long long i = 0; i < *n; ++i) {
    absl::StatusOr<Object> mode = Call(access->at, {FromLong(i)});
    if (!mode.ok()) return mode.status();
    absl::StatusOr<std::string> entry = Describe(*mode, *access);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }
  return absl::StrJoin(entries, ",");
}

}  // namespace dynamo::python
