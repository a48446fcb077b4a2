// See meta_fallback.h. Python values in, Python values out: the arguments
// become what torch's meta kernels take, and the results are read back the
// way the registry would have described them.
#include "lib/trace/meta_fallback.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "lib/python/error.h"

namespace dynamo::trace {
namespace {

using python::Object;

// torch.<name>, resolved on each call: the module is imported already
// (a trace runs torch code), and a cache would outlive an interpreter.
Object Torch(const char* name) {
  Object torch = Object::Steal(PyImport_ImportModule("torch"));
  if (!torch) {
    PyErr_Clear();
    return Object();
  }
  Object attr = Object::Steal(PyObject_GetAttrString(torch.get(), name));
  if (!attr) PyErr_Clear();
  return attr;
}

Object Attr(PyObject* o, const char* name) {
  Object attr = Object::Steal(PyObject_GetAttrString(o, name));
  if (!attr) PyErr_Clear();
  return attr;
}

absl::StatusOr<Object> CallWithKeywords(const Object& callable, const std::vector<Object>& args,
                                        const Object& kwargs) {
  Object tuple = python::MakeTuple(args);
  Object result = Object::Steal(PyObject_Call(callable.get(), tuple.get(), kwargs.get()));
  if (!result) return python::FetchError("");
  return result;
}

// The meta tensors handed to the call, with what the results are mapped back by.
struct Inputs {
  struct Tensor {
    Object meta;
    ops::TensorMeta before;
    ops::Device device;
    int64_t dim = 0;
    Object version;  // _version before the call
  };
  std::vector<Tensor> tensors;
};

Object IntTuple(const std::vector<int64_t>& ints) {
  std::vector<Object> items;
  for (int64_t i : ints) items.push_back(python::FromLong(i));
  return python::MakeTuple(items);
}

absl::StatusOr<Object> MetaTensor(const ops::TensorMeta& meta, Inputs& inputs) {
  if (meta.data_dependent) return absl::InvalidArgumentError("an input's size depends on tensor values");
  Object kwargs = Object::Steal(PyDict_New());
  Object dtype = Torch(std::string(ops::DTypeName(meta.dtype)).c_str());
  if (!dtype) return absl::InternalError(absl::StrCat("torch has no dtype ", ops::DTypeName(meta.dtype)));
  PyDict_SetItemString(kwargs.get(), "dtype", dtype.get());
  PyDict_SetItemString(kwargs.get(), "device", python::FromString("meta").get());
  absl::StatusOr<Object> t =
      meta.has_strides()
          ? CallWithKeywords(Torch("empty_strided"), {IntTuple(meta.sizes), IntTuple(meta.strides)}, kwargs)
          : CallWithKeywords(Torch("empty"), {IntTuple(meta.sizes)}, kwargs);
  if (!t.ok()) return t.status();
  if (meta.requires_grad) {
    absl::StatusOr<Object> r = python::CallMethod(*t, "requires_grad_");
    if (!r.ok()) return r.status();
  }
  inputs.tensors.push_back({*t, meta, meta.device, meta.dim(), Attr(t->get(), "_version")});
  return *t;
}

absl::StatusOr<Object> ToPython(const ops::Value& value, Inputs& inputs) {
  struct Visit {
    Inputs& inputs;
    absl::StatusOr<Object> operator()(const ops::NoneValue&) { return python::None(); }
    absl::StatusOr<Object> operator()(bool b) { return python::FromBool(b); }
    absl::StatusOr<Object> operator()(int64_t i) { return python::FromLong(i); }
    absl::StatusOr<Object> operator()(double d) { return Object::Steal(PyFloat_FromDouble(d)); }
    absl::StatusOr<Object> operator()(const std::string& s) { return python::FromString(s); }
    absl::StatusOr<Object> operator()(ops::DType d) { return Torch(std::string(ops::DTypeName(d)).c_str()); }
    absl::StatusOr<Object> operator()(const ops::Device& d) {
      return python::Call(Torch("device"), {python::FromString(ops::DeviceName(d))});
    }
    absl::StatusOr<Object> operator()(const ops::Slice& s) {
      auto bound = [](const std::optional<int64_t>& b) { return b ? python::FromLong(*b) : python::None(); };
      return Object::Steal(PySlice_New(bound(s.start).get(), bound(s.stop).get(), bound(s.step).get()));
    }
    absl::StatusOr<Object> operator()(const ops::EllipsisValue&) { return Object::Borrow(Py_Ellipsis); }
    absl::StatusOr<Object> operator()(ops::MemoryFormat f) {
      switch (f) {
        case ops::MemoryFormat::kContiguous: return Torch("contiguous_format");
        case ops::MemoryFormat::kChannelsLast: return Torch("channels_last");
        case ops::MemoryFormat::kChannelsLast3d: return Torch("channels_last_3d");
        case ops::MemoryFormat::kPreserve: return Torch("preserve_format");
      }
      return absl::InternalError("unknown memory format");
    }
    absl::StatusOr<Object> operator()(const ops::TensorMeta& t) { return MetaTensor(t, inputs); }
    absl::StatusOr<Object> operator()(const ops::ValueList& l) {
      std::vector<Object> items;
      for (const ops::Value& item : l.items) {
        absl::StatusOr<Object> o = ToPython(item, inputs);
        if (!o.ok()) return o.status();
        items.push_back(*std::move(o));
      }
      return l.is_tuple ? python::MakeTuple(items) : python::MakeList(items);
    }
  };
  return std::visit(Visit{inputs}, value.variant());
}

// The device a meta result stands for: the inputs' one device. torch lets a
// 0-dim CPU tensor join tensors of another device, so such scalars defer.
absl::StatusOr<ops::Device> ResultDevice(const Inputs& inputs) {
  std::vector<ops::Device> devices, scalar_cpu;
  for (const Inputs::Tensor& t : inputs.tensors) {
    std::vector<ops::Device>& into = t.dim == 0 && t.device.type == "cpu" ? scalar_cpu : devices;
    if (std::find(into.begin(), into.end(), t.device) == into.end()) into.push_back(t.device);
  }
  if (devices.empty()) devices = scalar_cpu;
  if (devices.size() == 1) return devices[0];
  if (devices.empty()) return absl::InvalidArgumentError("it returns a meta tensor without taking one");
  return absl::InvalidArgumentError(
      absl::StrCat("its tensor arguments are on several devices (", ops::DeviceName(devices[0]), ", ",
                   ops::DeviceName(devices[1]), ")"));
}

absl::StatusOr<std::vector<int64_t>> Ints(const Object& seq) {
  absl::StatusOr<std::vector<Object>> items = python::AsVector(seq);
  if (!items.ok()) return items.status();
  std::vector<int64_t> out;
  for (const Object& i : *items) {
    absl::StatusOr<long long> v = python::AsLong(i);
    if (!v.ok()) return absl::InvalidArgumentError("a size that is not an int");
    out.push_back(*v);
  }
  return out;
}

absl::StatusOr<ops::Device> DeviceOf(PyObject* device) {
  absl::StatusOr<std::string> type = python::AsString(Attr(device, "type"));
  if (!type.ok()) return absl::InvalidArgumentError("a device without a type");
  Object index = Attr(device, "index");
  ops::Device d{*type, -1};
  if (index && index.get() != Py_None) d.index = *python::AsLong(index);
  return d;
}

absl::StatusOr<ops::TensorMeta> TensorMetaOf(PyObject* t, const Inputs& inputs) {
  if (Attr(t, "layout").get() != Torch("strided").get()) {
    return absl::InvalidArgumentError("it returns a tensor that is not strided (sparse, nested)");
  }
  ops::TensorMeta meta;
  Object dtype_str = Object::Steal(PyObject_Str(Attr(t, "dtype").get()));
  absl::StatusOr<std::string> dtype_name = dtype_str ? python::AsString(dtype_str) : absl::UnknownError("");
  std::optional<ops::DType> dtype = dtype_name.ok() ? ops::DTypeFromName(*dtype_name) : std::nullopt;
  if (!dtype) return absl::InvalidArgumentError("it returns a tensor of a dtype libdynamo does not model");
  meta.dtype = *dtype;
  absl::StatusOr<std::vector<int64_t>> sizes = Ints(Attr(t, "shape"));
  absl::StatusOr<Object> stride = python::CallMethod(Object::Borrow(t), "stride");
  absl::StatusOr<std::vector<int64_t>> strides = stride.ok() ? Ints(*stride) : stride.status();
  if (!sizes.ok() || !strides.ok()) {
    PyErr_Clear();
    return absl::InvalidArgumentError("it returns a tensor whose sizes depend on tensor values");
  }
  meta.sizes = *std::move(sizes);
  meta.strides = *std::move(strides);
  absl::StatusOr<ops::Device> device = DeviceOf(Attr(t, "device").get());
  if (!device.ok()) return device.status();
  if (device->type == "meta") device = ResultDevice(inputs);
  if (!device.ok()) return device.status();
  meta.device = *std::move(device);
  meta.requires_grad = Attr(t, "requires_grad").get() == Py_True;
  return meta;
}

absl::StatusOr<ops::Value> FromPython(const Object& o, const Inputs& inputs, int depth = 0) {
  PyObject* p = o.get();
  if (p == Py_None) return ops::Value();
  if (PyBool_Check(p)) return ops::Value(p == Py_True);
  if (PyLong_Check(p)) {
    long long v = PyLong_AsLongLong(p);
    if (v == -1 && PyErr_Occurred()) return python::FetchError("an int result");
    return ops::Value(static_cast<int64_t>(v));
  }
  if (PyFloat_Check(p)) return ops::Value(PyFloat_AsDouble(p));
  if (PyUnicode_Check(p)) return ops::Value(*python::AsString(o));
  if (PyObject_IsInstance(p, Torch("Tensor").get()) == 1) {
    absl::StatusOr<ops::TensorMeta> meta = TensorMetaOf(p, inputs);
    if (!meta.ok()) return meta.status();
    return ops::Value(*std::move(meta));
  }
  if (PyObject_IsInstance(p, Torch("dtype").get()) == 1) {
    Object name = Object::Steal(PyObject_Str(p));
    std::optional<ops::DType> d = name ? ops::DTypeFromName(python::AsString(name).value_or("")) : std::nullopt;
    if (!d) return absl::InvalidArgumentError("it returns a dtype libdynamo does not model");
    return ops::Value(*d);
  }
  if (PyObject_IsInstance(p, Torch("device").get()) == 1) {
    absl::StatusOr<ops::Device> d = DeviceOf(p);
    if (!d.ok()) return d.status();
    if (d->type == "meta") d = ResultDevice(inputs);
    if (!d.ok()) return d.status();
    return ops::Value(*std::move(d));
  }
  PyErr_Clear();
  if ((PyTuple_Check(p) || PyList_Check(p)) && depth < 32) {
    absl::StatusOr<std::vector<Object>> items = python::AsVector(o);
    if (!items.ok()) return items.status();
    std::vector<ops::Value> values;
    for (const Object& item : *items) {
      absl::StatusOr<ops::Value> v = FromPython(item, inputs, depth + 1);
      if (!v.ok()) return v.status();
      values.push_back(*std::move(v));
    }
    return PyTuple_Check(p) ? ops::Value::Tuple(std::move(values)) : ops::Value::List(std::move(values));
  }
  return absl::InvalidArgumentError(absl::StrCat("it returns a ", python::TypeName(o)));
}

// The interpreter's grad mode set for the length of the call.
class GradMode {
 public:
  explicit GradMode(bool enabled) {
    Object is_enabled = Torch("is_grad_enabled");
    absl::StatusOr<Object> now = is_enabled ? python::Call(is_enabled) : absl::UnknownError("");
    previous_ = now.ok() && now->get() == Py_True;
    Set(enabled);
  }
  ~GradMode() { Set(previous_); }
  GradMode(const GradMode&) = delete;
  GradMode& operator=(const GradMode&) = delete;

 private:
  static void Set(bool enabled) {
    Object c = Torch("_C");
    Object set = c ? Attr(c.get(), "_set_grad_enabled") : Object();
    if (!set || !python::Call(set, {python::FromBool(enabled)}).ok()) PyErr_Clear();
  }
  bool previous_ = true;
};

}  // namespace

absl::StatusOr<MetaCall> InferOnMeta(const Object& fn, const std::vector<ops::Value>& args,
                                     const std::vector<ops::Kwarg>& kwargs, const MetaOptions& options) {
  Inputs inputs;
  std::vector<Object> py_args;
  for (const ops::Value& a : args) {
    absl::StatusOr<Object> o = ToPython(a, inputs);
    if (!o.ok()) return o.status();
    py_args.push_back(*std::move(o));
  }
  Object py_kwargs = Object::Steal(PyDict_New());
  for (const ops::Kwarg& k : kwargs) {
    absl::StatusOr<Object> o = ToPython(k.value, inputs);
    if (!o.ok()) return o.status();
    PyDict_SetItemString(py_kwargs.get(), k.name.c_str(), o->get());
  }
  absl::StatusOr<Object> result;
  {
    GradMode mode(options.grad_enabled);
    result = CallWithKeywords(fn, py_args, py_kwargs);
  }
  if (!result.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("on meta tensors it raises ", result.status().message()));
  }
  MetaCall call;
  for (const Inputs::Tensor& t : inputs.tensors) {
    Object version = Attr(t.meta.get(), "_version");
    if (version && t.version && PyObject_RichCompareBool(version.get(), t.version.get(), Py_NE) == 1) {
      call.mutates_input = true;
      absl::StatusOr<ops::TensorMeta> after = TensorMetaOf(t.meta.get(), inputs);
      if (!after.ok() || after->sizes != t.before.sizes || after->dtype != t.before.dtype ||
          after->requires_grad != t.before.requires_grad ||
          (t.before.has_strides() && after->strides != t.before.strides)) {
        call.changes_input_metadata = true;
      }
    }
    PyErr_Clear();
  }
  absl::StatusOr<ops::Value> value = FromPython(*result, inputs);
  if (!value.ok()) return value.status();
  call.result = *std::move(value);
  return call;
}

}  // namespace dynamo::trace
