// torch.autocast in the trace. Autocast is interpreter state (per device
// type: enabled, the low-precision dtype, whether casts are cached) that
// changes which dtypes ops compute in, so the trace keeps its own copy:
//
// - at entry, the interpreter's state for "cpu" and "cuda" (guarded: a
//   capture made outside autocast is never reused inside it, or back);
// - `with torch.autocast(...)` (and torch.amp / torch.cpu.amp /
//   torch.cuda.amp's spellings) changes it, and the graph gets the same
//   state changes as calls torch.autocast's own __enter__ / __exit__ make
//   (set_autocast_enabled, set_autocast_dtype, the nesting count, the cache
//   switch), so eager, aot_autograd and Inductor run the block under
//   autocast as eager does;
// - an op whose tensors are on a device with autocast enabled is inferred
//   by torch itself: the op on fake tensors of the inputs' devices under
//   that state, so autocast's own kernels say which inputs are cast and the
//   results' dtypes (the registry knows no autocast lists, and meta tensors
//   never reach autocast's kernels);
// - reads of the state (torch.is_autocast_enabled(), get_autocast_dtype())
//   answer the trace's state;
// - a break inside a block: the graph leaves the open blocks at its end
//   (CloseAutocastBlocks), the rewritten code enters them again for real
//   around the instruction Python runs (lib/rewrite), and the resume
//   function gets the block's __exit__ (AutocastExitInput), as for
//   `with torch.no_grad()`.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "lib/ops/infer_helpers.h"
#include "lib/ops/proto_conversion.h"
#include "lib/python/error.h"
#include "lib/trace/meta_fallback.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

using python::Object;

namespace {

// The device types whose autocast state the trace follows (torch's own
// autocast-enabled backends beyond these are not modelled: a block on one
// is a graph break).
constexpr const char* kAutocastDevices[] = {"cpu", "cuda"};

bool IsAutocastClass(PyObject* cls) {
  Object base = TorchAttr("amp.autocast_mode.autocast");
  return base && PyType_Check(cls) &&
         PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), reinterpret_cast<PyTypeObject*>(base.get()));
}

// The state-changing calls of torch.autocast's __enter__ / __exit__, as
// graph nodes (no value: each returns None).
ir::Argument Str(const std::string& s) {
  ir::Argument a;
  a.set_string_value(s);
  return a;
}
ir::Argument Bool(bool b) {
  ir::Argument a;
  a.set_bool_value(b);
  return a;
}
ir::Argument DType(ops::DType d) {
  ir::Argument a;
  a.set_dtype(ops::ToProto(d));
  return a;
}

void CollectDevices(const ops::Value& v, std::vector<std::string>& out) {
  if (v.is_tensor()) {
    out.push_back(v.as_tensor().device.type);
  } else if (v.is_list()) {
    for (const ops::Value& item : v.items()) CollectDevices(item, out);
  }
}

// The registry's result with each tensor's dtype the one autocast gave;
// false when the two do not describe the same tensors (then torch's
// answer is taken whole).
bool TakeDTypes(ops::Value& registry, const ops::Value& cast) {
  if (registry.is_tensor() && cast.is_tensor()) {
    if (registry.as_tensor().sizes != cast.as_tensor().sizes) return false;
    registry.as_tensor().dtype = cast.as_tensor().dtype;
    return true;
  }
  if (registry.is_list() && cast.is_list()) {
    if (registry.items().size() != cast.items().size()) return false;
    ops::ValueList list = registry.as_list();
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (!TakeDTypes(list.items[i], cast.items()[i])) return false;
    }
    registry = ops::Value(std::move(list));
    return true;
  }
  return registry == cast;
}

// A call's arguments as a cache key: every tensor's full metadata (the
// result's requires_grad, device and strides follow from them too).
void AppendKey(const ops::Value& v, std::string& key) {
  if (v.is_tensor()) {
    const ops::TensorMeta& t = v.as_tensor();
    absl::StrAppend(&key, ops::ToString(t), "@", ops::DeviceName(t.device), "/", absl::StrJoin(t.strides, ","),
                    t.requires_grad ? "g" : "", ";");
  } else if (v.is_list()) {
    absl::StrAppend(&key, v.as_list().is_tuple ? "(" : "[");
    for (const ops::Value& item : v.items()) AppendKey(item, key);
    absl::StrAppend(&key, v.as_list().is_tuple ? ")" : "]");
  } else {
    absl::StrAppend(&key, ops::ToString(v), ";");
  }
}

}  // namespace

bool TakeAutocastDTypes(ops::Value& registry, const ops::Value& cast) { return TakeDTypes(registry, cast); }

absl::Status Translator::InitAutocast() {
  autocast_.clear();
  autocast_stack_.clear();
  Object enabled_of = TorchAttr("is_autocast_enabled"), dtype_of = TorchAttr("get_autocast_dtype");
  Object cache = TorchAttr("is_autocast_cache_enabled");
  if (!enabled_of || !dtype_of || !cache) return absl::UnimplementedError("this torch has no per-device autocast state");
  for (const char* device : kAutocastDevices) {
    Object name = python::FromString(device);
    absl::StatusOr<Object> enabled = python::Call(enabled_of, {name});
    absl::StatusOr<Object> dtype = python::Call(dtype_of, {name});
    if (!enabled.ok()) return enabled.status();
    if (!dtype.ok()) return dtype.status();
    std::optional<ops::DType> d = DTypeOf(dtype->get());
    if (!d) return absl::UnimplementedError(absl::StrCat("autocast's dtype for ", device, " is one libdynamo does not model"));
    AutocastMode mode{enabled->get() == Py_True, *d, true};
    const bool cuda = std::string(device) == "cuda";
    guards_.GlobalState(cuda ? "is_autocast_enabled" : "is_autocast_cpu_enabled", mode.enabled);
    if (mode.enabled) guards_.GlobalDType(cuda ? "autocast_gpu_dtype" : "autocast_cpu_dtype", mode.dtype);
    autocast_.emplace_back(device, mode);
  }
  absl::StatusOr<Object> cached = python::Call(cache);
  if (!cached.ok()) return cached.status();
  autocast_cache_enabled_ = cached->get() == Py_True;
  return absl::OkStatus();
}

Translator::AutocastMode* Translator::AutocastOf(absl::string_view device_type) {
  for (auto& [device, mode] : autocast_) {
    if (device == device_type) return &mode;
  }
  return nullptr;
}

std::optional<absl::StatusOr<VarPtr>> Translator::AutocastQuery(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                                const Kwargs& kwargs) {
  // The C function's own name first (a field, no lookup): this runs for
  // every C function the trace calls.
  if (!PyCFunction_Check(fn->object.get())) return std::nullopt;
  const absl::string_view c_name = reinterpret_cast<PyCFunctionObject*>(fn->object.get())->m_ml->ml_name;
  if (!absl::StrContains(c_name, "autocast")) return std::nullopt;
  auto is = [&](const char* name) {
    Object f = TorchAttr(name);
    return f && f.get() == fn->object.get();
  };
  auto device_arg = [&]() -> std::optional<std::string> {
    if (args.size() != 1 || !kwargs.empty() || !args[0]->is_constant() || !PyUnicode_Check(args[0]->object.get())) {
      return std::nullopt;
    }
    return python::AsString(args[0]->object).value_or("");
  };
  // _is_autocast_available(device_type): a fact of this build, not state.
  if (is("_C._is_autocast_available") && device_arg()) return CallReal(fn, args, kwargs);
  std::optional<std::string> device;
  bool dtype = false;
  if (is("is_autocast_enabled")) device = args.empty() && kwargs.empty() ? std::optional<std::string>("cuda") : device_arg();
  if (is("is_autocast_cpu_enabled") && args.empty() && kwargs.empty()) device = "cpu";
  if (is("get_autocast_dtype")) device = device_arg(), dtype = true;
  if (is("get_autocast_gpu_dtype") && args.empty() && kwargs.empty()) device = "cuda", dtype = true;
  if (is("get_autocast_cpu_dtype") && args.empty() && kwargs.empty()) device = "cpu", dtype = true;
  if (!device) return std::nullopt;
  AutocastMode* mode = AutocastOf(*device);
  if (mode == nullptr) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::UNSUPPORTED_CALL,
                                        absl::StrCat("autocast state of device type '", *device, "'"),
                                        "the trace follows autocast on cpu and cuda only"));
  }
  if (!dtype) return absl::StatusOr<VarPtr>(Var::Constant(python::FromBool(mode->enabled)));
  // The entry state's dtype is guarded once read (an enabled one always is).
  if (mode->from_entry) guards_.GlobalDType(*device == "cuda" ? "autocast_gpu_dtype" : "autocast_cpu_dtype", mode->dtype);
  return Wrap(TorchAttr(std::string(ops::DTypeName(mode->dtype)).c_str()), nullptr);
}

std::optional<absl::StatusOr<VarPtr>> Translator::ConstructAutocast(const VarPtr& cls, const std::vector<VarPtr>& args,
                                                                    const Kwargs& kwargs) {
  if (!IsAutocastClass(cls->object.get())) return std::nullopt;
  // The constructor checks and stores its arguments (and warns where the
  // device cannot autocast, disabling itself, as eagerly): made for real.
  absl::StatusOr<VarPtr> made = CallReal(cls, args, kwargs);
  if (!made.ok()) return made;
  Object obj = (*made)->object;
  Object device = obj ? Attr(obj.get(), "device") : Object();
  python::ClearError();
  absl::StatusOr<std::string> type = device ? python::AsString(device) : absl::NotFoundError("");
  if (!type.ok() || AutocastOf(*type) == nullptr) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::UNSUPPORTED_CALL,
                                        absl::StrCat("autocast on device type '", type.value_or("?"), "'"),
                                        "the trace follows autocast on cpu and cuda only"));
  }
  return Var::OfKind(VarKind::kAutocast, obj);
}

absl::Status Translator::SetAutocast(const std::string& device_type, const AutocastMode& mode, bool cache_enabled) {
  ir::ValueMeta none;
  none.mutable_constant()->mutable_none();
  graph_.AddCall(ir::Node::CALL_FUNCTION, "torch.set_autocast_enabled", {Str(device_type), Bool(mode.enabled)}, {},
                 none, CurrentLocation());
  graph_.AddCall(ir::Node::CALL_FUNCTION, "torch.set_autocast_dtype", {Str(device_type), DType(mode.dtype)}, {}, none,
                 CurrentLocation());
  graph_.AddCall(ir::Node::CALL_FUNCTION, "torch.set_autocast_cache_enabled", {Bool(cache_enabled)}, {}, none,
                 CurrentLocation());
  *AutocastOf(device_type) = mode;
  autocast_cache_enabled_ = cache_enabled;
  return absl::OkStatus();
}

absl::Status Translator::EnterAutocast(Frame& f, const VarPtr& manager) {
  PyObject* o = manager->object.get();
  Object device = Attr(o, "device"), fast = Attr(o, "fast_dtype"), enabled = Attr(o, "_enabled");
  Object cache = Attr(o, "_cache_enabled");
  python::ClearError();
  absl::StatusOr<std::string> type = device ? python::AsString(device) : absl::NotFoundError("");
  std::optional<ops::DType> dtype = DTypeOf(fast.get());
  AutocastMode* now = type.ok() ? AutocastOf(*type) : nullptr;
  if (now == nullptr || !dtype || !enabled || !PyBool_Check(enabled.get()) || !cache || !PyBool_Check(cache.get())) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("'with' over ", Describe(*manager)),
                 "a torch.autocast whose device, dtype or switches the trace cannot read");
  }
  autocast_stack_.push_back({*type, *now, autocast_cache_enabled_});
  ir::ValueMeta none;
  none.mutable_constant()->mutable_none();
  // What __enter__ sets: the nesting count, then enabled, dtype and the cache switch.
  AutocastMode mode{enabled.get() == Py_True, *dtype, false};
  graph_.AddCall(ir::Node::CALL_FUNCTION, "torch.autocast_increment_nesting", {}, {}, none, CurrentLocation());
  if (absl::Status s = SetAutocast(*type, mode, cache.get() == Py_True); !s.ok()) return s;
  VarPtr exit = Var::Method(manager, "__exit__");
  f.stack.push_back(exit);
  f.stack.push_back(manager);  // __enter__ returns the object itself
  return absl::OkStatus();
}

absl::Status Translator::ExitAutocast() {
  if (autocast_stack_.empty()) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, "__exit__ of a torch.autocast block the trace did not enter",
                 "a torch.autocast object is entered and left by a with statement");
  }
  AutocastRestore r = std::move(autocast_stack_.back());
  autocast_stack_.pop_back();
  ir::ValueMeta none;
  none.mutable_constant()->mutable_none();
  graph_.AddCall(ir::Node::CALL_FUNCTION, "torch.autocast_decrement_nesting", {}, {}, none, CurrentLocation());
  if (absl::Status s = SetAutocast(r.device_type, r.mode, r.cache_enabled); !s.ok()) return s;
  // __exit__ drops the cast cache when it leaves the outermost block: here,
  // when no block the trace knows is open and no device autocasts.
  bool any_enabled = false;
  for (const auto& [device, mode] : autocast_) any_enabled |= mode.enabled;
  if (autocast_stack_.empty() && !any_enabled) {
    graph_.AddCall(ir::Node::CALL_FUNCTION, "torch.clear_autocast_cache", {}, {}, none, CurrentLocation());
  }
  return absl::OkStatus();
}

void Translator::CloseAutocastBlocks() {
  while (!autocast_stack_.empty()) {
    if (!ExitAutocast().ok()) return;  // cannot fail with a block open
  }
}

std::optional<VarPtr> Translator::AutocastExitInput(const Object& obj, const SourcePtr& source) {
  PyObject* o = obj.get();
  Object cls = TorchAttr("amp.autocast_mode.autocast");
  if (!PyMethod_Check(o) || !cls) return std::nullopt;
  PyObject* self = PyMethod_Self(o);  // borrowed
  Object exit = Attr(cls.get(), "__exit__");
  // Exactly torch.amp.autocast: what the rewrite enters blocks again with.
  if (reinterpret_cast<PyObject*>(Py_TYPE(self)) != cls.get() || !exit || PyMethod_Function(o) != exit.get()) {
    python::ClearError();
    return std::nullopt;
  }
  Object device = Attr(self, "device"), prev = Attr(self, "prev"), prev_dtype = Attr(self, "prev_fastdtype");
  Object prev_cache = Attr(self, "prev_cache_enabled");
  python::ClearError();
  absl::StatusOr<std::string> type = device ? python::AsString(device) : absl::NotFoundError("");
  std::optional<ops::DType> restore_dtype = DTypeOf(prev_dtype.get());
  if (!type.ok() || AutocastOf(*type) == nullptr || !prev || !PyBool_Check(prev.get()) || !restore_dtype ||
      !prev_cache || !PyBool_Check(prev_cache.get())) {
    return std::nullopt;
  }
  SourcePtr self_source = Source::Attr(source, "__self__");
  guards_.TypeMatch(self_source, Object::Borrow(self));
  guards_.IdMatch(Source::Attr(source, "__func__"), exit);
  // What __exit__ restores, and what entering the block again would set.
  for (const char* attr : {"device", "prev", "prev_fastdtype", "prev_cache_enabled", "fast_dtype", "_enabled",
                           "_cache_enabled"}) {
    Object value = Attr(self, attr);
    python::ClearError();
    if (value) guards_.EqualsMatch(Source::Attr(self_source, attr), value);
  }
  autocast_stack_.push_back({*type, AutocastMode{prev.get() == Py_True, *restore_dtype, false}, prev_cache.get() == Py_True});
  VarPtr ctx = Var::OfKind(VarKind::kAutocast, Object::Borrow(self), self_source);
  return Var::Method(ctx, "__exit__");
}

Object Translator::OpCallable(const std::string& target) {
  if (Object op = TorchOperator(target)) return op;
  const size_t dot = target.find('.');
  if (dot == std::string::npos) return Object();
  const std::string root = target.substr(0, dot), rest = target.substr(dot + 1);
  // Registry names (trusted: the registry's own, never a file's).
  if (root == "Tensor") return Attr(TorchAttr("Tensor").get(), rest.c_str());
  if (root == "torch") return TorchAttr(rest.c_str());
  if (root == "operator" || root == "math") {
    absl::StatusOr<Object> m = python::Import(root.c_str());
    if (!m.ok()) return Object();
    Object f = Attr(m->get(), rest.c_str());
    python::ClearError();
    return f;
  }
  return Object();
}

bool Translator::AutocastApplies(const std::vector<ops::Value>& values, const std::vector<ops::Kwarg>& kw) {
  // Every op call asks: nothing to collect where no device autocasts.
  bool any = false;
  for (const auto& [device, mode] : autocast_) any |= mode.enabled;
  if (!any) return false;
  std::vector<std::string> devices;
  for (const ops::Value& v : values) CollectDevices(v, devices);
  for (const ops::Kwarg& k : kw) CollectDevices(k.value, devices);
  for (const std::string& d : devices) {
    const AutocastMode* mode = AutocastOf(d);
    if (mode != nullptr && mode->enabled) return true;
  }
  return false;
}

MetaOptions Translator::CallOptions(const std::vector<ops::Value>& values, const std::vector<ops::Kwarg>& kw) {
  if (AutocastApplies(values, kw)) return AutocastOptions();
  MetaOptions options;
  options.grad_enabled = grad_enabled_;
  return options;
}

MetaOptions Translator::AutocastOptions() {
  MetaOptions options;
  options.grad_enabled = grad_enabled_;
  if (!fake_mode_) {
    Object cls = TorchAttr("_subclasses.fake_tensor.FakeTensorMode");
    absl::StatusOr<Object> mode = cls ? python::Call(cls) : absl::StatusOr<Object>(absl::UnknownError(""));
    if (!mode.ok()) {
      python::ClearError();
      return options;  // no fake mode: InferUnderAutocast says so
    }
    fake_mode_ = *mode;
  }
  options.fake_mode = fake_mode_;
  for (const auto& [device, mode] : autocast_) options.autocast.push_back({device, mode.enabled, mode.dtype});
  return options;
}

std::optional<absl::StatusOr<MetaCall>> Translator::InferUnderAutocast(const std::string& target,
                                                                       const std::vector<ops::Value>& values,
                                                                       const std::vector<ops::Kwarg>& kw) {
  if (!AutocastApplies(values, kw)) return std::nullopt;
  MetaOptions options = AutocastOptions();
  Object op = OpCallable(target);
  if (!options.fake_mode) return absl::StatusOr<MetaCall>(absl::UnavailableError("torch's FakeTensorMode is unavailable"));
  if (!op) return absl::StatusOr<MetaCall>(absl::NotFoundError("no callable to ask torch about it"));
  std::string key = absl::StrCat(target, grad_enabled_ ? "|g|" : "|n|");
  for (const AutocastDevice& d : options.autocast) {
    absl::StrAppend(&key, d.device_type, d.enabled ? "+" : "-", ops::DTypeName(d.dtype), "|");
  }
  for (const ops::Value& v : values) AppendKey(v, key);
  for (const ops::Kwarg& k : kw) {
    absl::StrAppend(&key, k.name, "=");
    AppendKey(k.value, key);
  }
  if (auto it = autocast_calls_.find(key); it != autocast_calls_.end()) return absl::StatusOr<MetaCall>(it->second);
  absl::StatusOr<MetaCall> call = InferOnMeta(op, values, kw, options);
  if (call.ok() && autocast_calls_.size() < 4096) autocast_calls_[key] = *call;
  return call;
}

}  // namespace dynamo::trace
