// Calling an nn.Module from traced code: what nn.Module.__call__ does,
// without tracing torch's own _call_impl. Its forward pre-hooks run on the
// positional arguments, then forward (an instance attribute `m.forward`
// shadows the class's), then its forward hooks on the result:
//
//   m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
//   m.register_forward_hook(lambda mod, args, out: out * 2)
//   m(x)        # traced as: forward(x + 1) * 2
//
// The hooks torch keeps per process (nn.modules.module's
// register_module_forward_hook) run first, as in _call_impl. Every hook
// dict the call read is guarded (its length, and each hook's identity), so
// registering or removing a hook after the capture recaptures instead of
// running stale code. Backward hooks are a graph break: they attach to the
// autograd graph the module's call builds, which is the backend's.
#include <Python.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;
using python::Attr;

constexpr const char* kTorchModuleModule = "torch.nn.modules.module";

// The per-process hook dict `name` of torch.nn.modules.module (empty when
// torch has none by that name: an older torch).
Object GlobalHooks(const char* name) {
  static const python::Name kModule(kTorchModuleModule);
  PyObject* module = kModule.get() ? PyDict_GetItemWithError(PyImport_GetModuleDict(), kModule.get()) : nullptr;  // borrowed
  if (module == nullptr) {
    python::ClearError();
    return Object();
  }
  Object d = Attr(module, name);
  if (!d || !PyDict_Check(d.get())) {
    python::ClearError();
    return Object();
  }
  return d;
}

bool NonEmptyDict(const Object& d) { return d && PyDict_Check(d.get()) && PyDict_Size(d.get()) > 0; }

bool IsNone(const VarPtr& v) { return v->kind == VarKind::kConstant && v->object.get() == Py_None; }

}  // namespace

SourcePtr Translator::GlobalHookSource(const char* name) {
  SourcePtr& source = global_hook_sources_[name];
  if (!source) source = Source::Attr(Source::Module(kTorchModuleModule), name);
  return source;
}

absl::StatusOr<std::vector<Translator::ModuleHook>> Translator::ModuleHooks(const VarPtr& module, bool pre) {
  PyObject* m = module->object.get();
  const char* local_name = pre ? "_forward_pre_hooks" : "_forward_hooks";
  const char* global_name = pre ? "_global_forward_pre_hooks" : "_global_forward_hooks";
  Object with_kwargs = Attr(m, pre ? "_forward_pre_hooks_with_kwargs" : "_forward_hooks_with_kwargs");
  Object global_with_kwargs = pre ? Object() : GlobalHooks("_global_forward_hooks_with_kwargs");
  python::ClearError();
  std::vector<ModuleHook> hooks;
  struct Table {
    Object dict;
    SourcePtr source;
  };
  Object local = Attr(m, local_name);
  python::ClearError();
  const Table tables[] = {
      {GlobalHooks(global_name), GlobalHookSource(global_name)},
      {local, module->source ? Source::Attr(module->source, local_name) : nullptr},
  };
  for (const Table& t : tables) {
    if (!t.dict || !PyDict_Check(t.dict.get())) continue;
    if (t.source) guards_.LengthMatch(t.source, PyDict_Size(t.dict.get()));
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(t.dict.get(), &pos, &key, &value)) {
      if (!t.source || !PyLong_Check(key)) {
        return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                     absl::StrCat(python::TypeName(module->object), " has ", local_name, " that cannot be guarded"),
                     "hooks are traced on modules the function reads from its arguments, globals or attributes");
      }
      int64_t id = PyLong_AsLongLong(key);
      SourcePtr source = Source::Item(t.source, id);
      absl::StatusOr<VarPtr> fn = Wrap(Object::Borrow(value), source);
      if (!fn.ok()) return fn.status();
      guards_.IdMatch(source, Object::Borrow(value));
      bool kw = (with_kwargs && PyDict_Check(with_kwargs.get()) && PyDict_Contains(with_kwargs.get(), key) == 1) ||
                (global_with_kwargs && PyDict_Contains(global_with_kwargs.get(), key) == 1);
      hooks.push_back({*fn, kw});
    }
  }
  python::ClearError();
  return hooks;
}

absl::StatusOr<VarPtr> Translator::CallNNModule(const VarPtr& fn, std::vector<VarPtr> args, Kwargs kwargs) {
  PyObject* m = fn->object.get();
  if (absl::Status lazy = InitializeLazyModule(fn, args, kwargs); !lazy.ok()) return lazy;
  // Backward hooks hang on the autograd graph the call builds: not traced.
  for (const char* name : {"_backward_hooks", "_backward_pre_hooks"}) {
    Object h = Attr(m, name);
    python::ClearError();
    if (NonEmptyDict(h)) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat(python::TypeName(fn->object), " has ", name),
                   "backward hooks are not traced; the module's call runs in Python");
    }
    if (fn->source && h && PyDict_Check(h.get())) guards_.LengthMatch(Source::Attr(fn->source, name), 0);
  }
  for (const char* name : {"_global_backward_hooks", "_global_backward_pre_hooks"}) {
    Object h = GlobalHooks(name);
    if (NonEmptyDict(h)) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("a module backward hook is registered (", name, ")"),
                   "backward hooks are not traced; the module's call runs in Python");
    }
    if (h) guards_.LengthMatch(GlobalHookSource(name), 0);
  }
  absl::StatusOr<std::vector<ModuleHook>> pre = ModuleHooks(fn, /*pre=*/true);
  if (!pre.ok()) return pre.status();
  absl::StatusOr<std::vector<ModuleHook>> post = ModuleHooks(fn, /*pre=*/false);
  if (!post.ok()) return post.status();
  if (pre->empty() && post->empty()) return CallForward(fn, std::move(args), std::move(kwargs));

  // The hooks see the positional arguments as a tuple, and those taking
  // keywords a dict of them.
  auto kwargs_dict = [&kwargs]() {
    std::vector<VarPtr> keys, values;
    for (const auto& [name, v] : kwargs) {
      keys.push_back(Var::Constant(python::FromString(name)));
      values.push_back(v);
    }
    return Var::Dict(std::move(keys), std::move(values));
  };
  VarPtr args_tuple = Var::Tuple(args);
  for (const ModuleHook& hook : *pre) {
    if (hook.with_kwargs) {
      ASSIGN_OR_RETURN(r, Call(hook.fn, {fn, args_tuple, kwargs_dict()}, {}));
      if (IsNone(r)) continue;
      if (r->kind != VarKind::kTuple || r->items.size() != 2 || r->items[0]->kind != VarKind::kTuple ||
          r->items[1]->kind != VarKind::kDict) {
        return Break(ir::GraphBreak::OTHER,
                     absl::StrCat("a forward pre-hook of ", python::TypeName(fn->object), " returned ", Describe(*r)),
                     "a pre-hook with kwargs returns None or (args, kwargs)");
      }
      args_tuple = r->items[0];
      Kwargs next;
      for (size_t i = 0; i < r->items[1]->keys.size(); ++i) {
        absl::StatusOr<std::string> key = python::AsString(r->items[1]->keys[i]->object);
        if (!key.ok()) return Break(ir::GraphBreak::OTHER, "a forward pre-hook returned a non-string keyword", "");
        next.emplace_back(*key, r->items[1]->items[i]);
      }
      kwargs = std::move(next);
    } else {
      ASSIGN_OR_RETURN(r, Call(hook.fn, {fn, args_tuple}, {}));
      if (IsNone(r)) continue;
      args_tuple = r->kind == VarKind::kTuple && !r->is_size ? r : Var::Tuple({r});
    }
  }
  // A named tuple the hook returned is still a tuple of its items here.
  ASSIGN_OR_RETURN(result, CallForward(fn, args_tuple->items, kwargs));
  for (const ModuleHook& hook : *post) {
    std::vector<VarPtr> hook_args = {fn, args_tuple};
    if (hook.with_kwargs) hook_args.push_back(kwargs_dict());
    hook_args.push_back(result);
    ASSIGN_OR_RETURN(r, Call(hook.fn, std::move(hook_args), {}));
    if (!IsNone(r)) result = r;
  }
  return result;
}

absl::Status Translator::InitializeLazyModule(const VarPtr& fn, const std::vector<VarPtr>& args,
                                              const Kwargs& kwargs) {
  PyObject* m = fn->object.get();
  Object instance_dict = Object::Steal(PyObject_GenericGetDict(m, nullptr));
  PyObject* hook = instance_dict ? PyDict_GetItemString(instance_dict.get(), "_initialize_hook") : nullptr;
  python::ClearError();
  if (hook == nullptr) return absl::OkStatus();
  absl::StatusOr<Object> lazy = python::Import("torch.nn.modules.lazy");
  Object mixin = lazy.ok() ? Attr(lazy->get(), "LazyModuleMixin") : Object();
  if (!mixin || PyObject_IsInstance(m, mixin.get()) != 1) {
    python::ClearError();
    return absl::OkStatus();
  }
  // Its first call infers the parameters' shapes from the arguments' and
  // materializes them (the hook then removes itself, and the module may
  // become its cls_to_become). That is initialization, not computation:
  // it runs for real now, as torch._dynamo runs it, on uninitialized
  // tensors of the arguments' metadata; the call traced is then that of
  // the module it made.
  auto failed = [&](const std::string& why) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                 absl::StrCat("initializing lazy module ", python::TypeName(fn->object), ": ", why),
                 "a lazy module infers its parameters from the metadata of its first call's arguments");
  };
  auto example = [](const VarPtr& v) {
    absl::StatusOr<ops::Value> value = ToValue(v);
    return value.ok() ? RealExample(*value) : absl::StatusOr<Object>(value.status());
  };
  std::vector<Object> py_args;
  for (const VarPtr& a : args) {
    absl::StatusOr<Object> o = example(a);
    if (!o.ok()) return failed(std::string(o.status().message()));
    py_args.push_back(*std::move(o));
  }
  Object py_kwargs = Object::Steal(PyDict_New());
  for (const auto& [name, value] : kwargs) {
    absl::StatusOr<Object> o = example(value);
    if (!o.ok()) return failed(std::string(o.status().message()));
    PyDict_SetItemString(py_kwargs.get(), name.c_str(), o->get());
  }
  absl::StatusOr<Object> done =
      python::CallMethod(fn->object, "_infer_parameters", {fn->object, python::MakeTuple(py_args), py_kwargs});
  if (!done.ok()) return failed(std::string(done.status().message()));
  guards_.Reidentify(fn->source, fn->object);
  return absl::OkStatus();
}

absl::StatusOr<VarPtr> Translator::CallForward(const VarPtr& fn, std::vector<VarPtr> args, Kwargs kwargs) {
  PyObject* m = fn->object.get();
  // nn.Module.__call__ runs self.forward: an instance attribute
  // (m.forward = f) shadows the class's. Either way the trace depends on
  // which one it is: m.forward is guarded (a bound method matches by
  // function and self), so assigning or deleting one recaptures.
  Object instance_dict = Object::Steal(PyObject_GenericGetDict(m, nullptr));
  PyObject* own = instance_dict ? PyDict_GetItemString(instance_dict.get(), "forward") : nullptr;
  python::ClearError();
  if (own != nullptr) {
    absl::StatusOr<VarPtr> shadow =
        Wrap(Object::Borrow(own), fn->source ? Source::Attr(fn->source, "forward") : nullptr);
    if (!shadow.ok()) return shadow.status();
    if (fn->source) guards_.IdMatch((*shadow)->source, Object::Borrow(own));
    return Call(*shadow, std::move(args), std::move(kwargs));
  }
  if (fn->source) {
    Object bound = Attr(m, "forward");
    if (!bound) return python::FetchError("reading forward");
    guards_.IdMatch(Source::Attr(fn->source, "forward"), bound);
  }
  Object forward = Attr(reinterpret_cast<PyObject*>(Py_TYPE(m)), "forward");
  if (!forward || !PyFunction_Check(forward.get())) {
    python::ClearError();
    return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                 absl::StrCat(python::TypeName(fn->object), ".forward is not a Python function"), "");
  }
  // type(m).forward: its defaults and closure have a path (a tensor
  // default is read from it on every call).
  VarPtr method = Var::OfKind(VarKind::kFunction, forward,
                              fn->source ? Source::Attr(Source::Attr(fn->source, "__class__"), "forward") : nullptr);
  // A @staticmethod forward is called without the module, as
  // nn.Module.__call__'s self.forward(...) calls it.
  PyObject* declared = _PyType_Lookup(Py_TYPE(m), python::FromString("forward").get());  // borrowed
  if (declared == nullptr || Py_TYPE(declared) != &PyStaticMethod_Type) method->self = fn;
  return Inline(method, std::move(args), std::move(kwargs));
}

namespace {

// True when making an instance of module class `c` runs only torch.nn's
// code: its __init__ and __setattr__ are torch.nn's (a user subclass that
// only adds a forward, as `class Net(nn.Module): def forward...`), its
// __new__ is object's and its metaclass is type. Such a construction has no
// effect but the new object, so it can be made at trace time.
bool BuiltByTorchNN(PyObject* c) {
  if (Py_TYPE(c) != &PyType_Type) return false;
  Object new_fn = Attr(c, "__new__");
  Object object_new = Attr(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__new__");
  python::ClearError();
  if (!new_fn || new_fn.get() != object_new.get()) return false;
  for (const char* method : {"__init__", "__setattr__"}) {
    Object fn = Attr(c, method);
    Object where = fn ? Attr(fn.get(), "__module__") : Object();
    python::ClearError();
    if (!where || !absl::StartsWith(python::AsString(where).value_or(""), "torch.nn.")) return false;
  }
  return true;
}

// The global random generators' states, put back after code the trace ran
// for real that drew from them. The CPU's always; CUDA's where CUDA is
// initialized. A CUDA initialized by that code itself (a module made on
// the GPU as the first CUDA work) is put back to the state its
// initialization left: each device's generator seeded again with its own
// initial seed (torch.manual_seed's, or the default), offset 0.
class RandomStreams {
 public:
  static absl::StatusOr<RandomStreams> Save() {
    RandomStreams s;
    s.torch_ = Object::Steal(PyImport_ImportModule("torch"));
    if (!s.torch_) return python::FetchError("importing torch");
    s.cpu_ = Object::Steal(PyObject_CallMethod(s.torch_.get(), "get_rng_state", nullptr));
    if (!s.cpu_) return python::FetchError("torch.get_rng_state");
    s.cuda_ = Attr(s.torch_.get(), "cuda");
    python::ClearError();
    if (s.cuda_ && s.CudaInitialized()) {
      s.cuda_states_ = Object::Steal(PyObject_CallMethod(s.cuda_.get(), "get_rng_state_all", nullptr));
      if (!s.cuda_states_) return python::FetchError("torch.cuda.get_rng_state_all");
    }
    return s;
  }

  absl::Status Restore() const {
    if (!Object::Steal(PyObject_CallMethod(torch_.get(), "set_rng_state", "O", cpu_.get()))) {
      return python::FetchError("torch.set_rng_state");
    }
    if (cuda_states_) {
      if (!Object::Steal(PyObject_CallMethod(cuda_.get(), "set_rng_state_all", "O", cuda_states_.get()))) {
        return python::FetchError("torch.cuda.set_rng_state_all");
      }
    } else if (cuda_ && CudaInitialized()) {
      Object generators = Attr(cuda_.get(), "default_generators");
      Object fast = generators ? Object::Steal(PySequence_Fast(generators.get(), "")) : Object();
      if (!fast) return python::FetchError("torch.cuda.default_generators");
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.get()); ++i) {
        PyObject* g = PySequence_Fast_GET_ITEM(fast.get(), i);  // borrowed
        Object seed = Object::Steal(PyObject_CallMethod(g, "initial_seed", nullptr));
        if (!seed || !Object::Steal(PyObject_CallMethod(g, "manual_seed", "O", seed.get()))) {
          return python::FetchError("reseeding a CUDA generator");
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  bool CudaInitialized() const {
    Object r = Object::Steal(PyObject_CallMethod(cuda_.get(), "is_initialized", nullptr));
    const bool yes = r && PyObject_IsTrue(r.get()) == 1;
    python::ClearError();
    return yes;
  }

  Object torch_, cpu_, cuda_, cuda_states_;
};

}  // namespace

std::optional<absl::StatusOr<VarPtr>> Translator::ConstructTorchModule(const VarPtr& cls, const std::vector<VarPtr>& args,
                                                                       const Kwargs& kwargs) {
  PyObject* c = cls->object.get();
  Object nn = Object::Steal(PyImport_ImportModule("torch.nn"));
  Object module_type = nn ? Attr(nn.get(), "Module") : Object();
  python::ClearError();
  if (!c || !PyType_Check(c) || !module_type || !PyType_Check(module_type.get()) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(c), reinterpret_cast<PyTypeObject*>(module_type.get()))) {
    return std::nullopt;
  }
  if (!BuiltByTorchNN(c)) return std::nullopt;
  if (!AllConstant(args, kwargs)) return std::nullopt;  // the caller's break names the construction
  if (cls->source) guards_.IdMatch(cls->source, cls->object);
  // A module with weights draws its initialisation from the global
  // generators (the CPU's, and a CUDA device's when it is made there): that
  // draw is undone below, so the capture leaves the random streams where
  // eager's own construction (after the break) expects them.
  absl::StatusOr<RandomStreams> streams = RandomStreams::Save();
  if (!streams.ok()) return absl::StatusOr<VarPtr>(streams.status());
  absl::StatusOr<VarPtr> made = CallReal(cls, args, kwargs);
  if (!made.ok() || (*made)->kind != VarKind::kNNModule) return made;
  // A module with weights would fold one draw of its initialisation into
  // the graph, where eager draws anew on each call.
  for (const char* state : {"parameters", "buffers"}) {
    Object it = Object::Steal(PyObject_CallMethod((*made)->object.get(), state, nullptr));
    Object first = it ? Object::Steal(PyIter_Next(it.get())) : Object();
    if (PyErr_Occurred()) return absl::StatusOr<VarPtr>(python::FetchError(state));
    if (first) {
      if (absl::Status restored = streams->Restore(); !restored.ok()) return absl::StatusOr<VarPtr>(restored);
      return absl::StatusOr<VarPtr>(Break(ir::GraphBreak::UNSUPPORTED_CALL,
                                          absl::StrCat("constructing ", python::Repr(cls->object),
                                                       " inside the traced code: it holds ", state),
                                          "make modules with weights in __init__ and call them in forward"));
    }
  }
  // How lib/rewrite makes it again where it outlives the graph: the class
  // called on the same arguments, the keywords' names last (as a
  // generator's call is rebuilt).
  VarPtr m = *made;
  m->user_class = cls;
  m->items = args;
  for (const auto& [name, value] : kwargs) {
    m->keys.push_back(Var::Constant(python::FromString(name)));
    m->items.push_back(value);
  }
  return absl::StatusOr<VarPtr>(m);
}

}  // namespace dynamo::trace
