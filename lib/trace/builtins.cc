// Python's builtins and the operator module, where calls.cc's general
// paths (run it on constants, or refuse) are not what CPython does:
//
//   isinstance(x, T, bad=1)     builtins that take no keywords raise TypeError
//   zip(a, b, strict=True)      unequal lengths raise ValueError
//   min(iter(lst)), max(t)      over any iterable the trace models
//   sorted(y, key=f, reverse=r) f called once per item, in order; a stable sort
//   str(f), repr(f)             of a real function (guarded by identity)
//   operator.is_(a, b), truth, not_, length_hint, contains, getitem
//   sys.intern(s), pow(a, b[, m])
//   torch.iinfo(dtype), torch.finfo(dtype)
//
// Each answer is CPython's (Python/bltinmodule.c, Modules/_operator.c); a
// call CPython would reject becomes a graph break, so Python raises it.
#include <Python.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "lib/bytecode/opcodes.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

int BinaryOpIndex(absl::string_view nb_name) {
  for (size_t i = 0; i < std::size(bytecode::generated::kBinaryOps); ++i) {
    if (absl::string_view(bytecode::generated::kBinaryOps[i].name) == nb_name) return static_cast<int>(i);
  }
  return -1;
}

namespace {

using python::Object;

// Builtins whose C signature has no keyword parameters: CPython raises
// "takes no keyword arguments" before reading any argument.
bool TakesNoKeywords(const std::string& name) {
  static constexpr absl::string_view kNames[] = {
      "len", "isinstance", "issubclass", "range", "iter", "next", "getattr", "hasattr", "setattr", "callable",
      "abs", "divmod", "id", "repr", "hash", "map", "filter", "set", "frozenset", "list", "tuple",
      "reversed", "any", "all", "bool", "float", "super"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

// The name and module of a C function (`_operator.is_`, `sys.intern`).
std::optional<std::pair<std::string, std::string>> CFunctionName(PyObject* fn) {
  if (fn == nullptr || !PyCFunction_Check(fn)) return std::nullopt;
  Object module = Object::Steal(PyObject_GetAttrString(fn, "__module__"));
  Object name = Object::Steal(PyObject_GetAttrString(fn, "__name__"));
  python::ClearError();
  absl::StatusOr<std::string> m = module ? python::AsString(module) : absl::NotFoundError("");
  absl::StatusOr<std::string> n = name ? python::AsString(name) : absl::NotFoundError("");
  python::ClearError();
  if (!m.ok() || !n.ok()) return std::nullopt;
  return std::make_pair(*m, *n);
}

// operator functions that change their first argument: never run on a
// Python copy of a tracker (the change would be lost).
bool MutatesArgument(const std::string& name) {
  return name == "setitem" || name == "delitem" ||
         (name.size() > 1 && name[0] == 'i' && name != "is_" && name != "is_not" && name != "index" &&
          name != "invert" && name != "itemgetter");
}


}  // namespace

absl::StatusOr<bool> Translator::Identical(const VarPtr& a, const VarPtr& b) {
  if (a->kind == VarKind::kTensor || b->kind == VarKind::kTensor) {
    NoteIdentity(a);
    NoteIdentity(b);
    return a->kind == b->kind && a->tensor_identity() == b->tensor_identity();
  }
  if (a->object && b->object) {
    // Identity between two values read from the frame is a fact of the
    // inputs (None and the like are pinned by their own guards).
    if (a->source && b->source) guards_.Aliasing({a->source, b->source}, {a->object.get(), b->object.get()});
    return a->object.get() == b->object.get();
  }
  return a == b;
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallBuiltinKind(const VarPtr& fn, std::vector<VarPtr>& args,
                                                                  Kwargs& kwargs) {
  using R = absl::StatusOr<VarPtr>;
  const std::string& name = fn->name;
  if (!kwargs.empty() && TakesNoKeywords(name)) {
    return R(Break(ir::GraphBreak::OTHER, absl::StrCat(name, "() takes no keyword arguments"),
                   "the call would raise TypeError"));
  }
  if (name == "zip" && !kwargs.empty()) return ZipStrict(args, kwargs);
  if ((name == "min" || name == "max") && args.size() == 1 && kwargs.empty() && !ToPython(args[0]).ok()) {
    const VarKind k = args[0]->kind;
    if (k != VarKind::kTuple && k != VarKind::kList && k != VarKind::kIterator && k != VarKind::kDictView &&
        k != VarKind::kDict && k != VarKind::kRange && k != VarKind::kSet) {
      return std::nullopt;
    }
    // min(iterable): the items as Python takes them, then the real min of
    // their values (ties keep the first, as CPython's min_max does).
    absl::StatusOr<std::vector<VarPtr>> items = Materialize(args[0]);
    if (!items.ok()) return R(items.status());
    std::vector<Object> values;
    for (const VarPtr& item : *items) {
      absl::StatusOr<Object> v = ToPython(item);
      if (!v.ok()) {
        return R(Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat(name, "() over ", Describe(*item)),
                       "min() and max() are traced over Python values; use torch.min/torch.max for tensors"));
      }
      values.push_back(*v);
    }
    return CallReal(fn, {Var::Constant(python::MakeList(values))}, {});
  }
  if (name == "sorted") return Sorted(args, kwargs);
  if ((name == "str" || name == "repr") && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kOpaque &&
      !args[0]->source && args[0]->object && PyExceptionInstance_Check(args[0]->object.get()) &&
      !(Py_TYPE(args[0]->object.get())->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    // An exception the trace made (MakeException): a builtin class's
    // message, from arguments that are constants.
    Object s = Object::Steal(name == "str" ? PyObject_Str(args[0]->object.get())
                                          : PyObject_Repr(args[0]->object.get()));
    if (!s) return R(python::FetchError(name));
    return R(Var::Constant(s));
  }
  if ((name == "str" || name == "repr") && args.size() == 1 && kwargs.empty() &&
      args[0]->kind == VarKind::kFunction && !args[0]->self && args[0]->source && args[0]->object &&
      PyFunction_Check(args[0]->object.get())) {
    // The very function (its identity is guarded where it was read): its
    // repr names it and its address, both fixed while the guard holds.
    Object s = Object::Steal(name == "str" ? PyObject_Str(args[0]->object.get())
                                          : PyObject_Repr(args[0]->object.get()));
    if (!s) return R(python::FetchError(name));
    return R(Var::Constant(s));
  }
  return std::nullopt;
}

absl::StatusOr<VarPtr> Translator::ZipStrict(const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  bool strict = false;
  for (const auto& [k, v] : kwargs) {
    absl::StatusOr<Object> value = k == "strict" ? ToPython(v) : absl::InvalidArgumentError(k);
    if (!value.ok()) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("zip() with keyword '", k, "'"),
                   k == "strict" ? "zip(strict=...) is traced with a constant flag"
                                 : "the call would raise TypeError");
    }
    int truth = PyObject_IsTrue(value->get());
    if (truth < 0) return python::FetchError("zip strict");
    strict = truth == 1;
  }
  // The iterables are taken whole (a strict zip must see every one end),
  // then paired; unequal lengths are CPython's ValueError.
  std::vector<std::vector<VarPtr>> columns;
  for (const VarPtr& a : args) {
    absl::StatusOr<std::vector<VarPtr>> items = Materialize(a);
    if (!items.ok()) return items.status();
    columns.push_back(*std::move(items));
  }
  size_t n = columns.empty() ? 0 : columns[0].size();
  for (const auto& c : columns) {
    if (strict && c.size() != n) {
      return Break(ir::GraphBreak::OTHER, "zip(strict=True) over iterables of different lengths",
                   "the function would raise ValueError");
    }
    n = std::min(n, c.size());
  }
  std::vector<VarPtr> out;
  for (size_t row = 0; row < n; ++row) {
    std::vector<VarPtr> t;
    for (const auto& c : columns) t.push_back(c[row]);
    out.push_back(Var::Tuple(std::move(t)));
  }
  return Var::Iterator(std::move(out));
}

absl::StatusOr<VarPtr> Translator::Sorted(const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  if (args.size() != 1) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("sorted() with ", args.size(), " positional arguments"),
                 "the call would raise TypeError");
  }
  VarPtr key;
  Object reverse = python::FromBool(false);
  for (const auto& [k, v] : kwargs) {
    if (k == "key") {
      if (!v->is_none()) key = v;
    } else if (k == "reverse") {
      absl::StatusOr<Object> r = ToPython(v);
      if (!r.ok()) return Break(ir::GraphBreak::OTHER, "sorted(reverse=...) of a non-constant", "");
      reverse = *r;
    } else {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("sorted() with keyword '", k, "'"),
                   "the call would raise TypeError");
    }
  }
  // list(iterable), then key(item) once per item in order, as list.sort
  // does; the order itself is the real sort of the keys' values (stable,
  // so equal keys keep their order, reversed or not).
  absl::StatusOr<std::vector<VarPtr>> items = Materialize(args[0]);
  if (!items.ok()) return items.status();
  std::vector<Object> keys;
  for (const VarPtr& item : *items) {
    VarPtr k = item;
    if (key) {
      absl::StatusOr<VarPtr> r = Call(key, {item}, {});
      if (!r.ok()) return r.status();
      k = *r;
    }
    absl::StatusOr<Object> value = ToPython(k);
    if (!value.ok()) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("sorted() by ", Describe(*k)),
                   "sorted() is traced when the sort keys are Python values");
    }
    keys.push_back(*value);
  }
  Object key_list = python::MakeList(keys);
  Object positions = Object::Steal(PyList_New(0));
  for (size_t i = 0; i < keys.size(); ++i) {
    PyList_Append(positions.get(), python::FromLong(static_cast<int64_t>(i)).get());
  }
  Object getitem = Object::Steal(PyObject_GetAttrString(key_list.get(), "__getitem__"));
  Object sort = Object::Steal(PyObject_GetAttrString(positions.get(), "sort"));
  Object kw = Object::Steal(PyDict_New());
  if (!getitem || !sort || !kw) return python::FetchError("sorted");
  PyDict_SetItemString(kw.get(), "key", getitem.get());
  PyDict_SetItemString(kw.get(), "reverse", reverse.get());
  Object empty = Object::Steal(PyTuple_New(0));
  Object done = Object::Steal(PyObject_Call(sort.get(), empty.get(), kw.get()));
  if (!done) {
    absl::Status error = python::FetchError("");
    return Break(ir::GraphBreak::OTHER, absl::StrCat("sorted() raises ", error.message()),
                 "the function would raise here");
  }
  std::vector<VarPtr> out;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(positions.get()); ++i) {
    out.push_back((*items)[static_cast<size_t>(PyLong_AsSsize_t(PyList_GET_ITEM(positions.get(), i)))]);
  }
  return Var::List(std::move(out));
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallStdlibFunction(const VarPtr& fn, std::vector<VarPtr>& args,
                                                                     Kwargs& kwargs) {
  using R = absl::StatusOr<VarPtr>;
  if (fn->kind == VarKind::kClass && fn->object && kwargs.empty() && args.size() == 1) {
    // torch.iinfo / torch.finfo of a dtype: a record of constants.
    Object torch = Object::Steal(PyImport_ImportModule("torch"));
    if (!torch) python::ClearError();
    for (const char* info : {"iinfo", "finfo"}) {
      Object cls = torch ? Object::Steal(PyObject_GetAttrString(torch.get(), info)) : Object();
      python::ClearError();
      if (!cls || cls.get() != fn->object.get()) continue;
      if (fn->source) guards_.IdMatch(fn->source, fn->object);
      if (args[0]->kind != VarKind::kDType || !args[0]->object) return std::nullopt;
      return CallReal(fn, args, kwargs);
    }
    return std::nullopt;
  }
  if (fn->kind != VarKind::kOpaque) return std::nullopt;
  if (std::optional<absl::StatusOr<VarPtr>> r = DictFromKeys(fn, args, kwargs)) return r;
  std::optional<std::pair<std::string, std::string>> id = CFunctionName(fn->object.get());
  if (!id) return std::nullopt;
  const std::string& module = id->first;
  const std::string& name = id->second;
  auto guard_identity = [&]() {
    if (fn->source) guards_.IdMatch(fn->source, fn->object);
  };
  if (module == "sys" && name == "intern") {
    if (!AllConstant(args, kwargs)) return std::nullopt;
    guard_identity();
    return CallReal(fn, args, kwargs);
  }
  if (module == "builtins" && name == "pow") {
    guard_identity();
    if (AllConstant(args, kwargs)) return CallReal(fn, args, kwargs);
    if (args.size() == 2 && kwargs.empty()) return BinaryOp(BinaryOpIndex("NB_POWER"), args[0], args[1]);
    return std::nullopt;
  }
  if (module != "_operator" && module != "operator") return std::nullopt;
  guard_identity();
  auto arity = [&](size_t n) -> std::optional<R> {
    if (args.size() == n && kwargs.empty()) return std::nullopt;
    return R(Break(ir::GraphBreak::OTHER, absl::StrCat("operator.", name, "() with ", args.size(), " arguments"),
                   "the call would raise TypeError"));
  };
  if (name == "is_" || name == "is_not") {
    if (std::optional<R> bad = arity(2)) return bad;
    absl::StatusOr<bool> same = Identical(args[0], args[1]);
    if (!same.ok()) return R(same.status());
    return R(Var::Constant(python::FromBool(*same == (name == "is_"))));
  }
  if (name == "truth" || name == "not_") {
    if (std::optional<R> bad = arity(1)) return bad;
    absl::StatusOr<bool> t = Truthy(args[0]);
    if (!t.ok()) return R(t.status());
    return R(Var::Constant(python::FromBool(*t == (name == "truth"))));
  }
  if (name == "contains") {
    if (std::optional<R> bad = arity(2)) return bad;
    absl::StatusOr<bool> found = Contains(args[0], args[1]);
    if (!found.ok()) return R(found.status());
    return R(Var::Constant(python::FromBool(*found)));
  }
  if (name == "getitem") {
    if (std::optional<R> bad = arity(2)) return bad;
    return Subscript(args[0], args[1]);
  }
  if (name == "length_hint" && (args.size() == 1 || args.size() == 2) && kwargs.empty() &&
      (args[0]->is_sequence() || args[0]->kind == VarKind::kDict)) {
    // A sized object's hint is its len().
    guards_.LengthMatch(args[0]->source, static_cast<int64_t>(args[0]->items.size()));
    return R(Var::Constant(python::FromLong(static_cast<int64_t>(args[0]->items.size()))));
  }
  if ((name == "neg" || name == "abs" || name == "invert") && args.size() == 1 && args[0]->is_ndarray) {
    return NdarrayOperator(name, args);
  }
  if ((name == "neg" || name == "abs" || name == "invert") && args.size() == 1 && args[0]->is_tensor()) {
    return CallOp(absl::StrCat("operator.", name), ir::Node::CALL_FUNCTION, args, {});
  }
  // The rest are pure functions of their arguments' values.
  if (MutatesArgument(name) || !AllConstant(args, kwargs)) return std::nullopt;
  return CallReal(fn, args, kwargs);
}

}  // namespace dynamo::trace
