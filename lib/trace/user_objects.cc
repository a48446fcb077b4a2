// User-defined classes and their instances: what the translator knows about
// an object of a plain Python class that the trace constructs (a tracked
// instance whose attributes are trackers), a named tuple made by calling
// its class, and the truth value of instances of Python classes.
//
//   class P:                      p = P(x)     # object.__new__, then P.__init__ inlined
//       def __init__(self, x):    p.y = p.x+1  # attributes live on the tracker
//           self.x = x            if p: ...    # type(p).__bool__, __len__, then True
//
// Only classes whose construction and attribute protocol are CPython's
// defaults are modelled (type as metaclass, object.__new__, no __slots__,
// object's __getattribute__/__setattr__/__delattr__, no __getattr__, no
// C base but object); anything else stays a graph break. An instance that
// outlives the graph is rebuilt by lib/rewrite as object.__new__(cls) and
// one STORE_ATTR per attribute, which is exactly the state the trace holds.
#include <Python.h>

#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;

PyTypeObject* AsType(PyObject* cls) { return reinterpret_cast<PyTypeObject*>(cls); }

// The raw class attribute `name` along the MRO (borrowed; null: absent),
// as CPython's special-method lookup and instance attribute lookup find it.
PyObject* TypeLookup(PyObject* cls, const char* name) {
  Object n = Object::Steal(PyUnicode_FromString(name));
  if (!n) {
    python::ClearError();
    return nullptr;
  }
  return _PyType_Lookup(AsType(cls), n.get());
}

PyObject* ObjectMember(const char* name) {
  return TypeLookup(reinterpret_cast<PyObject*>(&PyBaseObject_Type), name);
}

bool IsDataDescriptor(PyObject* d) { return Py_TYPE(d)->tp_descr_set != nullptr; }

// Every class of cls's MRO before `base` is a Python class (no __slots__
// unless allowed), and `base`, then object, end it.
bool PythonClassesUpTo(PyObject* cls, PyTypeObject* base, bool allow_slots) {
  if (!TypeCallConstructs(cls)) return false;
  PyObject* mro = AsType(cls)->tp_mro;
  if (mro == nullptr || !PyTuple_Check(mro)) return false;
  Py_ssize_t n = PyTuple_GET_SIZE(mro);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyTypeObject* t = AsType(PyTuple_GET_ITEM(mro, i));
    if (t == base) {
      return base == &PyBaseObject_Type ? i == n - 1
                                        : i == n - 2 && PyTuple_GET_ITEM(mro, n - 1) ==
                                                            reinterpret_cast<PyObject*>(&PyBaseObject_Type);
    }
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return false;
    // `__slots__ = ()` (collections.abc's classes) adds no slot.
    PyObject* slots = python::TypeDictItem(t, "__slots__");
    if (!allow_slots && slots != nullptr && PyObject_Length(slots) != 0) {
      python::ClearError();
      return false;
    }
  }
  return false;
}

// The attribute protocol of instances is that of `base` (object, or tuple,
// whose slots are the generic ones).
bool DefaultAttributeProtocol(PyObject* cls, PyTypeObject* base = &PyBaseObject_Type) {
  for (const char* name : {"__getattribute__", "__setattr__", "__delattr__"}) {
    if (TypeLookup(cls, name) != TypeLookup(reinterpret_cast<PyObject*>(base), name)) return false;
  }
  return TypeLookup(cls, "__getattr__") == nullptr;
}

// A slot of a Python class (`__slots__`, dataclass(slots=True)): its
// member descriptor reads and writes a field of the instance.
bool SlotMember(PyObject* d) { return d != nullptr && Py_TYPE(d) == &PyMemberDescr_Type; }

// A Python function that overrides object's `name` on cls, or null where
// object's own applies (a C override: not modelled, so not Plain).
bool OverriddenBy(PyObject* cls, const char* name, PyObject** fn) {
  PyObject* d = TypeLookup(cls, name);
  *fn = d == ObjectMember(name) ? nullptr : d;
  return *fn == nullptr || PyFunction_Check(*fn);
}

// A class whose instances the trace can make and track: cls(...) is
// object.__new__(cls) then cls.__init__(...), attributes in __dict__ or
// in slots. Reads are object's (no __getattribute__ or __getattr__ of its
// own); __setattr__ and __delattr__ may be Python functions, which the
// trace inlines (a frozen dataclass's raise, for one).
bool PlainClass(PyObject* cls) {
  if (!PyType_Check(cls) || !PythonClassesUpTo(cls, &PyBaseObject_Type, /*allow_slots=*/true) ||
      TypeLookup(cls, "__new__") != ObjectMember("__new__") ||
      TypeLookup(cls, "__getattribute__") != ObjectMember("__getattribute__") ||
      TypeLookup(cls, "__getattr__") != nullptr) {
    return false;
  }
  PyObject* fn = nullptr;
  return OverriddenBy(cls, "__setattr__", &fn) && OverriddenBy(cls, "__delattr__", &fn);
}

// A named tuple class (collections.namedtuple, typing.NamedTuple, or a
// Python subclass of one that keeps tuple's container protocol): its
// __new__ is a Python function that calls tuple.__new__.
bool NamedTupleClass(PyObject* cls) {
  if (!PyType_Check(cls) || !PythonClassesUpTo(cls, &PyTuple_Type, /*allow_slots=*/true)) return false;
  if (!DefaultAttributeProtocol(cls, &PyTuple_Type) || TypeLookup(cls, "__init__") != ObjectMember("__init__")) return false;
  PyObject* fields = TypeLookup(cls, "_fields");
  if (fields == nullptr || !PyTuple_Check(fields)) return false;
  PyObject* tuple = reinterpret_cast<PyObject*>(&PyTuple_Type);
  for (const char* name : {"__len__", "__getitem__", "__iter__", "__contains__", "__bool__", "__eq__",
                           "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__add__",
                           "__mul__", "__rmul__", "count", "index"}) {
    if (TypeLookup(cls, name) != TypeLookup(tuple, name)) return false;
  }
  PyObject* new_fn = TypeLookup(cls, "__new__");
  return new_fn != nullptr && Py_TYPE(new_fn) == &PyStaticMethod_Type;
}

Object StaticFunction(PyObject* descriptor) {
  Object f = Object::Steal(PyObject_GetAttrString(descriptor, "__func__"));
  if (!f) python::ClearError();
  return f;
}

}  // namespace

bool TypeCallConstructs(PyObject* cls) {
  if (!PyType_Check(cls)) return false;
  // A metaclass may add class-level behaviour (abc.ABCMeta's registry,
  // transformers' renaming of __init__ arguments through the class's
  // __setattr__), but calling the class must be type.__call__.
  PyObject* meta = reinterpret_cast<PyObject*>(Py_TYPE(cls));
  if (meta != reinterpret_cast<PyObject*>(&PyType_Type) &&
      TypeLookup(meta, "__call__") != TypeLookup(reinterpret_cast<PyObject*>(&PyType_Type), "__call__")) {
    return false;
  }
  // object.__new__ refuses a class with abstract methods left.
  return !(AsType(cls)->tp_flags & Py_TPFLAGS_IS_ABSTRACT);
}

std::optional<absl::StatusOr<VarPtr>> Translator::ConstructUserObject(const VarPtr& cls_var,
                                                                      std::vector<VarPtr>& args,
                                                                      Kwargs& kwargs) {
  PyObject* cls = cls_var->object.get();
  if (PlainClass(cls)) {
    Object empty = Object::Steal(PyTuple_New(0));
    Object stand_in = Object::Steal(PyBaseObject_Type.tp_new(AsType(cls), empty.get(), nullptr));
    if (!stand_in) return absl::StatusOr<VarPtr>(python::FetchError("object.__new__"));
    VarPtr instance = Var::OfKind(VarKind::kUserObject, stand_in);
    instance->user_class = cls_var;
    // The class facts construction relied on, beyond its identity: its
    // __new__ and attribute protocol are still those seen now.
    if (cls_var->source) {
      for (const char* name : {"__new__", "__setattr__", "__delattr__", "__getattribute__"}) {
        guards_.IdMatch(Source::Attr(cls_var->source, name), Object::Borrow(TypeLookup(cls, name)));
      }
      guards_.HasAttr(cls_var->source, "__getattr__", false);
    }
    PyObject* init = TypeLookup(cls, "__init__");
    if (init == ObjectMember("__init__")) {
      if (!args.empty() || !kwargs.empty()) {
        return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER,
                                            absl::StrCat(python::Repr(cls_var->object), "() takes no arguments"),
                                            "the call raises TypeError"));
      }
      return absl::StatusOr<VarPtr>(instance);
    }
    if (init == nullptr || !PyFunction_Check(init)) return std::nullopt;
    SourcePtr init_source = AttrOf(cls_var->source, "__init__");
    guards_.IdMatch(init_source, Object::Borrow(init));
    VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(init), init_source);
    fn->self = instance;
    absl::StatusOr<VarPtr> r = Inline(fn, std::move(args), std::move(kwargs));
    if (!r.ok()) return absl::StatusOr<VarPtr>(r.status());
    if (!(*r)->is_none()) {
      return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER, "__init__() should return None",
                                          "the call raises TypeError"));
    }
    return absl::StatusOr<VarPtr>(instance);
  }
  if (NamedTupleClass(cls)) {
    Object new_fn = StaticFunction(TypeLookup(cls, "__new__"));
    if (!new_fn || !PyFunction_Check(new_fn.get())) return std::nullopt;
    SourcePtr new_source = AttrOf(cls_var->source, "__new__");  // getattr gives the function
    guards_.IdMatch(new_source, new_fn);
    VarPtr fn = Var::OfKind(VarKind::kFunction, new_fn, new_source);
    args.insert(args.begin(), cls_var);
    // __init__ is object's, which accepts the arguments when __new__ is not.
    return Inline(fn, std::move(args), std::move(kwargs));
  }
  return ConstructUserDict(cls_var, args, kwargs);
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallTupleNew(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                               const Kwargs& kwargs) {
  if (!fn->object) return std::nullopt;
  PyObject* o = fn->object.get();
  // object.__init__ reached through super() or called unbound on a tracked
  // instance: it does nothing for a class whose __init__ is overridden.
  if (o == ObjectMember("__init__") && kwargs.empty()) {
    if (fn->self && fn->self->kind == VarKind::kUserObject && args.empty()) {
      return absl::StatusOr<VarPtr>(Var::Constant(python::None()));
    }
    if (!fn->self && args.size() == 1 && args[0]->kind == VarKind::kUserObject) {
      return absl::StatusOr<VarPtr>(Var::Constant(python::None()));
    }
    return std::nullopt;
  }
  // object.__setattr__ / __delattr__ on a tracked instance (a frozen
  // dataclass's __init__, a __setattr__ override's super() call): the
  // generic store, bypassing the class's own.
  const bool set = o == ObjectMember("__setattr__"), del = o == ObjectMember("__delattr__");
  if ((set || del) && kwargs.empty()) {
    std::vector<VarPtr> all = args;
    if (fn->self) all.insert(all.begin(), fn->self);
    if (all.size() != (set ? 3u : 2u) || all[0]->kind != VarKind::kUserObject) return std::nullopt;
    if (!all[1]->is_constant() || !PyUnicode_Check(all[1]->object.get())) {
      return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER,
                                          absl::StrCat("object.", set ? "__setattr__" : "__delattr__",
                                                       " with a name that is not a str constant"),
                                          "the attribute's name must be known while tracing"));
    }
    const std::string name = *python::AsString(all[1]->object);
    absl::Status s = set ? StoreUserObjectAttr(all[0], name, all[2], /*generic=*/true)
                         : DeleteUserObjectAttr(all[0], name, /*generic=*/true);
    if (!s.ok()) return absl::StatusOr<VarPtr>(s);
    return absl::StatusOr<VarPtr>(Var::Constant(python::None()));
  }
  Object tuple_new = Object::Steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyTuple_Type), "__new__"));
  if (!tuple_new) python::ClearError();
  if (o != tuple_new.get() || args.size() != 2 || !kwargs.empty() || args[0]->kind != VarKind::kClass) {
    return std::nullopt;
  }
  PyObject* cls = args[0]->object.get();
  const bool plain = cls == reinterpret_cast<PyObject*>(&PyTuple_Type);
  if (!plain && !NamedTupleClass(cls)) return std::nullopt;
  absl::StatusOr<std::vector<VarPtr>> items = Materialize(args[1]);
  if (!items.ok()) return absl::StatusOr<VarPtr>(items.status());
  VarPtr t = Var::Tuple(std::move(*items));
  if (plain) return absl::StatusOr<VarPtr>(t);
  PyObject* fields = TypeLookup(cls, "_fields");
  if (PyTuple_GET_SIZE(fields) != static_cast<Py_ssize_t>(t->items.size())) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER,
                                        absl::StrCat("a ", python::Repr(args[0]->object),
                                                     " with a length other than its fields'"),
                                        ""));
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); ++i) {
    absl::StatusOr<std::string> f = python::AsString(Object::Borrow(PyTuple_GET_ITEM(fields, i)));
    if (!f.ok()) return std::nullopt;
    t->fields.push_back(*f);
  }
  t->user_class = args[0];
  return absl::StatusOr<VarPtr>(t);
}

namespace {

// What a class attribute found on the MRO reads as through an instance
// (`self`) or through the class (self null): functions bind, staticmethod
// and classmethod unwrap, properties run their getter. The identity of what
// the trace relied on is guarded through the class's source.
enum class MemberKind { kFunction, kStatic, kClassMethod, kProperty, kOtherDescriptor, kValue };

MemberKind KindOf(PyObject* d) {
  if (PyFunction_Check(d)) return MemberKind::kFunction;
  if (Py_TYPE(d) == &PyStaticMethod_Type) return MemberKind::kStatic;
  if (Py_TYPE(d) == &PyClassMethod_Type) return MemberKind::kClassMethod;
  if (Py_TYPE(d) == &PyProperty_Type) return MemberKind::kProperty;
  if (Py_TYPE(d)->tp_descr_get != nullptr) return MemberKind::kOtherDescriptor;
  return MemberKind::kValue;
}

}  // namespace

std::optional<absl::StatusOr<VarPtr>> Translator::UserTupleAttr(const VarPtr& obj, const std::string& name) {
  PyObject* cls = obj->user_class->object.get();
  PyObject* d = TypeLookup(cls, name.c_str());
  if (d == nullptr || d == TypeLookup(reinterpret_cast<PyObject*>(&PyTuple_Type), name.c_str())) {
    if (name == "__class__") return absl::StatusOr<VarPtr>(obj->user_class);
    return std::nullopt;  // tuple's own methods
  }
  if (name == "__class__") return absl::StatusOr<VarPtr>(obj->user_class);
  return UserObjectAttr(obj, name);
}

absl::StatusOr<VarPtr> Translator::ClassMember(const VarPtr& obj, const VarPtr& cls_var, const std::string& name,
                                               PyObject* found) {
  const SourcePtr member_source = AttrOf(cls_var->source, name);
  switch (KindOf(found)) {
    case MemberKind::kFunction: {
      guards_.IdMatch(member_source, Object::Borrow(found));
      VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(found), member_source);
      fn->self = obj;
      return fn;
    }
    case MemberKind::kStatic:
    case MemberKind::kClassMethod: {
      Object f = StaticFunction(found);
      if (!f || !PyFunction_Check(f.get())) break;
      const bool static_method = KindOf(found) == MemberKind::kStatic;
      // getattr(cls, name) is the function itself for a staticmethod, a
      // method bound to cls for a classmethod.
      SourcePtr fn_source = static_method ? member_source : AttrOf(member_source, "__func__");
      guards_.IdMatch(fn_source, f);
      VarPtr fn = Var::OfKind(VarKind::kFunction, f, fn_source);
      if (!static_method) fn->self = cls_var;
      return fn;
    }
    case MemberKind::kProperty: {
      Object fget = Object::Steal(PyObject_GetAttrString(found, "fget"));
      if (!fget) python::ClearError();
      if (!fget || !PyFunction_Check(fget.get())) break;
      // getattr(cls, name) is the property itself.
      guards_.IdMatch(member_source, Object::Borrow(found));
      SourcePtr fget_source = AttrOf(member_source, "fget");
      VarPtr fn = Var::OfKind(VarKind::kFunction, fget, fget_source);
      return Inline(fn, {obj}, {});
    }
    case MemberKind::kValue:
      return Wrap(Object::Borrow(found), member_source);
    case MemberKind::kOtherDescriptor:
      break;
  }
  return Break(ir::GraphBreak::OTHER,
               absl::StrCat("reading .", name, " of ", Describe(*obj), " runs a ", python::TypeName(Object::Borrow(found))),
               "only functions, staticmethods, classmethods, properties and plain class attributes are traced");
}

absl::StatusOr<VarPtr> Translator::UserObjectAttr(const VarPtr& obj, const std::string& name) {
  if (name == "__class__") return obj->user_class;
  PyObject* d = TypeLookup(obj->user_class->object.get(), name.c_str());
  if (obj->kind == VarKind::kUserObject && SlotMember(d)) {  // a slot: held on the tracker, as attributes are
    for (size_t i = 0; i < obj->keys.size(); ++i) {
      if (*python::AsString(obj->keys[i]->object) == name) return obj->items[i];
    }
    // CPython's message: the class's name, from 3.13 its module and
    // qualified name ("%T") unless the module is builtins or __main__.
    PyObject* cls = obj->user_class->object.get();
    std::string type_name = AsType(cls)->tp_name;
    if (PY_VERSION_HEX >= 0x030D0000) {
      absl::StatusOr<std::string> module = python::AsString(Attr(cls, "__module__"));
      absl::StatusOr<std::string> qualname = python::AsString(Attr(cls, "__qualname__"));
      python::ClearError();
      if (module.ok() && qualname.ok()) {
        type_name = *module == "builtins" || *module == "__main__" ? *qualname : absl::StrCat(*module, ".", *qualname);
      }
    }
    return RaiseNew(PyExc_AttributeError, absl::StrCat("'", type_name, "' object has no attribute '", name, "'"));
  }
  if (d != nullptr && IsDataDescriptor(d)) {
    return ClassMember(obj, obj->user_class, name, d);  // a data descriptor wins over the instance
  }
  if (obj->kind == VarKind::kUserObject) {
    for (size_t i = 0; i < obj->keys.size(); ++i) {
      if (*python::AsString(obj->keys[i]->object) == name) return obj->items[i];
    }
  }
  if (d != nullptr) return ClassMember(obj, obj->user_class, name, d);
  return RaiseNew(PyExc_AttributeError, absl::StrCat("'", AsType(obj->user_class->object.get())->tp_name,
                                                     "' object has no attribute '", name, "'"));
}

PyTypeObject* SuperDefiner(const VarPtr& sup, const char* name) {
  Object start = Attr(sup->object.get(), "__thisclass__");
  PyObject* mro = Py_TYPE(sup->self->object.get())->tp_mro;
  Py_ssize_t i = 0, n = mro ? PyTuple_GET_SIZE(mro) : 0;
  while (i < n && PyTuple_GET_ITEM(mro, i) != start.get()) ++i;
  for (++i; i < n; ++i) {
    PyTypeObject* base = AsType(PyTuple_GET_ITEM(mro, i));
    if (python::TypeDictItem(base, name) != nullptr) return base;
  }
  return nullptr;
}

std::optional<absl::StatusOr<VarPtr>> Translator::ObjectGetattribute(const VarPtr& obj, const std::string& name) {
  if (name != "__getattribute__" || !obj->object) return std::nullopt;
  PyObject* slot = ObjectMember("__getattribute__");
  if (obj->kind == VarKind::kClass && obj->object.get() == reinterpret_cast<PyObject*>(&PyBaseObject_Type)) {
    return absl::StatusOr<VarPtr>(Var::OfKind(VarKind::kOpaque, Object::Borrow(slot)));
  }
  if (obj->kind != VarKind::kOpaque || !obj->self || !obj->self->object ||
      !PyObject_TypeCheck(obj->object.get(), &PySuper_Type)) {
    return std::nullopt;
  }
  // super().__getattribute__: only object's is modelled; the class's own
  // was guarded when it was inlined.
  PyTypeObject* definer = SuperDefiner(obj, "__getattribute__");
  if (definer == nullptr || python::TypeDictItem(definer, "__getattribute__") != slot) return std::nullopt;
  VarPtr bound = Var::OfKind(VarKind::kOpaque, Object::Borrow(slot));
  bound->self = obj->self;
  return absl::StatusOr<VarPtr>(bound);
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallObjectGetattribute(const VarPtr& fn,
                                                                         const std::vector<VarPtr>& args,
                                                                         const Kwargs& kwargs) {
  if (!fn->object || fn->object.get() != ObjectMember("__getattribute__") || !kwargs.empty()) return std::nullopt;
  std::vector<VarPtr> all = args;
  if (fn->self) all.insert(all.begin(), fn->self);
  if (all.size() != 2 || !all[1]->is_constant() || !PyUnicode_Check(all[1]->object.get())) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER,
                                        "object.__getattribute__ with other than an object and a str constant",
                                        "the attribute's name must be known while tracing"));
  }
  return GenericAttr(all[0], *python::AsString(all[1]->object));
}

// The instance dict of `o` (its type has one). The guards read it as
// obj.__dict__ through getattr, which runs the class's __getattribute__:
// that must give the instance's own dict, or the read is a graph break.
absl::StatusOr<Object> Translator::InstanceDict(PyObject* o) {
  Object dict = Object::Steal(PyObject_GenericGetDict(o, nullptr));
  if (!dict) return python::FetchError("reading an object's __dict__");
  Object seen = Attr(o, "__dict__");
  if (seen.get() != dict.get()) {
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat("the __dict__ of a ", python::TypeName(Object::Borrow(o)),
                              " reads as another object through getattr"),
                 "");
  }
  return dict;
}

absl::StatusOr<VarPtr> Translator::GenericAttr(const VarPtr& obj, const std::string& name) {
  PyObject* o = obj->object.get();
  if (obj->kind != VarKind::kOpaque || o == nullptr || !obj->source) {
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat("object.__getattribute__ of ", Describe(*obj)),
                 "the generic read is traced for objects the frame reads, inside their class's __getattribute__");
  }
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(o));
  // The class as a tracker, for reads that go through it (its type is
  // guarded where obj was read; an instance read adds no class guard).
  auto class_member = [&](PyObject* found) -> absl::StatusOr<VarPtr> {
    absl::StatusOr<VarPtr> cls_var = Wrap(Object::Borrow(cls), Source::Attr(obj->source, "__class__"));
    if (!cls_var.ok()) return cls_var.status();
    return ClassMember(obj, *cls_var, name, found);
  };
  if (name == "__class__") return Wrap(Object::Borrow(cls), Source::Attr(obj->source, "__class__"));
  // PyObject_GenericGetAttr's order: a data descriptor of the class, the
  // instance's __dict__, then any other class attribute.
  PyObject* d = TypeLookup(cls, name.c_str());
  if (name == "__dict__" && Py_TYPE(o)->tp_dictoffset != 0) {
    // The instance's own dict (its class's __dict__ descriptor): every
    // item is guarded, which also proves a key absent for .get().
    absl::StatusOr<Object> dict = InstanceDict(o);
    if (!dict.ok()) return dict.status();
    return Wrap(*dict, Source::Attr(obj->source, "__dict__"));
  }
  if (d != nullptr && IsDataDescriptor(d)) return class_member(d);
  auto missing = [&] {
    return Break(ir::GraphBreak::OTHER, absl::StrCat(Describe(*obj), " has no attribute '", name, "'"),
                 "the read raises AttributeError (a __getattr__ fallback is not traced)");
  };
  if (Py_TYPE(o)->tp_dictoffset != 0) {
    absl::StatusOr<Object> dict = InstanceDict(o);
    if (!dict.ok()) return dict.status();
    Object key = python::FromString(name);
    PyObject* value = PyDict_GetItemWithError(dict->get(), key.get());  // borrowed
    if (value == nullptr && PyErr_Occurred()) return python::FetchError("reading an object's __dict__");
    if (value != nullptr) {
      return Wrap(Object::Borrow(value), Source::Item(Source::Attr(obj->source, "__dict__"), name));
    }
  }
  if (d == nullptr) return missing();
  // A class attribute an instance attribute could later shadow: the guards
  // read it as getattr(obj, name), which must give what the generic read
  // gives now (a method: the same function, bound to obj).
  Object full = Object::Steal(PyObject_GetAttrString(o, name.c_str()));
  if (!full) python::ClearError();
  Object generic = Object::Steal(PyObject_GenericGetAttr(o, python::FromString(name).get()));
  if (!generic) python::ClearError();
  auto unbound = [](const Object& v) {
    return v && PyMethod_Check(v.get()) ? PyMethod_Function(v.get()) : v.get();
  };
  if (!full || !generic || unbound(full) != unbound(generic)) {
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat("reading .", name, " of ", Describe(*obj),
                              ": its class's __getattribute__ and object's give different answers"),
                 "");
  }
  if (KindOf(d) == MemberKind::kFunction) {
    SourcePtr fn_source = Source::Attr(Source::Attr(obj->source, name), "__func__");
    guards_.IdMatch(fn_source, Object::Borrow(d));
    VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(d), fn_source);
    fn->self = obj;
    return fn;
  }
  if (KindOf(d) == MemberKind::kValue) return Wrap(Object::Borrow(d), Source::Attr(obj->source, name));
  return class_member(d);
}

absl::Status Translator::StoreUserObjectAttr(const VarPtr& obj, const std::string& name, const VarPtr& value,
                                             bool generic) {
  PyObject* cls = obj->user_class->object.get();
  PyObject* setattr_fn = nullptr;
  if (!generic && OverriddenBy(cls, "__setattr__", &setattr_fn) && setattr_fn != nullptr) {
    // The class's own __setattr__ (guarded when the object was made), inlined.
    VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(setattr_fn), AttrOf(obj->user_class->source,
                                                                                    "__setattr__"));
    absl::StatusOr<VarPtr> r = Inline(fn, {obj, Var::Constant(python::FromString(name)), value}, {});
    return r.status();
  }
  PyObject* d = TypeLookup(cls, name.c_str());
  if (!SlotMember(d) && AsType(cls)->tp_dictoffset == 0 && !(d != nullptr && IsDataDescriptor(d))) {
    // CPython's message; 3.13 says why.
    return RaiseNew(PyExc_AttributeError, absl::StrCat("'", AsType(cls)->tp_name, "' object has no attribute '", name,
                                                       "'", PY_VERSION_HEX >= 0x030D0000
                                                                ? " and no __dict__ for setting new attributes"
                                                                : ""));
  }
  if (d != nullptr && IsDataDescriptor(d) && !SlotMember(d)) {
    return Break(ir::GraphBreak::SIDE_EFFECT,
                 absl::StrCat("setting .", name, " of ", Describe(*obj), " runs a ",
                              python::TypeName(Object::Borrow(d))),
                 "data descriptors (property setters, slots) are not traced");
  }
  // A new object: nothing outside the trace sees it until it is rebuilt.
  for (size_t i = 0; i < obj->keys.size(); ++i) {
    if (*python::AsString(obj->keys[i]->object) == name) {
      obj->items[i] = value;
      return absl::OkStatus();
    }
  }
  obj->keys.push_back(Var::Constant(python::FromString(name)));
  obj->items.push_back(value);
  return absl::OkStatus();
}

absl::Status Translator::DeleteUserObjectAttr(const VarPtr& obj, const std::string& name, bool generic) {
  PyObject* cls = obj->user_class->object.get();
  PyObject* delattr_fn = nullptr;
  if (!generic && OverriddenBy(cls, "__delattr__", &delattr_fn) && delattr_fn != nullptr) {
    VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(delattr_fn), AttrOf(obj->user_class->source,
                                                                                    "__delattr__"));
    return Inline(fn, {obj, Var::Constant(python::FromString(name))}, {}).status();
  }
  PyObject* d = TypeLookup(cls, name.c_str());
  if (d != nullptr && IsDataDescriptor(d) && !SlotMember(d)) {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat("deleting .", name, " of ", Describe(*obj)),
                 "__delattr__ overrides and data descriptors are not traced");
  }
  for (size_t i = 0; i < obj->keys.size(); ++i) {
    if (*python::AsString(obj->keys[i]->object) != name) continue;
    obj->keys.erase(obj->keys.begin() + static_cast<std::ptrdiff_t>(i));
    obj->items.erase(obj->items.begin() + static_cast<std::ptrdiff_t>(i));
    return absl::OkStatus();
  }
  // CPython's messages: the bare name for an unset slot, the long form otherwise.
  if (SlotMember(d)) return RaiseNew(PyExc_AttributeError, name);
  return RaiseNew(PyExc_AttributeError, absl::StrCat("'", AsType(cls)->tp_name, "' object has no attribute '",
                                                     name, "'"));
}

std::optional<absl::StatusOr<bool>> Translator::UserTruthy(const VarPtr& v) {
  if (!v->object || (v->kind != VarKind::kUserObject && v->kind != VarKind::kOpaque)) return std::nullopt;
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(v->object.get()));
  if (!PythonClassesUpTo(cls, &PyBaseObject_Type, /*allow_slots=*/true)) return std::nullopt;
  // Special methods are looked up on the type, never the instance.
  SourcePtr cls_source = v->kind == VarKind::kUserObject ? v->user_class->source : AttrOf(v->source, "__class__");
  for (const char* name : {"__bool__", "__len__"}) {
    PyObject* d = TypeLookup(cls, name);
    if (cls_source) guards_.HasAttr(cls_source, name, d != nullptr);
    if (d == nullptr) continue;
    if (!PyFunction_Check(d)) return std::nullopt;
    SourcePtr fn_source = AttrOf(cls_source, name);
    guards_.IdMatch(fn_source, Object::Borrow(d));
    VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(d), fn_source);
    absl::StatusOr<VarPtr> r = Inline(fn, {v}, {});
    if (!r.ok()) return absl::StatusOr<bool>(r.status());
    const bool is_bool = (*r)->is_constant() && PyBool_Check((*r)->object.get());
    if (absl::string_view(name) == "__bool__") {
      if (!is_bool) {
        return absl::StatusOr<bool>(Break(ir::GraphBreak::OTHER,
                                          absl::StrCat("__bool__ of ", Describe(*v), " returns ", Describe(**r)),
                                          "__bool__ should return bool; the branch raises TypeError or depends on a tensor"));
      }
      return absl::StatusOr<bool>((*r)->object.get() == Py_True);
    }
    absl::StatusOr<int64_t> n = (*r)->is_constant() ? AsInt(*r) : absl::InvalidArgumentError("");
    if (!n.ok() || *n < 0) {
      return absl::StatusOr<bool>(Break(ir::GraphBreak::OTHER,
                                        absl::StrCat("__len__ of ", Describe(*v), " returns ", Describe(**r)),
                                        "__len__ should return a non-negative int"));
    }
    return absl::StatusOr<bool>(*n > 0);
  }
  return absl::StatusOr<bool>(true);
}

std::optional<absl::StatusOr<VarPtr>> Translator::UserObjectBuiltin(const std::string& name,
                                                                    const std::vector<VarPtr>& args,
                                                                    const Kwargs& kwargs) {
  // len() of an object of a Python class runs its __len__ in the trace, so
  // attributes the trace has set (not yet replayed) are the ones it reads.
  if (name == "len" && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kOpaque &&
      args[0]->object) {
    PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(args[0]->object.get()));
    PyObject* d = TypeLookup(cls, "__len__");
    if (d != nullptr && PyFunction_Check(d)) {
      SourcePtr fn_source = AttrOf(AttrOf(args[0]->source, "__class__"), "__len__");
      guards_.IdMatch(fn_source, Object::Borrow(d));
      VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(d), fn_source);
      absl::StatusOr<VarPtr> r = Inline(fn, {args[0]}, {});
      if (!r.ok()) return r;
      absl::StatusOr<int64_t> n = (*r)->is_constant() ? AsInt(*r) : absl::InvalidArgumentError("");
      if (n.ok() && *n >= 0) return absl::StatusOr<VarPtr>(Var::Constant(python::FromLong(*n)));
      return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER, "__len__ does not return a non-negative int",
                                          "the call raises"));
    }
  }
  bool any = false;
  for (const VarPtr& a : args) any |= a->kind == VarKind::kUserObject;
  for (const auto& kv : kwargs) any |= kv.second->kind == VarKind::kUserObject;
  if (!any) return std::nullopt;
  for (const char* allowed : {"isinstance", "issubclass", "type", "getattr", "hasattr", "setattr", "super",
                              "callable", "bool", "print"}) {
    if (name == allowed) return std::nullopt;  // these read only the class, attributes or the tracker
  }
  // These only iterate their arguments, which runs type(obj).__iter__
  // traced (UserIter) or breaks.
  for (const char* iterating : {"iter", "zip", "enumerate", "list", "tuple", "map", "filter", "any", "all",
                                "sum", "sorted", "min", "max"}) {
    if (name == iterating) return std::nullopt;
  }
  if (name == "len" && args.size() == 1 && kwargs.empty()) {
    const VarPtr& v = args[0];
    PyObject* d = TypeLookup(v->user_class->object.get(), "__len__");
    if (d != nullptr && PyFunction_Check(d)) {
      SourcePtr fn_source = AttrOf(v->user_class->source, "__len__");
      guards_.IdMatch(fn_source, Object::Borrow(d));
      VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(d), fn_source);
      absl::StatusOr<VarPtr> r = Inline(fn, {v}, {});
      if (!r.ok()) return r;
      absl::StatusOr<int64_t> n = (*r)->is_constant() ? AsInt(*r) : absl::InvalidArgumentError("");
      if (n.ok() && *n >= 0) return absl::StatusOr<VarPtr>(Var::Constant(python::FromLong(*n)));
    }
  }
  return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::UNSUPPORTED_CALL,
                                      absl::StrCat(name, "() of an object made during the trace"),
                                      "only len(), bool(), isinstance(), type(), getattr() and hasattr() "
                                      "are traced on such objects"));
}

absl::StatusOr<VarPtr> Translator::UserObjectCompare(const std::string& op, const VarPtr& a, const VarPtr& b) {
  auto default_eq = [](const VarPtr& v) {
    if (v->kind == VarKind::kUserObject) {
      PyObject* cls = v->user_class->object.get();
      return TypeLookup(cls, "__eq__") == ObjectMember("__eq__") && TypeLookup(cls, "__ne__") == ObjectMember("__ne__");
    }
    return v->is_none();  // None's comparison defers to the other side's
  };
  if ((op == "==" || op == "!=") && default_eq(a) && default_eq(b)) {
    return Var::Constant(python::FromBool((a == b) == (op == "==")));
  }
  return Break(ir::GraphBreak::OTHER, absl::StrCat("comparing ", Describe(*a), " with ", Describe(*b)),
               "comparisons that run a class's own __eq__ or ordering are not traced");
}

std::optional<absl::StatusOr<VarPtr>> Translator::UserObjectOperator(const std::string& name, const VarPtr& a,
                                                                    const VarPtr& b) {
  auto user = [](const VarPtr& v) {
    return v->object && (v->kind == VarKind::kUserObject ||
                         (v->kind == VarKind::kOpaque && v->source &&
                          (Py_TYPE(v->object.get())->tp_flags & Py_TPFLAGS_HEAPTYPE)));
  };
  if (!user(a) && !user(b)) return std::nullopt;
  const bool inplace = name.size() > 1 && name[0] == 'i';
  std::string base = inplace ? name.substr(1) : name;
  if (!base.empty() && base.back() == '_') base.pop_back();  // and_ -> and
  auto class_of = [](const VarPtr& v) {
    return v->kind == VarKind::kUserObject ? v->user_class->object.get()
                                           : reinterpret_cast<PyObject*>(Py_TYPE(v->object.get()));
  };
  // Python asks a subclass's reflected method first; that order is not modelled.
  if (user(a) && user(b) && class_of(a) != class_of(b) &&
      PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(class_of(b)), reinterpret_cast<PyTypeObject*>(class_of(a)))) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER,
                                        absl::StrCat("'", name, "' between ", Describe(*a), " and its subclass's ",
                                                     Describe(*b)),
                                        "operators between a class and its subclass are not traced"));
  }
  auto answered = [](const absl::StatusOr<VarPtr>& r) {
    return !r.ok() || !(*r)->is_constant() || (*r)->object.get() != Py_NotImplemented;
  };
  std::vector<std::string> tries;
  if (inplace) tries.push_back(absl::StrCat("__i", base, "__"));
  tries.push_back(absl::StrCat("__", base, "__"));
  const std::string reflected = absl::StrCat("__r", base, "__");
  // A method that is not a Python function (a C base's slot) is not
  // modelled: the caller's path decides (a break).
  auto opaque_method = [&](const VarPtr& v, const std::string& method) {
    PyObject* d = user(v) ? TypeLookup(class_of(v), method.c_str()) : nullptr;
    return d != nullptr && !PyFunction_Check(d);
  };
  for (const std::string& method : tries) {
    if (opaque_method(a, method)) return std::nullopt;
  }
  if (opaque_method(b, reflected)) return std::nullopt;
  // tensor op obj: torch's operator asks obj's __torch_function__ first.
  if (a->is_tensor() && user(b) && TypeLookup(class_of(b), "__torch_function__") != nullptr) return std::nullopt;
  if (user(a)) {
    for (const std::string& method : tries) {
      if (std::optional<absl::StatusOr<VarPtr>> r = CallUserSpecial(a, method.c_str(), {b})) {
        if (answered(*r)) return r;
      }
    }
  }
  if (user(b) && !(user(a) && class_of(a) == class_of(b))) {
    if (std::optional<absl::StatusOr<VarPtr>> r = CallUserSpecial(b, reflected.c_str(), {a})) {
      if (answered(*r)) return r;
    }
  }
  // Neither side answers. The other operand's own method answers
  // NotImplemented where it is a builtin number, str, bytes or None, a
  // tensor or a container the trace holds: TypeError. Any other (a NumPy
  // scalar's, say) is not modelled.
  const VarPtr& other = user(a) ? b : a;
  auto builtin_constant = [](const VarPtr& v) {
    PyObject* o = v->object.get();
    return v->is_constant() && (o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
                                PyComplex_CheckExact(o) || PyUnicode_CheckExact(o) || PyBytes_CheckExact(o));
  };
  if (!user(other) && !builtin_constant(other) && !other->is_tensor() && !other->is_sequence() &&
      other->kind != VarKind::kDict) {
    return std::nullopt;
  }
  auto type_name = [&](const VarPtr& v) {
    Object cls = ClassOf(v);
    return cls ? python::AsString(Object::Steal(PyObject_GetAttrString(cls.get(), "__name__"))).value_or("?") : "?";
  };
  return absl::StatusOr<VarPtr>(RaiseNew(PyExc_TypeError, absl::StrCat("unsupported operand type(s) for ", name, ": '",
                                                                       type_name(a), "' and '", type_name(b), "'")));
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallUserSpecial(const VarPtr& v, const char* name,
                                                                   std::vector<VarPtr> args) {
  if (!v->object || (v->kind != VarKind::kUserObject && v->kind != VarKind::kOpaque)) return std::nullopt;
  if (v->kind == VarKind::kOpaque && !v->source) return std::nullopt;
  PyTypeObject* type = Py_TYPE(v->object.get());
  if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE)) return std::nullopt;
  // Special methods are looked up on the type (its metaclass plays no
  // part); the trace relies on the very function, guarded through the
  // class (an opaque object's type is guarded where it was read).
  PyObject* d = TypeLookup(reinterpret_cast<PyObject*>(type), name);
  if (d == nullptr || !PyFunction_Check(d)) return std::nullopt;
  SourcePtr cls_source = v->kind == VarKind::kUserObject ? v->user_class->source : AttrOf(v->source, "__class__");
  SourcePtr fn_source = AttrOf(cls_source, name);
  guards_.IdMatch(fn_source, Object::Borrow(d));
  VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(d), fn_source);
  args.insert(args.begin(), v);
  return Inline(fn, std::move(args), {});
}

std::optional<absl::StatusOr<VarPtr>> Translator::UserIter(const VarPtr& v) {
  if (!v->object || (v->kind != VarKind::kUserObject && v->kind != VarKind::kOpaque)) return std::nullopt;
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(v->object.get()));
  if (!PythonClassesUpTo(cls, &PyBaseObject_Type, /*allow_slots=*/true)) return std::nullopt;
  PyObject* d = TypeLookup(cls, "__iter__");
  if (d == nullptr || !PyFunction_Check(d)) return std::nullopt;
  SourcePtr cls_source = v->kind == VarKind::kUserObject ? v->user_class->source : AttrOf(v->source, "__class__");
  SourcePtr fn_source = AttrOf(cls_source, "__iter__");
  guards_.IdMatch(fn_source, Object::Borrow(d));
  VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(d), fn_source);
  PyObject* sequence = StdlibObject("collections.abc", "Sequence");
  if (sequence != nullptr && d == TypeLookup(sequence, "__iter__")) {
    return absl::StatusOr<VarPtr>(MakeSequenceIterator(fn, v));  // a generator function, run natively
  }
  absl::StatusOr<VarPtr> r = Inline(fn, {v}, {});
  if (!r.ok()) return r;
  if ((*r)->kind != VarKind::kIterator && (*r)->kind != VarKind::kGenerator) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER,
                                        absl::StrCat("__iter__ of ", Describe(*v), " returns ", Describe(**r)),
                                        "iteration is traced when __iter__ returns an iterator or generator"));
  }
  return r;
}

}  // namespace dynamo::trace
