// NumPy code on tensors, as torch._dynamo traces it: a numpy.ndarray the
// trace holds is a tensor tracker flagged is_ndarray (Tensor.numpy() is the
// same tensor viewed as an array; an array argument of the frame is a graph
// input read through torch.from_numpy). NumPy's functions, the array's
// methods and attributes and the operators on arrays become graph nodes
// that run torch._numpy (torch's NumPy layer over tensors, which follows
// NumPy's dtype rules: float64 defaults, NEP 50 scalars) on the nodes'
// tensors: python/dynamo/numpy_bridge.py resolves their targets
// ("torch._numpy.add", "torch._numpy.ndarray.reshape",
// "torch._numpy.operator.mul"), and each node's output metadata comes from
// running that very call on meta tensors (meta_fallback.h), as
// torch._dynamo's fake tensors do. The rewritten code hands arrays back to
// Python as real numpy.ndarrays (numpy_bridge.to_numpy).
//
// What torch._numpy cannot express stays a graph break with its reason:
// numpy.random (NumPy's own generator: the graph would draw from torch's),
// object and other dtypes torch has not, out= arguments, results computed
// from array values (data-dependent sizes, Python scalars read from data),
// and mixing a torch.Tensor with an array in an operator.
#include <Python.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/ops/infer_helpers.h"
#include "lib/python/error.h"
#include "lib/python/lazy.h"
#include "lib/trace/meta_fallback.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using python::Object;

constexpr const char* kPrefix = "torch._numpy.";
constexpr const char* kHint = "torch._numpy runs NumPy code on tensors; this part of NumPy has no form there";

// numpy, when the program imported it (the trace never imports it).
PyObject* NumpyModule() {
  return PyDict_GetItemString(PyImport_GetModuleDict(), "numpy");  // borrowed
}

// numpy's callables by identity -> the torch._numpy name of the same
// function (by name, module by module, as torch._dynamo maps them).
struct NumpyTarget {
  std::string target;
  bool random = false;
};

const absl::flat_hash_map<PyObject*, NumpyTarget>& NumpyTargets() {
  // Leaked on purpose: its keys are numpy's own callables, alive while numpy
  // is. Made by imports, so lazily under the GIL (lib/python/lazy.h).
  using Table = absl::flat_hash_map<PyObject*, NumpyTarget>;
  static Table* table = nullptr;
  return python::LazyValue(table, [] {
    auto t = std::make_unique<Table>();
    struct Module {
      const char* numpy;
      const char* torch_numpy;
      const char* prefix;  // of the target names
    };
    const Module kModules[] = {{"numpy", "torch._numpy", ""},
                               {"numpy.fft", "torch._numpy.fft", "fft."},
                               {"numpy.linalg", "torch._numpy.linalg", "linalg."},
                               {"numpy.random", "torch._numpy.random", "random."}};
    for (const Module& m : kModules) {
      const char* sub = m.prefix;
      Object np = Object::Steal(PyImport_ImportModule(m.numpy));
      Object tnp = Object::Steal(PyImport_ImportModule(m.torch_numpy));
      if (!np || !tnp) {
        python::ClearError();
        continue;
      }
      Object names = Object::Steal(PyObject_Dir(tnp.get()));
      if (!names) {
        python::ClearError();
        continue;
      }
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names.get()); ++i) {
        PyObject* name = PyList_GET_ITEM(names.get(), i);
        absl::StatusOr<std::string> n = python::AsString(Object::Borrow(name));
        if (!n.ok() || n->empty() || (*n)[0] == '_') continue;
        Object f = Attr(tnp.get(), n->c_str());
        // Classes (dtypes, ndarray) are no operations; modules neither.
        if (!f || !PyCallable_Check(f.get()) || PyType_Check(f.get()) || PyModule_Check(f.get())) continue;
        Object np_f = Attr(np.get(), n->c_str());
        if (!np_f || PyType_Check(np_f.get()) || PyModule_Check(np_f.get())) continue;
        NumpyTarget target{absl::StrCat(kPrefix, sub, *n), absl::string_view(sub) == "random."};
        t->try_emplace(np_f.release(), std::move(target));
      }
    }
    return t;
  });
}

bool IsExactNdarray(PyObject* o) {
  PyObject* np = NumpyModule();
  if (np == nullptr) return false;
  Object cls = Attr(np, "ndarray");
  return cls && reinterpret_cast<PyObject*>(Py_TYPE(o)) == cls.get();
}

// A dtype-like object NumPy accepts where a dtype goes (np.float32,
// np.dtype("f8"), float, "float64" is a str and passes as it is), as the
// torch dtype torch._numpy maps it to; nothing for anything else.
std::optional<Object> TorchDType(PyObject* o) {
  PyObject* np = NumpyModule();
  if (np == nullptr) return std::nullopt;
  bool dtype_like = false;
  if (PyType_Check(o)) {
    Object generic = Attr(np, "generic");
    dtype_like = o == reinterpret_cast<PyObject*>(&PyFloat_Type) || o == reinterpret_cast<PyObject*>(&PyLong_Type) ||
                 o == reinterpret_cast<PyObject*>(&PyBool_Type) || o == reinterpret_cast<PyObject*>(&PyComplex_Type) ||
                 (generic && PyObject_IsSubclass(o, generic.get()) == 1);
  } else {
    Object dtype_class = Attr(np, "dtype");
    dtype_like = dtype_class && PyObject_IsInstance(o, dtype_class.get()) == 1;
  }
  python::ClearError();
  if (!dtype_like) return std::nullopt;
  // NumPy's own name for it ("float32", "int64" for int), which torch._numpy reads.
  Object np_dtype = Object::Steal(PyObject_CallMethod(np, "dtype", "O", o));
  Object name = np_dtype ? Attr(np_dtype.get(), "name") : Object();
  Object dtypes = name ? Object::Steal(PyImport_ImportModule("torch._numpy._dtypes")) : Object();
  Object wrapped = dtypes ? Object::Steal(PyObject_CallMethod(dtypes.get(), "dtype", "O", name.get())) : Object();
  Object torch_dtype = wrapped ? Attr(wrapped.get(), "torch_dtype") : Object();
  if (!torch_dtype) {
    python::ClearError();
    return std::nullopt;
  }
  return torch_dtype;
}

// Flags every tensor in `v` an array, the k-th (depth first) a scalar when
// scalars[k] says NumPy returns one there.
void MarkArrays(const VarPtr& v, const std::vector<bool>& scalars, size_t& k) {
  if (!v) return;
  if (v->is_tensor()) {
    v->is_ndarray = true;
    v->numpy_scalar = k < scalars.size() && scalars[k];
    ++k;
  }
  for (const VarPtr& item : v->items) MarkArrays(item, scalars, k);
}


}  // namespace

bool IsNumpyArray(PyObject* o) { return IsExactNdarray(o); }

absl::StatusOr<VarPtr> Translator::WrapNdarray(const Object& array, SourcePtr source) {
  PyObject* a = array.get();
  if (!source) {
    return Break(ir::GraphBreak::EXTERNAL_LIBRARY, "a numpy.ndarray made outside the trace with no known path",
                 "pass the array as an argument");
  }
  if (!allow_breaks_) {
    return Break(ir::GraphBreak::EXTERNAL_LIBRARY, "a numpy.ndarray input outside the live path",
                 "an exported graph takes tensors; pass torch.from_numpy(array)");
  }
  Object dtype = Attr(a, "dtype");
  Object dtype_str = dtype ? Attr(dtype.get(), "str") : Object();
  Object dtype_name = dtype ? Attr(dtype.get(), "name") : Object();
  Object native = dtype ? Attr(dtype.get(), "isnative") : Object();
  absl::StatusOr<std::string> name = dtype_name ? python::AsString(dtype_name) : absl::UnknownError("dtype");
  std::optional<ops::DType> d = name.ok() ? ops::DTypeFromName(*name) : std::nullopt;
  if (!d || !native || native.get() != Py_True) {
    return Break(ir::GraphBreak::EXTERNAL_LIBRARY,
                 absl::StrCat("a numpy.ndarray of dtype ", name.ok() ? *name : "?", " has no tensor form"),
                 "torch has no such dtype (object, string, non-native byte order arrays stay NumPy)");
  }
  Object shape = Attr(a, "shape"), strides = Attr(a, "strides"), itemsize = Attr(a, "itemsize");
  absl::StatusOr<std::vector<Object>> sizes = shape ? python::AsVector(shape) : absl::UnknownError("shape");
  absl::StatusOr<std::vector<Object>> steps = strides ? python::AsVector(strides) : absl::UnknownError("strides");
  absl::StatusOr<int64_t> item = itemsize ? python::AsLong(itemsize) : absl::UnknownError("itemsize");
  if (!sizes.ok() || !steps.ok() || !item.ok() || *item <= 0) return python::FetchError("reading an array's layout");
  ops::TensorMeta meta;
  meta.dtype = *d;
  for (size_t i = 0; i < sizes->size(); ++i) {
    int64_t size = python::AsLong((*sizes)[i]).value_or(-1);
    int64_t stride = python::AsLong((*steps)[i]).value_or(-1);
    if (stride < 0 || stride % *item != 0) {
      return Break(ir::GraphBreak::EXTERNAL_LIBRARY, "a numpy.ndarray with negative or unaligned strides",
                   "torch.as_tensor cannot view it; pass a copy (np.ascontiguousarray)");
    }
    meta.sizes.push_back(size);
    meta.strides.push_back(stride / *item);
  }
  // What the graph depends on: the array's type, dtype and layout.
  guards_.TypeMatch(source, array);
  guards_.EqualsMatch(Source::Attr(Source::Attr(source, "dtype"), "str"), dtype_str);
  guards_.EqualsMatch(Source::Attr(source, "shape"), shape);
  guards_.EqualsMatch(Source::Attr(source, "strides"), strides);
  auto as_array = [&](const std::string& node) {
    VarPtr v = Var::Tensor(node, meta, source);
    v->is_ndarray = true;
    return v;
  };
  NoteTensorSource(source, a);
  if (auto it = attribute_nodes_.find(a); it != attribute_nodes_.end()) return as_array(it->second);
  std::string label = source->ToString();
  std::string placeholder;
  for (char c : label) placeholder += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  while (!placeholder.empty() && placeholder[0] == '_') placeholder.erase(0, 1);
  std::string node = InputGraph().AddPlaceholder(placeholder.empty() ? "array" : placeholder, meta);
  placeholder_sources_.push_back(source);
  array_placeholders_.insert(placeholder_sources_.size() - 1);
  attribute_nodes_[a] = node;
  return as_array(node);
}

absl::StatusOr<VarPtr> Translator::TensorToNdarray(const VarPtr& tensor, const std::vector<VarPtr>& args,
                                                   const Kwargs& kwargs) {
  VarPtr force = args.empty() ? nullptr : args[0];
  for (const auto& [k, v] : kwargs) {
    if (k == "force") force = v;
  }
  bool forced = false;
  if (force) {
    absl::StatusOr<Object> f = ToPython(force);
    if (!f.ok() || !PyBool_Check(f->get())) {
      return Break(ir::GraphBreak::OTHER, "Tensor.numpy(force=...) with a value that is no bool", "");
    }
    forced = f->get() == Py_True;
  }
  VarPtr t = tensor;
  if (t->meta.device.type != "cpu") {
    return Break(ir::GraphBreak::EXTERNAL_LIBRARY, "Tensor.numpy() of a tensor that is not on the CPU",
                 "numpy arrays live in host memory; move the tensor with .cpu() first");
  }
  if (t->meta.requires_grad && !forced) {
    return Break(ir::GraphBreak::OTHER, "Tensor.numpy() of a tensor that requires grad",
                 "the call would raise RuntimeError; call .detach() first or pass force=True");
  }
  if (forced && t->meta.requires_grad) {
    absl::StatusOr<VarPtr> detached = CallOp("Tensor.detach", ir::Node::CALL_METHOD, {t}, {});
    if (!detached.ok()) return detached.status();
    t = *detached;
  }
  // The array is a view of the very tensor: same node, no copy.
  auto a = std::make_shared<Var>(*t);
  a->source = nullptr;
  a->is_ndarray = true;
  a->numpy_scalar = false;
  a->identity.clear();
  a->tensor_type = Object();
  if (t->source) a->self = t;  // rebuilt from the input it views (rewrite.cc)
  return a;
}

absl::StatusOr<ops::Value> Translator::NumpyValue(const VarPtr& v, const std::string& what) {
  if (v->is_tensor()) return ops::Value(v->meta);
  if (v->kind == VarKind::kTuple || v->kind == VarKind::kList) {
    std::vector<ops::Value> items;
    for (const VarPtr& item : v->items) {
      absl::StatusOr<ops::Value> value = NumpyValue(item, what);
      if (!value.ok()) return value.status();
      items.push_back(*std::move(value));
    }
    return v->kind == VarKind::kTuple ? ops::Value::Tuple(std::move(items)) : ops::Value::List(std::move(items));
  }
  if (v->is_constant()) {
    // np.float64(2) is a float to Python but a strongly typed float64 to
    // NumPy (NEP 50): as a Python float it would promote differently.
    PyObject* o = v->object.get();
    if ((PyFloat_Check(o) && !PyFloat_CheckExact(o)) || (PyComplex_Check(o) && !PyComplex_CheckExact(o)) ||
        (PyLong_Check(o) && !PyLong_CheckExact(o) && !PyBool_Check(o))) {
      return Break(ir::GraphBreak::EXTERNAL_LIBRARY,
                   absl::StrCat(what, " given a NumPy scalar of type ", python::TypeName(v->object)),
                   "NumPy scalars promote by their own dtype; pass a Python number or an array");
    }
  }
  absl::StatusOr<ops::Value> value = ToValue(v);
  if (!value.ok()) {
    return Break(ir::GraphBreak::EXTERNAL_LIBRARY, absl::StrCat(what, " given ", Describe(*v)),
                 "NumPy calls in the graph take arrays, tensors, dtypes and Python constants");
  }
  return value;
}

absl::StatusOr<VarPtr> Translator::NumpyArgument(const VarPtr& v) {
  if (v->kind == VarKind::kTuple || v->kind == VarKind::kList) {
    std::vector<VarPtr> items;
    for (const VarPtr& item : v->items) {
      absl::StatusOr<VarPtr> a = NumpyArgument(item);
      if (!a.ok()) return a.status();
      items.push_back(*a);
    }
    if (items == v->items) return v;
    return v->kind == VarKind::kTuple ? Var::Tuple(std::move(items)) : Var::List(std::move(items));
  }
  if ((v->kind == VarKind::kClass || v->kind == VarKind::kBuiltin || v->kind == VarKind::kOpaque) && v->object) {
    if (std::optional<Object> d = TorchDType(v->object.get())) return Wrap(*d, nullptr);
  }
  return v;
}

absl::StatusOr<VarPtr> Translator::NumpyNode(const std::string& target, std::vector<VarPtr> args, Kwargs kwargs) {
  const std::string what = absl::StrCat("numpy ", target.substr(std::string(kPrefix).size()));
  for (VarPtr& a : args) {
    absl::StatusOr<VarPtr> n = NumpyArgument(a);
    if (!n.ok()) return n.status();
    a = *n;
  }
  for (auto& [name, a] : kwargs) {
    if (name == "out" && !a->is_none()) {
      return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat(what, "(out=...) writes into an array"),
                   "use the form that returns its result");
    }
    absl::StatusOr<VarPtr> n = NumpyArgument(a);
    if (!n.ok()) return n.status();
    a = *n;
  }
  std::vector<ops::Value> values;
  std::vector<ops::Kwarg> kw;
  for (const VarPtr& a : args) {
    absl::StatusOr<ops::Value> v = NumpyValue(a, what);
    if (!v.ok()) return v.status();
    values.push_back(*std::move(v));
  }
  for (const auto& [name, a] : kwargs) {
    absl::StatusOr<ops::Value> v = NumpyValue(a, what);
    if (!v.ok()) return v.status();
    kw.push_back({name, *std::move(v)});
  }
  absl::StatusOr<Object> bridge = python::Import("dynamo.numpy_bridge");
  absl::StatusOr<Object> fn = bridge.ok() ? python::CallMethod(*bridge, "resolve", {python::FromString(target)})
                                          : bridge.status();
  if (!fn.ok() || fn->get() == Py_None) {
    python::ClearError();
    return Break(ir::GraphBreak::EXTERNAL_LIBRARY, absl::StrCat(what, " has no torch._numpy form"), kHint);
  }
  MetaOptions options;  // NumPy's functions: no autocast
  options.grad_enabled = grad_enabled_;
  absl::StatusOr<MetaCall> call = InferOnMeta(*fn, values, kw, options);
  if (!call.ok()) {
    std::string error(call.status().message());
    bool data = absl::StrContains(error, "data-dependent") || absl::StrContains(error, "DynamicOutputShape") ||
                absl::StrContains(error, "data dependent") || absl::StrContains(error, "item() cannot be called") ||
                absl::StrContains(error, "no data!");
    return Break(data ? ir::GraphBreak::DATA_DEPENDENT_SHAPE : ir::GraphBreak::EXTERNAL_LIBRARY,
                 absl::StrCat(what, data ? " depends on the array's values (" : " cannot run in the graph (", error,
                              ")"),
                 kHint);
  }
  if (call->changes_input_metadata) {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat(what, " changes an array's shape or dtype in place"),
                 "use the form that returns a new array");
  }
  bool sourced = false;
  for (const VarPtr& a : args) sourced |= a->is_tensor() && a->source != nullptr;
  if (call->mutates_input && sourced && !allow_breaks_) {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat(what, " mutates an input in place"),
                 "in-place updates of inputs are side effects a single graph cannot hold");
  }
  if (!HasTensor(call->result) && !(call->result.is_none() && call->mutates_input)) {
    return Break(ir::GraphBreak::EXTERNAL_LIBRARY,
                 absl::StrCat(what, " returns ", ops::ToString(call->result), ", a Python value, not an array"),
                 "a value read from an array's data is not known while tracing; keep it an array");
  }
  absl::StatusOr<std::string> node = AddCallNode(ir::Node::CALL_FUNCTION, target, args, kwargs, call->result);
  if (!node.ok()) return node.status();
  graph_.MarkLastInferredOnMeta();  // kept: its effects (setitem, iadd) are described nowhere else
  if (call->result.is_none()) return Var::Constant(python::None());
  // a += b on an array updates a and returns it: the very array.
  if (call->mutates_input && absl::StartsWith(target, "torch._numpy.operator.i") && !args.empty() &&
      args[0]->is_ndarray && call->result.is_tensor() && call->result.as_tensor().sizes == args[0]->meta.sizes &&
      call->result.as_tensor().dtype == args[0]->meta.dtype) {
    return args[0];
  }
  absl::StatusOr<VarPtr> out = NewVarFromResult(*node, call->result);
  if (!out.ok()) return out.status();
  std::vector<bool> scalars;
  if (absl::StatusOr<Object> s = python::GetAttr(*fn, "scalars"); s.ok() && PyTuple_Check(s->get())) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(s->get()); ++i) scalars.push_back(PyTuple_GET_ITEM(s->get(), i) == Py_True);
  }
  python::ClearError();
  size_t k = 0;
  MarkArrays(*out, scalars, k);
  return out;
}

absl::StatusOr<VarPtr> Translator::NdarrayOperator(const std::string& name, std::vector<VarPtr> args) {
  for (const VarPtr& a : args) {
    if (a->is_tensor() && !a->is_ndarray) {
      return Break(ir::GraphBreak::EXTERNAL_LIBRARY,
                   absl::StrCat("'", name, "' between a torch.Tensor and a numpy.ndarray"),
                   "convert one side explicitly (torch.from_numpy(a) or t.numpy())");
    }
  }
  return NumpyNode(absl::StrCat(kPrefix, "operator.", name), std::move(args), {});
}

absl::StatusOr<VarPtr> Translator::NdarrayAttr(const VarPtr& array, const std::string& name) {
  const ops::TensorMeta& m = array->meta;
  auto constant = [](Object o) { return Var::Constant(std::move(o)); };
  auto ints = [](const std::vector<int64_t>& values, int64_t scale) {
    std::vector<Object> items;
    for (int64_t v : values) items.push_back(python::FromLong(v * scale));
    return python::MakeTuple(items);
  };
  PyObject* np = NumpyModule();
  if (np == nullptr) return absl::InternalError("a numpy.ndarray without numpy imported");
  SpecializeShape(array);  // NumPy's attributes answer from the sizes seen
  if (name == "shape") return constant(ints(m.sizes, 1));
  if (name == "ndim") return constant(python::FromLong(m.dim()));
  if (name == "size") return constant(python::FromLong(m.numel()));
  if (name == "dtype" || name == "itemsize" || name == "nbytes") {
    Object dtype = Object::Steal(PyObject_CallMethod(np, "dtype", "s", std::string(ops::DTypeName(m.dtype)).c_str()));
    if (!dtype) {
      python::ClearError();
      return Break(ir::GraphBreak::EXTERNAL_LIBRARY,
                   absl::StrCat("an array of ", ops::DTypeName(m.dtype), ", a dtype NumPy has not"), kHint);
    }
    if (name == "dtype") return constant(dtype);
    Object itemsize = Attr(dtype.get(), "itemsize");
    if (name == "itemsize") return constant(itemsize);
    return constant(python::FromLong(m.numel() * python::AsLong(itemsize).value_or(0)));
  }
  if (name == "strides" && (array->source || (array->self && array->self->source))) {
    // An input array, or the view of an input tensor: the strides seen, which
    // the input's guards hold (a computed array's layout is the kernels').
    Object dtype = Object::Steal(PyObject_CallMethod(np, "dtype", "s", std::string(ops::DTypeName(m.dtype)).c_str()));
    absl::StatusOr<int64_t> itemsize = dtype ? python::AsLong(Attr(dtype.get(), "itemsize")) : absl::UnknownError("");
    if (itemsize.ok()) return constant(ints(m.strides, *itemsize));
    python::ClearError();
  }
  if (name == "T" || name == "real" || name == "imag" || name == "mT") {
    return NumpyNode(absl::StrCat(kPrefix, "ndarray_attr.", name), {array}, {});
  }
  Object tnp = Object::Steal(PyImport_ImportModule("torch._numpy"));
  Object cls = tnp ? Attr(tnp.get(), "ndarray") : Object();
  Object member = cls ? Attr(cls.get(), name.c_str()) : Object();
  if (member && PyCallable_Check(member.get()) && name[0] != '_' && !PyType_Check(member.get())) {
    return Var::Method(array, name);
  }
  return Break(ir::GraphBreak::EXTERNAL_LIBRARY, absl::StrCat("numpy.ndarray.", name, " is not traced"),
               "flags, base, data, strides and the like describe memory the graph does not model");
}

absl::StatusOr<VarPtr> Translator::CallNdarrayMethod(const VarPtr& array, const std::string& name,
                                                     const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  if (capture_scalars_ && (name == "item" || name == "tolist") && args.empty() && kwargs.empty()) {
    // The Python numbers of the array's values, as a tensor's (the same
    // types: int64 gives int, float32 float), computed by the graph.
    auto t = std::make_shared<Var>(*array);
    t->is_ndarray = false;
    t->numpy_scalar = false;
    return name == "item" ? TensorItem(t, name) : TensorToList(t);
  }
  if (name == "tolist" || name == "item" || name == "__bool__" || name == "__int__" || name == "__float__" ||
      name == "__index__" || name == "tobytes") {
    return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH, absl::StrCat("numpy.ndarray.", name, "() reads the array's values"),
                 "values are not known while tracing; keep them in arrays");
  }
  std::vector<VarPtr> all = {array};
  all.insert(all.end(), args.begin(), args.end());
  return NumpyNode(absl::StrCat(kPrefix, "ndarray.", name), std::move(all), kwargs);
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallNumpy(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                            const Kwargs& kwargs) {
  if (!fn->object || NumpyModule() == nullptr) return std::nullopt;
  PyObject* f = fn->object.get();
  // Most calls are of none of these: one lookup in a set made once per
  // trace rules them out (there are some for every call the trace makes).
  static constexpr const char* kQueries[] = {"issubdtype", "can_cast", "promote_types", "result_type", "isdtype"};
  if (!numpy_callables_) {
    numpy_callables_.emplace();
    for (const auto& [module, name] : {std::pair<const char*, const char*>{"torch", "from_numpy"}, {"torch", "as_tensor"}}) {
      if (PyObject* o = StdlibObject(module, name)) numpy_callables_->insert(o);
    }
    for (const char* query : kQueries) {
      if (PyObject* o = StdlibObject("numpy", query)) numpy_callables_->insert(o);
    }
  }
  if (!numpy_callables_->contains(f) && !NumpyTargets().contains(f)) return std::nullopt;
  // torch.from_numpy(a) / torch.as_tensor(a) of an array the trace holds:
  // the tensor it views.
  PyObject* from_numpy = StdlibObject("torch", "from_numpy");
  PyObject* as_tensor = StdlibObject("torch", "as_tensor");
  // Under torch.set_default_device, as_tensor is a constructor that copies
  // to that device: not the view.
  if ((f == from_numpy || (f == as_tensor && !ops::HasDefaultDevice())) && args.size() == 1 && kwargs.empty() &&
      args[0]->is_tensor() && args[0]->is_ndarray) {
    guards_.IdMatch(fn->source, fn->object);
    auto t = std::make_shared<Var>(*args[0]);
    t->is_ndarray = false;
    t->numpy_scalar = false;
    t->source = nullptr;
    t->identity.clear();
    if (args[0]->source) t->self = args[0];  // rebuilt from the array it views (rewrite.cc)
    return absl::StatusOr<VarPtr>(t);
  }
  // Questions about dtypes (np.issubdtype(type(n), np.integer)) ask nothing
  // of array values: NumPy answers them now.
  for (const char* query : kQueries) {
    if (f != StdlibObject("numpy", query)) continue;
    bool any_tensor = false;
    for (const VarPtr& a : args) any_tensor |= ContainsTensor(a);
    for (const auto& kv : kwargs) any_tensor |= ContainsTensor(kv.second);
    if (any_tensor) break;
    guards_.IdMatch(fn->source, fn->object);
    return CallReal(fn, args, kwargs);
  }
  const auto& table = NumpyTargets();
  auto it = table.find(f);
  if (it == table.end()) return std::nullopt;
  guards_.IdMatch(fn->source, fn->object);
  const NumpyTarget& target = it->second;
  absl::string_view short_name = absl::string_view(target.target).substr(std::string(kPrefix).size());
  if (target.random) {
    return absl::StatusOr<VarPtr>(
        Break(ir::GraphBreak::EXTERNAL_LIBRARY, absl::StrCat("numpy.", short_name, " draws from NumPy's generator"),
              "the graph would draw from torch's generator instead; NumPy's random calls run in Python"));
  }
  if (std::optional<absl::StatusOr<VarPtr>> r = NumpyArrayLiteral(target.target, args, kwargs)) return r;
  return NumpyNode(target.target, args, kwargs);
}

std::optional<absl::StatusOr<VarPtr>> Translator::NumpyArrayLiteral(const std::string& target,
                                                                   const std::vector<VarPtr>& args,
                                                                   const Kwargs& kwargs) {
  // np.array([np.float64(1), np.float64(2)]): NumPy scalars (constants of
  // the trace, their values guarded) promote by their own dtypes, which a
  // node of Python numbers would not; the dtype NumPy itself gives the literal
  // goes with the numbers they hold.
  if ((target != "torch._numpy.array" && target != "torch._numpy.asarray") || args.size() != 1 || !kwargs.empty()) {
    return std::nullopt;
  }
  const VarPtr& data = args[0];
  if ((data->kind != VarKind::kList && data->kind != VarKind::kTuple) || data->items.empty()) return std::nullopt;
  // np.array([a, b]) of arrays of one shape is their stack (torch._numpy's
  // array() would copy the data out of the tensors, which the trace has not).
  const VarPtr& first = data->items[0];
  if (absl::c_all_of(data->items, [&](const VarPtr& i) {
        return i->is_tensor() && i->is_ndarray && i->meta.sizes == first->meta.sizes;
      })) {
    return NumpyNode(absl::StrCat(kPrefix, "stack"), {data}, {});
  }
  std::vector<Object> values;
  bool numpy_scalar = false;
  Object generic = Attr(NumpyModule(), "generic");
  std::vector<const VarPtr*> read;  // NumPy scalars the trace knows only by type so far
  for (const VarPtr& item : data->items) {
    if (!generic || !item->object || (!item->is_constant() && item->kind != VarKind::kOpaque)) return std::nullopt;
    const int is_generic = PyObject_IsInstance(item->object.get(), generic.get());
    if (is_generic < 0) python::ClearError();
    if (item->kind == VarKind::kOpaque && is_generic != 1) return std::nullopt;
    if (item->kind == VarKind::kOpaque) read.push_back(&item);
    numpy_scalar |= is_generic == 1;
    values.push_back(item->object);
  }
  if (!numpy_scalar) return std::nullopt;
  Object literal = Object::Steal(PyObject_CallMethod(NumpyModule(), "array", "O", python::MakeList(values).get()));
  Object dtype = literal ? Attr(literal.get(), "dtype") : Object();
  std::optional<Object> torch_dtype = dtype ? TorchDType(dtype.get()) : std::nullopt;
  Object ndim = literal ? Attr(literal.get(), "ndim") : Object();
  if (!torch_dtype || !ndim || python::AsLong(ndim).value_or(0) != 1) {
    python::ClearError();
    return std::nullopt;  // NumpyNode says why
  }
  std::vector<VarPtr> numbers;
  for (const Object& v : values) {
    const int is_generic = PyObject_IsInstance(v.get(), generic.get());
    if (is_generic < 0) python::ClearError();
    Object number = is_generic == 1 ? Object::Steal(PyObject_CallMethod(v.get(), "item", nullptr))  // the Python number
                                    : v;                                                              // it holds
    if (!number) {
      python::ClearError();
      return std::nullopt;
    }
    numbers.push_back(Var::Constant(number));
  }
  for (const VarPtr* item : read) guards_.EqualsMatch((*item)->source, (*item)->object);  // their values are in the graph
  return NumpyNode(target, {Var::List(std::move(numbers))}, {{"dtype", Var::OfKind(VarKind::kOpaque, dtype)}});
}

}  // namespace dynamo::trace
