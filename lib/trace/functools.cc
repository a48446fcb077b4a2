// The standard library's functional helpers, traced with CPython's own
// semantics (Modules/_functoolsmodule.c, Modules/itertoolsmodule.c):
//
//   functools.partial(f, *args, **kw)   a kPartial tracker; calling it calls
//                                       f(*args, *more, **{**kw, **more_kw})
//   functools.reduce(f, it[, initial])  f applied left to right, pulling
//                                       from `it` lazily
//   itertools.chain(*its), islice(...)  lazy adapters (generators.cc)
//   inspect.signature(f)                f's Signature, a constant, for a
//                                       Python function of guarded identity
//
// A partial passed in from outside is its function, args and keywords, each
// read from the real object through its path (p.func, p.args, p.keywords)
// and guarded there; its exact type is guarded, so a subclass (which may
// define its own __call__) is never taken for one.
#include <Python.h>

#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

using python::Object;

PyObject* StdlibObject(const char* module, const char* name) {
  // module -> name -> object: found without building a key (asked on every call the trace makes).
  static auto* cache = new absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, PyObject*>>();
  absl::flat_hash_map<std::string, PyObject*>& names = (*cache)[absl::string_view(module)];
  if (auto it = names.find(absl::string_view(name)); it != names.end()) return it->second;
  PyObject* found = nullptr;
  absl::StatusOr<Object> m = python::Import(module);
  absl::StatusOr<Object> a = m.ok() ? python::GetAttr(*m, name) : m.status();
  if (a.ok()) {
    found = a->release();
  } else {
    python::ClearError();
  }
  (*cache)[absl::string_view(module)][name] = found;  // found again: the import ran Python
  return found;
}

namespace {

bool Is(const VarPtr& fn, const char* module, const char* name) {
  PyObject* o = StdlibObject(module, name);
  return o != nullptr && fn->object.get() == o;
}

// islice's start/stop/step: None or a non-negative int (CPython raises
// ValueError otherwise).
std::optional<int64_t> SliceBound(const VarPtr& v, int64_t if_none) {
  if (v->is_none()) return if_none;
  if (!v->is_constant() || !PyLong_Check(v->object.get())) return std::nullopt;
  int overflow = 0;
  long long n = PyLong_AsLongLongAndOverflow(v->object.get(), &overflow);
  if (overflow != 0 || n < 0) return std::nullopt;
  return static_cast<int64_t>(n);
}

// Binds a C function's arguments as its signature does: the first
// `positional` of `names` may come by position, any by keyword unless
// `no_keywords`; the first `required` must come. Unbound ones stay null;
// nothing when the call would raise TypeError.
std::optional<std::vector<VarPtr>> BindCSignature(const std::vector<VarPtr>& args, const Kwargs& kwargs,
                                                 const std::vector<const char*>& names, size_t positional,
                                                 size_t required, bool no_keywords = false) {
  if (args.size() > positional || (no_keywords && !kwargs.empty())) return std::nullopt;
  std::vector<VarPtr> bound(names.size());
  for (size_t i = 0; i < args.size(); ++i) bound[i] = args[i];
  for (const auto& [k, v] : kwargs) {
    size_t i = 0;
    while (i < names.size() && k != names[i]) ++i;
    if (i == names.size() || bound[i]) return std::nullopt;
    bound[i] = v;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!bound[i]) return std::nullopt;
  }
  return bound;
}

// A number as count() takes one (PyNumber_Check): a numeric constant or a tensor.
bool IsNumber(const VarPtr& v) {
  if (v->is_tensor()) return true;
  return v->is_constant() && PyNumber_Check(v->object.get()) && !PyUnicode_Check(v->object.get());
}

}  // namespace

std::optional<absl::StatusOr<VarPtr>> Translator::CallItertool(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                               const Kwargs& kwargs) {
  using R = absl::StatusOr<VarPtr>;
  static const char* const kNames[] = {"count", "repeat", "cycle", "accumulate", "groupby"};
  const char* name = nullptr;
  for (const char* n : kNames) {
    if (Is(fn, "itertools", n)) name = n;
  }
  if (name == nullptr) return std::nullopt;
  guards_.IdMatch(fn->source, fn->object);
  const std::string what = name;
  auto raises = [&](const std::string& error) {
    return R(Break(ir::GraphBreak::OTHER, absl::StrCat("itertools.", what, "() with these arguments"),
                   absl::StrCat("the call would raise ", error)));
  };
  auto iter_of = [&](const VarPtr& iterable) -> absl::StatusOr<VarPtr> { return GetIter(iterable); };
  // The iterator a constructor keeps (iter() of its iterable, taken now).
  VarPtr made;
  if (what == "count") {
    std::optional<std::vector<VarPtr>> a = BindCSignature(args, kwargs, {"start", "step"}, 2, 0);
    if (!a) return raises("TypeError");
    VarPtr start = (*a)[0] ? (*a)[0] : Var::Constant(python::FromLong(0));
    VarPtr step = (*a)[1] ? (*a)[1] : Var::Constant(python::FromLong(1));
    if (!IsNumber(start) || !IsNumber(step)) return raises("TypeError: a number is required");
    made = MakeItertool(what, nullptr, nullptr, start, step, -1);
  } else if (what == "repeat") {
    std::optional<std::vector<VarPtr>> a = BindCSignature(args, kwargs, {"object", "times"}, 2, 1);
    if (!a) return raises("TypeError");
    int64_t times = -1;
    if ((*a)[1]) {
      absl::StatusOr<int64_t> n = AsInt((*a)[1]);
      if (!n.ok() || !(*a)[1]->is_constant() || !PyLong_Check((*a)[1]->object.get())) return raises("TypeError");
      times = std::max<int64_t>(*n, 0);  // a negative count repeats nothing
    }
    made = MakeItertool(what, nullptr, nullptr, (*a)[0], nullptr, times);
  } else {
    const bool cycle = what == "cycle";
    std::optional<std::vector<VarPtr>> a =
        cycle ? BindCSignature(args, kwargs, {"iterable"}, 1, 1, /*no_keywords=*/true)
        : what == "accumulate" ? BindCSignature(args, kwargs, {"iterable", "func", "initial"}, 2, 1)
                               : BindCSignature(args, kwargs, {"iterable", "key"}, 2, 1);
    if (!a) return raises("TypeError");
    absl::StatusOr<VarPtr> it = iter_of((*a)[0]);
    if (!it.ok()) return R(it.status());
    VarPtr function = a->size() > 1 ? (*a)[1] : nullptr;
    VarPtr initial = a->size() > 2 ? (*a)[2] : nullptr;
    made = MakeItertool(what, *it, function, initial, nullptr, -1);
  }
  // Untouched, the iterator is rebuilt by calling the constructor again on
  // the same (kept) arguments, as a generator expression is.
  made->self = fn;
  for (const VarPtr& a : args) made->items.push_back(a);
  for (const auto& [k, v] : kwargs) {
    made->items.push_back(v);
    made->keys.push_back(Var::Constant(python::FromString(k)));
  }
  return R(made);
}

std::optional<absl::StatusOr<VarPtr>> Translator::InspectSignature(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                                    const Kwargs& kwargs) {
  if (!fn->object || !Is(fn, "inspect", "signature") || args.size() != 1 || !kwargs.empty()) return std::nullopt;
  const VarPtr& target = args[0];
  PyObject* f = target->object.get();
  if (target->kind != VarKind::kFunction || f == nullptr || !PyFunction_Check(f) || !target->source) {
    return std::nullopt;
  }
  if (target->self && !target->self->object) return std::nullopt;  // a method of an object the trace made
  // A Python function of guarded identity: its signature is its code's
  // parameters, its defaults (guarded where they are) and annotations,
  // unless __wrapped__ or __signature__ redirect it (left to be inlined).
  for (const char* redirect : {"__wrapped__", "__signature__"}) {
    if (python::HasAttr(f, redirect)) return std::nullopt;
  }
  guards_.IdMatch(target->source, target->object);
  for (const char* defaults : {"__defaults__", "__kwdefaults__"}) {
    absl::StatusOr<VarPtr> d = Wrap(Attr(f, defaults), Source::Attr(target->source, defaults));
    if (!d.ok()) return absl::StatusOr<VarPtr>(d.status());
  }
  Object callable = target->object;
  if (target->self) {
    callable = Object::Steal(PyMethod_New(f, target->self->object.get()));
    if (!callable) return absl::StatusOr<VarPtr>(python::FetchError("binding a method"));
  }
  absl::StatusOr<Object> sig = python::Call(Object::Borrow(fn->object.get()), {callable});
  if (!sig.ok()) return std::nullopt;  // inlined instead: it raises there as it would here
  // A Signature and its Parameters are immutable: a Python value.
  return absl::StatusOr<VarPtr>(Var::Constant(*sig));
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallFunctools(const VarPtr& fn, std::vector<VarPtr>& args,
                                                                Kwargs& kwargs) {
  if (std::optional<absl::StatusOr<VarPtr>> r = InspectSignature(fn, args, kwargs)) return r;
  if (fn->kind == VarKind::kPartial) {
    std::vector<VarPtr> all = fn->defaults->items;
    all.insert(all.end(), args.begin(), args.end());
    // {**keywords, **kwargs}: a keyword given again keeps its first position.
    Kwargs merged;
    for (size_t i = 0; i < fn->kwdefaults->keys.size(); ++i) {
      absl::StatusOr<std::string> k = python::AsString(fn->kwdefaults->keys[i]->object);
      if (!k.ok()) return absl::StatusOr<VarPtr>(k.status());
      merged.emplace_back(*k, fn->kwdefaults->items[i]);
    }
    for (auto& kv : kwargs) {
      bool replaced = false;
      for (auto& m : merged) {
        if (m.first == kv.first) {
          m.second = kv.second;
          replaced = true;
        }
      }
      if (!replaced) merged.push_back(kv);
    }
    return Call(fn->self, std::move(all), std::move(merged));
  }
  if (!fn->object || (fn->kind != VarKind::kClass && fn->kind != VarKind::kOpaque)) return std::nullopt;

  if (Is(fn, "functools", "partial")) {
    if (args.empty()) {
      return Break(ir::GraphBreak::OTHER, "functools.partial() without a function",
                   "the call would raise TypeError");
    }
    VarPtr func = args[0];
    switch (func->kind) {
      case VarKind::kFunction: case VarKind::kOp: case VarKind::kBuiltin: case VarKind::kMethod:
      case VarKind::kNNModule: case VarKind::kPartial:
        break;
      default:
        return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                     absl::StrCat("functools.partial of ", Describe(*func)),
                     "partials are traced over functions, torch ops, modules and methods");
    }
    std::vector<VarPtr> bound;
    std::vector<VarPtr> keys, values;
    if (func->kind == VarKind::kPartial) {  // partial(partial(f, a), b) is partial(f, a, b)
      bound = func->defaults->items;
      keys = func->kwdefaults->keys;
      values = func->kwdefaults->items;
      func = func->self;
    }
    bound.insert(bound.end(), args.begin() + 1, args.end());
    for (auto& kv : kwargs) {
      bool replaced = false;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (python::AsString(keys[i]->object).value_or("") == kv.first) {
          values[i] = kv.second;
          replaced = true;
        }
      }
      if (!replaced) {
        keys.push_back(Var::Constant(python::FromString(kv.first)));
        values.push_back(kv.second);
      }
    }
    VarPtr p = Var::OfKind(VarKind::kPartial, Object());
    p->self = func;
    p->defaults = Var::Tuple(std::move(bound));
    p->kwdefaults = Var::Dict(std::move(keys), std::move(values));
    return absl::StatusOr<VarPtr>(p);
  }

  if (reinterpret_cast<PyObject*>(Py_TYPE(fn->object.get())) == StdlibObject("functools", "_lru_cache_wrapper")) {
    // A functools.lru_cache function: its __wrapped__ is traced, as
    // torch._dynamo does; the cache is neither read nor filled (for the pure
    // functions it is meant for, the values are the same).
    guards_.IdMatch(fn->source, fn->object);
    Object wrapped = Attr(fn->object.get(), "__wrapped__");
    if (!wrapped) return absl::StatusOr<VarPtr>(python::FetchError("lru_cache's __wrapped__"));
    absl::StatusOr<VarPtr> inner = Wrap(wrapped, fn->source ? Source::Attr(fn->source, "__wrapped__") : nullptr);
    if (!inner.ok()) return inner;
    return Call(*inner, std::move(args), std::move(kwargs));
  }

  if (Is(fn, "functools", "reduce")) {
    guards_.IdMatch(fn->source, fn->object);
    if (!kwargs.empty() || args.size() < 2 || args.size() > 3) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("functools.reduce() with ", args.size(), " arguments"),
                   "the call would raise TypeError");
    }
    absl::StatusOr<VarPtr> it = GetIter(args[1]);
    if (!it.ok()) return absl::StatusOr<VarPtr>(it.status());
    // An explicit initial, None included, is the first accumulated value.
    VarPtr result = args.size() == 3 ? args[2] : nullptr;
    for (;;) {
      absl::StatusOr<std::optional<VarPtr>> next = NextValue(*it);
      if (!next.ok()) return absl::StatusOr<VarPtr>(next.status());
      if (!*next) break;
      if (!result) {
        result = **next;
        continue;
      }
      absl::StatusOr<VarPtr> r = Call(args[0], {result, **next}, {});
      if (!r.ok()) return r;
      result = *r;
    }
    if (!result) {
      return Break(ir::GraphBreak::OTHER, "functools.reduce() of an empty iterable with no initial value",
                   "the call would raise TypeError");
    }
    return absl::StatusOr<VarPtr>(result);
  }

  if (std::optional<absl::StatusOr<VarPtr>> r = CallItertool(fn, args, kwargs)) return r;

  if (Is(fn, "itertools", "chain")) {
    if (!kwargs.empty()) {
      return Break(ir::GraphBreak::OTHER, "itertools.chain() with keyword arguments",
                   "the call would raise TypeError");
    }
    return absl::StatusOr<VarPtr>(MakeChain(args));
  }

  // itertools.chain.from_iterable: a classmethod of the C type chain (its
  // bound form is made anew on each access, so it is known by its owner).
  PyObject* chain = StdlibObject("itertools", "chain");
  if (chain != nullptr && PyCFunction_Check(fn->object.get()) && PyCFunction_GET_SELF(fn->object.get()) == chain &&
      absl::string_view(reinterpret_cast<PyCFunctionObject*>(fn->object.get())->m_ml->ml_name) == "from_iterable") {
    if (!kwargs.empty() || args.size() != 1) {
      return Break(ir::GraphBreak::OTHER, "chain.from_iterable() takes one argument", "the call would raise TypeError");
    }
    absl::StatusOr<VarPtr> source = GetIter(args[0]);
    if (!source.ok()) return absl::StatusOr<VarPtr>(source.status());
    return absl::StatusOr<VarPtr>(MakeChainFromIterable(*source));
  }

  if (Is(fn, "itertools", "product") || Is(fn, "itertools", "combinations")) {
    guards_.IdMatch(fn->source, fn->object);
    return Combinatoric(Is(fn, "itertools", "product"), args, kwargs);
  }

  if (Is(fn, "itertools", "islice")) {
    if (!kwargs.empty() || args.size() < 2 || args.size() > 4) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("itertools.islice() with ", args.size(), " arguments"),
                   "the call would raise TypeError");
    }
    std::optional<int64_t> start = 0, stop, step = 1;
    if (args.size() == 2) {
      stop = SliceBound(args[1], -1);
    } else {
      start = SliceBound(args[1], 0);
      stop = SliceBound(args[2], -1);
      if (args.size() == 4) step = SliceBound(args[3], 1);
    }
    if (!start || !stop || !step || *step < 1) {
      return Break(ir::GraphBreak::OTHER, "itertools.islice() with bounds that are not None or ints >= 0",
                   "the call would raise ValueError");
    }
    absl::StatusOr<VarPtr> it = GetIter(args[0]);
    if (!it.ok()) return absl::StatusOr<VarPtr>(it.status());
    return absl::StatusOr<VarPtr>(MakeIslice(*it, *start, *stop, *step));
  }
  return std::nullopt;
}

absl::StatusOr<VarPtr> Translator::Combinatoric(bool product, const std::vector<VarPtr>& args,
                                                const Kwargs& kwargs) {
  // Both take their iterables whole when they are made (product's pools,
  // combinations' pool are tuples), so the tuples they yield are fixed
  // then; an iterator over them is what they are.
  int64_t r = -1;
  size_t n_pools = args.size();
  if (product) {
    r = 1;
    for (const auto& [k, v] : kwargs) {
      absl::StatusOr<int64_t> n = k == "repeat" ? AsInt(v) : absl::InvalidArgumentError(k);
      if (!n.ok() || *n < 0) {
        return Break(ir::GraphBreak::OTHER, absl::StrCat("itertools.product() with keyword '", k, "'"),
                     "the call would raise TypeError or ValueError");
      }
      r = *n;
    }
  } else {
    if (!kwargs.empty() || args.size() != 2) {
      return Break(ir::GraphBreak::OTHER, "itertools.combinations() takes (iterable, r)",
                   "the call would raise TypeError");
    }
    absl::StatusOr<int64_t> n = AsInt(args[1]);
    if (!n.ok() || *n < 0) {
      return Break(ir::GraphBreak::OTHER, "itertools.combinations() with r that is not an int >= 0",
                   "the call would raise TypeError or ValueError");
    }
    r = *n;
    n_pools = 1;
  }
  std::vector<std::vector<VarPtr>> pools;
  for (size_t i = 0; i < n_pools; ++i) {
    absl::StatusOr<std::vector<VarPtr>> items = Materialize(args[i]);
    if (!items.ok()) return items.status();
    pools.push_back(*std::move(items));
  }
  constexpr size_t kMaxItems = 100000;  // loops over them are unrolled
  std::vector<VarPtr> out;
  if (product) {
    std::vector<std::vector<VarPtr>> all;
    for (int64_t k = 0; k < r; ++k) all.insert(all.end(), pools.begin(), pools.end());
    std::vector<std::vector<VarPtr>> rows = {{}};
    for (const auto& pool : all) {
      std::vector<std::vector<VarPtr>> next;
      for (const auto& row : rows) {
        for (const VarPtr& item : pool) {
          next.push_back(row);
          next.back().push_back(item);
          if (next.size() > kMaxItems) {
            return Break(ir::GraphBreak::OTHER, "itertools.product() of more than 100,000 tuples",
                         "loops are unrolled; use a tensor operation instead");
          }
        }
      }
      rows = std::move(next);
    }
    for (auto& row : rows) out.push_back(Var::Tuple(std::move(row)));
  } else {
    const std::vector<VarPtr>& pool = pools[0];
    const size_t n = pool.size(), k = static_cast<size_t>(r);
    if (k <= n) {
      // Lexicographic order of positions, as CPython yields them.
      std::vector<size_t> idx(k);
      for (size_t i = 0; i < k; ++i) idx[i] = i;
      for (;;) {
        std::vector<VarPtr> row;
        for (size_t i : idx) row.push_back(pool[i]);
        out.push_back(Var::Tuple(std::move(row)));
        if (out.size() > kMaxItems) {
          return Break(ir::GraphBreak::OTHER, "itertools.combinations() of more than 100,000 tuples",
                       "loops are unrolled; use a tensor operation instead");
        }
        size_t i = k;
        while (i > 0 && idx[i - 1] == i - 1 + n - k) --i;
        if (i == 0) break;
        ++idx[i - 1];
        for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
      }
    }
  }
  return Var::Iterator(std::move(out));
}

std::optional<absl::StatusOr<VarPtr>> Translator::WrapPartial(const Object& obj, const SourcePtr& source) {
  PyObject* partial = StdlibObject("functools", "partial");
  if (partial == nullptr || reinterpret_cast<PyObject*>(Py_TYPE(obj.get())) != partial) return std::nullopt;
  if (!source) {
    return Break(ir::GraphBreak::OTHER, "a functools.partial with no known path",
                 "pass the partial as an argument or keep it as a global");
  }
  guards_.TypeMatch(source, obj);
  VarPtr p = Var::OfKind(VarKind::kPartial, obj, source);
  struct Part {
    const char* name;
    VarPtr* into;
  };
  VarPtr func;
  for (Part part : {Part{"func", &func}, Part{"args", &p->defaults}, Part{"keywords", &p->kwdefaults}}) {
    absl::StatusOr<Object> value = python::GetAttr(obj, part.name);
    if (!value.ok()) return absl::StatusOr<VarPtr>(value.status());
    absl::StatusOr<VarPtr> w = Wrap(*value, Source::Attr(source, part.name));
    if (!w.ok()) return w;
    *part.into = *w;
  }
  p->self = func;
  if (p->defaults->kind != VarKind::kTuple || p->kwdefaults->kind != VarKind::kDict) {
    return Break(ir::GraphBreak::OTHER, "a functools.partial whose args or keywords are not plain",
                 "build the partial from a plain tuple and dict");
  }
  return absl::StatusOr<VarPtr>(p);
}

}  // namespace dynamo::trace
