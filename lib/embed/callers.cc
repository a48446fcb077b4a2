#include "lib/embed/callers.h"

#include <Python.h>
#include <structmember.h>

#include <cstddef>

#include "lib/embed/eval_frame.h"
#include "lib/guards/versions.h"
#include "lib/python/error.h"
#include "lib/python/object.h"

namespace dynamo::embed {
namespace {

using python::Object;

// Interned names, made once (under the GIL) and kept for the process.
struct Names {
  PyObject* modules;
  PyObject* orig_mod;
  PyObject* callback;
  PyObject* forward;
  PyObject* getattribute;
  PyObject* hooks[4];         // the module's own hook dicts
  PyObject* global_hooks[4];  // torch.nn.modules.module's
};

const Names& N() {
  static const Names names = [] {
    Names n{};
    n.modules = PyUnicode_InternFromString("_modules");
    n.orig_mod = PyUnicode_InternFromString("_orig_mod");
    n.callback = PyUnicode_InternFromString("_dynamo_callback");
    n.forward = PyUnicode_InternFromString("forward");
    n.getattribute = PyUnicode_InternFromString("__getattribute__");
    const char* hooks[4] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"};
    for (int i = 0; i < 4; ++i) {
      n.hooks[i] = PyUnicode_InternFromString(hooks[i]);
      n.global_hooks[i] = PyUnicode_FromFormat("_global%s", hooks[i]);
    }
    return n;
  }();
  return names;
}

// ---------------------------------------------------------------------------
// OptimizedFunction

struct OptimizedFunction {
  PyObject_HEAD
  PyObject* callback;
  PyObject* target;
  PyObject* config;  // dynamo.config: its cache_size_limit is read on every call through a frame
  vectorcallfunc vectorcall;
};

PyObject* FunctionCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* f = reinterpret_cast<OptimizedFunction*>(self);
  return CallWithEvalFrame(f->callback, f->config, f->target, args, PyVectorcall_NARGS(nargsf), kwnames);
}

int FunctionInit(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* f = reinterpret_cast<OptimizedFunction*>(self);
  PyObject *callback, *target, *config;
  static const char* kw[] = {"callback", "target", "config", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:OptimizedFunction", const_cast<char**>(kw), &callback,
                                   &target, &config)) {
    return -1;
  }
  Py_XSETREF(f->callback, Py_NewRef(callback));
  Py_XSETREF(f->target, Py_NewRef(target));
  Py_XSETREF(f->config, Py_NewRef(config));
  f->vectorcall = FunctionCall;
  return 0;
}

int FunctionTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* f = reinterpret_cast<OptimizedFunction*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(f->callback);
  Py_VISIT(f->target);
  Py_VISIT(f->config);
  return 0;
}

int FunctionClear(PyObject* self) {
  auto* f = reinterpret_cast<OptimizedFunction*>(self);
  Py_CLEAR(f->callback);
  Py_CLEAR(f->target);
  Py_CLEAR(f->config);
  return 0;
}

void FunctionDealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  FunctionClear(self);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

// As a class attribute it binds like a function: obj.f(x) is f(obj, x).
PyObject* FunctionGet(PyObject* self, PyObject* obj, PyObject* /*type*/) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyObject* FunctionRepr(PyObject* self) {
  auto* f = reinterpret_cast<OptimizedFunction*>(self);
  return PyUnicode_FromFormat("<dynamo optimized %R>", f->target);
}

PyMemberDef kFunctionMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(OptimizedFunction, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot kFunctionSlots[] = {
    {Py_tp_init, reinterpret_cast<void*>(FunctionInit)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(FunctionGet)},
    {Py_tp_traverse, reinterpret_cast<void*>(FunctionTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(FunctionClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(FunctionDealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(FunctionRepr)},
    {Py_tp_members, kFunctionMembers},
    {Py_tp_doc, const_cast<char*>("OptimizedFunction(callback, target, config): target(*args, **kwargs) run under "
                                  "the frame evaluator's callback (what dynamo.optimize(...)(fn) returns).")},
    {0, nullptr},
};

PyType_Spec kFunctionSpec = {
    "dynamo._C.OptimizedFunction", sizeof(OptimizedFunction), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    kFunctionSlots};

// ---------------------------------------------------------------------------
// ModuleCall

// What FastTargets found for the wrapper called last, and what it read to
// find it: it holds while those dicts and classes are unchanged. CPython
// never hands a dict's version tag out twice (a new dict at a freed one's
// address has a new one), so an unchanged tag is the same dict in the same
// state, and what it holds is alive; likewise a class's tag. Only where
// guards::VersionTagsReliable() (3.11, 3.12).
struct FastMemo {
  bool valid = false;
  PyObject* dict = nullptr;  // the wrapper's __dict__
  uint64_t dict_tag = 0;
  PyObject* modules = nullptr;  // its _modules
  uint64_t modules_tag = 0;
  PyObject* mod_dict = nullptr;  // the original's __dict__
  uint64_t mod_dict_tag = 0;
  PyTypeObject* mod_type = nullptr;
  unsigned int mod_type_tag = 0;
  uint64_t globals_tag = 0;  // torch.nn.modules.module's globals
  PyObject* hooks[12] = {};  // every hook dict read, each empty then
  PyObject* callback = nullptr;
  PyObject* mod = nullptr;
  PyObject* forward = nullptr;  // the class's forward: the original's forward is it, bound
};

struct ModuleCall {
  PyObject_HEAD
  PyObject* slow;    // the Python path: slow(self, *args, **kwargs)
  PyObject* config;  // dynamo.config
  PyObject* torch_module;  // torch.nn.modules.module: the global hook dicts
  vectorcallfunc vectorcall;
  FastMemo memo;
};

// Whether `d` (a module's __dict__ or torch's module globals) has a
// non-empty dict under `name`; -1 when something is not as nn.Module makes
// it. `*hook` gets the dict (borrowed), null where there is none.
int NonEmpty(PyObject* d, PyObject* name, PyObject** hook) {
  PyObject* v = PyDict_GetItemWithError(d, name);
  *hook = v;
  if (v == nullptr) return PyErr_Occurred() ? -1 : 0;
  if (!PyDict_Check(v)) return -1;
  return PyDict_Size(v) > 0 ? 1 : 0;
}

// Whether the memo still holds for the wrapper `self`: its tags first, then
// every hook dict it read still empty.
bool MemoHolds(const FastMemo& m, PyObject* self, PyObject* globals) {
  if (!m.valid || guards::InstanceDict(self) != m.dict || guards::DictVersion(m.dict) != m.dict_tag ||
      guards::DictVersion(m.modules) != m.modules_tag || guards::DictVersion(globals) != m.globals_tag ||
      Py_TYPE(m.mod) != m.mod_type || !guards::HasValidTypeTag(m.mod_type) ||
      m.mod_type->tp_version_tag != m.mod_type_tag || guards::InstanceDict(m.mod) != m.mod_dict ||
      guards::DictVersion(m.mod_dict) != m.mod_dict_tag) {
    return false;
  }
  for (PyObject* hook : m.hooks) {
    if (hook != nullptr && PyDict_Size(hook) != 0) return false;
  }
  return true;
}

// The original module when the call can skip every hook: -1 for the slow
// path, 0 with `*mod` and `*callback` set (borrowed) for the fast one.
// `memo` is filled where what was found can be kept (see FastMemo).
int FastTargets(const ModuleCall* m, PyObject* self, PyObject** mod, PyObject** callback, FastMemo* memo) {
  memo->valid = false;
  PyObject* d = guards::InstanceDict(self);
  if (d == nullptr) return -1;
  const Names& n = N();
  *callback = PyDict_GetItemWithError(d, n.callback);
  if (*callback == nullptr) return -1;
  PyObject* modules = PyDict_GetItemWithError(d, n.modules);
  if (modules == nullptr || !PyDict_Check(modules)) return -1;
  *mod = PyDict_GetItemWithError(modules, n.orig_mod);
  if (*mod == nullptr) return -1;
  PyObject* md = guards::InstanceDict(*mod);
  PyObject* globals = PyModule_GetDict(m->torch_module);
  if (md == nullptr || globals == nullptr) return -1;
  for (int i = 0; i < 4; ++i) {
    // The wrapper's own hooks, the original's and the global ones: any of
    // them means nn.Module.__call__ must run (the slow path).
    if (NonEmpty(d, n.hooks[i], &memo->hooks[3 * i]) != 0 || NonEmpty(md, n.hooks[i], &memo->hooks[3 * i + 1]) != 0 ||
        NonEmpty(globals, n.global_hooks[i], &memo->hooks[3 * i + 2]) != 0) {
      return -1;
    }
  }
  PyTypeObject* type = Py_TYPE(*mod);
  if (!guards::VersionTagsReliable() || !guards::HasValidTypeTag(type)) return 0;
  // forward, read as nn.Module.__call__ reads it, is the class's function
  // bound to the module: object's attribute lookup, no instance forward.
  static PyObject* object_getattribute = _PyType_Lookup(&PyBaseObject_Type, n.getattribute);
  PyObject* forward = _PyType_Lookup(type, n.forward);
  if (forward == nullptr || !PyFunction_Check(forward) || _PyType_Lookup(type, n.getattribute) != object_getattribute ||
      PyDict_GetItemWithError(md, n.forward) != nullptr || !guards::HasValidTypeTag(type)) {
    python::ClearError();
    return 0;
  }
  memo->dict = d;
  memo->dict_tag = guards::DictVersion(d);
  memo->modules = modules;
  memo->modules_tag = guards::DictVersion(modules);
  memo->mod_dict = md;
  memo->mod_dict_tag = guards::DictVersion(md);
  memo->mod_type = type;
  memo->mod_type_tag = type->tp_version_tag;
  memo->globals_tag = guards::DictVersion(globals);
  memo->callback = *callback;
  memo->mod = *mod;
  memo->forward = forward;
  memo->valid = true;
  return 0;
}

PyObject* ModuleCallCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* m = reinterpret_cast<ModuleCall*>(self);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "OptimizedModule.__call__ needs the module");
    return nullptr;
  }
  PyObject* globals = PyModule_GetDict(m->torch_module);
  if (globals != nullptr && MemoHolds(m->memo, args[0], globals)) {
    // forward(original, *args): what the bound method would call, without
    // making it. The memo's objects are held by the unchanged dicts until
    // the call starts; the call holds them from then.
    Object keep_mod = Object::Borrow(m->memo.mod), keep_callback = Object::Borrow(m->memo.callback);
    Object keep_forward = Object::Borrow(m->memo.forward);
    // The keyword arguments' values follow the positional ones.
    const Py_ssize_t total = nargs + (kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject* small[8];
    std::vector<PyObject*> big;
    PyObject** call_args = small;
    if (total > 8) {
      big.resize(static_cast<size_t>(total));
      call_args = big.data();
    }
    call_args[0] = keep_mod.get();
    std::copy(args + 1, args + total, call_args + 1);
    return CallWithEvalFrame(keep_callback.get(), m->config, keep_forward.get(), call_args,
                             static_cast<size_t>(nargs), kwnames);
  }
  PyObject *mod = nullptr, *callback = nullptr;
  FastMemo memo;
  if (FastTargets(m, args[0], &mod, &callback, &memo) != 0) {
    python::ClearError();
    return PyObject_Vectorcall(m->slow, args, static_cast<size_t>(nargs), kwnames);
  }
  Object keep_mod = Object::Borrow(mod), keep_callback = Object::Borrow(callback);
  // nn.Module.__call__ runs the instance's forward when one was set, else
  // the class's: an attribute read, as there.
  Object target = Object::Steal(PyObject_GetAttr(mod, N().forward));
  if (!target) return nullptr;
  PyObject* fn = PyMethod_Check(target.get()) ? PyMethod_Function(target.get()) : target.get();
  if (PyFunction_Check(fn)) {
    // Captured even if its file is one the evaluator skips (torch's own).
    Object marked = Object::Steal(MarkCapture(nullptr, PyFunction_GetCode(fn)));
    if (!marked) return nullptr;
  }
  // Kept for the next call only if the attribute read gave what the memo
  // says it gives (and, marked above, its code is captured).
  if (memo.valid && PyMethod_Check(target.get()) && PyMethod_Function(target.get()) == memo.forward &&
      PyMethod_Self(target.get()) == mod) {
    m->memo = memo;
  }
  return CallWithEvalFrame(callback, m->config, target.get(), args + 1, static_cast<size_t>(nargs - 1), kwnames);
}

int ModuleCallInit(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* m = reinterpret_cast<ModuleCall*>(self);
  PyObject *slow, *config, *torch_module;
  static const char* kw[] = {"slow", "config", "torch_module", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO!:ModuleCall", const_cast<char**>(kw), &slow, &config,
                                   &PyModule_Type, &torch_module)) {
    return -1;
  }
  Py_XSETREF(m->slow, Py_NewRef(slow));
  Py_XSETREF(m->config, Py_NewRef(config));
  Py_XSETREF(m->torch_module, Py_NewRef(torch_module));
  m->vectorcall = ModuleCallCall;
  return 0;
}

int ModuleCallTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* m = reinterpret_cast<ModuleCall*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(m->slow);
  Py_VISIT(m->config);
  Py_VISIT(m->torch_module);
  return 0;
}

int ModuleCallClear(PyObject* self) {
  auto* m = reinterpret_cast<ModuleCall*>(self);
  Py_CLEAR(m->slow);
  Py_CLEAR(m->config);
  Py_CLEAR(m->torch_module);
  return 0;
}

void ModuleCallDealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  ModuleCallClear(self);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef kModuleCallMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(ModuleCall, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot kModuleCallSlots[] = {
    {Py_tp_init, reinterpret_cast<void*>(ModuleCallInit)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(FunctionGet)},
    {Py_tp_traverse, reinterpret_cast<void*>(ModuleCallTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(ModuleCallClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(ModuleCallDealloc)},
    {Py_tp_members, kModuleCallMembers},
    {Py_tp_doc, const_cast<char*>("ModuleCall(slow, config, torch_module): OptimizedModule.__call__ in C.")},
    {0, nullptr},
};

PyType_Spec kModuleCallSpec = {
    "dynamo._C.ModuleCall", sizeof(ModuleCall), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    kModuleCallSlots};

}  // namespace

absl::Status AddCallerTypes(PyObject* module) {
  N();
  for (PyType_Spec* spec : {&kFunctionSpec, &kModuleCallSpec}) {
    Object type = Object::Steal(PyType_FromSpec(spec));
    const char* name = spec->name + sizeof("dynamo._C.") - 1;
    if (!type || PyModule_AddObjectRef(module, name, type.get()) != 0) {
      return python::FetchError("adding dynamo._C's callable types");
    }
  }
  return absl::OkStatus();
}

}  // namespace dynamo::embed
