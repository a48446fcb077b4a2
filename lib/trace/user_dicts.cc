// Instances of Python subclasses of dict (or OrderedDict) that the trace
// constructs: transformers' ModelOutput dataclasses, a user's
// `class Config(dict)`. Such an object is two things at once, and the
// tracker holds both: its items (a kDict's keys and items) and its instance
// attributes (`instance_dict`, the kDict that `obj.__dict__` reads).
//
//   @dataclass
//   class Out(ModelOutput):          out = Out(last_hidden_state=h)
//       last_hidden_state: ... = None  # base __new__, then Out.__init__ inlined:
//       pooler_output: ... = None      # its __setattr__ / __setitem__ overrides
//                                      # run traced, super().__setitem__ is dict's
//   out[0], out.last_hidden_state, out.to_tuple(), "x" in out
//
// The class's Python code (its __init__, __getitem__, __setitem__,
// __contains__, __setattr__, properties, methods) is inlined; what dict's
// C slots do (super().__setitem__, keys(), get()) is done on the tracker.
// Only classes whose every special method is one of those, or one that no
// traced operation reaches without breaking, are modelled; anything else
// stays a graph break. After the graph the object is rebuilt by lib/rewrite
// as base.__new__(cls), base.__setitem__ per item and object.__setattr__
// per attribute, which is exactly the state the trace holds, without
// running the class's __init__ again.
#include <Python.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;

PyObject* TypeLookup(PyObject* cls, const char* name) {
  Object n = python::FromString(name);
  return _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls), n.get());
}

// Special names a Python class of the MRO may define. The routed ones are
// inlined where Python calls them (obj[k], obj[k] = v, k in obj, obj.a = v,
// construction); the rest are data, or are reached only by operations that
// break on these objects anyway (==, repr(), copy, pickling: dict's C code
// or ToPython, which has no value for the tracker).
constexpr const char* kRoutedSpecials[] = {"__init__", "__getitem__", "__setitem__", "__contains__",
                                           "__setattr__", "__post_init__"};
constexpr const char* kInertSpecials[] = {
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__", "__annotate__",
    "__annotate_func__", "__annotations_cache__", "__firstlineno__", "__static_attributes__",
    "__orig_bases__", "__parameters__", "__match_args__", "__dataclass_fields__", "__dataclass_params__",
    "__init_subclass__", "__class_getitem__", "__eq__", "__ne__", "__hash__", "__repr__", "__str__",
    "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__delitem__",
    "__replace__"};  // 3.13's dataclasses: copy.replace(), a Python method

bool Listed(const char* const* begin, const char* const* end, const std::string& name) {
  return std::find_if(begin, end, [&](const char* n) { return name == n; }) != end;
}

// The index from the end of cls.__mro__ of its C dict base (-2: dict,
// -3: OrderedDict), or 0 when cls is not a class this file models.
int DictBaseIndex(PyObject* cls) {
  if (!TypeCallConstructs(cls)) return 0;
  PyObject* mro = reinterpret_cast<PyTypeObject*>(cls)->tp_mro;
  if (mro == nullptr || !PyTuple_Check(mro)) return 0;
  const Py_ssize_t n = PyTuple_GET_SIZE(mro);
  Py_ssize_t i = 0;
  for (; i < n; ++i) {
    PyTypeObject* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) break;
    if (python::TypeDictItem(t, "__slots__") != nullptr) return 0;
    PyObject* dict = t->tp_dict;  // a Python class's own (builtin types' is per-interpreter from 3.12)
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
      absl::StatusOr<std::string> k = python::AsString(Object::Borrow(key));
      if (!k.ok()) return 0;
      if (!absl::StartsWith(*k, "__") || !absl::EndsWith(*k, "__")) continue;  // methods: read by name
      if (!Listed(std::begin(kRoutedSpecials), std::end(kRoutedSpecials), *k) &&
          !Listed(std::begin(kInertSpecials), std::end(kInertSpecials), *k)) {
        return 0;
      }
    }
  }
  if (i == 0 || i >= n) return 0;
  PyObject* base = PyTuple_GET_ITEM(mro, i);
  PyObject* rest_dict = reinterpret_cast<PyObject*>(&PyDict_Type);
  PyObject* object = reinterpret_cast<PyObject*>(&PyBaseObject_Type);
  const bool plain = base == rest_dict && n - i == 2 && PyTuple_GET_ITEM(mro, n - 1) == object;
  const bool ordered = base == StdlibObject("collections", "OrderedDict") && n - i == 3 &&
                       PyTuple_GET_ITEM(mro, n - 2) == rest_dict && PyTuple_GET_ITEM(mro, n - 1) == object;
  if (!plain && !ordered) return 0;
  // Made by the base's own __new__, read by the generic attribute protocol.
  for (const char* name : {"__new__", "__getattribute__", "__delattr__"}) {
    if (TypeLookup(cls, name) != TypeLookup(base, name)) return 0;
  }
  if (TypeLookup(cls, "__getattr__") != nullptr) return 0;
  return static_cast<int>(i - n);
}

// The class of cls's MRO that defines `name`, with what it defines; nulls
// when none does.
std::pair<PyObject*, PyObject*> Definer(PyObject* cls, const char* name) {
  PyObject* mro = reinterpret_cast<PyTypeObject*>(cls)->tp_mro;
  for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(mro); i < n; ++i) {
    PyTypeObject* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (PyObject* found = python::TypeDictItem(t, name)) return {reinterpret_cast<PyObject*>(t), found};
  }
  return {nullptr, nullptr};
}

bool IsPythonClass(PyObject* t) {
  return t != nullptr && (reinterpret_cast<PyTypeObject*>(t)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

}  // namespace

bool IsUserDict(const VarPtr& v) { return v->kind == VarKind::kDict && v->user_class && v->instance_dict; }

std::optional<absl::StatusOr<VarPtr>> Translator::ConstructUserDict(const VarPtr& cls_var, std::vector<VarPtr>& args,
                                                                    Kwargs& kwargs) {
  using R = absl::StatusOr<VarPtr>;
  PyObject* cls = cls_var->object.get();
  const int base_index = DictBaseIndex(cls);
  if (base_index == 0) return std::nullopt;
  PyObject* mro = reinterpret_cast<PyTypeObject*>(cls)->tp_mro;
  PyTypeObject* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, PyTuple_GET_SIZE(mro) + base_index));
  // A real, empty instance stands for it in class lookups, isinstance and
  // super(); it is never handed to code or emitted.
  Object empty = Object::Steal(PyTuple_New(0));
  Object stand_in = Object::Steal(base->tp_new(reinterpret_cast<PyTypeObject*>(cls), empty.get(), nullptr));
  if (!stand_in) return R(python::FetchError("dict.__new__"));
  VarPtr d = Var::Dict({}, {});
  d->object = stand_in;
  d->container_class = cls_var->object;
  d->user_class = cls_var;
  d->instance_dict = Var::Dict({}, {});
  // What construction relied on beyond the class's identity: its
  // __new__, attribute protocol and the specials routed here.
  if (cls_var->source) {
    for (const char* name : {"__new__", "__getattribute__", "__setattr__", "__getitem__", "__setitem__",
                             "__contains__", "__init__"}) {
      guards_.IdMatch(Source::Attr(cls_var->source, name), Object::Borrow(TypeLookup(cls, name)));
    }
    guards_.HasAttr(cls_var->source, "__getattr__", false);
  }
  PyObject* init = TypeLookup(cls, "__init__");
  if (init == TypeLookup(reinterpret_cast<PyObject*>(base), "__init__")) {
    if (absl::Status s = UpdateDict(d, args, kwargs); !s.ok()) return R(s);
    return R(d);
  }
  if (!PyFunction_Check(init)) return std::nullopt;
  VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(init), AttrOf(cls_var->source, "__init__"));
  fn->self = d;
  absl::StatusOr<VarPtr> r = Inline(fn, std::move(args), std::move(kwargs));
  if (!r.ok()) return R(r.status());
  if (!(*r)->is_none()) {
    return R(Break(ir::GraphBreak::OTHER, "__init__() should return None", "the call raises TypeError"));
  }
  return R(d);
}

absl::StatusOr<VarPtr> Translator::UserDictAttr(const VarPtr& d, const std::string& name) {
  if (name == "__class__") return d->user_class;
  if (name == "__dict__") return d->instance_dict;
  PyObject* cls = d->user_class->object.get();
  auto [definer, found] = Definer(cls, name.c_str());
  const bool data_descriptor = found != nullptr && Py_TYPE(found)->tp_descr_set != nullptr;
  if (data_descriptor && IsPythonClass(definer)) return ClassMember(d, d->user_class, name, found);
  const VarPtr& attrs = d->instance_dict;
  for (size_t i = 0; i < attrs->keys.size(); ++i) {
    if (attrs->keys[i]->is_constant() && PyUnicode_Check(attrs->keys[i]->object.get()) &&
        *python::AsString(attrs->keys[i]->object) == name) {
      return attrs->items[i];
    }
  }
  if (found == nullptr) {
    return RaiseNew(PyExc_AttributeError,
                    absl::StrCat("'", python::TypeName(d->object), "' object has no attribute '", name, "'"));
  }
  if (IsPythonClass(definer)) return ClassMember(d, d->user_class, name, found);
  // dict's own method (keys, get, ...): what the class resolves it to is
  // guarded, so a method added later in a Python class recaptures.
  if (d->user_class->source) guards_.IdMatch(Source::Attr(d->user_class->source, name), Object::Borrow(found));
  return Var::Method(d, name);
}

absl::Status Translator::StoreUserDictAttr(const VarPtr& d, const std::string& name, const VarPtr& value,
                                           bool through_class) {
  PyObject* cls = d->user_class->object.get();
  if (through_class) {
    auto [definer, setattr] = Definer(cls, "__setattr__");
    if (IsPythonClass(definer)) {
      if (!PyFunction_Check(setattr)) {
        return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat("setting .", name, " of ", Describe(*d)),
                     "its class's __setattr__ is not a Python function");
      }
      VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(setattr),
                              AttrOf(d->user_class->source, "__setattr__"));
      absl::StatusOr<VarPtr> r = Inline(fn, {d, Var::Constant(python::FromString(name)), value}, {});
      return r.ok() ? absl::OkStatus() : r.status();
    }
  }
  // object.__setattr__: a data descriptor of the class wins, else the
  // instance dict (the object is new: no side effect).
  auto [definer, found] = Definer(cls, name.c_str());
  if (found != nullptr && Py_TYPE(found)->tp_descr_set != nullptr) {
    return Break(ir::GraphBreak::SIDE_EFFECT,
                 absl::StrCat("setting .", name, " of ", Describe(*d), " runs a ",
                              python::TypeName(Object::Borrow(found))),
                 "data descriptors (property setters) are not traced");
  }
  return DictSet(d->instance_dict, Var::Constant(python::FromString(name)), value);
}

std::optional<absl::StatusOr<VarPtr>> Translator::UserDictSpecial(const VarPtr& d, const char* name,
                                                                  std::vector<VarPtr> args) {
  if (!IsUserDict(d)) return std::nullopt;
  auto [definer, found] = Definer(d->user_class->object.get(), name);
  if (!IsPythonClass(definer)) return std::nullopt;  // dict's slot: the caller's plain-dict path
  if (!PyFunction_Check(found)) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER,
                                        absl::StrCat(name, " of ", Describe(*d), " is not a Python function"), ""));
  }
  SourcePtr fn_source = AttrOf(d->user_class->source, name);
  guards_.IdMatch(fn_source, Object::Borrow(found));
  VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(found), fn_source);
  args.insert(args.begin(), d);
  return Inline(fn, std::move(args), {});
}

std::optional<absl::StatusOr<VarPtr>> Translator::UserDictSuperAttr(const VarPtr& sup, const std::string& name) {
  if (sup->kind != VarKind::kOpaque || !sup->self || !IsUserDict(sup->self) || !sup->object ||
      !PyObject_TypeCheck(sup->object.get(), &PySuper_Type)) {
    return std::nullopt;
  }
  const VarPtr& d = sup->self;
  PyObject* definer = reinterpret_cast<PyObject*>(SuperDefiner(sup, name.c_str()));
  PyObject* found = definer ? python::TypeDictItem(reinterpret_cast<PyTypeObject*>(definer), name.c_str()) : nullptr;
  if (found == nullptr) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER,
                                        absl::StrCat("super().", name, " is not found in a base class"),
                                        "the read raises AttributeError"));
  }
  if (IsPythonClass(definer)) {
    if (!PyFunction_Check(found)) {
      return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER, absl::StrCat("super().", name, " runs a descriptor"),
                                          "its result is not known while tracing"));
    }
    // The base class is on the class's MRO, fixed with the class's identity;
    // its entry may be reassigned, so it is guarded.
    SourcePtr entry;
    if (d->user_class->source) {
      PyObject* mro = reinterpret_cast<PyTypeObject*>(d->user_class->object.get())->tp_mro;
      Py_ssize_t i = 0;
      while (PyTuple_GET_ITEM(mro, i) != definer) ++i;
      entry = Source::Item(Source::Attr(Source::Item(Source::Attr(d->user_class->source, "__mro__"), i), "__dict__"),
                           name);
      guards_.IdMatch(entry, Object::Borrow(found));
    }
    VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(found), entry);
    fn->self = d;
    return absl::StatusOr<VarPtr>(fn);
  }
  return absl::StatusOr<VarPtr>(Var::Method(d, name));  // dict's (or object's) C method
}

std::optional<absl::StatusOr<VarPtr>> Translator::DictSubclassAttr(const VarPtr& d, const std::string& name) {
  using R = absl::StatusOr<VarPtr>;
  if (d->kind != VarKind::kDict || IsUserDict(d) || !d->object || !d->source) return std::nullopt;
  PyObject* o = d->object.get();
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(o));
  if (!IsPythonClass(cls)) return std::nullopt;
  // A dict subclass read from the frame keeps dict's item protocol (Wrap
  // checked it), so its items are the tracker's; its attributes follow
  // the generic read: a data descriptor of a Python class, the instance
  // dict, then the class (dict's own methods stay the tracker's).
  const auto definition = Definer(cls, name.c_str());
  PyObject* const definer = definition.first;
  PyObject* const found = definition.second;
  const bool python_member = found != nullptr && IsPythonClass(definer);
  const bool data_descriptor = found != nullptr && Py_TYPE(found)->tp_descr_set != nullptr;
  auto class_member = [&]() -> R {
    absl::StatusOr<VarPtr> cls_var = Wrap(Object::Borrow(cls), Source::Attr(d->source, "__class__"));
    if (!cls_var.ok()) return cls_var.status();
    if (PyFunction_Check(found)) {  // bound to the tracker; the function is guarded by identity
      SourcePtr fn_source = Source::Attr(Source::Attr(d->source, name), "__func__");
      guards_.IdMatch(fn_source, Object::Borrow(found));
      VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(found), fn_source);
      fn->self = d;
      return fn;
    }
    return ClassMember(d, *cls_var, name, found);
  };
  if (python_member && data_descriptor) return class_member();
  if (Py_TYPE(o)->tp_dictoffset != 0 && name != "__dict__") {
    absl::StatusOr<Object> dict = InstanceDict(o);
    if (!dict.ok()) return R(dict.status());
    Object key = python::FromString(name);
    PyObject* value = PyDict_GetItemWithError(dict->get(), key.get());  // borrowed
    if (value == nullptr && PyErr_Occurred()) return R(python::FetchError("reading an object's __dict__"));
    if (value != nullptr) return Wrap(Object::Borrow(value), Source::Attr(d->source, name));
  }
  // A plain class attribute is read through the instance, so one set on
  // the instance later fails its guard.
  if (python_member && Py_TYPE(found)->tp_descr_get == nullptr) {
    return Wrap(Object::Borrow(found), Source::Attr(d->source, name));
  }
  if (python_member) return class_member();
  if (found == nullptr) {
    // Neither the instance nor its class has it: the class's __getattr__
    // answers, or the read raises. Both rely on the name staying absent.
    SourcePtr cls_source = Source::Attr(d->source, "__class__");
    if (Py_TYPE(o)->tp_dictoffset != 0) guards_.HasItem(Source::Attr(d->source, "__dict__"), name, false);
    guards_.HasAttr(cls_source, name, false);
    const auto [getattr_definer, getattr_fn] = Definer(cls, "__getattr__");
    if (getattr_fn == nullptr) {
      return R(RaiseNew(PyExc_AttributeError, absl::StrCat("'", python::TypeName(d->object),
                                                           "' object has no attribute '", name, "'")));
    }
    if (!PyFunction_Check(getattr_fn)) {
      return R(Break(ir::GraphBreak::OTHER, absl::StrCat("reading .", name, " of ", Describe(*d),
                                                         " runs its class's __getattr__, which is no Python function"),
                     ""));
    }
    SourcePtr fn_source = Source::Attr(cls_source, "__getattr__");
    guards_.IdMatch(fn_source, Object::Borrow(getattr_fn));
    VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(getattr_fn), fn_source);
    return Inline(fn, {d, Var::Constant(python::FromString(name))}, {});
  }
  return std::nullopt;  // dict's own: the tracker's method
}

absl::StatusOr<VarPtr> Translator::CallUserDictMethod(const VarPtr& d, const std::string& name,
                                                      std::vector<VarPtr> args, Kwargs kwargs) {
  auto none = [] { return Var::Constant(python::None()); };
  // A plain dict of the same items, for the read-only slots: dict's code,
  // not the class's, answers them.
  auto plain = [&] { return Var::Dict(d->keys, d->items); };
  const bool positional = kwargs.empty();
  if (name == "__init__" || name == "update") {
    if (absl::Status s = UpdateDict(d, args, kwargs); !s.ok()) return s;
    return none();
  }
  if (name == "__setitem__" && positional && args.size() == 2) {
    if (absl::Status s = StoreItem(d, args[0], args[1]); !s.ok()) return s;
    return none();
  }
  if (name == "__setattr__" && positional && args.size() == 2) {
    absl::StatusOr<std::string> attr = args[0]->is_constant() ? python::AsString(args[0]->object)
                                                              : absl::InvalidArgumentError("");
    if (!attr.ok()) return Break(ir::GraphBreak::OTHER, "object.__setattr__ with a non-constant name", "");
    if (absl::Status s = StoreUserDictAttr(d, *attr, args[1], /*through_class=*/false); !s.ok()) return s;
    return none();
  }
  if (name == "__getitem__" && positional && args.size() == 1) return Subscript(plain(), args[0]);
  if (name == "__contains__" && positional && args.size() == 1) {
    absl::StatusOr<bool> in = Contains(plain(), args[0]);
    if (!in.ok()) return in.status();
    return Var::Constant(python::FromBool(*in));
  }
  if (name == "__len__" && positional && args.empty()) {
    return Var::Constant(python::FromLong(static_cast<int64_t>(d->keys.size())));
  }
  if ((name == "keys" || name == "values" || name == "items") && positional && args.empty()) {
    VarPtr view = Var::OfKind(VarKind::kDictView, Object());
    view->self = d;
    view->name = name;
    return view;
  }
  if (name == "get") return CallMethod(Var::Method(plain(), "get"), std::move(args), std::move(kwargs));
  if (name == "pop" || name == "setdefault") {
    if (std::optional<absl::StatusOr<VarPtr>> r = CallDictMethod(d, name, args, kwargs)) return *std::move(r);
  }
  if (name == "clear" && positional && args.empty()) {
    d->keys.clear();
    d->items.clear();
    return none();
  }
  return Break(ir::GraphBreak::UNSUPPORTED_CALL,
               absl::StrCat(name, "() of ", Describe(*d), " (dict's own method)"),
               "keys, values, items, get, pop, setdefault, update and clear are traced on such objects");
}

}  // namespace dynamo::trace
