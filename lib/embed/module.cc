#include "lib/embed/module.h"

#include <climits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/disassemble.h"
#include "lib/capture/capture.h"
#include "lib/capture/live.h"
#include "lib/capture/report.h"
#include "lib/embed/callers.h"
#include "lib/embed/graph_forward.h"
#include "lib/embed/live_capture.h"
#include "lib/embed/eval_frame.h"
#include "lib/ops/registry.h"
#include "lib/python/error.h"
#include "lib/python/torch_modes.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::embed {
namespace {

using python::Object;

// The module's exception types. Created once per process and leaked: raised
// exceptions and `except` clauses outlive any one module object.
struct ExceptionTypes {
  Object capture_error;  // dynamo._C.CaptureError(RuntimeError)
  Object graph_break;    // dynamo._C.GraphBreak(CaptureError)
};

const ExceptionTypes& Exceptions() {
  static const ExceptionTypes* types = [] {
    auto* t = new ExceptionTypes;
    t->capture_error = Object::Steal(PyErr_NewExceptionWithDoc(
        "dynamo._C.CaptureError",
        "libdynamo could not capture the function; the message says why, in one line.",
        PyExc_RuntimeError, nullptr));
    if (t->capture_error) {
      t->graph_break = Object::Steal(PyErr_NewExceptionWithDoc(
          "dynamo._C.GraphBreak",
          "The function needs a graph break where none is allowed. Attributes: reason, "
          "filename, lineno, text (the source line) and hint.",
          t->capture_error.get(), nullptr));
    }
    return t;
  }();
  return *types;
}

// Sets `obj.name = value`; an exception object takes any attribute.
void SetAttr(const Object& obj, const char* name, const Object& value) {
  if (value && PyObject_SetAttrString(obj.get(), name, value.get()) != 0) python::ClearError();
}

// Status messages are ours, but may quote bytes from a script: never fail on them.
Object Text(absl::string_view s) {
  return Object::Steal(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

void SetBreakAttributes(const Object& error, const ir::GraphBreak& b) {
  SetAttr(error, "reason", Text(ir::GraphBreak::Reason_Name(b.reason())));
  SetAttr(error, "filename", Text(b.location().file()));
  SetAttr(error, "lineno", python::FromLong(b.location().line()));
  SetAttr(error, "text", Text(b.location().text()));
  SetAttr(error, "hint", Text(b.hint()));
}

// The code object of `obj`: a code object itself or a function's (anything
// with a __code__, as dis accepts). Empty, with TypeError set, otherwise.
Object CodeOf(const Object& obj) {
  if (PyCode_Check(obj.get())) return obj;
  Object code = Object::Steal(PyObject_GetAttrString(obj.get(), "__code__"));
  if (code && PyCode_Check(code.get())) return code;
  PyErr_Format(PyExc_TypeError, "disassemble() expects a code object or a function, not %s",
               Py_TYPE(obj.get())->tp_name);
  return Object();
}

// `inputs` as spec strings; false, with TypeError set, for anything but an
// iterable of str (a lone str would otherwise be taken a character at a time).
bool InputSpecs(PyObject* inputs, std::vector<std::string>& specs) {
  if (inputs == nullptr || inputs == Py_None) return true;
  if (PyUnicode_Check(inputs)) {
    PyErr_SetString(PyExc_TypeError, "inputs must be a list of specs such as ['x=f32[2,3]'], not a str");
    return false;
  }
  absl::StatusOr<std::vector<Object>> items = python::AsVector(Object::Borrow(inputs));
  if (!items.ok()) {
    PyErr_Format(PyExc_TypeError, "inputs must be a list of str, not %s", Py_TYPE(inputs)->tp_name);
    return false;
  }
  for (const Object& item : *items) {
    absl::StatusOr<std::string> spec = python::AsString(item);
    if (!spec.ok()) {
      PyErr_Format(PyExc_TypeError, "inputs must hold str specs, not %s", Py_TYPE(item.get())->tp_name);
      return false;
    }
    specs.push_back(*std::move(spec));
  }
  return true;
}

// `weights` by name; false, with ValueError set, for an unknown one. External
// weights need a side file, which a bytes result has no room for.
bool WeightsByName(absl::string_view name, capture::Weights& weights) {
  if (name == "none") {
    weights = capture::Weights::kNone;
  } else if (name == "embed") {
    weights = capture::Weights::kEmbed;
  } else {
    PyErr_Format(PyExc_ValueError, "weights must be 'none' or 'embed', not '%s'",
                 std::string(name).c_str());
    return false;
  }
  return true;
}

// The functions of the module, one small adapter each: parse the arguments,
// make one library call, convert its result or raise its Status.
namespace methods {

PyObject* IrVersion(PyObject* /*module*/, PyObject* /*unused*/) {
  return python::FromLong(ir::IR_VERSION_CURRENT).release();
}

PyObject* Disassemble(PyObject* /*module*/, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"code", "nested", nullptr};
  PyObject* arg = nullptr;  // borrowed
  int nested = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:disassemble", const_cast<char**>(keywords),
                                   &arg, &nested)) {
    return nullptr;
  }
  Object code = CodeOf(Object::Borrow(arg));
  if (!code) return nullptr;
  absl::StatusOr<bytecode::DecodedCode> decoded = bytecode::Decode(code, {.nested = nested != 0});
  if (!decoded.ok()) return RaiseStatus(decoded.status());
  return Text(bytecode::Disassemble(*decoded, {.nested = nested != 0})).release();
}

PyObject* Capture(PyObject* /*module*/, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"script", "function", "inputs", "example_inputs", "weights",
                                   "dims", "allow_breaks", nullptr};
  PyObject* script_bytes = nullptr;  // a new reference from PyUnicode_FSConverter
  const char* function = nullptr;
  PyObject* inputs = nullptr;  // borrowed
  const char* example_inputs = "";
  const char* weights = "none";
  PyObject* dims = nullptr;  // borrowed: --dim constraints ("B=1..64")
  int allow_breaks = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&s|O$ssOp:capture", const_cast<char**>(keywords),
                                   PyUnicode_FSConverter, &script_bytes, &function, &inputs,
                                   &example_inputs, &weights, &dims, &allow_breaks)) {
    return nullptr;
  }
  Object script = Object::Steal(script_bytes);
  capture::CaptureOptions options;
  options.script = PyBytes_AS_STRING(script.get());
  options.function = function;
  options.example_inputs = example_inputs;
  options.allow_breaks = allow_breaks != 0;
  if (!InputSpecs(inputs, options.inputs) || !InputSpecs(dims, options.dims) ||
      !WeightsByName(weights, options.weights)) {
    return nullptr;
  }
  absl::StatusOr<capture::Captured> captured = capture::CaptureFunction(options);
  if (!captured.ok()) return RaiseStatus(captured.status(), Exceptions().capture_error.get());
  absl::StatusOr<std::string> bytes = capture::Serialize(captured->capture, "pb");
  if (!bytes.ok()) return RaiseStatus(bytes.status());
  return Object::Steal(PyBytes_FromStringAndSize(bytes->data(), static_cast<Py_ssize_t>(bytes->size())))
      .release();
}

// A serialized capture drawn as Graphviz DOT: the same picture as
// dynamo-inspect --dot, for explain() output and loaded captures.
PyObject* CaptureDot(PyObject* /*module*/, PyObject* arg) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(arg, &data, &size) != 0) return nullptr;
  ir::Capture capture;
  if (size > INT_MAX || !capture.ParseFromArray(data, static_cast<int>(size))) {
    PyErr_SetString(PyExc_ValueError, "capture_dot: not a serialized libdynamo capture");
    return nullptr;
  }
  return Text(capture::FormatDot(capture)).release();
}

// The registry's canonical target names: the loader resolves a capture's call
// targets only against these (README, "Trust model").
PyObject* OpTargets(PyObject* /*module*/, PyObject* /*unused*/) {
  const ops::Registry& registry = ops::DefaultRegistry();
  if (!registry.status().ok()) return RaiseStatus(registry.status());
  std::vector<Object> names;
  for (const std::string& name : registry.Names()) names.push_back(Text(name));
  return python::MakeTuple(names).release();
}

// The `dynamic` argument of capture_call: None, or a dict {"all": bool,
// "none": bool, "dims": {source: [dim, ...]}} (dynamo.runtime builds it).
bool DynamicShapesFrom(PyObject* spec, trace::DynamicShapes& out) {
  if (spec == Py_None) return true;
  if (!PyDict_Check(spec)) {
    PyErr_SetString(PyExc_TypeError, "capture_call: dynamic must be a dict or None");
    return false;
  }
  auto flag = [spec](const char* key) {
    PyObject* v = PyDict_GetItemString(spec, key);  // borrowed
    return v != nullptr && PyObject_IsTrue(v) == 1;
  };
  out.all = flag("all");
  out.none = flag("none");
  PyObject* dims = PyDict_GetItemString(spec, "dims");  // borrowed
  if (dims == nullptr) return true;
  if (!PyDict_Check(dims)) {
    PyErr_SetString(PyExc_TypeError, "capture_call: dynamic['dims'] must be a dict");
    return false;
  }
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dims, &pos, &key, &value)) {
    absl::StatusOr<std::string> source = python::AsString(Object::Borrow(key));
    absl::StatusOr<std::vector<Object>> items = python::AsVector(Object::Borrow(value));
    if (!source.ok() || !items.ok()) {
      PyErr_SetString(PyExc_TypeError, "capture_call: dynamic['dims'] maps sources to lists of ints");
      return false;
    }
    std::vector<int64_t> ds;
    for (const Object& d : *items) {
      long long v = PyLong_AsLongLong(d.get());
      if (v == -1 && PyErr_Occurred()) return false;
      ds.push_back(v);
    }
    out.dims.emplace_back(*source, std::move(ds));
  }
  return true;
}

// capture_call(function, self, args, kwargs, id, dynamic=None, scalars=False) -> dict: one
// live capture (lib/capture/live.h) as Python values for dynamo.runtime.
PyObject* CaptureCall(PyObject* /*module*/, PyObject* args) {
  PyObject *function, *self, *call_args, *call_kwargs;  // borrowed
  PyObject* dynamic_spec = Py_None;                      // borrowed
  int id = 0;
  int scalars = 0;
  if (!PyArg_ParseTuple(args, "OOO!Oi|Op:capture_call", &function, &self, &PyTuple_Type, &call_args,
                        &call_kwargs, &id, &dynamic_spec, &scalars)) {
    return nullptr;
  }
  trace::DynamicShapes dynamic;
  if (!DynamicShapesFrom(dynamic_spec, dynamic)) return nullptr;
  absl::StatusOr<capture::LiveCapture> c = capture::CaptureCall(
      Object::Borrow(function), self == Py_None ? Object() : Object::Borrow(self),
      Object::Borrow(call_args), Object::Borrow(call_kwargs), id, dynamic, scalars != 0);
  if (!c.ok()) return RaiseStatus(c.status(), Exceptions().capture_error.get());
  // A capture that an interrupt touched may rest on a probe it cut short.
  if (python::RaisePendingInterrupt()) return nullptr;
  Object out = Object::Steal(PyDict_New());
  auto set = [&](const char* key, Object value) {
    return value && PyDict_SetItemString(out.get(), key, value.get()) == 0;
  };
  Object attributes = Object::Steal(PyDict_New());
  for (const auto& [target, tensor] : c->attributes) {
    if (PyDict_SetItemString(attributes.get(), target.c_str(), tensor.get()) != 0) return nullptr;
  }
  std::vector<Object> objects;
  for (const auto& [name, object] : c->objects) objects.push_back(python::MakeTuple({Text(name), object}));
  std::vector<Object> resumes;
  for (const rewrite::ResumeFunction& r : c->resumes) {
    resumes.push_back(python::MakeTuple({Text(r.global_name), r.code, python::FromBool(r.capture),
                                         python::FromBool(r.takes_closure), python::FromLong(r.offset)}));
  }
  // The capture stays in C++ memory; Python reads what it needs (live_capture.h).
  if (!set("capture", NewLiveCapture(std::move(c->capture))) ||
      !set("code", c->code ? c->code : python::None()) || !set("graph_name", Text(c->graph_name)) ||
      !set("attributes", attributes) || !set("resumes", python::MakeList(resumes)) ||
      !set("skip_reason", Text(c->skip_reason)) || !set("objects", python::MakeList(objects))) {
    return nullptr;
  }
  Object direct = python::None();
  if (c->direct) {
    std::vector<Object> slots, outputs;
    for (int s : c->direct_slots) slots.push_back(python::FromLong(s));
    for (int o : c->direct_outputs) outputs.push_back(python::FromLong(o));
    direct = python::MakeTuple({python::MakeTuple(slots), python::MakeTuple(outputs),
                                python::FromBool(c->direct_tuple)});
  }
  Object timings = Object::Steal(Py_BuildValue("{s:d,s:d}", "trace", c->trace_seconds, "rewrite", c->rewrite_seconds));
  if (!set("direct", direct) || !set("timings", timings)) {
    return nullptr;
  }
  return out.release();
}

}  // namespace methods

PyObject* TorchFunctionModes(PyObject* /*self*/, PyObject* /*unused*/) {
  absl::StatusOr<std::string> modes = python::TorchFunctionModes();
  if (!modes.ok()) return RaiseStatus(modes.status());
  return PyUnicode_FromStringAndSize(modes->data(), static_cast<Py_ssize_t>(modes->size()));
}

// PyMethodDef stores every signature as a PyCFunction; a cast through
// void(*)() is the one -Wcast-function-type accepts.
template <typename F>
PyCFunction AsCFunction(F* f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

// Each function of the module ends by raising an interrupt set aside while
// it ran (python::ClearError): the interrupt is what the caller sees, even
// where the function would otherwise have succeeded.
template <auto F>
struct Interruptible;
template <typename... A, PyObject* (*F)(A...)>
struct Interruptible<F> {
  static PyObject* Call(A... args) {
    PyObject* result = F(args...);
    if (python::RaisePendingInterrupt()) {
      Py_XDECREF(result);
      return nullptr;
    }
    return result;
  }
};

PyMethodDef kMethods[] = {
    {"ir_version", Interruptible<methods::IrVersion>::Call, METH_NOARGS,
     "ir_version() -> int\n\n"
     "The IR version (proto/dynamo_ir.proto) of the captures this build writes."},
    {"disassemble", AsCFunction(Interruptible<methods::Disassemble>::Call), METH_VARARGS | METH_KEYWORDS,
     "disassemble(code, nested=True) -> str\n\n"
     "The listing dynamo-inspect prints for a code object or function: dis's layout,\n"
     "with EXTENDED_ARG folded, no memory addresses, and KW_NAMES resolved. nested\n"
     "also lists the code objects in co_consts, after their parent."},
    {"capture", AsCFunction(Interruptible<methods::Capture>::Call), METH_VARARGS | METH_KEYWORDS,
     "capture(script, function, inputs=(), *, example_inputs='', weights='none', dims=(), allow_breaks=False)\n"
     "    -> bytes\n\n"
     "Captures `function` of the script at path `script` (imported into this\n"
     "interpreter) for the input specs (['x=f32[8,3]', 'int:2']) or the script's\n"
     "`example_inputs` function, as dynamo-export does, and returns the serialized\n"
     "Capture (dynamo.loader reads it). Sizes named in specs (f32[B,3]) are\n"
     "symbolic, constrained by `dims` (['B=1..64', 'T=%8'], dynamo-export's --dim).\n"
     "weights: 'none' or 'embed'. Raises\n"
     "GraphBreak for a construct that needs a break (unless allow_breaks, as\n"
     "dynamo-export --allow-breaks; dynamo.loader.load_program runs such a\n"
     "capture), CaptureError for any other failure, with a one-line message."},
    {"set_eval_frame", Interruptible<SetEvalFrame>::Call, METH_VARARGS,
     "set_eval_frame(callback, cache_size_limit=-1) -> previous callback (-1 keeps the limit)\n\n"
     "Sets this thread's PEP 523 frame evaluator callback (None: off). See\n"
     "lib/embed/eval_frame.h for the callback's contract."},
    {"run_with_eval_frame", AsCFunction(Interruptible<RunWithEvalFrame>::Call), METH_FASTCALL | METH_KEYWORDS,
     "run_with_eval_frame(callback, cache_size_limit, fn, *args, **kwargs)\n\n"
     "fn(*args, **kwargs) with this thread's frame evaluator callback set for the call\n"
     "(cache_size_limit -1 keeps the current limit)."},
    {"mark_skip", Interruptible<MarkSkip>::Call, METH_O,
     "mark_skip(code)\n\nFrames of this code object always run as CPython runs them."},
    {"mark_capture", Interruptible<MarkCapture>::Call, METH_O,
     "mark_capture(code)\n\nFrames of this code object are captured even where its file is skipped."},
    {"reset_caches", Interruptible<ResetCaches>::Call, METH_NOARGS,
     "reset_caches()\n\nDrops every cached capture of every code object."},
    {"cache_stats", Interruptible<CacheStats>::Call, METH_NOARGS,
     "cache_stats() -> dict\n\nHits, misses and cached entries of the frame evaluator."},
    {"capture_dot", Interruptible<methods::CaptureDot>::Call, METH_O,
     "capture_dot(capture: bytes) -> str\n\nA serialized Capture as Graphviz DOT (dynamo-inspect --dot)."},
    {"op_targets", Interruptible<methods::OpTargets>::Call, METH_NOARGS,
     "op_targets() -> tuple of str\n\n"
     "The op registry's canonical target names ('torch.add', 'Tensor.relu',\n"
     "'operator.getitem', ...), sorted: every target a capture's graph may name."},
    {"torch_function_modes", Interruptible<TorchFunctionModes>::Call, METH_NOARGS,
     "torch_function_modes() -> str\n\n"
     "torch's function-mode stack as guards compare it: '' when empty, else one entry a\n"
     "mode, bottom first, joined by ',': 'device=cuda:0' for torch's default-device\n"
     "mode (torch.set_default_device, `with torch.device(...)`), 'mode=module.Class' for\n"
     "any other."},
    {"capture_call", Interruptible<methods::CaptureCall>::Call, METH_VARARGS,
     "capture_call(function, self, args, kwargs, id, dynamic=None, scalars=False) -> dict\n\n"
     "Traces one call of `function` on its real arguments with graph breaks allowed\n"
     "and rewrites it: {'capture': a LiveCapture (graph, guards, break; in C++ memory),\n"
     "'code': code to run instead (None: run the function as it is), 'graph_name',\n"
     "'attributes': {get_attr target: tensor}, 'resumes': [(global name, code,\n"
     "capture?, takes_closure?, offset)], 'skip_reason'}. `scalars`: Tensor.item(),\n"
     "tolist() and int()/float() of a tensor stay in the graph. Used by dynamo.runtime."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT,
    kModuleName,
    "libdynamo's native core: capture, disassembly and (later) the live frame evaluator.",
    -1,  // the state is process-wide (libdynamo's statics)
    kMethods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

// Binds `module` as the package's `_C`, when there is a `dynamo` package to
// import (without one, importlib.import_module("dynamo._C") still finds it).
absl::Status BindToPackage(const Object& module) {
  absl::StatusOr<Object> util = python::Import("importlib.util");
  absl::StatusOr<Object> find_spec = util.ok() ? python::GetAttr(*util, "find_spec") : util.status();
  absl::StatusOr<Object> spec =
      find_spec.ok() ? python::Call(*find_spec, {python::FromString("dynamo")}) : find_spec.status();
  if (!spec.ok()) return spec.status();
  if (spec->get() == Py_None) return absl::OkStatus();
  absl::StatusOr<Object> package = python::Import("dynamo");
  if (!package.ok()) return package.status();
  if (PyObject_SetAttrString(package->get(), "_C", module.get()) != 0) {
    return python::FetchError("binding dynamo._C to the dynamo package");
  }
  return absl::OkStatus();
}

}  // namespace

PyObject* RaiseStatus(const absl::Status& status, PyObject* type) {
  // An interrupt that cut the work short is what the caller sees, not the
  // failure it caused.
  if (python::RaisePendingInterrupt()) return nullptr;
  if (status.ok()) {
    PyErr_SetString(PyExc_SystemError, "libdynamo reported an OK status as an error (a bug)");
    return nullptr;
  }
  std::optional<ir::GraphBreak> graph_break = capture::GraphBreakOf(status);
  if (graph_break && Exceptions().graph_break) type = Exceptions().graph_break.get();
  Object message = Text(status.message());
  absl::StatusOr<Object> error = message ? python::Call(Object::Borrow(type), {message})
                                         : absl::InternalError("");
  if (!error.ok()) {  // the instance could not be built: raise the bare type
    PyErr_SetString(type, std::string(status.message()).c_str());
    return nullptr;
  }
  if (graph_break) SetBreakAttributes(*error, *graph_break);
  if (std::optional<std::string> tb = python::PythonTraceback(status); tb && !tb->empty()) {
    SetAttr(*error, "python_traceback", Text(*tb));
  }
  PyErr_SetObject(type, error->get());
  return nullptr;
}

absl::StatusOr<Object> CreateModule() {
  const ExceptionTypes& types = Exceptions();
  if (!types.graph_break) {
    if (PyErr_Occurred()) return python::FetchError("creating dynamo._C's exception types");
    return absl::InternalError("dynamo._C's exception types could not be created");
  }
  Object module = Object::Steal(PyModule_Create(&kModule));
  if (!module) return python::FetchError("creating the module dynamo._C");
  if (PyModule_AddObjectRef(module.get(), "CaptureError", types.capture_error.get()) != 0 ||
      PyModule_AddObjectRef(module.get(), "GraphBreak", types.graph_break.get()) != 0) {
    return python::FetchError("adding dynamo._C's exception types");
  }
  if (absl::Status s = AddCallerTypes(module.get()); !s.ok()) return s;
  if (absl::Status s = AddGraphForwardType(module.get()); !s.ok()) return s;
  if (absl::Status s = AddLiveCaptureType(module.get()); !s.ok()) return s;
  return module;
}

absl::Status RegisterModule() {
  if (!Py_IsInitialized()) {
    return absl::FailedPreconditionError(
        "RegisterModule: Python is not running (start it first, e.g. python::Interpreter::Start)");
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  struct Release {
    PyGILState_STATE state;
    ~Release() { PyGILState_Release(state); }
  } release{gil};

  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  Object existing = Object::Borrow(PyDict_GetItemString(modules, kModuleName));
  if (existing) {
    if (PyModule_Check(existing.get()) && PyModule_GetDef(existing.get()) == &kModule) {
      return absl::OkStatus();
    }
    return absl::AlreadyExistsError(absl::StrCat(
        kModuleName, " is already imported (", python::Repr(existing),
        "); a host that links libdynamo must register its own before Python imports the extension"));
  }
  absl::StatusOr<Object> module = CreateModule();
  if (!module.ok()) return module.status();
  if (PyDict_SetItemString(modules, kModuleName, module->get()) != 0) {
    return python::FetchError("adding dynamo._C to sys.modules");
  }
  if (absl::Status s = BindToPackage(*module); !s.ok()) {
    PyDict_DelItemString(modules, kModuleName);  // all or nothing
    return s;
  }
  return absl::OkStatus();
}

}  // namespace dynamo::embed
