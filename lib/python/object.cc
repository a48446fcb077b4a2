#include "lib/python/object.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/python/error.h"

namespace dynamo::python {
namespace {

// `context` is only evaluated on failure: building it can be expensive (the
// repr of a module is the repr of every submodule).
template <typename Context>
absl::StatusOr<Object> Checked(PyObject* result, const Context& context) {
  if (result != nullptr) return Object::Steal(result);
  // Building the context may call into Python (and clear errors): set the
  // pending exception aside meanwhile. Fetch/Restore hand the references over.
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  std::string text = context();
  PyErr_Restore(type, value, traceback);
  return FetchError(text);
}

// Null when an item is null (a conversion that failed: its exception stays
// set), so that no caller hands a tuple with a NULL slot to Python.
Object PackTuple(const std::vector<Object>& items) {
  for (const Object& item : items) {
    if (!item) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "libdynamo: a null argument");
      return Object();
    }
  }
  Object t = Object::Steal(PyTuple_New(static_cast<Py_ssize_t>(items.size())));
  if (!t) return t;
  for (size_t i = 0; i < items.size(); ++i) {
    Object item = items[i];  // PyTuple_SET_ITEM steals the copy's reference
    PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), item.release());
  }
  return t;
}

// "torch.nn.functional.relu" or "Linear.forward" rather than a repr, which
// for a module lists every submodule.
std::string ShortName(const Object& callable) {
  Object qualname = Object::Steal(PyObject_GetAttrString(callable.get(), "__qualname__"));
  if (!qualname) ClearError();
  absl::StatusOr<std::string> s = qualname ? AsString(qualname) : absl::NotFoundError("");
  return s.ok() ? *s : absl::StrCat("a ", TypeName(callable));
}

}  // namespace

PyObject* Interned(absl::string_view name) {
  // Leaked on purpose, like every cache of Python objects here (see
  // Object's destructor). It grows with the distinct names asked for: the
  // identifiers of the code traced, as CPython's own table of them does.
  static auto* table = new absl::flat_hash_map<std::string, PyObject*>();
  if (auto it = table->find(name); it != table->end()) return it->second;
  PyObject* s = PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
  if (s == nullptr) return nullptr;
  PyUnicode_InternInPlace(&s);
  table->emplace(std::string(name), s);
  return s;
}

namespace {

// o.name: 1 with a new reference in *out, 0 when o has no such attribute
// (for most classes known without making an AttributeError), -1 with an
// exception set.
int LookupAttr(PyObject* o, PyObject* name, PyObject** out) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyObject_GetOptionalAttr(o, name, out);
#else
  return _PyObject_LookupAttr(o, name, out);
#endif
}

}  // namespace

bool HasAttr(PyObject* obj, const char* name) { return static_cast<bool>(Attr(obj, name)); }

absl::StatusOr<Object> GetAttr(const Object& obj, absl::string_view name) {
  PyObject* key = Interned(name);
  return Checked(key != nullptr ? PyObject_GetAttr(obj.get(), key) : nullptr,
                 [&] { return absl::StrCat("getattr(", TypeName(obj), ", '", name, "')"); });
}

Object Attr(PyObject* o, const char* name) { return Attr(o, Interned(name)); }

Object Attr(PyObject* o, PyObject* name) {
  PyObject* value = nullptr;
  if (name == nullptr || LookupAttr(o, name, &value) < 0) ClearError();
  return Object::Steal(value);
}

absl::StatusOr<Object> Import(absl::string_view module) {
  std::string name(module);
  return Checked(PyImport_ImportModule(name.c_str()), [&] { return absl::StrCat("import ", module); });
}

absl::StatusOr<Object> Call(const Object& callable, const std::vector<Object>& args) {
  Object tuple = PackTuple(args);
  if (!tuple) return FetchError(absl::StrCat("the arguments of ", ShortName(callable)));
  return Checked(PyObject_Call(callable.get(), tuple.get(), nullptr),
                 [&] { return absl::StrCat("calling ", ShortName(callable)); });
}

absl::StatusOr<Object> CallMethod(const Object& obj, absl::string_view name,
                                  const std::vector<Object>& args) {
  absl::StatusOr<Object> method = GetAttr(obj, name);
  if (!method.ok()) return method.status();
  return Call(*method, args);
}

Object FromString(absl::string_view s) {
  return Object::Steal(PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
}
Object FromLong(long long v) { return Object::Steal(PyLong_FromLongLong(v)); }
Object FromBool(bool v) { return Object::Borrow(v ? Py_True : Py_False); }
Object None() { return Object::Borrow(Py_None); }
Object MakeTuple(const std::vector<Object>& items) { return PackTuple(items); }
Object MakeList(const std::vector<Object>& items) {
  for (const Object& item : items) {
    if (!item) return PackTuple(items);  // null, with PackTuple's error
  }
  Object l = Object::Steal(PyList_New(static_cast<Py_ssize_t>(items.size())));
  if (!l) return l;
  for (size_t i = 0; i < items.size(); ++i) {
    Object item = items[i];
    PyList_SET_ITEM(l.get(), static_cast<Py_ssize_t>(i), item.release());
  }
  return l;
}

absl::StatusOr<std::string> AsString(const Object& obj) {
  if (!obj || !PyUnicode_Check(obj.get())) {
    return absl::InvalidArgumentError(absl::StrCat("expected str, got ", TypeName(obj)));
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(obj.get(), &size);
  if (data == nullptr) return FetchError("decoding str as UTF-8");
  return std::string(data, static_cast<size_t>(size));
}

absl::StatusOr<long long> AsLong(const Object& obj) {
  if (!obj || !PyLong_Check(obj.get())) {
    return absl::InvalidArgumentError(absl::StrCat("expected int, got ", TypeName(obj)));
  }
  long long v = PyLong_AsLongLong(obj.get());
  if (v == -1 && PyErr_Occurred()) return FetchError("converting int");
  return v;
}

absl::StatusOr<std::vector<Object>> AsVector(const Object& seq) {
  Object fast = Object::Steal(PySequence_Fast(seq.get(), "expected an iterable"));
  if (!fast) return FetchError("iterating");
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.get());
  std::vector<Object> out;
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    out.push_back(Object::Borrow(PySequence_Fast_GET_ITEM(fast.get(), i)));
  }
  return out;
}

std::string Repr(const Object& obj) {
  if (!obj) return "<null>";
  Object r = Object::Steal(PyObject_Repr(obj.get()));
  if (!r) {
    ClearError();
    return "<repr failed>";
  }
  absl::StatusOr<std::string> s = AsString(r);
  if (!s.ok()) {
    ClearError();
    return "<repr failed>";
  }
  return *std::move(s);
}

std::string TypeName(const Object& obj) {
  if (!obj) return "NULL";
  return Py_TYPE(obj.get())->tp_name;
}

PyObject* TypeDictItem(PyTypeObject* type, const char* name) {
#if PY_VERSION_HEX >= 0x030C0000
  // A new reference to a dict the type keeps alive as long as itself.
  Object dict = Object::Steal(PyType_GetDict(type));
  return dict ? PyDict_GetItemString(dict.get(), name) : nullptr;
#else
  return type->tp_dict ? PyDict_GetItemString(type->tp_dict, name) : nullptr;
#endif
}

namespace {

// nn.Module.__getattr__, once torch.nn is imported (never imported here).
PyObject* NnModuleGetattr() {
  static PyObject* found = nullptr;  // torch's class lives as long as the process
  if (found != nullptr) return found;
  Object name = FromString("torch.nn.modules.module");
  Object module = name ? Object::Steal(PyImport_GetModule(name.get())) : Object();
  Object cls = module ? Object::Steal(PyObject_GetAttrString(module.get(), "Module")) : Object();
  if (cls && PyType_Check(cls.get())) {
    found = Py_XNewRef(TypeDictItem(reinterpret_cast<PyTypeObject*>(cls.get()), "__getattr__"));
  }
  PyErr_Clear();
  return found;
}

}  // namespace

Found LookupWithoutPython(PyObject* o, PyObject* name, Object* value) {
  if (PyErr_Occurred() || name == nullptr) return Found::kUnknown;  // from here on, any error set is ours to clear
  auto unknown = [] {
    PyErr_Clear();
    return Found::kUnknown;
  };
  PyTypeObject* t = Py_TYPE(o);
  // object's own lookup, or a Python class with object's __getattribute__
  // and nn.Module's __getattr__, which looks in _parameters, _buffers and
  // _modules, in that order, and raises AttributeError if none has the
  // name. Any other (a class object's, a Python __getattr__) runs code.
  const bool generic = t->tp_getattro == PyObject_GenericGetAttr;
  if (!generic) {
    static PyObject* const object_getattribute = TypeDictItem(&PyBaseObject_Type, "__getattribute__");
    PyObject* nn_getattr = NnModuleGetattr();
    static const Name kGetattribute("__getattribute__"), kGetattr("__getattr__");
    PyObject* getattribute_name = kGetattribute.get();
    PyObject* getattr_name = kGetattr.get();
    if (nn_getattr == nullptr || getattribute_name == nullptr || getattr_name == nullptr ||
        _PyType_Lookup(t, getattribute_name) != object_getattribute || _PyType_Lookup(t, getattr_name) != nn_getattr) {
      return unknown();
    }
  }
  // A class attribute or a descriptor of that name decides (or shares the
  // decision): only Python's own read knows.
  if (_PyType_Lookup(t, name) != nullptr) return Found::kUnknown;
  PyObject** slot = _PyObject_GetDictPtr(o);
  PyObject* dict = slot != nullptr ? *slot : nullptr;
  if (PyErr_Occurred()) return unknown();
  if (dict != nullptr) {
    if (!PyDict_CheckExact(dict)) return unknown();
    if (PyObject* v = PyDict_GetItemWithError(dict, name)) {
      *value = Object::Borrow(v);
      return Found::kFound;
    }
    if (PyErr_Occurred()) return unknown();
  }
  if (generic) return Found::kMissing;
  if (dict == nullptr) return Found::kUnknown;
  static const Name kHolders[] = {Name("_parameters"), Name("_buffers"), Name("_modules")};
  for (const Name& holder : kHolders) {
    PyObject* key = holder.get();
    PyObject* d = key != nullptr ? PyDict_GetItemWithError(dict, key) : nullptr;
    // A module without one (mid-__init__) or with a dict subclass there
    // (its own `in` and [] would run): Python's read it is.
    if (d == nullptr || !PyDict_CheckExact(d)) return unknown();
    if (PyObject* v = PyDict_GetItemWithError(d, name)) {
      *value = Object::Borrow(v);
      return Found::kFound;
    }
    if (PyErr_Occurred()) return unknown();
  }
  return Found::kMissing;
}

bool SurelyLacks(PyObject* o, const char* name) { return SurelyLacks(o, Interned(name)); }

bool SurelyLacks(PyObject* o, PyObject* name) {
  Object unused;
  return LookupWithoutPython(o, name, &unused) == Found::kMissing;
}

namespace {

const Name kName("__name__"), kQualname("__qualname__"), kModule("__module__");

// A class's __qualname__ or __module__ (`name`, one of those Names) as its
// metaclass answers it, borrowed, where that metaclass is `type` itself and
// the class is a heap type: type's own data descriptors then decide (before
// anything in the class's dict) and give the class's ht_qualname and the
// `__module__` entry of its own dict. nullptr: ask getattr (a static type,
// another metaclass, no such entry).
PyObject* HeapTypeName(PyObject* o, PyObject* name) {
  if (!Py_IS_TYPE(o, &PyType_Type) || !PyType_HasFeature(reinterpret_cast<PyTypeObject*>(o), Py_TPFLAGS_HEAPTYPE)) {
    return nullptr;
  }
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(o);
  if (name == kQualname.get()) return heap->ht_qualname;
  if (name != kModule.get() || heap->ht_type.tp_dict == nullptr) return nullptr;
  PyObject* module = PyDict_GetItemWithError(heap->ht_type.tp_dict, name);
  if (module == nullptr) ClearError();
  return module;
}

// o.name as text, "" when it is missing or no str.
std::string AttrText(PyObject* o, PyObject* name) {
  if (PyObject* known = HeapTypeName(o, name); known != nullptr && PyUnicode_Check(known)) {
    if (absl::StatusOr<std::string> text = AsString(Object::Borrow(known)); text.ok()) return *text;
  }
  if (SurelyLacks(o, name)) return "";
  Object a = Attr(o, name);
  absl::StatusOr<std::string> s = a && PyUnicode_Check(a.get()) ? AsString(a) : absl::NotFoundError("");
  return s.ok() ? *s : "";
}

}  // namespace

std::string IdentityName(PyObject* o) {
  if (PyModule_Check(o)) return absl::StrCat("module ", AttrText(o, kName.get()));
  std::string qualname = AttrText(o, kQualname.get());
  if (!qualname.empty()) {
    std::string module = AttrText(o, kModule.get());
    return module.empty() ? qualname : absl::StrCat(module, ".", qualname);
  }
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(o));
  std::string type_module = AttrText(type, kModule.get()), type_name = AttrText(type, kQualname.get());
  if (type_module == "torch" && (type_name == "dtype" || type_name == "layout" || type_name == "memory_format")) {
    Object repr = Object::Steal(PyObject_Repr(o));  // torch's singletons name themselves: "torch.float32"
    absl::StatusOr<std::string> text = repr ? AsString(repr) : absl::UnknownError("repr");
    ClearError();
    if (text.ok()) return *text;
  }
  return absl::StrCat("instance of ", type_module, ".", type_name);
}

bool IsTupleIterator(PyObject* o) {
  static PyTypeObject* const type = [] {
    Object empty = Object::Steal(PyTuple_New(0));
    return Py_TYPE(Object::Steal(PyObject_GetIter(empty.get())).get());  // a static type of the interpreter's
  }();
  return Py_TYPE(o) == type;
}

bool IsNumpyNumber(PyObject* o) {
  if (std::strncmp(Py_TYPE(o)->tp_name, "numpy.", 6) != 0) return false;
  PyObject* np = PyDict_GetItemString(PyImport_GetModuleDict(), "numpy");  // borrowed: only if imported
  if (np == nullptr) return false;
  for (const char* kind : {"number", "bool_"}) {
    Object type = Object::Steal(PyObject_GetAttrString(np, kind));
    if (type && PyType_Check(type.get()) && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(type.get()))) {
      return true;
    }
    PyErr_Clear();
  }
  return false;
}

}  // namespace dynamo::python
