// Sets and frozensets, as CPython defines them (Objects/setobject.c):
// members are found by hash, then identity, then ==.
//
// A set of Python constants is a real set the trace owns (kConstant): it
// iterates in CPython's own order. A set that holds anything else (a
// tensor, a module, a function) is a kSet tracker of its distinct members:
//
//   s = {x, y}        two members unless x is y (tensors hash by id, so a
//                     tensor is only ever the same member as itself)
//   t in s            identity for tensors and objects, == for constants
//   s.add(t), s.discard(t), s.remove(t), s.update(it), len(s), bool(s)
//
// The order of such a set is the order of its members' addresses, which
// the trace cannot know: iterating it (or pop()) with more than one member
// is a graph break, never a guessed order. Rebuilt after the graph
// (rewrite), it is a real set again, in Python's order.
#include <Python.h>

#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;

// The object's type hashes and compares by identity (object's own slots):
// functions, modules, classes, nn.Modules that define neither.
bool HashesByIdentity(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  return t->tp_hash == PyBaseObject_Type.tp_hash && t->tp_richcompare == PyBaseObject_Type.tp_richcompare;
}

bool IsSetObject(const VarPtr& v) {
  return v->is_constant() && (PySet_Check(v->object.get()) || PyFrozenSet_Check(v->object.get()));
}

}  // namespace

absl::StatusOr<Translator::SetMember> Translator::AsSetMember(const VarPtr& item) {
  if (item->is_tensor()) return SetMember{SetMember::kIdentity, Object()};
  absl::StatusOr<Object> value = ToPython(item);
  if (value.ok()) {
    if (PyObject_Hash(value->get()) == -1) {
      python::ClearError();
      return Break(ir::GraphBreak::OTHER, absl::StrCat("a set member that is ", Describe(*item)),
                   "the value is unhashable: the function would raise TypeError");
    }
    return SetMember{SetMember::kValue, *value};
  }
  switch (item->kind) {
    case VarKind::kFunction:
    case VarKind::kNNModule:
    case VarKind::kOpaque:
      if (item->object && !item->self && !PyCode_Check(item->object.get()) && HashesByIdentity(item->object.get())) {
        return SetMember{SetMember::kIdentity, item->object};
      }
      break;
    default:
      break;
  }
  return Break(ir::GraphBreak::OTHER, absl::StrCat("a set holding ", Describe(*item)),
               "sets are traced over tensors, Python constants and objects compared by identity");
}

absl::StatusOr<bool> Translator::SameSetMember(const VarPtr& a, const VarPtr& b) {
  absl::StatusOr<SetMember> ka = AsSetMember(a);
  if (!ka.ok()) return ka.status();
  absl::StatusOr<SetMember> kb = AsSetMember(b);
  if (!kb.ok()) return kb.status();
  if (ka->how != kb->how) return false;  // a tensor's hash is its address: no constant shares it
  if (ka->how == SetMember::kValue) {
    // Equal hashes, then ==, as set_lookkey does.
    if (PyObject_Hash(ka->value.get()) != PyObject_Hash(kb->value.get())) return false;
    int eq = PyObject_RichCompareBool(ka->value.get(), kb->value.get(), Py_EQ);
    if (eq < 0) return python::FetchError("set member ==");
    return eq == 1;
  }
  if (a->is_tensor() != b->is_tensor()) return false;
  if (a->is_tensor()) {
    NoteIdentity(a);
    NoteIdentity(b);
    return a->tensor_identity() == b->tensor_identity();
  }
  return Identical(a, b);
}

absl::Status Translator::AddToSet(const VarPtr& set, const VarPtr& item) {
  if (IsSetObject(set)) {
    absl::StatusOr<Object> value = ToPython(item);
    if (value.ok()) {
      if (PySet_Add(set->object.get(), value->get()) != 0) {
        absl::Status error = python::FetchError("");
        return Break(ir::GraphBreak::OTHER, absl::StrCat("adding to a set raises ", error.message()),
                     "the function would raise here");
      }
      return absl::OkStatus();
    }
    if (set->source) {
      return Break(ir::GraphBreak::SIDE_EFFECT, "adding to a set that outlives the call",
                   "mutating sets that outlive the call is a side effect; copy it first");
    }
    // From now on a tracker of its members: the constants so far, in the
    // real set's order, then the new member.
    absl::StatusOr<SetMember> member = AsSetMember(item);
    if (!member.ok()) return member.status();
    const bool frozen = PyFrozenSet_Check(set->object.get());
    std::vector<VarPtr> members;
    Object it = Object::Steal(PyObject_GetIter(set->object.get()));
    while (Object m = it ? Object::Steal(PyIter_Next(it.get())) : Object()) {
      members.push_back(Var::Constant(m));
    }
    if (PyErr_Occurred()) return python::FetchError("iterating a set");
    set->kind = VarKind::kSet;
    set->name = frozen ? "frozenset" : "set";
    set->object = Object();
    set->items = std::move(members);
  }
  if (set->kind != VarKind::kSet) return absl::InternalError("AddToSet on a non-set");
  for (const VarPtr& m : set->items) {
    absl::StatusOr<bool> same = SameSetMember(m, item);
    if (!same.ok()) return same.status();
    if (*same) return absl::OkStatus();  // the first member stays, as in CPython
  }
  absl::StatusOr<SetMember> member = AsSetMember(item);
  if (!member.ok()) return member.status();
  set->items.push_back(item);
  return absl::OkStatus();
}

absl::StatusOr<VarPtr> Translator::BuildSet(const std::vector<VarPtr>& items, bool frozen) {
  VarPtr set = Var::Constant(Object::Steal(PySet_New(nullptr)));
  for (const VarPtr& item : items) {
    if (absl::Status s = AddToSet(set, item); !s.ok()) return s;
  }
  if (frozen && set->is_constant()) return Var::Constant(Object::Steal(PyFrozenSet_New(set->object.get())));
  if (frozen) set->name = "frozenset";
  return set;
}

absl::StatusOr<bool> Translator::SetContains(const VarPtr& set, const VarPtr& item) {
  for (const VarPtr& m : set->items) {
    absl::StatusOr<bool> same = SameSetMember(m, item);
    if (!same.ok()) return same.status();
    if (*same) return true;
  }
  return false;
}

absl::StatusOr<std::vector<VarPtr>> Translator::SetMembers(const VarPtr& set) {
  if (set->items.size() > 1) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("iterating over a ", Describe(*set), " holding tensors or objects"),
                 "a set's order follows its members' addresses, which tracing cannot know; use a list");
  }
  return set->items;
}

std::optional<absl::StatusOr<bool>> Translator::ContainsInRealSet(const VarPtr& container, const VarPtr& item) {
  // A frozenset read from the frame (frozenset([torch.add])): immutable, so
  // the very object (identity guarded) answers for an item that is a real
  // object hashed by identity or a constant. So does a set of constants
  // (set(), {1, 2}) for such an object.
  const bool real_frozenset =
      container->kind == VarKind::kOpaque && container->object && PyFrozenSet_CheckExact(container->object.get());
  if (!real_frozenset && !IsSetObject(container)) return std::nullopt;
  // Nothing is in an empty set (a tensor, hashed by identity, included).
  if (IsSetObject(container) && PySet_GET_SIZE(container->object.get()) == 0 && !item->is_ndarray &&
      (item->is_tensor() || (item->object && HashesByIdentity(item->object.get())))) {
    return absl::StatusOr<bool>(false);
  }
  if (item->is_tensor()) return std::nullopt;
  Object key;
  if (absl::StatusOr<Object> value = ToPython(item); value.ok()) {
    key = *value;
  } else if (item->object && !item->self && !PyCode_Check(item->object.get()) &&
             HashesByIdentity(item->object.get())) {
    key = item->object;
  } else {
    return std::nullopt;
  }
  if (real_frozenset && container->source) guards_.IdMatch(container->source, container->object);
  int r = PySet_Contains(container->object.get(), key.get());
  if (r < 0) return absl::StatusOr<bool>(python::FetchError("frozenset contains"));
  return absl::StatusOr<bool>(r == 1);
}

absl::StatusOr<VarPtr> Translator::SetAttr(const VarPtr& set, const std::string& name) {
  PyTypeObject* type = set->name == "frozenset" ? &PyFrozenSet_Type : &PySet_Type;
  if (name == "__class__") return Var::Constant(Object::Borrow(reinterpret_cast<PyObject*>(type)));
  // What the instance's attribute would be: set objects have no __dict__,
  // so the type's own entry decides (a method descriptor binds).
  PyObject* found = _PyType_Lookup(type, python::FromString(name).get());  // borrowed
  if (found == nullptr) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("reading .", name, " of ", Describe(*set)),
                 "sets have no such attribute: the function would raise AttributeError");
  }
  if (PyObject_TypeCheck(found, &PyMethodDescr_Type) || PyObject_TypeCheck(found, &PyWrapperDescr_Type)) {
    return Var::Method(set, name);
  }
  return Break(ir::GraphBreak::OTHER, absl::StrCat("reading .", name, " of ", Describe(*set)),
               "only the methods of sets holding tensors or objects are traced");
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallSetMethod(const VarPtr& self, const std::string& name,
                                                                const std::vector<VarPtr>& args,
                                                                const Kwargs& kwargs) {
  using R = absl::StatusOr<VarPtr>;
  if (self->kind != VarKind::kSet) return std::nullopt;
  auto none = [] { return R(Var::Constant(python::None())); };
  const bool frozen = self->name == "frozenset";
  auto arity = [&](size_t n) -> std::optional<R> {
    if (args.size() == n && kwargs.empty()) return std::nullopt;
    return R(Break(ir::GraphBreak::OTHER, absl::StrCat(self->name, ".", name, "() with ", args.size(), " arguments"),
                   "the call would raise TypeError"));
  };
  if (!frozen && name == "add") {
    if (std::optional<R> bad = arity(1)) return bad;
    if (absl::Status s = AddToSet(self, args[0]); !s.ok()) return R(s);
    return none();
  }
  if (!frozen && name == "update") {
    for (const VarPtr& a : args) {
      absl::StatusOr<std::vector<VarPtr>> items = Materialize(a);
      if (!items.ok()) return R(items.status());
      for (const VarPtr& item : *items) {
        if (absl::Status s = AddToSet(self, item); !s.ok()) return R(s);
      }
    }
    return none();
  }
  if (!frozen && (name == "discard" || name == "remove")) {
    if (std::optional<R> bad = arity(1)) return bad;
    for (size_t i = 0; i < self->items.size(); ++i) {
      absl::StatusOr<bool> same = SameSetMember(self->items[i], args[0]);
      if (!same.ok()) return R(same.status());
      if (*same) {
        self->items.erase(self->items.begin() + static_cast<std::ptrdiff_t>(i));
        return none();
      }
    }
    if (absl::StatusOr<SetMember> m = AsSetMember(args[0]); !m.ok()) return R(m.status());
    if (name == "remove") {
      return R(Break(ir::GraphBreak::OTHER, "set.remove() of a missing member", "the function would raise KeyError"));
    }
    return none();
  }
  if (!frozen && name == "clear") {
    if (std::optional<R> bad = arity(0)) return bad;
    self->items.clear();
    return none();
  }
  if (!frozen && name == "pop") {
    if (std::optional<R> bad = arity(0)) return bad;
    absl::StatusOr<std::vector<VarPtr>> members = SetMembers(self);  // the first in Python's order
    if (!members.ok()) return R(members.status());
    if (members->empty()) return R(Break(ir::GraphBreak::OTHER, "pop from an empty set", "the function would raise KeyError"));
    VarPtr first = (*members)[0];
    self->items.clear();
    return R(first);
  }
  if (name == "copy") {
    if (std::optional<R> bad = arity(0)) return bad;
    if (frozen) return R(self);  // frozenset.copy() is the same object
    VarPtr copy = Var::OfKind(VarKind::kSet, Object());
    copy->name = "set";
    copy->items = self->items;
    return R(copy);
  }
  if (name == "__contains__") {
    if (std::optional<R> bad = arity(1)) return bad;
    absl::StatusOr<bool> found = SetContains(self, args[0]);
    if (!found.ok()) return R(found.status());
    return R(Var::Constant(python::FromBool(*found)));
  }
  if (name == "__len__") {
    if (std::optional<R> bad = arity(0)) return bad;
    return R(Var::Constant(python::FromLong(static_cast<int64_t>(self->items.size()))));
  }
  return R(Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("method ", name, "() of ", Describe(*self)),
                 "this set method is not traced for sets holding tensors or objects"));
}

}  // namespace dynamo::trace
