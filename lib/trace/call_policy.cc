// Calls whose treatment the user chose (python/dynamo/decorators.py):
// dynamo.allow_in_graph(fn) makes a call one graph node, its output
// metadata from fn run on meta tensors (meta_fallback.h);
// disallow_in_graph(fn) ends the graph at the call;
// assume_constant_result(fn) runs fn once, now, and its result is a
// constant; dynamo.is_compiling() is true here. Each answer depends on
// which object was called, so the callable's identity is guarded.
//
// The table is the Python module's dict `_policy` (id -> (kind, fn,
// target)), read only when dynamo.decorators was imported: nothing to
// register from C++, and one dict lookup per call.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/ops/proto_conversion.h"
#include "lib/python/error.h"
#include "lib/python/lazy.h"
#include "lib/trace/meta_fallback.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;

constexpr absl::string_view kAllowedTargetPrefix = "allow_in_graph.";  // decorators.ALLOWED_TARGET_PREFIX

struct PolicyEntry {
  std::string kind;  // "allow", "disallow", "constant", "is_compiling"
  std::string target;  // the graph target of an allowed function
};

std::optional<PolicyEntry> FindPolicy(PyObject* fn) {
  PyObject* module = PyDict_GetItemString(PyImport_GetModuleDict(), "dynamo.decorators");  // borrowed
  if (module == nullptr) return std::nullopt;
  Object policy = Object::Steal(PyObject_GetAttrString(module, "_policy"));
  if (!policy || !PyDict_Check(policy.get())) {
    python::ClearError();
    return std::nullopt;
  }
  Object key = Object::Steal(PyLong_FromVoidPtr(fn));
  PyObject* entry = PyDict_GetItemWithError(policy.get(), key.get());  // borrowed
  if (entry == nullptr) {
    python::ClearError();
    return std::nullopt;
  }
  // The table holds fn, so its id is not reused while the entry lives; the
  // object is compared anyway (a table edited by hand).
  if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3 || PyTuple_GET_ITEM(entry, 1) != fn) {
    return std::nullopt;
  }
  PolicyEntry out;
  out.kind = python::AsString(Object::Borrow(PyTuple_GET_ITEM(entry, 0))).value_or("");
  PyObject* target = PyTuple_GET_ITEM(entry, 2);
  if (target != Py_None) out.target = python::AsString(Object::Borrow(target)).value_or("");
  return out;
}

// "torch.sub", "mymodule.helper": for messages, without memory addresses.
std::string CallableName(PyObject* fn) {
  // A torch.library operator's module is a generated one: str() is its name.
  if (absl::StartsWith(Py_TYPE(fn)->tp_name, "OpOverload") || absl::string_view(Py_TYPE(fn)->tp_name) == "CustomOpDef") {
    Object text = Object::Steal(PyObject_Str(fn));
    if (text && PyUnicode_Check(text.get())) return absl::StrCat("torch.ops.", python::AsString(text).value_or("?"));
    python::ClearError();
  }
  Object module = Object::Steal(PyObject_GetAttrString(fn, "__module__"));
  if (!module) python::ClearError();
  Object name = Object::Steal(PyObject_GetAttrString(fn, "__qualname__"));
  if (!name) {
    python::ClearError();
    name = Object::Steal(PyObject_GetAttrString(fn, "__name__"));
  }
  if (!name) {
    python::ClearError();
    return python::TypeName(Object::Borrow(fn));
  }
  std::string m = module && PyUnicode_Check(module.get()) ? *python::AsString(module) : "";
  std::string n = PyUnicode_Check(name.get()) ? *python::AsString(name) : python::Repr(name);
  if (m == "torch._C._VariableFunctions" || absl::StartsWith(n, "_VariableFunctionsClass.")) {
    return absl::StrCat("torch.", n.substr(n.rfind('.') + 1));
  }
  return m.empty() ? n : absl::StrCat(m, ".", n);
}

// What a graph node can hand back: a tensor, None, or a flat tuple/list of
// tensors (its items become getitem nodes).
bool GraphResult(const ops::Value& v) {
  if (v.is_tensor() || v.is_none()) return true;
  if (!v.is_list() || v.items().empty()) return false;
  for (const ops::Value& item : v.items()) {
    if (!item.is_tensor()) return false;
  }
  return true;
}

bool HasTensorValue(PyObject* o, int depth = 0) {
  Object tensor_type = Object::Steal(PyImport_ImportModule("torch"));
  Object tensor = tensor_type ? Object::Steal(PyObject_GetAttrString(tensor_type.get(), "Tensor")) : Object();
  if (!tensor) {
    python::ClearError();
    return false;
  }
  if (PyObject_IsInstance(o, tensor.get()) == 1) return true;
  python::ClearError();
  if ((PyTuple_Check(o) || PyList_Check(o)) && depth < 32) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
      if (HasTensorValue(PySequence_Fast_GET_ITEM(o, i), depth + 1)) return true;
    }
  }
  if (PyDict_Check(o) && depth < 32) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &key, &value)) {
      if (HasTensorValue(value, depth + 1)) return true;
    }
  }
  return false;
}

}  // namespace

bool IsAllowedFunctionTarget(absl::string_view target) { return absl::StartsWith(target, kAllowedTargetPrefix); }

std::optional<absl::StatusOr<VarPtr>> Translator::CallCustomOperator(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                                     const Kwargs& kwargs) {
  // Only a torch.ops object or a torch.library.custom_op can be one; the
  // check itself is Python code.
  if (!fn->object) return std::nullopt;
  const absl::string_view type = Py_TYPE(fn->object.get())->tp_name;
  if (!absl::StartsWith(type, "OpOverload") && type != "CustomOpDef") return std::nullopt;
  Object module = Object::Steal(PyImport_ImportModule("dynamo.decorators"));
  if (!module) return absl::StatusOr<VarPtr>(python::FetchError("importing dynamo.decorators"));
  Object registered =
      Object::Steal(PyObject_CallMethod(module.get(), "_allow_custom_operator", "O", fn->object.get()));
  if (!registered) return absl::StatusOr<VarPtr>(python::FetchError("registering a custom operator"));
  if (registered.get() != Py_True) return std::nullopt;
  std::optional<PolicyEntry> policy = FindPolicy(fn->object.get());
  if (!policy || policy->kind != "allow") return std::nullopt;
  guards_.IdMatch(fn->source, fn->object);
  return CallAllowed(fn, CallableName(fn->object.get()), policy->target, args, kwargs, "a torch.library operator");
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallByPolicy(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                               const Kwargs& kwargs) {
  if (!fn->object) return std::nullopt;
  std::optional<PolicyEntry> policy = FindPolicy(fn->object.get());
  if (!policy) return std::nullopt;
  guards_.IdMatch(fn->source, fn->object);
  std::string name = CallableName(fn->object.get());
  if (policy->kind == "is_compiling" && args.empty() && kwargs.empty()) {
    return Var::Constant(python::FromBool(true));
  }
  if (policy->kind == "disallow") {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat(name, " is marked dynamo.disallow_in_graph"),
                 "it runs in Python by request; dynamo.allow_in_graph undoes it");
  }
  if (fn->self) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                 absl::StrCat(name, " (dynamo.", policy->kind == "allow" ? "allow_in_graph" : "assume_constant_result",
                              ") called as a bound method"),
                 "mark a plain function; call it with the object as an argument");
  }
  if (policy->kind == "constant") return CallConstantResult(fn, name, args, kwargs);
  if (policy->kind == "allow") {
    // A torch.library operator is registered on its first call
    // (CallCustomOperator) and found here after.
    const absl::string_view type = Py_TYPE(fn->object.get())->tp_name;
    const bool op = absl::StartsWith(type, "OpOverload") || type == "CustomOpDef";
    return CallAllowed(fn, name, policy->target, args, kwargs,
                       op ? "a torch.library operator" : "dynamo.allow_in_graph");
  }
  return std::nullopt;
}

absl::StatusOr<VarPtr> Translator::CallConstantResult(const VarPtr& fn, const std::string& name,
                                                      const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  std::vector<Object> py_args;
  Object py_kwargs = Object::Steal(PyDict_New());
  for (size_t i = 0; i < args.size() + kwargs.size(); ++i) {
    const VarPtr& a = i < args.size() ? args[i] : kwargs[i - args.size()].second;
    absl::StatusOr<Object> o = ToPython(a);
    if (!o.ok()) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                   absl::StrCat(name, " (dynamo.assume_constant_result) given ", Describe(*a)),
                   "a constant result is computed at capture time, from constant arguments only");
    }
    if (i < args.size()) {
      py_args.push_back(*std::move(o));
    } else {
      PyDict_SetItemString(py_kwargs.get(), kwargs[i - args.size()].first.c_str(), o->get());
    }
  }
  Object tuple = python::MakeTuple(py_args);
  Object result = Object::Steal(PyObject_Call(fn->object.get(), tuple.get(), py_kwargs.get()));
  if (!result) {
    absl::Status error = python::FetchError("");
    return Break(ir::GraphBreak::OTHER, absl::StrCat(name, " raises ", error.message()),
                 "the function would raise on these inputs");
  }
  if (HasTensorValue(result.get())) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                 absl::StrCat(name, " (dynamo.assume_constant_result) returned a tensor"),
                 "constant results are Python values; return the tensor from a module attribute instead");
  }
  // No source: the result itself is not guarded (torch does not either).
  return Wrap(result, nullptr);
}

absl::StatusOr<VarPtr> Translator::CallAllowed(const VarPtr& fn, const std::string& name, const std::string& target,
                                               const std::vector<VarPtr>& args, const Kwargs& kwargs,
                                               const std::string& why) {
  const std::string hint =
      why == "dynamo.allow_in_graph"
          ? "an allowed function must run on meta tensors (no .item(), no reading values, no data-dependent "
            "sizes) and return tensors or None; without allow_in_graph it is traced into"
      : why == "a torch.library operator"
          ? "an operator is one graph node, described by its fake kernel: register one with "
            "torch.library.register_fake (or a Meta kernel)"
          : "an autograd.Function is one graph node: its forward must run on meta tensors (no .item(), no "
            "reading values, no data-dependent sizes) and take tensors and Python constants";
  std::vector<ops::Value> values;
  std::vector<ops::Kwarg> kw;
  for (size_t i = 0; i < args.size() + kwargs.size(); ++i) {
    const VarPtr& a = i < args.size() ? args[i] : kwargs[i - args.size()].second;
    absl::StatusOr<ops::Value> v = ToValue(a);
    if (!v.ok()) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                   absl::StrCat(name, " (", why, ") given ", Describe(*a)),
                   "arguments of a function in the graph are tensors and Python constants");
    }
    if (i < args.size()) {
      values.push_back(*std::move(v));
    } else {
      kw.push_back({kwargs[i - args.size()].first, *std::move(v)});
    }
  }
  absl::StatusOr<MetaCall> call = InferOnMeta(fn->object, values, kw, CallOptions(values, kw));
  if (!call.ok() && why == "a torch.library operator" && WritesAndReturnsNothing(fn->object.get())) {
    MetaCall written;  // no fake kernel needed: the schema says all
    written.mutates_input = true;
    call = std::move(written);
  }
  if (!call.ok()) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                 absl::StrCat(name, " (", why, ") cannot be a graph node: ", call.status().message()),
                 hint);
  }
  if (call->changes_input_metadata || (call->mutates_input && !allow_breaks_)) {
    return Break(ir::GraphBreak::SIDE_EFFECT,
                 absl::StrCat(name, " (", why, ") changes a tensor argument in place"), hint);
  }
  if (!GraphResult(call->result)) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                 absl::StrCat(name, " (", why, ") returns ", ops::ToString(call->result),
                              ", which is no graph value"),
                 hint);
  }
  absl::StatusOr<std::string> added = AddCallNode(ir::Node::CALL_FUNCTION, target, args, kwargs, call->result);
  if (!added.ok()) return added.status();
  const std::string& node = *added;
  return NewVarFromResult(node, call->result);
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallAutogradFunction(const VarPtr& fn,
                                                                      const std::vector<VarPtr>& args,
                                                                      const Kwargs& kwargs) {
  // MyFn.apply is torch's Function.apply bound to the class: a C
  // classmethod (torch 2.x), or a Python one (read as its function with the
  // class tracker as self).
  if (!fn->object) return std::nullopt;
  PyObject* function_class = StdlibObject("torch.autograd.function", "Function");
  static PyObject* apply_slot = nullptr;  // leaked: lives as long as torch
  PyObject* apply = python::LazyObject(apply_slot, [function_class]() -> PyObject* {
    Object bound = function_class ? Object::Steal(PyObject_GetAttrString(function_class, "apply")) : Object();
    python::ClearError();
    PyObject* f = !bound ? nullptr : PyMethod_Check(bound.get()) ? PyMethod_Function(bound.get()) : bound.get();
    Py_XINCREF(f);
    return f;
  });
  if (apply == nullptr) return std::nullopt;
  PyObject* cls = nullptr;
  PyObject* o = fn->object.get();
  if (fn->kind == VarKind::kFunction && fn->self && fn->self->kind == VarKind::kClass && o == apply) {
    cls = fn->self->object.get();
  } else if (PyCFunction_Check(o) && PyCFunction_Check(apply) &&
             PyCFunction_GET_FUNCTION(o) == PyCFunction_GET_FUNCTION(apply) && PyCFunction_GET_SELF(o) != nullptr &&
             PyType_Check(PyCFunction_GET_SELF(o))) {
    cls = PyCFunction_GET_SELF(o);
    // Which class it is bound to is what the node calls: guarded.
    if (fn->source && fn->source->kind() == Source::Kind::kAttr) guards_.IdMatch(fn->source->base(), Object::Borrow(cls));
  }
  if (cls == nullptr || PyObject_IsSubclass(cls, function_class) != 1) {
    python::ClearError();
    return std::nullopt;
  }
  std::string name = absl::StrCat(CallableName(cls), ".apply");
  // The graph target names the class's apply (dynamo.decorators keeps it
  // for the GraphModule, as for allow_in_graph).
  Object decorators = Object::Steal(PyImport_ImportModule("dynamo.decorators"));
  Object target = decorators ? Object::Steal(PyObject_CallMethod(decorators.get(), "_autograd_function_target", "O", cls))
                             : Object();
  absl::StatusOr<std::string> t = target ? python::AsString(target) : absl::StatusOr<std::string>(python::FetchError(""));
  if (!t.ok()) {
    python::ClearError();
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::UNSUPPORTED_CALL,
                                        absl::StrCat(name, ": the dynamo package is not importable here"),
                                        "autograd.Function calls become graph nodes through dynamo.decorators"));
  }
  Object bound = Object::Steal(PyObject_GetAttrString(cls, "apply"));
  if (!bound) return absl::StatusOr<VarPtr>(python::FetchError("reading apply"));
  return CallAllowed(Var::OfKind(VarKind::kOpaque, bound), name, *t, args, kwargs, "autograd.Function");
}

}  // namespace dynamo::trace
