// collections.defaultdict and collections.deque made during the trace.
//
//   d = collections.defaultdict(list)    # a kDict whose container_class is
//   d["a"].append(x)                     # defaultdict: a missing key calls
//                                        # default_factory (traced) and stores it
//   q = collections.deque([x], maxlen=3) # a kList whose container_class is
//   q.appendleft(y); q.popleft()         # deque, trimmed to maxlen the way
//                                        # CPython's deque drops items
//
// Both are rebuilt after the graph by calling the class (lib/rewrite):
// defaultdict(factory, {...}) and deque([...], maxlen). A deque is a list
// tracker for everything the two types share (len, iteration, `in`,
// integer indexing, unpacking); what a deque does differently is decided
// here: its methods, its attributes, slicing (a TypeError), `+` and `*`.
// Anything else a deque is given is a graph break, never the list answer.
#include <Python.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;
using R = absl::StatusOr<VarPtr>;

PyObject* DequeClass() { return StdlibObject("collections", "deque"); }
PyObject* DefaultDictClass() { return StdlibObject("collections", "defaultdict"); }

VarPtr None() { return Var::Constant(python::None()); }

// The items beyond maxlen leave from the end opposite the one added to.
void Trim(const VarPtr& q, bool added_left) {
  if (q->maxlen < 0) return;
  while (static_cast<int64_t>(q->items.size()) > q->maxlen) {
    if (added_left) {
      q->items.pop_back();
    } else {
      q->items.erase(q->items.begin());
    }
  }
}

}  // namespace

bool IsDeque(const VarPtr& v) {
  return v->kind == VarKind::kList && v->container_class && v->container_class.get() == DequeClass();
}

bool IsDequeObject(PyObject* o) { return reinterpret_cast<PyObject*>(Py_TYPE(o)) == DequeClass(); }

bool IsDefaultDict(const VarPtr& v) {
  return v->kind == VarKind::kDict && v->default_factory && v->container_class &&
         v->container_class.get() == DefaultDictClass();
}

// A factory the trace can call: a class, a function, a builtin, a partial.
bool TracedFactory(const VarPtr& factory) {
  return factory->is_none() || factory->kind == VarKind::kFunction || factory->kind == VarKind::kClass ||
         factory->kind == VarKind::kBuiltin || factory->kind == VarKind::kPartial;
}

std::optional<R> Translator::ConstructCollection(const VarPtr& cls, const std::vector<VarPtr>& args,
                                                 const Kwargs& kwargs) {
  if (!cls->object) return std::nullopt;
  if (cls->object.get() == DefaultDictClass()) {
    // defaultdict(default_factory=None, *dict_args, **kwargs)
    VarPtr factory = args.empty() ? None() : args[0];
    if (!TracedFactory(factory)) {
      return R(Break(ir::GraphBreak::UNSUPPORTED_CALL,
                     absl::StrCat("defaultdict with a default_factory that is a ", Describe(*factory)),
                     "defaultdict is traced with a class, a function or None as its factory"));
    }
    std::vector<VarPtr> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
    absl::StatusOr<VarPtr> d = BuildDict(rest, kwargs);
    if (!d.ok()) return R(d.status());
    (*d)->container_class = cls->object;
    (*d)->default_factory = factory;
    return R(*d);
  }
  if (cls->object.get() == DequeClass()) {
    // deque(iterable=(), maxlen=None)
    VarPtr iterable, maxlen;
    if (args.size() > 2) return R(RaiseNew(PyExc_TypeError, "deque() takes at most 2 arguments"));
    if (!args.empty()) iterable = args[0];
    if (args.size() == 2) maxlen = args[1];
    for (const auto& [k, v] : kwargs) {
      if (k == "iterable" && !iterable) {
        iterable = v;
      } else if (k == "maxlen" && !maxlen) {
        maxlen = v;
      } else {
        return R(RaiseNew(PyExc_TypeError, absl::StrCat("deque() got an unexpected keyword argument '", k, "'")));
      }
    }
    VarPtr q = Var::List({});
    q->container_class = cls->object;
    if (maxlen && !maxlen->is_none()) {
      absl::StatusOr<int64_t> n = maxlen->is_constant() && PyLong_Check(maxlen->object.get())
                                      ? AsInt(maxlen)
                                      : absl::StatusOr<int64_t>(absl::InvalidArgumentError(""));
      if (!n.ok()) {
        return R(Break(ir::GraphBreak::OTHER, absl::StrCat("deque maxlen that is a ", Describe(*maxlen)),
                       "maxlen is an int or None"));
      }
      if (*n < 0) return R(RaiseNew(PyExc_ValueError, "maxlen must be non-negative"));
      q->maxlen = *n;
    }
    if (iterable) {
      absl::StatusOr<std::vector<VarPtr>> items = Materialize(iterable);
      if (!items.ok()) return R(items.status());
      q->items = *std::move(items);
      Trim(q, /*added_left=*/false);
    }
    return R(q);
  }
  return std::nullopt;
}

R Translator::DefaultDictMissing(const VarPtr& d, const VarPtr& key) {
  // dict.__getitem__ calls __missing__: default_factory() stored under key,
  // or KeyError when the factory is None.
  if (d->default_factory->is_none()) {
    absl::StatusOr<Object> k = ToPython(key);
    return RaiseNew(PyExc_KeyError, k.ok() ? python::Repr(*k) : "");
  }
  absl::StatusOr<VarPtr> value = Call(d->default_factory, {}, {});
  if (!value.ok()) return value.status();
  // A defaultdict read from the frame is changed as an item store would
  // (replayed after the graph, or a break).
  if (absl::Status s = StoreItem(d, key, *value); !s.ok()) return s;
  return *value;
}

absl::Status Translator::ReadDefaultFactory(const VarPtr& d, const Object& obj) {
  Object factory = Attr(obj.get(), "default_factory");
  if (!factory) return python::FetchError("reading a defaultdict's default_factory");
  absl::StatusOr<VarPtr> f = Wrap(factory, d->source ? Source::Attr(d->source, "default_factory") : nullptr);
  if (!f.ok()) return f.status();
  // Another factory leaves the dict's missing keys to Python (a break).
  if (!TracedFactory(*f)) return absl::OkStatus();
  d->container_class = Object::Borrow(DefaultDictClass());
  d->default_factory = *f;
  return absl::OkStatus();
}

R Translator::WrapTupleIterator(const Object& obj, SourcePtr source) {
  absl::StatusOr<Object> state = python::CallMethod(obj, "__reduce__");
  if (!state.ok()) return state.status();
  // (iter, (tuple,), position), or (iter, ((),)) once exhausted.
  PyObject* s = state->get();
  PyObject* args = PyTuple_Check(s) && PyTuple_GET_SIZE(s) >= 2 ? PyTuple_GET_ITEM(s, 1) : nullptr;
  PyObject* items = args != nullptr && PyTuple_Check(args) && PyTuple_GET_SIZE(args) == 1 ? PyTuple_GET_ITEM(args, 0)
                                                                                          : nullptr;
  if (items == nullptr || !PyTuple_Check(items)) return absl::InternalError("unexpected tuple iterator state");
  int64_t position = 0;
  if (PyTuple_GET_SIZE(s) == 3) {
    absl::StatusOr<long long> p = python::AsLong(Object::Borrow(PyTuple_GET_ITEM(s, 2)));
    if (!p.ok()) return p.status();
    position = *p;
  }
  const int64_t length = PyTuple_GET_SIZE(items);
  SourcePtr reduced = Source::Call(source, "__reduce__");
  SourcePtr tuple = Source::Item(Source::Item(reduced, 1), 0);
  guards_.TypeMatch(source, obj);
  guards_.LengthMatch(tuple, length);
  if (length > 0) guards_.EqualsMatch(Source::Item(reduced, 2), python::FromLong(position));
  std::vector<VarPtr> rest;
  for (int64_t i = position; i < length; ++i) {
    ASSIGN_OR_RETURN(item, Wrap(Object::Borrow(PyTuple_GET_ITEM(items, i)), Source::Item(tuple, i)));
    rest.push_back(item);
  }
  VarPtr v = Var::Iterator(std::move(rest));
  v->source = std::move(source);
  v->object = obj;
  v->start = position;
  return v;
}

R Translator::WrapDeque(const Object& obj, SourcePtr source) {
  VarPtr q = Var::List({}, source);
  Py_ssize_t n = PyObject_Length(obj.get());
  if (n < 0) return python::FetchError("len(deque)");
  for (Py_ssize_t i = 0; i < n; ++i) {
    Object item = Object::Steal(PySequence_GetItem(obj.get(), i));
    if (!item) return python::FetchError("deque item");
    absl::StatusOr<VarPtr> v = Wrap(item, Source::Item(source, i));
    if (!v.ok()) return v.status();
    q->items.push_back(*v);
  }
  guards_.TypeMatch(source, obj);
  guards_.LengthMatch(source, static_cast<int64_t>(n));
  Object maxlen = python::Attr(obj.get(), "maxlen");
  if (!maxlen) return python::FetchError("deque.maxlen");
  q->maxlen = maxlen.get() == Py_None ? -1 : PyLong_AsLongLong(maxlen.get());
  q->container_class = Object::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(obj.get())));
  q->object = obj;
  return q;
}

R Translator::DequeAttr(const VarPtr& q, const std::string& name) {
  if (name == "maxlen") {
    VarPtr v = q->maxlen < 0 ? None() : Var::Constant(python::FromLong(q->maxlen));
    if (q->source) guards_.EqualsMatch(Source::Attr(q->source, "maxlen"), v->object);
    return v;
  }
  static const char* const kMethods[] = {"append", "appendleft", "pop",   "popleft", "extend", "extendleft",
                                         "clear",  "copy",       "count", "index",   "insert", "remove",
                                         "reverse", "rotate"};
  for (const char* m : kMethods) {
    if (name == m) return Var::Method(q, name);
  }
  return Break(ir::GraphBreak::OTHER, absl::StrCat("attribute '", name, "' of a deque"),
               "deque's methods and maxlen are traced");
}

R Translator::CallDequeMethod(const VarPtr& q, const std::string& name, const std::vector<VarPtr>& args,
                              const Kwargs& kwargs) {
  if (!kwargs.empty()) return RaiseNew(PyExc_TypeError, absl::StrCat("deque.", name, "() takes no keyword arguments"));
  static const char* const kReading[] = {"copy", "count", "index"};
  bool reading = false;
  for (const char* m : kReading) reading |= name == m;
  if (q->source && !reading) {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat("deque.", name, "() on ", q->source->ToString()),
                 "a deque the function was given is read by the trace, not changed; copy it first");
  }
  auto arity = [&](size_t lo, size_t hi) { return args.size() >= lo && args.size() <= hi; };
  auto full = [&]() { return q->maxlen >= 0 && static_cast<int64_t>(q->items.size()) >= q->maxlen; };
  if ((name == "append" || name == "appendleft") && arity(1, 1)) {
    bool left = name == "appendleft";
    if (left) {
      q->items.insert(q->items.begin(), args[0]);
    } else {
      q->items.push_back(args[0]);
    }
    Trim(q, left);
    return None();
  }
  if ((name == "extend" || name == "extendleft") && arity(1, 1)) {
    absl::StatusOr<std::vector<VarPtr>> items = Materialize(args[0]);
    if (!items.ok()) return items.status();
    bool left = name == "extendleft";
    for (const VarPtr& item : *items) {  // one at a time: extendleft reverses
      if (left) {
        q->items.insert(q->items.begin(), item);
      } else {
        q->items.push_back(item);
      }
      Trim(q, left);
    }
    return None();
  }
  if ((name == "pop" || name == "popleft") && arity(0, 0)) {
    if (q->items.empty()) return RaiseNew(PyExc_IndexError, absl::StrCat(name, " from an empty deque"));
    VarPtr v;
    if (name == "pop") {
      v = q->items.back();
      q->items.pop_back();
    } else {
      v = q->items.front();
      q->items.erase(q->items.begin());
    }
    return v;
  }
  if (name == "clear" && arity(0, 0)) {
    q->items.clear();
    return None();
  }
  if (name == "copy" && arity(0, 0)) {
    VarPtr copy = Var::List(q->items);
    copy->container_class = q->container_class;
    copy->maxlen = q->maxlen;
    return copy;
  }
  if (name == "reverse" && arity(0, 0)) {
    std::reverse(q->items.begin(), q->items.end());
    return None();
  }
  if (name == "rotate" && arity(0, 1)) {
    absl::StatusOr<int64_t> n = args.empty() ? absl::StatusOr<int64_t>(1) : AsInt(args[0]);
    if (!n.ok()) return n.status();
    int64_t size = static_cast<int64_t>(q->items.size());
    if (size > 1) {
      int64_t k = ((*n % size) + size) % size;  // right by n: the last k items move to the front
      std::rotate(q->items.begin(), q->items.end() - k, q->items.end());
    }
    return None();
  }
  if (name == "insert" && arity(2, 2)) {
    if (full()) return RaiseNew(PyExc_IndexError, "deque already at its maximum size");
    absl::StatusOr<int64_t> i = AsInt(args[0]);
    if (!i.ok()) return i.status();
    int64_t n = static_cast<int64_t>(q->items.size());
    int64_t k = std::clamp<int64_t>(*i < 0 ? *i + n : *i, 0, n);
    q->items.insert(q->items.begin() + k, args[1]);
    return None();
  }
  // index(x, start, stop) takes a range; count(x) and remove(x) take x alone.
  if ((name == "index" && arity(1, 3)) || ((name == "count" || name == "remove") && arity(1, 1))) {
    // Equality decides: only over Python constants, by the real deque's
    // own method on a copy (remove then drops the same position here).
    absl::StatusOr<Object> real = ToPython(q);
    if (!real.ok()) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("deque.", name, "() over a deque holding tensors"),
                   "comparing items needs their values; the deque holds trackers");
    }
    if (name == "remove") {
      absl::StatusOr<VarPtr> at = CallReal(Var::OfKind(VarKind::kOpaque, python::Attr(real->get(), "index")), args, {});
      if (!at.ok()) return at.status();
      absl::StatusOr<int64_t> k = AsInt(*at);
      if (!k.ok()) return k.status();
      q->items.erase(q->items.begin() + *k);
      return None();
    }
    return CallReal(Var::OfKind(VarKind::kOpaque, python::Attr(real->get(), name.c_str())), args, {});
  }
  return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("deque.", name, "() with ", args.size(), " arguments"),
               "this method is not traced");
}

R Translator::DequeOperator(const std::string& name, const VarPtr& a, const VarPtr& b) {
  if ((name == "iadd" || name == "imul") && a->source) return CallDequeMethod(a, name, {b}, {});  // a break
  // deque + deque, deque += iterable, deque * n: a deque, trimmed.
  if (name == "iadd" && IsDeque(a)) {
    absl::StatusOr<VarPtr> r = CallDequeMethod(a, "extend", {b}, {});
    if (!r.ok()) return r.status();
    return a;
  }
  if (name == "add" && IsDeque(a) && IsDeque(b)) {
    VarPtr out = Var::List(a->items);
    out->container_class = a->container_class;
    out->maxlen = a->maxlen;
    out->items.insert(out->items.end(), b->items.begin(), b->items.end());
    Trim(out, /*added_left=*/false);
    return out;
  }
  if ((name == "mul" || name == "imul") && IsDeque(a) && b->is_constant() && PyLong_Check(b->object.get())) {
    absl::StatusOr<int64_t> n = AsInt(b);
    if (!n.ok()) return n.status();
    VarPtr out = name == "imul" ? a : Var::List({});
    std::vector<VarPtr> once = a->items;
    out->container_class = a->container_class;
    out->maxlen = a->maxlen;
    out->items.clear();
    for (int64_t k = 0; k < *n; ++k) out->items.insert(out->items.end(), once.begin(), once.end());
    Trim(out, /*added_left=*/false);
    return out;
  }
  return Break(ir::GraphBreak::OTHER, absl::StrCat("'", name, "' between ", Describe(*a), " and ", Describe(*b)),
               "deques are traced with +, += and * by an int");
}

}  // namespace dynamo::trace
