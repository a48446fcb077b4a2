#include "lib/embed/graph_forward.h"

#include <Python.h>
#include <structmember.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/python/object.h"

#if PY_VERSION_HEX >= 0x030D0000
// Exported by every CPython since 3.5; 3.13 moved its declaration to the
// internal headers. It adds a traceback entry for C code that has no frame.
extern "C" void _PyTraceback_Add(const char* funcname, const char* filename, int lineno);
#endif

namespace dynamo::embed {
namespace {

using python::Object;

// What a step's argument (or the output) is made from on each call.
struct Template {
  enum Kind { kConst, kSlot, kList, kTuple, kDict, kSlice };
  Kind kind = kConst;
  int slot = -1;
  Object value;  // kConst: the object; kDict: the keys, as a tuple
  std::vector<Template> items;
};

struct Step {
  int kind = 0;  // 0 call, 1 method, 2 attribute path from self
  Object target;
  std::vector<Template> args;  // the positional ones, then one per keyword
  Object kwnames;              // a tuple, or null
  Py_ssize_t positional = 0;
  int slot = -1;
  std::vector<int> drops;  // slots whose last use this step is
};

struct Program {
  std::vector<Object> params;  // names
  std::vector<Step> steps;
  Template output;
  int slots = 0;
  Object describe;
  std::string filename;
};

struct GraphForward {
  PyObject_HEAD
  Program* program;
  PyObject* dict;  // __signature__, __name__, ... as the Python side sets them
  PyObject* weakrefs;  // weak references to it, as to a function
  vectorcallfunc vectorcall;
};

// ---------------------------------------------------------------------------
// Building the program

// Reads `obj` into `out`; false with an exception set when a slot is out of
// range. Returns through `has_slot` whether any slot is inside.
bool Compile(PyObject* obj, PyTypeObject* local_type, int slots, Template* out, bool* has_slot, int depth = 0) {
  *has_slot = false;
  if (depth > 64) {
    PyErr_SetString(PyExc_ValueError, "GraphForward: arguments nested too deep");
    return false;
  }
  if (Py_TYPE(obj) == local_type) {
    Object slot = Object::Steal(PyObject_GetAttrString(obj, "slot"));
    if (!slot) return false;
    long s = PyLong_AsLong(slot.get());
    if (s == -1 && PyErr_Occurred()) return false;
    if (s < 0 || s >= slots) {
      PyErr_Format(PyExc_ValueError, "GraphForward: slot %ld out of range", s);
      return false;
    }
    out->kind = Template::kSlot;
    out->slot = static_cast<int>(s);
    *has_slot = true;
    return true;
  }
  std::vector<PyObject*> parts;  // borrowed
  Template::Kind kind = Template::kConst;
  if (PyList_CheckExact(obj)) {
    kind = Template::kList;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); ++i) parts.push_back(PyList_GET_ITEM(obj, i));
  } else if (PyTuple_CheckExact(obj)) {
    kind = Template::kTuple;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); ++i) parts.push_back(PyTuple_GET_ITEM(obj, i));
  } else if (PyDict_CheckExact(obj)) {
    kind = Template::kDict;
    Object keys = Object::Steal(PyTuple_New(PyDict_Size(obj)));
    if (!keys) return false;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(obj, &pos, &key, &value)) {
      PyTuple_SET_ITEM(keys.get(), i++, Py_NewRef(key));
      parts.push_back(value);
    }
    out->value = keys;
  } else if (PySlice_Check(obj)) {
    kind = Template::kSlice;
    auto* s = reinterpret_cast<PySliceObject*>(obj);
    parts = {s->start, s->stop, s->step};
  }
  if (kind != Template::kConst) {
    bool any = false;
    out->items.resize(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      bool inner = false;
      if (!Compile(parts[i], local_type, slots, &out->items[i], &inner, depth + 1)) return false;
      any = any || inner;
    }
    // A list is made afresh on every call (a callee may keep or change
    // it); a tuple, dict or slice of constants is the constant.
    if (any || kind == Template::kList) {
      out->kind = kind;
      *has_slot = any;
      return true;
    }
    out->items.clear();
  }
  out->kind = Template::kConst;
  out->value = Object::Borrow(obj);
  return true;
}

void Reads(const Template& t, std::vector<int>* out) {
  if (t.kind == Template::kSlot) out->push_back(t.slot);
  for (const Template& item : t.items) Reads(item, out);
}

bool CompileStep(PyObject* spec, PyTypeObject* local_type, int slots, Step* step) {
  PyObject *target, *args, *kwargs;
  int slot;
  if (!PyArg_ParseTuple(spec, "iOO!O!i:GraphForward step", &step->kind, &target, &PyTuple_Type, &args, &PyDict_Type,
                        &kwargs, &slot)) {
    return false;
  }
  if (slot < -1 || slot >= slots) {
    PyErr_Format(PyExc_ValueError, "GraphForward: slot %d out of range", slot);
    return false;
  }
  step->slot = slot;
  step->target = Object::Borrow(target);
  if (step->kind == kStepMethod && (!PyUnicode_Check(target) || PyTuple_GET_SIZE(args) < 1)) {
    PyErr_SetString(PyExc_TypeError, "GraphForward: a method step needs its name and its object");
    return false;
  }
  if (step->kind == kStepAttributes) {
    if (!PyTuple_Check(target) || PyTuple_GET_SIZE(args) != 0 || PyDict_Size(kwargs) != 0) {
      PyErr_SetString(PyExc_TypeError, "GraphForward: an attribute step needs a tuple of names");
      return false;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(target); ++i) {
      if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(target, i))) {
        PyErr_SetString(PyExc_TypeError, "GraphForward: an attribute path holds names");
        return false;
      }
    }
  } else if (step->kind != kStepCall && step->kind != kStepMethod) {
    PyErr_Format(PyExc_ValueError, "GraphForward: unknown step kind %d", step->kind);
    return false;
  }
  step->positional = PyTuple_GET_SIZE(args);
  step->args.resize(static_cast<size_t>(step->positional + PyDict_Size(kwargs)));
  bool unused = false;
  for (Py_ssize_t i = 0; i < step->positional; ++i) {
    if (!Compile(PyTuple_GET_ITEM(args, i), local_type, slots, &step->args[static_cast<size_t>(i)], &unused)) {
      return false;
    }
  }
  if (PyDict_Size(kwargs) > 0) {
    step->kwnames = Object::Steal(PyTuple_New(PyDict_Size(kwargs)));
    if (!step->kwnames) return false;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      if (!PyUnicode_Check(key)) {
        PyErr_SetString(PyExc_TypeError, "GraphForward: keyword names are strings");
        return false;
      }
      PyTuple_SET_ITEM(step->kwnames.get(), i, Py_NewRef(key));
      if (!Compile(value, local_type, slots, &step->args[static_cast<size_t>(step->positional + i)], &unused)) {
        return false;
      }
      ++i;
    }
  }
  return true;
}

// Each slot is dropped after the step that reads it last (or, never read,
// right after the step that makes it); what the output reads stays. False
// with an exception set when a slot is not one value made before it is read
// (the parameters' slots come first, then one per step at most).
bool PlanDrops(Program* p) {
  constexpr int kOutput = -2, kNever = -1;
  const auto params = static_cast<int>(p->params.size());
  std::vector<int> last(static_cast<size_t>(p->slots), kNever);
  std::vector<char> made(static_cast<size_t>(p->slots), 0);
  for (int s = 0; s < params; ++s) made[static_cast<size_t>(s)] = 1;
  std::vector<int> reads;
  for (size_t i = 0; i <= p->steps.size(); ++i) {
    reads.clear();
    if (i < p->steps.size()) {
      for (const Template& t : p->steps[i].args) Reads(t, &reads);
    } else {
      Reads(p->output, &reads);
    }
    for (int s : reads) {
      if (!made[static_cast<size_t>(s)]) {
        PyErr_Format(PyExc_ValueError, "GraphForward: slot %d is read before a step makes it", s);
        return false;
      }
      last[static_cast<size_t>(s)] = i < p->steps.size() ? static_cast<int>(i) : kOutput;
    }
    if (i == p->steps.size()) break;
    int slot = p->steps[i].slot;
    if (slot >= 0 && (slot < params || made[static_cast<size_t>(slot)])) {
      PyErr_Format(PyExc_ValueError, "GraphForward: slot %d is a parameter's or another step's", slot);
      return false;
    }
    if (slot >= 0) made[static_cast<size_t>(slot)] = 1;
  }
  for (size_t i = 0; i < p->steps.size(); ++i) {
    int slot = p->steps[i].slot;
    if (slot >= 0 && last[static_cast<size_t>(slot)] == kNever) p->steps[i].drops.push_back(slot);
  }
  for (int s = 0; s < p->slots; ++s) {
    if (last[static_cast<size_t>(s)] >= 0) p->steps[static_cast<size_t>(last[static_cast<size_t>(s)])].drops.push_back(s);
  }
  return true;
}

// ---------------------------------------------------------------------------
// Running it

PyObject* Build(const Template& t, PyObject* const* slots) {
  switch (t.kind) {
    case Template::kConst:
      return Py_NewRef(t.value.get());
    case Template::kSlot: {
      PyObject* v = slots[t.slot];
      if (v == nullptr) {
        PyErr_SetString(PyExc_SystemError, "GraphForward: a value read after its last use");
        return nullptr;
      }
      return Py_NewRef(v);
    }
    case Template::kList:
    case Template::kTuple: {
      const bool list = t.kind == Template::kList;
      const auto n = static_cast<Py_ssize_t>(t.items.size());
      Object out = Object::Steal(list ? PyList_New(n) : PyTuple_New(n));
      if (!out) return nullptr;
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* item = Build(t.items[static_cast<size_t>(i)], slots);
        if (item == nullptr) return nullptr;
        if (list) {
          PyList_SET_ITEM(out.get(), i, item);
        } else {
          PyTuple_SET_ITEM(out.get(), i, item);
        }
      }
      return out.release();
    }
    case Template::kDict: {
      Object out = Object::Steal(PyDict_New());
      if (!out) return nullptr;
      for (size_t i = 0; i < t.items.size(); ++i) {
        Object item = Object::Steal(Build(t.items[i], slots));
        if (!item ||
            PyDict_SetItem(out.get(), PyTuple_GET_ITEM(t.value.get(), static_cast<Py_ssize_t>(i)), item.get()) != 0) {
          return nullptr;
        }
      }
      return out.release();
    }
    case Template::kSlice: {
      Object parts[3];
      for (int i = 0; i < 3; ++i) {
        parts[i] = Object::Steal(Build(t.items[static_cast<size_t>(i)], slots));
        if (!parts[i]) return nullptr;
      }
      return PySlice_New(parts[0].get(), parts[1].get(), parts[2].get());
    }
  }
  return nullptr;
}

using Slots = absl::InlinedVector<PyObject*, 64>;

void ClearSlots(Slots* slots) {
  for (PyObject*& v : *slots) Py_CLEAR(v);
}

// The error of step `i`: its traceback entry names the step's line of the
// forward (which `describe` makes readable), with the exception unchanged.
void StepFailed(const Program& p, size_t i) {
  if (p.describe) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Object index = Object::Steal(PyLong_FromSize_t(i));
    Object done = index ? Object::Steal(PyObject_CallOneArg(p.describe.get(), index.get())) : Object();
    if (!done) PyErr_Clear();  // the step's error is the one to raise
    PyErr_Restore(type, value, tb);
  }
  _PyTraceback_Add("forward", p.filename.c_str(), static_cast<int>(i) + 2);
}

// Binds the call's inputs to slots 0..P-1: by position, then by name.
bool BindInputs(const Program& p, PyObject* const* args, Py_ssize_t n, PyObject* kwnames, Slots* slots) {
  const auto params = static_cast<Py_ssize_t>(p.params.size());
  if (n > params) {
    PyErr_Format(PyExc_TypeError, "forward() takes %zd positional arguments but %zd were given", params + 1, n + 1);
    return false;
  }
  for (Py_ssize_t i = 0; i < n; ++i) (*slots)[static_cast<size_t>(i)] = Py_NewRef(args[i]);
  const Py_ssize_t keywords = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t at = -1;
    for (Py_ssize_t i = 0; i < params && at < 0; ++i) {
      int same = PyUnicode_Compare(name, p.params[static_cast<size_t>(i)].get());
      if (same == -1 && PyErr_Occurred()) return false;
      if (same == 0) at = i;
    }
    if (at < 0) {
      PyErr_Format(PyExc_TypeError, "forward() got an unexpected keyword argument '%U'", name);
      return false;
    }
    PyObject*& slot = (*slots)[static_cast<size_t>(at)];
    if (slot != nullptr) {
      PyErr_Format(PyExc_TypeError, "forward() got multiple values for argument '%U'", name);
      return false;
    }
    slot = Py_NewRef(args[n + k]);
  }
  for (Py_ssize_t i = 0; i < params; ++i) {
    if ((*slots)[static_cast<size_t>(i)] == nullptr) {
      PyErr_Format(PyExc_TypeError, "forward() missing required argument '%U'", p.params[static_cast<size_t>(i)].get());
      return false;
    }
  }
  return true;
}

PyObject* RunStep(const Step& step, PyObject* self, PyObject* const* slots) {
  if (step.kind == kStepAttributes) {
    // A parameter sits three or four modules deep, and each module's read
    // through nn.Module.__getattr__ runs Python (about 0.4 us, a thousand
    // per call of a mobilenet_v2): read in C where that is sure to find
    // what Python would, and through getattr anywhere else.
    Object value = Object::Borrow(self);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(step.target.get()); ++i) {
      PyObject* name = PyTuple_GET_ITEM(step.target.get(), i);
      Object found;
      if (python::LookupWithoutPython(value.get(), name, &found) == python::Found::kFound) {
        value = std::move(found);
        continue;
      }
      value = Object::Steal(PyObject_GetAttr(value.get(), name));
      if (!value) return nullptr;
    }
    return value.release();
  }
  // One spare entry in front: callees may use it (PY_VECTORCALL_ARGUMENTS_OFFSET).
  absl::InlinedVector<PyObject*, 16> argv(step.args.size() + 1, nullptr);
  PyObject* result = nullptr;
  size_t built = 0;
  for (; built < step.args.size(); ++built) {
    argv[built + 1] = Build(step.args[built], slots);
    if (argv[built + 1] == nullptr) break;
  }
  if (built == step.args.size()) {
    const size_t nargsf = static_cast<size_t>(step.positional) | PY_VECTORCALL_ARGUMENTS_OFFSET;
    result = step.kind == kStepCall ? PyObject_Vectorcall(step.target.get(), argv.data() + 1, nargsf, step.kwnames.get())
                                : PyObject_VectorcallMethod(step.target.get(), argv.data() + 1, nargsf,
                                                            step.kwnames.get());
  }
  for (size_t i = 1; i <= built; ++i) Py_DECREF(argv[i]);
  return result;
}

PyObject* ForwardCall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* f = reinterpret_cast<GraphForward*>(callable);
  if (f->program == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "GraphForward: cleared");
    return nullptr;
  }
  const Program& p = *f->program;
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "forward() needs the module");
    return nullptr;
  }
  Slots slots(static_cast<size_t>(p.slots), nullptr);
  if (!BindInputs(p, args + 1, nargs - 1, kwnames, &slots)) {
    ClearSlots(&slots);
    return nullptr;
  }
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& step = p.steps[i];
    PyObject* result = RunStep(step, args[0], slots.data());
    if (result == nullptr) {
      ClearSlots(&slots);
      StepFailed(p, i);
      return nullptr;
    }
    if (step.slot >= 0) {
      Py_XSETREF(slots[static_cast<size_t>(step.slot)], result);
    } else {
      Py_DECREF(result);
    }
    for (int d : step.drops) Py_CLEAR(slots[static_cast<size_t>(d)]);
  }
  PyObject* out = Build(p.output, slots.data());
  ClearSlots(&slots);
  return out;
}

int ForwardInit(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* f = reinterpret_cast<GraphForward*>(self);
  PyObject *params, *steps, *output, *local_type, *describe, *filename;
  static const char* kw[] = {"params", "steps", "output", "local_type", "describe", "filename", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!OO!OU:GraphForward", const_cast<char**>(kw), &PyTuple_Type,
                                   &params, &PyTuple_Type, &steps, &output, &PyType_Type, &local_type, &describe,
                                   &filename)) {
    return -1;
  }
  if (f->program != nullptr) {
    // A running call reads its program: it is made once and never replaced.
    PyErr_SetString(PyExc_TypeError, "GraphForward: already made");
    return -1;
  }
  auto program = std::make_unique<Program>();
  const Py_ssize_t n_params = PyTuple_GET_SIZE(params);
  program->slots = static_cast<int>(n_params + PyTuple_GET_SIZE(steps));
  for (Py_ssize_t i = 0; i < n_params; ++i) {
    PyObject* name = PyTuple_GET_ITEM(params, i);
    if (!PyUnicode_Check(name)) {
      PyErr_SetString(PyExc_TypeError, "GraphForward: parameter names are strings");
      return -1;
    }
    program->params.push_back(Object::Borrow(name));
  }
  auto* type = reinterpret_cast<PyTypeObject*>(local_type);
  program->steps.resize(static_cast<size_t>(PyTuple_GET_SIZE(steps)));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(steps); ++i) {
    PyObject* spec = PyTuple_GET_ITEM(steps, i);
    if (!PyTuple_Check(spec)) {
      PyErr_SetString(PyExc_TypeError, "GraphForward: a step is a tuple");
      return -1;
    }
    if (!CompileStep(spec, type, program->slots, &program->steps[static_cast<size_t>(i)])) return -1;
  }
  bool unused = false;
  if (!Compile(output, type, program->slots, &program->output, &unused)) return -1;
  if (describe != Py_None) program->describe = Object::Borrow(describe);
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(filename, &size);
  if (text == nullptr) return -1;
  program->filename.assign(text, static_cast<size_t>(size));
  if (!PlanDrops(program.get())) return -1;
  f->program = program.release();
  f->vectorcall = ForwardCall;
  return 0;
}

int VisitTemplate(const Template& t, visitproc visit, void* arg) {
  Py_VISIT(t.value.get());
  for (const Template& item : t.items) {
    if (int r = VisitTemplate(item, visit, arg)) return r;
  }
  return 0;
}

int ForwardTraverse(PyObject* self, visitproc visit, void* arg) {
  auto* f = reinterpret_cast<GraphForward*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(f->dict);
  if (f->program == nullptr) return 0;
  const Program& p = *f->program;
  Py_VISIT(p.describe.get());
  for (const Step& step : p.steps) {
    Py_VISIT(step.target.get());
    for (const Template& t : step.args) {
      if (int r = VisitTemplate(t, visit, arg)) return r;
    }
  }
  return VisitTemplate(p.output, visit, arg);
}

int ForwardClear(PyObject* self) {
  auto* f = reinterpret_cast<GraphForward*>(self);
  Py_CLEAR(f->dict);
  Program* p = f->program;
  f->program = nullptr;
  delete p;  // its objects' references go last: their deallocation may run Python
  return 0;
}

void ForwardDealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  if (reinterpret_cast<GraphForward*>(self)->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  ForwardClear(self);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

// As a class attribute it binds like a function: gm.forward(x) is forward(gm, x).
PyObject* ForwardGet(PyObject* self, PyObject* obj, PyObject* /*type*/) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyMemberDef kForwardMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(GraphForward, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(GraphForward, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(GraphForward, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot kForwardSlots[] = {
    {Py_tp_init, reinterpret_cast<void*>(ForwardInit)},
    {Py_tp_new, reinterpret_cast<void*>(PyType_GenericNew)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(ForwardGet)},
    {Py_tp_traverse, reinterpret_cast<void*>(ForwardTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(ForwardClear)},
    {Py_tp_dealloc, reinterpret_cast<void*>(ForwardDealloc)},
    {Py_tp_members, kForwardMembers},
    {Py_tp_doc, const_cast<char*>("GraphForward(params, steps, output, local_type, describe, filename): a captured "
                                  "graph's forward run from a table of steps (lib/embed/graph_forward.h).")},
    {0, nullptr},
};

PyType_Spec kForwardSpec = {
    "dynamo._C.GraphForward", sizeof(GraphForward), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    kForwardSlots};

// dynamo._C.Local(name, slot): a node's value in a table, made in C (a
// Python class's __init__ ran once per node of every first call).
struct Local {
  PyObject_HEAD
  PyObject* name;
  Py_ssize_t slot;
};

PyObject* LocalNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kw[] = {"name", "slot", nullptr};
  PyObject* name;
  Py_ssize_t slot;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Un:Local", const_cast<char**>(kw), &name, &slot)) return nullptr;
  auto* self = reinterpret_cast<Local*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->name = Py_NewRef(name);
  self->slot = slot;
  return reinterpret_cast<PyObject*>(self);
}

void LocalDealloc(PyObject* self) {
  Py_CLEAR(reinterpret_cast<Local*>(self)->name);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* LocalRepr(PyObject* self) {
  const auto* l = reinterpret_cast<Local*>(self);
  return PyUnicode_FromFormat("Local(%R, %zd)", l->name, l->slot);
}

PyMemberDef kLocalMembers[] = {
    {"name", T_OBJECT_EX, offsetof(Local, name), READONLY, nullptr},
    {"slot", T_PYSSIZET, offsetof(Local, slot), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyType_Slot kLocalSlots[] = {
    {Py_tp_new, reinterpret_cast<void*>(LocalNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(LocalDealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(LocalRepr)},
    {Py_tp_members, kLocalMembers},
    {Py_tp_doc, const_cast<char*>("Local(name, slot): a node's value in a GraphForward table (the slot it is kept "
                                  "in), as dynamo.deferred makes them.")},
    {0, nullptr},
};

PyType_Spec kLocalSpec = {"dynamo._C.Local", sizeof(Local), 0, Py_TPFLAGS_DEFAULT, kLocalSlots};

}  // namespace

absl::Status AddGraphForwardType(PyObject* module) {
  for (auto [spec, name] : {std::pair{&kForwardSpec, "GraphForward"}, std::pair{&kLocalSpec, "Local"}}) {
    Object type = Object::Steal(PyType_FromSpec(spec));
    if (!type || PyModule_AddObjectRef(module, name, type.get()) != 0) {
      return python::FetchError(absl::StrCat("adding dynamo._C.", name));
    }
  }
  return absl::OkStatus();
}

}  // namespace dynamo::embed
