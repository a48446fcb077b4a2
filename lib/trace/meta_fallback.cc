// See meta_fallback.h. Python values in, Python values out: the arguments
// become what torch's meta kernels take, and the results are read back the
// way the registry would have described them.
#include "lib/trace/meta_fallback.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/ops/infer_helpers.h"
#include "lib/python/error.h"

namespace dynamo::trace {
namespace {

using python::Attr;
using python::Object;

// torch.<name>, resolved on each call: the module is imported already
// (a trace runs torch code), and a cache would outlive an interpreter.
Object Torch(const char* name) {
  Object torch = Object::Steal(PyImport_ImportModule("torch"));
  if (!torch) {
    python::ClearError();
    return Object();
  }
  Object attr = Object::Steal(PyObject_GetAttrString(torch.get(), name));
  if (!attr) python::ClearError();
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
  std::vector<ops::Device> devices;  // device arguments, handed over as "meta"
  bool offset_storage = false;       // MetaOptions::offset_storage
  bool fake = false;                 // MetaOptions::fake_mode: tensors on their own devices
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
  PyDict_SetItemString(kwargs.get(), "device",
                       python::FromString(inputs.fake ? ops::DeviceName(meta.device) : "meta").get());
  absl::StatusOr<Object> t =
      meta.has_strides()
          ? CallWithKeywords(Torch("empty_strided"), {IntTuple(meta.sizes), IntTuple(meta.strides)}, kwargs)
          : CallWithKeywords(Torch("empty"), {IntTuple(meta.sizes)}, kwargs);
  if (!t.ok()) return t.status();
  if (inputs.offset_storage) {
    // The same sizes and strides one element into a larger storage.
    absl::StatusOr<Object> strides = python::CallMethod(*t, "stride");
    int64_t extent = 2;
    for (size_t i = 0; i < meta.sizes.size() && strides.ok(); ++i) {
      absl::StatusOr<long long> st = python::AsLong(Object::Steal(PySequence_GetItem(strides->get(), i)));
      if (meta.sizes[i] > 0 && st.ok()) extent += (meta.sizes[i] - 1) * *st;
    }
    absl::StatusOr<Object> base = CallWithKeywords(Torch("empty"), {IntTuple({extent})}, kwargs);
    if (!base.ok() || !strides.ok()) return absl::InternalError("cannot build an offset meta tensor");
    t = python::CallMethod(*base, "as_strided", {IntTuple(meta.sizes), *strides, python::FromLong(1)});
    if (!t.ok()) return t.status();
  }
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
      if (std::find(inputs.devices.begin(), inputs.devices.end(), d) == inputs.devices.end()) {
        inputs.devices.push_back(d);
      }
      return python::Call(Torch("device"), {python::FromString(inputs.fake ? ops::DeviceName(d) : "meta")});
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

// The device a meta result stands for: a device argument's (x.to("cpu"),
// zeros_like(x, device=...)), else the tensor inputs' one device, else the
// CPU (a factory). torch lets a 0-dim CPU tensor join tensors of another
// device, so such scalars defer.
absl::StatusOr<ops::Device> ResultDevice(const Inputs& inputs) {
  if (inputs.devices.size() == 1) return inputs.devices[0];
  if (inputs.devices.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("it is given several devices (", ops::DeviceName(inputs.devices[0]),
                                                   ", ", ops::DeviceName(inputs.devices[1]), ")"));
  }
  if (inputs.tensors.empty()) {
    // Whether torch.set_default_device applies depends on whether torch
    // lists the function among its constructors: not guessed.
    if (ops::HasDefaultDevice()) {
      return absl::UnimplementedError(
          absl::StrCat("it makes a tensor from no tensor under a default device (", ops::DeviceName(ops::DefaultDevice()),
                       ")"));
    }
    return ops::Device{"cpu", -1};
  }
  std::vector<ops::Device> devices, scalar_cpu;
  for (const Inputs::Tensor& t : inputs.tensors) {
    std::vector<ops::Device>& into = t.dim == 0 && t.device.type == "cpu" ? scalar_cpu : devices;
    if (std::find(into.begin(), into.end(), t.device) == into.end()) into.push_back(t.device);
  }
  if (devices.empty()) devices = scalar_cpu;
  if (devices.size() == 1) return devices[0];
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
    python::ClearError();
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
  python::ClearError();
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

// A Python context manager entered for the length of a C++ scope.
class Entered {
 public:
  explicit Entered(Object manager) : manager_(std::move(manager)) {
    if (manager_ && !python::CallMethod(manager_, "__enter__").ok()) {
      status_ = python::FetchError("entering a context");
      manager_ = Object();
    }
  }
  ~Entered() {
    if (!manager_) return;
    Object none = python::None();
    if (!python::CallMethod(manager_, "__exit__", {none, none, none}).ok()) python::ClearError();
  }
  Entered(const Entered&) = delete;
  Entered& operator=(const Entered&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  Object manager_;
  absl::Status status_;
};

// torch's autocast state set as `devices` say for the length of the call,
// then put back: what torch.autocast's __enter__ and __exit__ set, minus
// the nesting count (no cache is filled on fake tensors).
class AutocastScope {
 public:
  explicit AutocastScope(const std::vector<AutocastDevice>& devices) {
    for (const AutocastDevice& d : devices) {
      Object device = python::FromString(d.device_type);
      absl::StatusOr<Object> enabled = python::Call(Torch("is_autocast_enabled"), {device});
      absl::StatusOr<Object> dtype = python::Call(Torch("get_autocast_dtype"), {device});
      Object fast = Torch(std::string(ops::DTypeName(d.dtype)).c_str());
      if (!enabled.ok() || !dtype.ok() || !fast) {
        status_ = absl::InternalError(absl::StrCat("cannot read torch's autocast state for ", d.device_type));
        python::ClearError();
        return;
      }
      saved_.push_back({device, *enabled, *dtype});
      if (!Set(device, python::FromBool(d.enabled), fast)) {
        status_ = python::FetchError("setting torch's autocast state");
        return;
      }
    }
  }
  ~AutocastScope() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (!Set(it->device, it->enabled, it->dtype)) python::ClearError();
    }
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  struct Saved {
    Object device, enabled, dtype;
  };
  static bool Set(const Object& device, const Object& enabled, const Object& dtype) {
    return python::Call(Torch("set_autocast_enabled"), {device, enabled}).ok() &&
           python::Call(Torch("set_autocast_dtype"), {device, dtype}).ok();
  }
  std::vector<Saved> saved_;
  absl::Status status_;
};

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
    if (!set || !python::Call(set, {python::FromBool(enabled)}).ok()) python::ClearError();
  }
  bool previous_ = true;
};

bool Identifier(absl::string_view s) {
  if (s.empty() || s.size() > 128 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return !(absl::StartsWith(s, "__") && absl::EndsWith(s, "__"));
}

// torch's module at a fixed dotted path below torch ("_C._nn"), by
// attributes: the path is one of this file's constants, never input.
Object TorchPath(absl::string_view path) {
  Object o = Object::Steal(PyImport_ImportModule("torch"));
  if (!o) python::ClearError();
  for (absl::string_view part : absl::StrSplit(path, '.', absl::SkipEmpty())) {
    if (!o) break;
    o = Attr(o.get(), std::string(part).c_str());
  }
  return o;
}

// ATen bindings whose effect leaves the tensors (a file read or written, a
// line printed): no tensor operation, and never a call target a capture may
// name (the schemas that take a file name, and aten::_print).
constexpr const char* kNotOperators[] = {"from_file", "save", "_print"};

// The modules of builtins that are ATen bindings, beside torch._C._VariableFunctions.
constexpr const char* kOperatorModules[] = {"_C._nn", "_C._linalg", "_C._fft", "_C._special"};

bool IsInstanceOfPath(PyObject* o, absl::string_view type_path) {
  Object type = TorchPath(type_path);
  int r = type ? PyObject_IsInstance(o, type.get()) : 0;
  if (r < 0) python::ClearError();
  return r == 1;
}

}  // namespace

Object TorchOperator(absl::string_view name) {
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  for (absl::string_view p : parts) {
    if (p.empty() || p.size() > 128) return Object();
  }
  auto same = [](Object o, bool ok) { return ok ? o : Object(); };
  if (parts.size() == 2 && parts[0] == "Tensor") {
    if (!Identifier(parts[1])) return Object();
    // The method torch.Tensor resolves (no Python override), defined in C
    // on TensorBase.
    Object m = Attr(TorchPath("Tensor").get(), std::string(parts[1]).c_str());
    return same(m, m && Py_TYPE(m.get()) == &PyMethodDescr_Type &&
                       Attr(m.get(), "__objclass__").get() == TorchPath("_C.TensorBase").get());
  }
  if (parts.size() < 2 || parts[0] != "torch") return Object();
  for (const char* excluded : kNotOperators) {
    if (std::find(parts.begin(), parts.end(), excluded) != parts.end()) return Object();
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    // Module names start with "_"; an operator's own name may (torch._shape_as_tensor).
    if (!Identifier(parts[i])) return Object();
  }
  if (parts.size() == 2) {
    Object f = Attr(TorchPath("_C._VariableFunctions").get(), std::string(parts[1]).c_str());
    return same(f, f && PyCFunction_Check(f.get()));
  }
  if (parts.size() == 4 && parts[1] == "_C") {
    for (const char* module : kOperatorModules) {
      if (absl::StrCat("_C.", parts[2]) != module) continue;
      Object f = Attr(TorchPath(module).get(), std::string(parts[3]).c_str());
      return same(f, f && PyCFunction_Check(f.get()));
    }
    return Object();
  }
  if ((parts.size() == 4 || parts.size() == 5) && parts[1] == "ops" && parts[2] == "aten") {
    Object packet = Attr(TorchPath("ops.aten").get(), std::string(parts[3]).c_str());
    if (!packet || !IsInstanceOfPath(packet.get(), "_ops.OpOverloadPacket")) return Object();
    if (parts.size() == 4) return packet;
    Object overload = Attr(packet.get(), std::string(parts[4]).c_str());
    return same(overload, overload && IsInstanceOfPath(overload.get(), "_ops.OpOverload"));
  }
  return Object();
}

std::optional<std::string> TorchOperatorName(PyObject* fn) {
  auto name_of = [](PyObject* o, const char* attr) -> std::string {
    Object n = Attr(o, attr);
    return n && PyUnicode_Check(n.get()) ? python::AsString(n).value_or("") : "";
  };
  std::string candidate;
  if (PyCFunction_Check(fn)) {
    const std::string name = name_of(fn, "__name__");
    if (Attr(TorchPath("_C._VariableFunctions").get(), name.c_str()).get() == fn) {
      candidate = absl::StrCat("torch.", name);
    } else {
      for (const char* module : kOperatorModules) {
        if (Attr(TorchPath(module).get(), name.c_str()).get() == fn) candidate = absl::StrCat("torch.", module, ".", name);
      }
    }
  } else if (Py_TYPE(fn) == &PyMethodDescr_Type) {
    candidate = absl::StrCat("Tensor.", name_of(fn, "__name__"));
  } else if (IsInstanceOfPath(fn, "_ops.OpOverloadPacket")) {
    const std::string q = name_of(fn, "_qualified_op_name");
    if (absl::StartsWith(q, "aten::")) candidate = absl::StrCat("torch.ops.aten.", q.substr(6));
  } else if (IsInstanceOfPath(fn, "_ops.OpOverload")) {
    Object packet = Attr(fn, "overloadpacket");
    const std::string q = packet ? name_of(packet.get(), "_qualified_op_name") : "";
    if (absl::StartsWith(q, "aten::")) {
      candidate = absl::StrCat("torch.ops.aten.", q.substr(6), ".", name_of(fn, "_overloadname"));
    }
  }
  python::ClearError();
  // The name must lead back to this very object by the same rule.
  if (candidate.empty() || TorchOperator(candidate).get() != fn) return std::nullopt;
  return candidate;
}

absl::StatusOr<Object> RealExample(const ops::Value& value) {
  Inputs inputs;
  inputs.fake = true;  // tensors of their own devices; outside a fake mode, real
  return ToPython(value, inputs);
}

absl::StatusOr<MetaCall> InferOnMeta(const Object& fn, const std::vector<ops::Value>& args,
                                     const std::vector<ops::Kwarg>& kwargs, const MetaOptions& options) {
  Inputs inputs;
  inputs.offset_storage = options.offset_storage;
  inputs.fake = static_cast<bool>(options.fake_mode);
  // Under fake mode the arguments are made in it too (fake tensors of the
  // inputs' devices); it is left before the results are read back.
  std::optional<Entered> fake;
  if (inputs.fake) {
    fake.emplace(options.fake_mode);
    if (!fake->status().ok()) return fake->status();
  }
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
    // Without tensor arguments a factory would allocate (and draw random
    // numbers) for real on the default device: torch.device("meta") as a
    // context makes it a meta tensor.
    std::optional<AutocastScope> autocast;
    if (!options.autocast.empty()) {
      autocast.emplace(options.autocast);
      if (!autocast->status().ok()) return autocast->status();
    }
    Object meta_device;
    if (inputs.tensors.empty() && !inputs.fake) {
      absl::StatusOr<Object> d = python::Call(Torch("device"), {python::FromString("meta")});
      if (!d.ok()) return d.status();
      if (!python::CallMethod(*d, "__enter__").ok()) return python::FetchError("entering torch.device('meta')");
      meta_device = *d;
    }
    result = CallWithKeywords(fn, py_args, py_kwargs);
    if (meta_device) {  // the call's error, if any, is already in `result`
      Object none = python::None();
      if (!python::CallMethod(meta_device, "__exit__", {none, none, none}).ok()) python::ClearError();
    }
  }
  fake.reset();
  if (!result.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("on meta tensors it raises ", result.status().message()));
  }
  MetaCall call;
  for (const Inputs::Tensor& t : inputs.tensors) {
    Object version = Attr(t.meta.get(), "_version");
    if (version && t.version && PyObject_RichCompareBool(version.get(), t.version.get(), Py_NE) == 1) {
      call.mutates_input = true;
    }
    // Every input, moved version or not: requires_grad_() and detach_()
    // change metadata without a version bump.
    absl::StatusOr<ops::TensorMeta> after = TensorMetaOf(t.meta.get(), inputs);
    if (!after.ok() || after->sizes != t.before.sizes || after->dtype != t.before.dtype ||
        after->requires_grad != t.before.requires_grad ||
        (t.before.has_strides() && after->strides != t.before.strides)) {
      call.mutates_input = call.changes_input_metadata = true;
    }
    python::ClearError();
  }
  absl::StatusOr<ops::Value> value = FromPython(*result, inputs);
  if (!value.ok()) return value.status();
  call.result = *std::move(value);
  if (PyTuple_Check(result->get()) && !PyTuple_CheckExact(result->get())) {
    // A structseq (torch.return_types.*) names its fields in __match_args__.
    absl::StatusOr<std::vector<Object>> names =
        python::AsVector(Attr(reinterpret_cast<PyObject*>(Py_TYPE(result->get())), "__match_args__"));
    if (names.ok()) {
      for (const Object& n : *names) call.fields.push_back(python::AsString(n).value_or(""));
    }
    python::ClearError();
  }
  return call;
}

// No result, and the written tensors keep their metadata, as the schema's
// alias annotation promises.
bool WritesAndReturnsNothing(PyObject* op) {
  Object overload = Object::Borrow(op);
  Object names = Attr(op, "_overload_names");
  python::ClearError();
  if (names) {  // a packet: its one overload
    if (!PyList_Check(names.get()) || PyList_GET_SIZE(names.get()) != 1) return false;
    overload = Attr(op, python::AsString(Object::Borrow(PyList_GET_ITEM(names.get(), 0))).value_or("").c_str());
    if (!overload) overload = Attr(op, "default");
  }
  Object schema = overload ? Attr(overload.get(), "_schema") : Object();
  Object returns = schema ? Attr(schema.get(), "returns") : Object();
  Object arguments = schema ? Attr(schema.get(), "arguments") : Object();
  python::ClearError();
  if (!returns || !arguments || PyObject_Length(returns.get()) != 0) {
    python::ClearError();
    return false;
  }
  Object fast = Object::Steal(PySequence_Fast(arguments.get(), ""));
  if (!fast) {
    python::ClearError();
    return false;
  }
  bool writes = false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.get()); ++i) {
    Object alias = Attr(PySequence_Fast_GET_ITEM(fast.get(), i), "alias_info");
    Object is_write = alias && alias.get() != Py_None ? Attr(alias.get(), "is_write") : Object();
    writes |= is_write && is_write.get() == Py_True;
  }
  python::ClearError();
  return writes;
}

}  // namespace dynamo::trace
