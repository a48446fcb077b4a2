// Lists and dicts beyond indexing: slice assignment, the dict() constructor
// and the dict/list methods that copy or empty a container, each as CPython
// defines it (Objects/listobject.c list_ass_subscript, Objects/dictobject.c
// dict_update_arg):
//
//   m[1:] = [6] * 3        list_ass_slice: the slice replaced by the items
//   m[::2] = (a, b)        extended slice: lengths must match
//   dict(pairs, **kw)      a mapping's keys() then [k], or 2-item sequences
//   d.copy(), d.clear()    a new dict; the same dict emptied (recorded when
//                          the dict outlives the call, see MarkMutated)
#include <Python.h>

#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

absl::Status Translator::AssignSlice(const VarPtr& list, const VarPtr& slice, const VarPtr& value) {
  absl::StatusOr<python::Object> s = ToPython(slice);
  if (!s.ok()) return s.status();
  Py_ssize_t start = 0, stop = 0, step = 1;
  if (PySlice_Unpack(s->get(), &start, &stop, &step) < 0) return python::FetchError("slice");
  const Py_ssize_t n = static_cast<Py_ssize_t>(list->items.size());
  Py_ssize_t count = PySlice_AdjustIndices(n, &start, &stop, step);
  // "can only assign an iterable": taken whole first, so m[:] = m works.
  absl::StatusOr<std::vector<VarPtr>> items = Materialize(value);
  if (!items.ok()) return items.status();
  if (step == 1) {
    if (stop < start) stop = start;
    std::vector<VarPtr> out(list->items.begin(), list->items.begin() + start);
    out.insert(out.end(), items->begin(), items->end());
    out.insert(out.end(), list->items.begin() + stop, list->items.end());
    list->items = std::move(out);
    return absl::OkStatus();
  }
  if (static_cast<Py_ssize_t>(items->size()) != count) {
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat("assigning a sequence of size ", items->size(), " to an extended slice of size ",
                              count),
                 "the function would raise ValueError");
  }
  for (Py_ssize_t k = 0; k < count; ++k) {
    list->items[static_cast<size_t>(start + k * step)] = (*items)[static_cast<size_t>(k)];
  }
  return absl::OkStatus();
}

absl::Status Translator::DictSet(const VarPtr& dict, const VarPtr& key, const VarPtr& value) {
  // The first key object stays, as in CPython.
  return AddDictEntry(dict->keys, dict->items, key, value);
}

absl::StatusOr<VarPtr> Translator::BuildDict(const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  VarPtr d = Var::Dict({}, {});
  if (absl::Status s = UpdateDict(d, args, kwargs); !s.ok()) return s;
  return d;
}

absl::Status Translator::UpdateDict(const VarPtr& d, const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  if (args.size() > 1) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("dict update with ", args.size(), " positional arguments"),
                 "the call would raise TypeError");
  }
  if (args.size() == 1) {
    const VarPtr& arg = args[0];
    if (arg->kind == VarKind::kDict) {  // a mapping: its keys, in its order
      guards_.LengthMatch(arg->source, static_cast<int64_t>(arg->items.size()));
      for (size_t i = 0; i < arg->keys.size(); ++i) {
        if (absl::Status s = DictSet(d, arg->keys[i], arg->items[i]); !s.ok()) return s;
      }
    } else if (arg->is_sequence() || arg->kind == VarKind::kIterator || arg->kind == VarKind::kGenerator ||
               arg->kind == VarKind::kDictView) {
      absl::StatusOr<VarPtr> it = GetIter(arg);
      if (!it.ok()) return it.status();
      for (;;) {
        absl::StatusOr<std::optional<VarPtr>> next = NextValue(*it);
        if (!next.ok()) return next.status();
        if (!*next) break;
        const VarPtr& pair = **next;
        if (!pair->is_sequence()) {  // a constant pair ('x', 2), or any iterable of two
          absl::StatusOr<std::vector<VarPtr>> kv = Unpack(pair, 2);
          if (!kv.ok()) return kv.status();
          if (absl::Status s = DictSet(d, (*kv)[0], (*kv)[1]); !s.ok()) return s;
          continue;
        }
        if (pair->items.size() != 2) {
          return Break(ir::GraphBreak::OTHER,
                       absl::StrCat("dict() of a sequence of length ", pair->items.size()),
                       "the function would raise ValueError");
        }
        guards_.LengthMatch(pair->source, 2);
        if (absl::Status s = DictSet(d, pair->items[0], pair->items[1]); !s.ok()) return s;
      }
    } else {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("dict update from ", Describe(*arg)),
                   "dict() is traced over dicts and iterables of pairs");
    }
  }
  for (const auto& [k, v] : kwargs) {
    if (absl::Status s = DictSet(d, Var::Constant(python::FromString(k)), v); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::optional<absl::StatusOr<VarPtr>> Translator::ConstructContainer(const VarPtr& cls,
                                                                     const std::vector<VarPtr>& args,
                                                                     const Kwargs& kwargs) {
  PyObject* ordered_dict = StdlibObject("collections", "OrderedDict");
  if (std::optional<absl::StatusOr<VarPtr>> r = ConstructCollection(cls, args, kwargs)) return r;
  if (!cls->object || cls->object.get() != ordered_dict) return std::nullopt;
  // OrderedDict.__init__ updates from a mapping's keys or from pairs, then
  // from the keywords: what dict() does, in the same order.
  absl::StatusOr<VarPtr> d = BuildDict(args, kwargs);
  if (d.ok()) (*d)->container_class = cls->object;
  return d;
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallContainerMethod(const VarPtr& self, const std::string& name,
                                                                      const std::vector<VarPtr>& args,
                                                                      const Kwargs& kwargs) {
  if (self->kind != VarKind::kList && self->kind != VarKind::kDict) return std::nullopt;
  // A subclass read from the frame (OrderedDict, a user's list) answers
  // with its own class's methods.
  PyTypeObject* exact = self->kind == VarKind::kList ? &PyList_Type : &PyDict_Type;
  if (self->object && Py_TYPE(self->object.get()) != exact) return std::nullopt;
  if (self->kind == VarKind::kDict && (name == "pop" || name == "update" || name == "setdefault")) {
    return CallDictMethod(self, name, args, kwargs);
  }
  if (!kwargs.empty() || !args.empty()) return std::nullopt;
  if (name == "clear") {
    self->items.clear();
    self->keys.clear();
    return absl::StatusOr<VarPtr>(Var::Constant(python::None()));
  }
  if (name == "copy") {
    // A shallow copy: a new container of the same trackers.
    guards_.LengthMatch(self->source, static_cast<int64_t>(self->items.size()));
    if (self->kind == VarKind::kList) return absl::StatusOr<VarPtr>(Var::List(self->items));
    // OrderedDict.copy() is type(self)(self): the same class.
    VarPtr copy = Var::Dict(self->keys, self->items);
    copy->container_class = self->container_class;
    copy->default_factory = self->default_factory;
    return absl::StatusOr<VarPtr>(copy);
  }
  return std::nullopt;
}


VarPtr Translator::KeysViewAsSet(const VarPtr& v) {
  // dict_keys compares and combines (==, <=, |, &, -, ^) as the set of its
  // keys; the keys of a dict tracker are constants, so that set is real.
  if (v->kind != VarKind::kDictView || v->name != "keys") return v;
  const VarPtr& d = v->self;
  guards_.LengthMatch(d->source, static_cast<int64_t>(d->keys.size()));
  python::Object set = python::Object::Steal(PySet_New(nullptr));
  for (const VarPtr& k : d->keys) {
    absl::StatusOr<python::Object> key = ToPython(k);
    if (!key.ok() || PySet_Add(set.get(), key->get()) != 0) {
      python::ClearError();
      return v;
    }
  }
  return Var::Constant(set);
}

std::optional<std::pair<VarPtr, VarPtr>> Translator::KeysViewOperands(const VarPtr& a, const VarPtr& b) {
  auto set_like = [](const VarPtr& v) {
    return (v->kind == VarKind::kDictView && v->name == "keys") ||
           (v->is_constant() && (PySet_Check(v->object.get()) || PyFrozenSet_Check(v->object.get())));
  };
  if (!(a->kind == VarKind::kDictView || b->kind == VarKind::kDictView) || !set_like(a) || !set_like(b)) {
    return std::nullopt;
  }
  VarPtr sa = KeysViewAsSet(a), sb = KeysViewAsSet(b);
  if (!sa->is_constant() || !sb->is_constant()) return std::nullopt;
  return std::make_pair(sa, sb);
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallDictMethod(const VarPtr& self, const std::string& name,
                                                                 const std::vector<VarPtr>& args,
                                                                 const Kwargs& kwargs) {
  using R = absl::StatusOr<VarPtr>;
  if (name == "update") {
    if (absl::Status s = UpdateDict(self, args, kwargs); !s.ok()) return R(s);
    return R(Var::Constant(python::None()));
  }
  if (!kwargs.empty() || args.empty() || args.size() > 2) {
    return R(Break(ir::GraphBreak::OTHER, absl::StrCat("dict.", name, "() with ", args.size(), " arguments"),
                   "the call would raise TypeError"));
  }
  guards_.LengthMatch(self->source, static_cast<int64_t>(self->keys.size()));
  absl::StatusOr<std::optional<size_t>> at = FindDictKey(self->keys, args[0]);
  if (!at.ok()) return R(at.status());
  if (*at) {
    const size_t k = **at;
    VarPtr value = self->items[k];
    if (name == "pop") {
      self->keys.erase(self->keys.begin() + static_cast<std::ptrdiff_t>(k));
      self->items.erase(self->items.begin() + static_cast<std::ptrdiff_t>(k));
    }
    return R(value);
  }
  // Missing: pop's default (or KeyError); setdefault inserts its default.
  VarPtr fallback = args.size() == 2 ? args[1] : nullptr;
  if (name == "pop") {
    if (fallback) return R(fallback);
    return R(Break(ir::GraphBreak::OTHER, absl::StrCat("dict.pop() of missing key ", Describe(*args[0])),
                   "the function would raise KeyError"));
  }
  if (!fallback) fallback = Var::Constant(python::None());
  if (absl::Status s = DictSet(self, args[0], fallback); !s.ok()) return R(s);
  return R(fallback);
}

std::optional<absl::StatusOr<VarPtr>> Translator::DictFromKeys(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                               const Kwargs& kwargs) {
  // dict.fromkeys / OrderedDict.fromkeys / defaultdict.fromkeys: a
  // classmethod, bound anew on each read, so known by its owner.
  if (!fn->object || !PyCFunction_Check(fn->object.get())) return std::nullopt;
  PyObject* owner = PyCFunction_GET_SELF(fn->object.get());
  if (owner == nullptr || !PyType_Check(owner) ||
      absl::string_view(reinterpret_cast<PyCFunctionObject*>(fn->object.get())->m_ml->ml_name) != "fromkeys") {
    return std::nullopt;
  }
  PyObject* ordered_dict = StdlibObject("collections", "OrderedDict");
  PyObject* defaultdict = StdlibObject("collections", "defaultdict");
  if (owner != reinterpret_cast<PyObject*>(&PyDict_Type) && owner != ordered_dict && owner != defaultdict) {
    return std::nullopt;
  }
  VarPtr value = args.size() == 2 ? args[1] : Var::Constant(python::None());
  for (const auto& [k, v] : kwargs) {
    if (k != "value" || args.size() == 2) {
      return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER, absl::StrCat("fromkeys() with keyword '", k, "'"),
                                          "the call would raise TypeError"));
    }
    value = v;
  }
  if (args.empty() || args.size() > 2) {
    return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::OTHER, absl::StrCat("fromkeys() with ", args.size(), " arguments"),
                                        "the call would raise TypeError"));
  }
  // Every key maps to the one value object, in the iterable's order.
  absl::StatusOr<std::vector<VarPtr>> keys = Materialize(args[0]);
  if (!keys.ok()) return absl::StatusOr<VarPtr>(keys.status());
  VarPtr d = Var::Dict({}, {});
  if (owner != reinterpret_cast<PyObject*>(&PyDict_Type)) d->container_class = python::Object::Borrow(owner);
  if (owner == defaultdict) d->default_factory = Var::Constant(python::None());  // fromkeys makes it without one
  for (const VarPtr& k : *keys) {
    if (absl::Status s = DictSet(d, k, value); !s.ok()) return absl::StatusOr<VarPtr>(s);
  }
  return absl::StatusOr<VarPtr>(d);
}

// os.environ read from a source (os._Environ, whose Python __getitem__
// goes through a dict of bytes): an item is the variable's value now,
// guarded as os.environ['K'], and a missing one is guarded absent and
// raises KeyError in the trace (os.environ.get's default is then taken by
// Mapping.get's own except clause). Nothing for other values.
std::optional<absl::StatusOr<bool>> Translator::EnvironHas(const VarPtr& env, const VarPtr& key) {
  // Every subscript and `in` asks: the cheap tests first.
  if (env->kind != VarKind::kOpaque || !env->source || !env->object || !key->is_constant() ||
      !PyUnicode_CheckExact(key->object.get())) {
    return std::nullopt;
  }
  PyObject* environ_type = StdlibObject("os", "_Environ");
  if (environ_type == nullptr || reinterpret_cast<PyObject*>(Py_TYPE(env->object.get())) != environ_type) {
    return std::nullopt;
  }
  int r = PySequence_Contains(env->object.get(), key->object.get());
  if (r < 0) return absl::StatusOr<bool>(python::FetchError("reading os.environ"));
  guards_.HasItem(env->source, *python::AsString(key->object), r == 1);
  return absl::StatusOr<bool>(r == 1);
}

std::optional<absl::StatusOr<VarPtr>> Translator::EnvironItem(const VarPtr& env, const VarPtr& key) {
  using R = absl::StatusOr<VarPtr>;
  std::optional<absl::StatusOr<bool>> has = EnvironHas(env, key);
  if (!has) return std::nullopt;
  if (!has->ok()) return R(has->status());
  if (!**has) return R(RaiseNew(PyExc_KeyError, *python::AsString(key->object)));
  python::Object value = python::Object::Steal(PyObject_GetItem(env->object.get(), key->object.get()));
  if (!value) return R(python::FetchError("reading os.environ"));
  return Wrap(value, Source::Item(env->source, *python::AsString(key->object)));
}

}  // namespace dynamo::trace
