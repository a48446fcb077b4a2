// Calls, attribute reads and the wrapping of real Python objects: the half
// of the Translator that decides what each Python value *is* (translator.cc
// runs the opcodes).
#include <Python.h>
#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/bytecode/opcodes.h"
#include "lib/ops/infer_helpers.h"
#include "lib/ops/proto_conversion.h"
#include "lib/python/error.h"
#include "lib/python/torch_modes.h"
#include "lib/trace/meta_fallback.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

// A function's attributes that are no __dict__ entries but may be set to
// any value of the right type (what functools.update_wrapper copies).
bool FunctionSlot(const std::string& name) {
  return name == "__name__" || name == "__qualname__" || name == "__doc__" || name == "__module__" ||
         name == "__annotations__" || name == "__type_params__";
}
bool MadeInTrace(const VarPtr& fn) {
  return fn->kind == VarKind::kFunction && fn->object && PyCode_Check(fn->object.get());
}

using python::Object;

}  // namespace

// torch's own attributes ("nn.Module", "no_grad", "_C._is_tracing"), resolved
// once per process: they are looked up on every wrapped value.
Object TorchAttr(const char* dotted) {
  // Leaked on purpose: holds Python objects past main() (see Object's destructor).
  static auto* cache = new absl::flat_hash_map<std::string, Object>();
  auto it = cache->find(dotted);
  if (it != cache->end()) return it->second;
  Object obj = Object::Steal(PyImport_ImportModule("torch"));
  if (!obj) {
    python::ClearError();
    return obj;
  }
  std::string path(dotted);
  size_t start = 0;
  while (obj && start < path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    obj = Attr(obj.get(), part.c_str());
    start = dot == std::string::npos ? path.size() : dot + 1;
  }
  (*cache)[dotted] = obj;
  return obj;
}

std::optional<ops::DType> DTypeOf(PyObject* dtype) {
  // torch's dtypes are singletons: each is named once, by its str(), and
  // found by address after (the cache holds a reference, so no other object
  // takes the address). Leaked, as TorchAttr's cache.
  static auto* cache = new absl::flat_hash_map<PyObject*, ops::DType>();
  if (dtype == nullptr) return std::nullopt;
  if (auto it = cache->find(dtype); it != cache->end()) return it->second;
  if (PyObject_IsInstance(dtype, TorchAttr("dtype").get()) != 1) {
    python::ClearError();
    return std::nullopt;
  }
  Object text = Object::Steal(PyObject_Str(dtype));
  absl::StatusOr<std::string> name = text ? python::AsString(text) : absl::UnknownError("dtype");
  python::ClearError();
  std::optional<ops::DType> d = name.ok() ? ops::DTypeFromName(*name) : std::nullopt;
  if (d && reinterpret_cast<PyObject*>(Py_TYPE(dtype)) == TorchAttr("dtype").get()) {
    cache->emplace(Object::Borrow(dtype).release(), *d);
  }
  return d;
}

namespace {

bool IsInstanceOf(PyObject* obj, const char* torch_class) {
  Object cls = TorchAttr(torch_class);
  if (!cls) return false;
  int r = PyObject_IsInstance(obj, cls.get());
  if (r < 0) python::ClearError();
  return r == 1;
}

bool IsParameter(PyObject* obj) {
  PyObject* parameter = StdlibObject("torch.nn", "Parameter");
  if (parameter == nullptr) return false;
  // Parameter's metaclass counts a plain torch.Tensor (a buffer) as one
  // when its `_is_param` is true, in Python: that attribute is read in C
  // where the answer is certain (no class attribute of that name).
  if (reinterpret_cast<PyObject*>(Py_TYPE(obj)) == StdlibObject("torch", "Tensor")) {
    static const python::Name kIsParam("_is_param");
    Object flag;
    const python::Found found = python::LookupWithoutPython(obj, kIsParam.get(), &flag);
    if (found == python::Found::kMissing) return false;
    if (found == python::Found::kFound) {
      const int truth = PyObject_IsTrue(flag.get());
      if (truth >= 0) return truth == 1;
      python::ClearError();
    }
  }
  int r = PyObject_IsInstance(obj, parameter);
  if (r < 0) python::ClearError();
  return r == 1;
}

// The ints of a tuple (torch.Size is one), or false.
bool TupleInts(PyObject* t, std::vector<int64_t>* out) {
  if (t == nullptr || !PyTuple_Check(t)) return false;
  const Py_ssize_t n = PyTuple_GET_SIZE(t);
  out->reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    if (v == -1 && PyErr_Occurred()) {
      python::ClearError();
      return false;
    }
    out->push_back(v);
  }
  return true;
}

// Real tensors (parameters, buffers, global tensors): their metadata.
absl::StatusOr<ops::TensorMeta> MetaOf(PyObject* tensor) {
  static const python::Name kDtype("dtype"), kStride("stride"), kShape("shape"), kDevice("device"),
      kIsCpu("is_cpu"), kRequiresGrad("requires_grad");
  ops::TensorMeta meta;
  std::optional<ops::DType> d = DTypeOf(Attr(tensor, kDtype.get()).get());
  if (!d) return absl::InvalidArgumentError("tensor with an unsupported dtype");
  meta.dtype = *d;
  Object strides = kStride.get() ? Object::Steal(PyObject_CallMethodNoArgs(tensor, kStride.get())) : Object();
  if (!TupleInts(Attr(tensor, kShape.get()).get(), &meta.sizes) || !TupleInts(strides.get(), &meta.strides)) {
    python::ClearError();
    return absl::InvalidArgumentError("tensor without sizes");
  }
  // A CPU tensor's device is torch.device('cpu'): is_cpu says so without
  // making a device object, where both are torch's own getters.
  static PyObject* const base = TorchAttr("_C.TensorBase").get();
  auto torchs = [&](const python::Name& name) {
    PyObject* key = name.get();
    return key != nullptr && base != nullptr && PyType_Check(base) &&
           _PyType_Lookup(Py_TYPE(tensor), key) == _PyType_Lookup(reinterpret_cast<PyTypeObject*>(base), key);
  };
  if (torchs(kDevice) && torchs(kIsCpu) && Attr(tensor, kIsCpu.get()).get() == Py_True) {
    meta.device.type = "cpu";
    meta.device.index = -1;
  } else {
    Object device = Attr(tensor, kDevice.get());
    absl::StatusOr<std::string> type = python::AsString(Attr(device.get(), "type"));
    meta.device.type = type.ok() ? *type : "cpu";
    Object index = Attr(device.get(), "index");
    meta.device.index = index && index.get() != Py_None ? *python::AsLong(index) : -1;
  }
  meta.requires_grad = Attr(tensor, kRequiresGrad.get()).get() == Py_True;
  return meta;
}

bool IsImmutableConstant(PyObject* o) {
  return o == Py_None || o == Py_Ellipsis || PyBool_Check(o) || PyLong_Check(o) ||
         PyFloat_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) || PyComplex_Check(o) ||
         PyCode_Check(o);
}

bool SetOfConstants(PyObject* set) {
  Object it = Object::Steal(PyObject_GetIter(set));
  if (!it) {
    python::ClearError();
    return false;
  }
  while (Object item = Object::Steal(PyIter_Next(it.get()))) {
    if (!IsImmutableConstant(item.get()) && !PyTuple_Check(item.get())) return false;
  }
  python::ClearError();
  return true;
}

// A tuple, list or dict subclass whose container protocol is written in
// Python (a ModelOutput's __getitem__, a __len__ of its own) is not the
// builtin container: modelling it as one would answer with the builtin's
// semantics and write guards that run its code.
bool OverridesContainerProtocol(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  if (t == &PyTuple_Type || t == &PyList_Type || t == &PyDict_Type) return false;
  for (const char* name : {"__getitem__", "__iter__", "__len__", "__contains__", "__bool__", "__reversed__",
                           "keys", "values", "items", "get", "__getattribute__", "__eq__"}) {
    Object n = python::FromString(name);
    PyObject* f = _PyType_Lookup(t, n.get());  // borrowed
    if (f != nullptr && !PyCFunction_Check(f) && Py_TYPE(f) != &PyMethodDescr_Type &&
        Py_TYPE(f) != &PyWrapperDescr_Type && Py_TYPE(f) != &PyClassMethodDescr_Type) {
      return true;
    }
  }
  return false;
}

// A dotted attribute path for a get_attr node: under the traced method's
// module, nn.Module's own path ("layers.0.weight"); elsewhere a name built
// from the source.
std::string AttributeTarget(const Source& source, absl::flat_hash_map<std::string, bool>* nn_module_has) {
  std::vector<std::string> parts;  // innermost first
  const Source* s = &source;
  for (; s->base(); s = s->base().get()) {
    // module._modules['x'] (and _parameters, _buffers) is module.x.
    if (s->kind() == Source::Kind::kAttr && !parts.empty() &&
        (s->name() == "_modules" || s->name() == "_parameters" || s->name() == "_buffers")) {
      continue;
    }
    parts.push_back(s->kind() == Source::Kind::kAttr        ? s->name()
                    : s->kind() == Source::Kind::kDictEntry ? absl::StrCat(s->name(), "_", s->index())
                    : s->is_index()                         ? absl::StrCat(s->index())
                                                            : s->name());
  }
  std::string root = s->name();
  std::string path = s->kind() == Source::Kind::kLocal && root == "self" ? "" : "_" + root;
  // A path the loader can walk has plain names and child indices only; one
  // through anything else (a closure cell: "f.__closure__.0.cell_contents",
  // a dict key with a dot) becomes one flat name.
  bool walkable = true;
  for (std::string& part : parts) {
    for (char& c : part) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
    }
    const bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    const bool dunder = part.size() > 4 && absl::StartsWith(part, "__") && absl::EndsWith(part, "__");
    if (part.empty() || dunder || (!index && std::isdigit(static_cast<unsigned char>(part[0])))) walkable = false;
    // The loader makes each step a submodule: a name nn.Module already has
    // (a dict key "cpu", as timm's LeViT caches its biases by device) can
    // be no attribute of one.
    if (!index) {
      auto [known, fresh] = nn_module_has->try_emplace(part, false);
      if (fresh) {
        Object module = TorchAttr("nn.Module");
        Object key = python::FromString(part);  // any text a dict key holds: not interned for the process
        known->second = module && key && python::Attr(module.get(), key.get());
        python::ClearError();
      }
      if (known->second) walkable = false;
    }
  }
  const char* sep = walkable ? "." : "_";
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    path += path.empty() ? *it : sep + *it;
  }
  for (char& c : path) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) c = '_';
  }
  if (!walkable && absl::StartsWith(path, "__") && absl::EndsWith(path, "__")) path = "_" + path + "_";
  return path;
}

}  // namespace

// A dict's items as a kDict tracker (no object: not the dict itself), read
// with dict's own protocol: in its iteration order (an OrderedDict's after
// move_to_end is not its storage order), values as dict.__getitem__ reads
// them. Type, length and every item are guarded. A str or int key is a
// constant and its value's path is d['k'] / d[3]; any other key (a class,
// an enum member, a module, a tensor, a float) is read and guarded like any
// value, through its position (d.keys()[i], d.values()[i]), so a dict with
// the same keys in another order is another program, as for torch._dynamo.
absl::StatusOr<VarPtr> Translator::WrapDictItems(const Object& obj, SourcePtr source) {
  PyObject* o = obj.get();
  std::vector<VarPtr> keys, values;
  Object key_list = Object::Steal(PySequence_List(o));
  if (!key_list) return python::FetchError("listing a dict's keys");
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(key_list.get()); ++i) {
    PyObject* key = PyList_GET_ITEM(key_list.get(), i);
    PyObject* value = PyDict_GetItemWithError(o, key);  // borrowed
    if (value == nullptr) return python::FetchError("reading a dict's item");
    // Exact str and int only: a subclass's == and hash are its own.
    const bool plain_key = PyUnicode_CheckExact(key) || PyLong_CheckExact(key);
    SourcePtr item_source;
    if (source && PyUnicode_CheckExact(key)) item_source = Source::Item(source, *python::AsString(Object::Borrow(key)));
    if (source && PyLong_CheckExact(key)) item_source = Source::Item(source, PyLong_AsLongLong(key));
    if (source && !plain_key) item_source = Source::DictValue(source, i);
    VarPtr key_var;
    if (plain_key) {
      key_var = Var::Constant(Object::Borrow(key));
    } else {
      absl::StatusOr<VarPtr> k = Wrap(Object::Borrow(key), source ? Source::DictKey(source, i) : nullptr);
      if (!k.ok()) return k.status();
      key_var = *k;
    }
    absl::StatusOr<VarPtr> v = Wrap(Object::Borrow(value), item_source);
    if (!v.ok()) return v.status();
    keys.push_back(key_var);
    values.push_back(*v);
  }
  guards_.TypeMatch(source, obj);
  guards_.LengthMatch(source, static_cast<int64_t>(keys.size()));
  return Var::Dict(std::move(keys), std::move(values), source);
}

absl::StatusOr<VarPtr> Translator::Wrap(const Object& obj, SourcePtr source) {
  PyObject* o = obj.get();
  if (python::IsNumpyNumber(o)) {
    // Not its identity (a fresh object each time it is computed, np.float64
    // subclasses float): its type and value, as NumPy's own operators and
    // torch's argument parser read it.
    guards_.TypeMatch(source, obj);
    guards_.EqualsMatch(source, obj);
    return Var::Constant(obj, source);
  }
  if ((PyFrozenSet_Check(o) || PySet_Check(o)) && SetOfConstants(o)) {
    guards_.EqualsMatch(source, obj);
    return Var::Constant(obj, source);
  }
  if (IsImmutableConstant(o)) {
    // A subclass of int or str (an Enum member such as timm's Format.NHWC,
    // an IntEnum) is no IR constant: an equal plain value is not it. Its
    // identity is guarded (Enum members are singletons).
    const bool exact = PyLong_CheckExact(o) || PyUnicode_CheckExact(o) || PyFloat_CheckExact(o) ||
                       PyBytes_CheckExact(o) || PyComplex_CheckExact(o) || PyBool_Check(o) || o == Py_None ||
                       o == Py_Ellipsis;
    if (!exact && !PyCode_Check(o)) {
      guards_.IdMatch(source, obj);
    } else if (!PyCode_Check(o)) {
      guards_.EqualsMatch(source, obj);
    }
    return Var::Constant(obj, source);
  }
  if (auto it = op_names_.find(o); it != op_names_.end()) {
    guards_.IdMatch(source, obj);
    VarPtr v = Var::OfKind(VarKind::kOp, obj, source);
    v->name = it->second;
    return v;
  }
  if (auto it = builtins_.find(o); it != builtins_.end()) {
    guards_.IdMatch(source, obj);
    VarPtr v = Var::OfKind(VarKind::kBuiltin, obj, source);
    v->name = it->second;
    return v;
  }
  if ((PyTuple_Check(o) || PyList_Check(o) || PyDict_Check(o)) && OverridesContainerProtocol(o)) {
    guards_.TypeMatch(source, obj);
    return Var::OfKind(VarKind::kOpaque, obj, source);
  }
  const bool container = PyTuple_Check(o) || PyList_Check(o) || PyDict_Check(o);
  if (container && (wrapping_.size() >= kMaxWrapDepth ||
                    std::find(wrapping_.begin(), wrapping_.end(), o) != wrapping_.end())) {
    // A container inside itself, or nested past the bound: read as an object
    // whose items the trace does not know (reading one is a graph break).
    guards_.TypeMatch(source, obj);
    return Var::OfKind(VarKind::kOpaque, obj, source);
  }
  if (container) wrapping_.push_back(o);
  absl::Cleanup unwrap = [this, container] {
    if (container) wrapping_.pop_back();
  };
  if (PyTuple_Check(o) || PyList_Check(o)) {
    bool is_size = IsInstanceOf(o, "Size");
    std::vector<VarPtr> items;
    Object fast = Object::Steal(PySequence_Fast(o, ""));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.get()); ++i) {
      absl::StatusOr<VarPtr> item = Wrap(Object::Borrow(PySequence_Fast_GET_ITEM(fast.get(), i)),
                                         source ? Source::Item(source, i) : nullptr);
      if (!item.ok()) return item.status();
      items.push_back(*item);
    }
    // Type and length: the trace's isinstance() answers and unrolled loops
    // depend on both.
    guards_.TypeMatch(source, obj);
    guards_.LengthMatch(source, static_cast<int64_t>(items.size()));
    VarPtr v = PyList_Check(o) ? Var::List(std::move(items), source) : Var::Tuple(std::move(items), source);
    v->is_size = is_size;
    v->object = obj;
    // A named tuple's fields read as attributes (p.x is p[0]).
    if (PyTuple_Check(o) && !PyTuple_CheckExact(o) && !is_size) {
      absl::StatusOr<std::vector<Object>> fields =
          python::AsVector(Attr(reinterpret_cast<PyObject*>(Py_TYPE(o)), "_fields"));
      if (fields.ok() && fields->size() == v->items.size()) {
        for (const Object& f : *fields) v->fields.push_back(python::AsString(f).value_or(""));
      }
      python::ClearError();
    }
    if (PyList_Check(o) && source) {
      // The guards above are for this path; the tracker is the object's one.
      auto [it, inserted] = containers_.try_emplace(o, v);
      return it->second;
    }
    return v;
  }
  if (source && IsDequeObject(o)) return WrapDeque(obj, source);
  if (source && python::IsTupleIterator(o)) return WrapTupleIterator(obj, source);
  if (PyDict_Check(o)) {
    absl::StatusOr<VarPtr> v = WrapDictItems(obj, source);
    if (!v.ok() || (*v)->kind != VarKind::kDict) return v;
    (*v)->object = obj;
    if (Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(StdlibObject("collections", "defaultdict"))) {
      if (absl::Status s = ReadDefaultFactory(*v, obj); !s.ok()) return s;
    }
    if (source) {
      auto [it, inserted] = containers_.try_emplace(o, *v);
      return it->second;
    }
    return v;
  }
  if (!source && Py_TYPE(o) == &PyDictProxy_Type) {
    // A read-only view read from a Python value (a Signature's parameters):
    // its items, as a dict the trace cannot change.
    Object items = Object::Steal(PyDict_New());
    if (!items || PyDict_Update(items.get(), o) < 0) return python::FetchError("reading a mappingproxy");
    return WrapDictItems(items, nullptr);
  }
  if (IsInstanceOf(o, "Tensor")) return WrapTensor(obj, source);
  if (IsNumpyArray(o)) return WrapNdarray(obj, source);
  if (IsInstanceOf(o, "dtype")) {
    std::optional<ops::DType> d = DTypeOf(o);
    if (!d) return Var::OfKind(VarKind::kOpaque, obj, source);
    guards_.IdMatch(source, obj);
    VarPtr v = Var::OfKind(VarKind::kDType, obj, source);
    v->dtype = *d;
    return v;
  }
  if (IsInstanceOf(o, "layout")) {  // torch.strided and the like: singletons, passed to ops by name
    guards_.IdMatch(source, obj);
    return Var::OfKind(VarKind::kConstant, obj, source);
  }
  if (IsInstanceOf(o, "device")) {
    guards_.EqualsMatch(source, obj);
    VarPtr v = Var::OfKind(VarKind::kDevice, obj, source);
    absl::StatusOr<std::string> type = python::AsString(Attr(o, "type"));
    v->device.type = type.ok() ? *type : "cpu";
    Object index = Attr(o, "index");
    v->device.index = index && index.get() != Py_None ? *python::AsLong(index) : -1;
    return v;
  }
  if (PyModule_Check(o)) {
    guards_.IdMatch(source, obj);
    return Var::OfKind(VarKind::kModule, obj, source);
  }
  if (PyFunction_Check(o)) {
    if (source && PyFunction_GetClosure(o) != nullptr) {
      // A closure is made anew by every call of its enclosing function:
      // identified by its code (torch._dynamo's CLOSURE_MATCH), with what
      // the trace reads of its cells and defaults guarded where it is read
      // (Inline wraps them through __closure__ and __defaults__).
      guards_.IdMatch(Source::Attr(source, "__code__"), Object::Borrow(PyFunction_GetCode(o)));
      // Its globals are read through its module: the same code made over
      // another namespace (types.FunctionType(code, other_globals)) is not it.
      guards_.IdMatch(Source::Attr(source, "__globals__"), Object::Borrow(PyFunction_GetGlobals(o)));
    } else {
      guards_.IdMatch(source, obj);
    }
    return Var::OfKind(VarKind::kFunction, obj, source);
  }
  // A method of a Python function is that function with `self` (inlined
  // with it prepended). A method object over anything else (a Cython
  // method such as numpy.random.uniform, types.MethodType(len, x)) stays
  // the bound object: splitting it would lose `self`, since no other kind
  // of callable is called with one.
  if (PyMethod_Check(o) && !PyFunction_Check(PyMethod_Function(o))) {
    guards_.TypeMatch(source, obj);
    return Var::OfKind(VarKind::kOpaque, obj, source);
  }
  if (PyMethod_Check(o)) {
    absl::StatusOr<VarPtr> self = Wrap(Object::Borrow(PyMethod_Self(o)),
                                       source ? Source::Attr(source, "__self__") : nullptr);
    if (!self.ok()) return self.status();
    // Which function it binds is guarded as m.__func__: another method of
    // the same object is another program.
    absl::StatusOr<VarPtr> fn = Wrap(Object::Borrow(PyMethod_Function(o)),
                                     source ? Source::Attr(source, "__func__") : nullptr);
    if (!fn.ok()) return fn.status();
    (*fn)->self = *self;
    return *fn;
  }
  if (IsInstanceOf(o, "nn.Module")) {
    guards_.IdMatch(source, obj);
    return Var::OfKind(VarKind::kNNModule, obj, source);
  }
  if (PyType_Check(o)) {
    guards_.IdMatch(source, obj);
    return Var::OfKind(VarKind::kClass, obj, source);
  }
  if (PySlice_Check(o)) {
    // slice(start, stop, step): each bound is a value of its own (guarded
    // where it is read), as a slice the trace builds holds them.
    guards_.TypeMatch(source, obj);
    VarPtr v = Var::OfKind(VarKind::kSlice, obj, source);  // the object: for `is`
    for (const char* bound : {"start", "stop", "step"}) {
      absl::StatusOr<VarPtr> b = Wrap(Attr(o, bound), source ? Source::Attr(source, bound) : nullptr);
      if (!b.ok()) return b.status();
      if (!(*b)->is_constant()) return Break(ir::GraphBreak::OTHER, "a slice whose bounds are not Python values", "");
      v->items.push_back(*b);
    }
    return v;
  }
  if (PyRange_Check(o)) {
    VarPtr v = Var::OfKind(VarKind::kRange, obj, source);
    v->start = *python::AsLong(Attr(o, "start"));
    v->stop = *python::AsLong(Attr(o, "stop"));
    v->step = *python::AsLong(Attr(o, "step"));
    guards_.EqualsMatch(source, obj);
    return v;
  }
  if (std::optional<absl::StatusOr<VarPtr>> p = WrapPartial(obj, source)) return *std::move(p);
  guards_.TypeMatch(source, obj);
  return Var::OfKind(VarKind::kOpaque, obj, source);
}

absl::StatusOr<VarPtr> Translator::WrapTensor(const Object& tensor, SourcePtr source) {
  absl::StatusOr<ops::TensorMeta> meta = MetaOf(tensor.get());
  if (!meta.ok()) return Break(ir::GraphBreak::OTHER, std::string(meta.status().message()), "");
  // The class is part of what the tensor is (isinstance(p, nn.Parameter));
  // TENSOR_MATCH pins it.
  auto typed = [&tensor](VarPtr v) {
    if (reinterpret_cast<PyObject*>(Py_TYPE(tensor.get())) != TorchAttr("Tensor").get()) {
      v->tensor_type = Object::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(tensor.get())));
    }
    return v;
  };
  if (auto it = attribute_nodes_.find(tensor.get()); it != attribute_nodes_.end()) {
    // The same tensor reached by a second path: one node, and the identity
    // between the paths is guarded.
    NoteTensorSource(source, tensor.get());
    VarPtr same = typed(Var::Tensor(it->second, *meta, source));
    // Its sizes are the first path's: symbolic where those are.
    if (auto sym = node_sym_sizes_.find(it->second); sym != node_sym_sizes_.end()) same->sym_sizes = sym->second;
    return same;
  }
  if (!source) {
    return Break(ir::GraphBreak::OTHER, "a tensor object made outside the trace with no known path",
                 "pass the tensor as an argument or keep it as a module attribute");
  }
  if (allow_breaks_ && (IsParameter(tensor.get()) || module_attribute_)) {
    // Live: parameters and buffers stay get_attr nodes (updated in place,
    // as BatchNorm's statistics are, they are the same tensors); the very
    // tensor is guarded, so assigning a new one recaptures.
    guards_.IdMatch(source, tensor);
  } else if (allow_breaks_) {
    // Live: a tensor read from a global or a container can be replaced
    // between calls, so it is a graph input read from its source on every
    // call (a get_attr would freeze this call's tensor).
    std::string name = AttributeTarget(*source, &nn_module_has_);
    std::string node = InputGraph().AddPlaceholder(name.substr(name[0] == '_' ? 1 : 0), *meta);
    guards_.TensorMatch(source, *meta);
    placeholder_sources_.push_back(source);
    attribute_nodes_[tensor.get()] = node;
    NoteTensorSource(source, tensor.get());
    return typed(Var::Tensor(node, *meta, source));
  }
  const std::string path = AttributeTarget(*source, &nn_module_has_);
  // Two tensors whose paths flatten alike keep distinct targets (the loader
  // sets each target once).
  std::string target = path;
  for (int suffix = 1; attribute_targets_.contains(target); ++suffix) target = absl::StrCat(path, "_", suffix);
  attribute_targets_.insert(target);
  std::string node = InputGraph().AddGetAttr(target, *meta);
  attribute_nodes_[tensor.get()] = node;
  attributes_.push_back({target, source->ToString(), tensor});
  return typed(Var::Tensor(node, *meta, source));
}

void Translator::NoteTensorSource(const SourcePtr& source, PyObject* tensor) {
  if (!source) return;
  alias_sources_.push_back(source);
  alias_ids_.push_back(tensor);
}

void Translator::GuardAliasing() {
  // Two paths to one tensor object share one node. That is a fact the
  // capture holds for only when the graph uses the node (a later call with
  // distinct objects would feed the graph one of them twice) or the trace
  // compared the tensor's identity; a tensor the graph never reads only
  // travels back to Python, where each path is read again from its source,
  // so the arguments' aliasing is no fact of this capture.
  absl::flat_hash_set<std::string> used = identity_nodes_;
  std::function<void(const ir::Argument&)> note = [&](const ir::Argument& a) {
    if (a.has_node()) used.insert(a.node());
    if (a.has_list()) {
      for (const ir::Argument& item : a.list().items()) note(item);
    }
    if (a.has_dict()) {
      for (const ir::Argument& item : a.dict().values()) note(item);
    }
    if (a.has_slice()) {
      for (const std::string* n : {&a.slice().start_node(), &a.slice().stop_node(), &a.slice().step_node()}) {
        if (!n->empty()) used.insert(*n);
      }
    }
  };
  for (const ir::Node& n : graph_.graph().nodes()) {
    for (const ir::Argument& a : n.args()) note(a);
    for (const ir::KeywordArgument& k : n.kwargs()) note(k.value());
  }
  std::vector<SourcePtr> sources;
  std::vector<const void*> ids;
  for (size_t i = 0; i < alias_sources_.size(); ++i) {
    auto node = attribute_nodes_.find(static_cast<PyObject*>(const_cast<void*>(alias_ids_[i])));
    if (node != attribute_nodes_.end() && !used.contains(node->second)) continue;
    sources.push_back(alias_sources_[i]);
    ids.push_back(alias_ids_[i]);
  }
  guards_.Aliasing(sources, ids);
}

SourcePtr Translator::ChildSource(const VarPtr& container, int64_t index) {
  if (!container->source && container->kind == VarKind::kNNModule && container->self) {
    // A slice of a container: the child is the original's.
    return ChildSource(container->self, container->start + index * container->step);
  }
  if (!container->source) return nullptr;
  // nn.Module containers iterate their _modules in order; the child's own
  // name gives the exact path ("features.conv0" where iteration says [0]).
  Object modules = Attr(container->object.get(), "_modules");
  if (modules && PyDict_Check(modules.get()) && index < PyDict_Size(modules.get())) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    for (int64_t i = 0; PyDict_Next(modules.get(), &pos, &key, &value); ++i) {
      if (i != index) continue;
      absl::StatusOr<std::string> name = python::AsString(Object::Borrow(key));
      if (name.ok() && *name != absl::StrCat(index) && PyUnicode_IsIdentifier(key)) {
        return Source::Attr(container->source, *name);
      }
      break;
    }
  }
  return Source::Item(container->source, index);
}

SourcePtr Translator::IteratedSource(const VarPtr& container, int64_t index, PyObject* item) {
  if (PyUnicode_Check(item)) {
    // ModuleDict iterates its _modules' keys, ParameterDict its _keys': the
    // i-th key, so that a renamed or reordered entry fails a guard (its
    // child's path would name a module, not the key).
    for (const char* dict_name : {"_modules", "_keys"}) {
      Object d = Attr(container->object.get(), dict_name);
      python::ClearError();
      if (!d || !PyDict_Check(d.get()) || index >= PyDict_Size(d.get())) continue;
      PyObject *key, *value;
      Py_ssize_t pos = 0;
      for (int64_t i = 0; PyDict_Next(d.get(), &pos, &key, &value) && i <= index; ++i) {
        if (i == index && key == item) {
          return container->source ? Source::DictKey(Source::Attr(container->source, dict_name), index) : nullptr;
        }
      }
    }
  }
  return ChildSource(container, index);
}

absl::StatusOr<VarPtr> Translator::FromValue(const ops::Value& value) {
  if (value.is_none()) return Var::Constant(python::None());
  if (value.is_bool()) return Var::Constant(python::FromBool(value.as_bool()));
  if (value.is_int()) return Var::Constant(python::FromLong(value.as_int()));
  if (value.is_float()) return Var::Constant(Object::Steal(PyFloat_FromDouble(value.as_float())));
  if (value.is_string()) return Var::Constant(python::FromString(value.as_string()));
  if (value.is_dtype()) {
    VarPtr v = Var::OfKind(VarKind::kDType, TorchAttr(std::string(ops::DTypeName(value.as_dtype())).c_str()));
    v->dtype = value.as_dtype();
    return v;
  }
  if (value.is_device()) {
    absl::StatusOr<Object> device = python::Call(TorchAttr("device"), {python::FromString(ops::DeviceName(value.as_device()))});
    if (!device.ok()) return device.status();
    VarPtr v = Var::OfKind(VarKind::kDevice, *device);
    v->device = value.as_device();
    return v;
  }
  if (value.is_list()) {
    std::vector<VarPtr> items;
    for (const ops::Value& item : value.items()) {
      absl::StatusOr<VarPtr> v = FromValue(item);
      if (!v.ok()) return v.status();
      items.push_back(*v);
    }
    return value.as_list().is_tuple ? Var::Tuple(std::move(items)) : Var::List(std::move(items));
  }
  return absl::InternalError(absl::StrCat("no Python form for ", ops::ToString(value)));
}

absl::StatusOr<Object> Translator::ToPython(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kSymInt:
      return SpecializedInt(v);  // a Python value: this trace holds for this size only
    case VarKind::kConstant:
    case VarKind::kDType:
    case VarKind::kDevice:
    case VarKind::kModule:
    case VarKind::kClass:
    case VarKind::kOp:
    case VarKind::kBuiltin:
      return v->object;
    case VarKind::kTuple:
    case VarKind::kList: {
      std::vector<Object> items;
      for (const VarPtr& item : v->items) {
        absl::StatusOr<Object> o = ToPython(item);
        if (!o.ok()) return o.status();
        items.push_back(*o);
      }
      if (v->is_size) return python::Call(TorchAttr("Size"), {python::MakeTuple(items)});
      if (IsDeque(v)) {
        return python::Call(v->container_class, {python::MakeList(items),
                                                 v->maxlen < 0 ? python::None() : python::FromLong(v->maxlen)});
      }
      if (v->user_class) {  // a named tuple made by the trace: its class's tuple.__new__
        return python::Call(Attr(reinterpret_cast<PyObject*>(&PyTuple_Type), "__new__"),
                            {v->user_class->object, python::MakeTuple(items)});
      }
      return v->kind == VarKind::kTuple ? python::MakeTuple(items) : python::MakeList(items);
    }
    case VarKind::kSlice: {
      absl::StatusOr<Object> a = ToPython(v->items[0]);
      absl::StatusOr<Object> b = a.ok() ? ToPython(v->items[1]) : a.status();
      absl::StatusOr<Object> c = b.ok() ? ToPython(v->items[2]) : b.status();
      if (!c.ok()) return c.status();
      return Object::Steal(PySlice_New(a->get(), b->get(), c->get()));
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(Describe(*v), " has no value at trace time"));
  }
}

absl::StatusOr<ir::Argument> Translator::ToArgument(const VarPtr& v) {
  if (v->is_tensor()) return Ref(v->node);
  if (v->kind == VarKind::kSymInt || v->kind == VarKind::kScalar) return Ref(v->node);  // a number the graph computes
  if (v->kind == VarKind::kSlice && !SymOf(v).is_static()) {
    ir::Argument a;
    ir::Slice* slice = a.mutable_slice();
    for (size_t i = 0; i < 3 && i < v->items.size(); ++i) {
      const VarPtr& bound = v->items[i];
      if (bound->is_none()) continue;
      if (bound->kind == VarKind::kSymInt) {
        (i == 0 ? slice->mutable_start_node() : i == 1 ? slice->mutable_stop_node() : slice->mutable_step_node())
            ->assign(bound->node);
        continue;
      }
      absl::StatusOr<int64_t> n = AsInt(bound);
      if (!n.ok()) return n.status();
      if (i == 0) slice->set_start(*n);
      if (i == 1) slice->set_stop(*n);
      if (i == 2) slice->set_step(*n);
    }
    return a;
  }
  if (v->kind == VarKind::kDict) {
    ir::Argument a;
    for (size_t i = 0; i < v->keys.size(); ++i) {
      absl::StatusOr<std::string> key = v->keys[i]->is_constant() ? python::AsString(v->keys[i]->object)
                                                                  : absl::InvalidArgumentError("");
      if (!key.ok()) return absl::InvalidArgumentError("only dicts with str keys are graph values");
      absl::StatusOr<ir::Argument> value = ToArgument(v->items[i]);
      if (!value.ok()) return value.status();
      a.mutable_dict()->add_keys(*key);
      *a.mutable_dict()->add_values() = *std::move(value);
    }
    if (v->keys.empty()) a.mutable_dict();  // an empty dict is still a dict
    return a;
  }
  if (IsDeque(v)) return absl::InvalidArgumentError("a deque is no graph value (torch ops take lists and tuples)");
  if (v->is_sequence()) {
    ir::Argument a;
    a.mutable_list()->set_is_tuple(v->kind == VarKind::kTuple);
    for (const VarPtr& item : v->items) {
      absl::StatusOr<ir::Argument> arg = ToArgument(item);
      if (!arg.ok()) return arg.status();
      *a.mutable_list()->add_items() = *arg;
    }
    return a;
  }
  // A torch.layout (layout=x.layout): the IR's layout argument, by name.
  if (v->is_constant() && IsInstanceOf(v->object.get(), "layout")) {
    absl::StatusOr<ops::Value> name = ToValue(v);
    if (!name.ok()) return name.status();
    ir::Argument a;
    a.set_layout(name->as_string());
    return a;
  }
  absl::StatusOr<ops::Value> value = ToValue(v);
  if (!value.ok()) return value.status();
  return ops::ToArgument(*value);
}

absl::StatusOr<VarPtr> Translator::NewVarFromResult(const std::string& node, const ops::Value& value) {
  if (value.is_tensor()) return Var::Tensor(node, value.as_tensor());
  if (!value.is_list()) return FromValue(value);
  std::vector<VarPtr> items;
  for (size_t i = 0; i < value.items().size(); ++i) {
    const ops::Value& item = value.items()[i];
    if (!item.is_tensor() && !item.is_list()) {
      absl::StatusOr<VarPtr> c = FromValue(item);
      if (!c.ok()) return c.status();
      items.push_back(*c);
      continue;
    }
    absl::StatusOr<ir::ValueMeta> meta = ops::ToValueMeta(item);
    if (!meta.ok()) return meta.status();
    ir::Argument index;
    index.set_int_value(static_cast<int64_t>(i));
    std::string getitem = graph_.AddCall(ir::Node::CALL_FUNCTION, "operator.getitem",
                                         {Ref(node), index}, {}, *meta, CurrentLocation());
    absl::StatusOr<VarPtr> v = NewVarFromResult(getitem, item);
    if (!v.ok()) return v.status();
    items.push_back(*v);
  }
  return value.as_list().is_tuple ? Var::Tuple(std::move(items)) : Var::List(std::move(items));
}

namespace {
// Results computed under torch.no_grad() never require grad.
ops::Value WithoutGrad(const ops::Value& v) {
  if (v.is_tensor()) {
    ops::TensorMeta meta = v.as_tensor();
    meta.requires_grad = false;
    return ops::Value(meta);
  }
  if (!v.is_list()) return v;
  std::vector<ops::Value> items;
  for (const ops::Value& item : v.items()) items.push_back(WithoutGrad(item));
  return v.as_list().is_tuple ? ops::Value::Tuple(std::move(items)) : ops::Value::List(std::move(items));
}
bool DataDependent(const ops::Value& v) {
  if (v.is_tensor()) return v.as_tensor().data_dependent;
  if (v.is_list()) {
    for (const ops::Value& item : v.items()) {
      if (DataDependent(item)) return true;
    }
  }
  return false;
}
// torch.manual_seed, torch.seed, torch.get_rng_state/set_rng_state,
// torch.random.fork_rng and their torch.cuda twins are functions of a
// torch.random module that read or replace a global generator's state.
// Inlined, the trace would hold half of one (the state itself moves
// through torch.Generator methods), so each is a graph break at the user's
// call, where torch._dynamo breaks too. "torch.random.manual_seed" for the
// message, or nullopt for any other function.
std::optional<std::string> GlobalRngStateFunction(PyObject* fn) {
  Object module = python::Attr(fn, "__module__");
  if (!module || !PyUnicode_Check(module.get())) return std::nullopt;
  const std::string m = python::AsString(module).value_or("");
  if (m != "torch.random" && !(absl::StartsWith(m, "torch.") && absl::EndsWith(m, ".random"))) return std::nullopt;
  Object name = python::Attr(fn, "__qualname__");
  return absl::StrCat(m, ".", name && PyUnicode_Check(name.get()) ? python::AsString(name).value_or("?") : "?");
}
// torch.return_types: the field names of ops that return named tuples.
std::vector<std::string> ReturnFields(const std::string& target, size_t arity) {
  if (arity != 2) return {};
  std::string op = target.substr(target.rfind('.') + 1);
  for (const char* values_indices : {"max", "min", "sort", "topk", "kthvalue", "mode", "median",
                                     "nanmedian", "cummax", "cummin"}) {
    if (op == values_indices) return {"values", "indices"};
  }
  if (op == "aminmax") return {"min", "max"};
  if (op == "slogdet") return {"sign", "logabsdet"};
  return {};
}

}  // namespace

absl::StatusOr<VarPtr> Translator::CallOp(const std::string& target, ir::Node::Kind kind,
                                          const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  // torch reads the Python number types as dtypes where it takes one
  // (x.to(float), dtype=bool): bool, int64, float64, complex128.
  auto python_type_dtype = [this](const VarPtr& v) -> VarPtr {
    if (v->kind != VarKind::kBuiltin || !v->object) return nullptr;
    PyObject* o = v->object.get();
    const char* name = o == reinterpret_cast<PyObject*>(&PyBool_Type)      ? "bool"
                       : o == reinterpret_cast<PyObject*>(&PyLong_Type)    ? "int64"
                       : o == reinterpret_cast<PyObject*>(&PyFloat_Type)   ? "float64"
                       : o == reinterpret_cast<PyObject*>(&PyComplex_Type) ? "complex128"
                                                                           : nullptr;
    if (name == nullptr) return nullptr;
    absl::StatusOr<VarPtr> dtype = Wrap(TorchAttr(name), nullptr);
    return dtype.ok() && (*dtype)->kind == VarKind::kDType ? *dtype : nullptr;
  };
  bool any_type = false;
  for (const VarPtr& a : args) any_type |= python_type_dtype(a) != nullptr;
  for (const auto& kv : kwargs) any_type |= python_type_dtype(kv.second) != nullptr;
  if (any_type) {
    std::vector<VarPtr> typed = args;
    Kwargs typed_kwargs = kwargs;
    for (VarPtr& a : typed) {
      if (VarPtr d = python_type_dtype(a)) a = d;
    }
    for (auto& kv : typed_kwargs) {
      if (VarPtr d = python_type_dtype(kv.second)) kv.second = d;
    }
    return CallOp(target, kind, typed, typed_kwargs);
  }
  if (kind == ir::Node::CALL_FUNCTION && absl::StartsWith(target, "Tensor.")) {
    // torch.Tensor.add_(t, 1) is t.add_(1): a "Tensor.<name>" target names a
    // method, and graphs (FX's call_method, the loader's allowlist) hold it as one.
    if (args.empty() || !args[0]->is_tensor()) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat(target, "() without a tensor first"),
                   "the descriptor applies to tensors only: the call would raise TypeError");
    }
    kind = ir::Node::CALL_METHOD;
  }
  std::vector<ops::Value> values;
  std::vector<ops::Kwarg> kw;
  if (std::optional<absl::StatusOr<VarPtr>> size = SymbolicSizeCall(target, args, kwargs)) return *std::move(size);
  if (std::optional<absl::StatusOr<VarPtr>> t = TensorOfScalars(target, args, kwargs)) return *std::move(t);
  bool scalar_operands = false;
  for (const VarPtr& a : args) {
    if (HoldsScalar(a)) {  // ScalarOperands gives it a stand-in
      scalar_operands = true;
      values.emplace_back();
      continue;
    }
    absl::StatusOr<ops::Value> v = ToValue(a, /*specialize=*/false);
    if (!v.ok()) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                   absl::StrCat(target, "(): ", v.status().message()),
                   "pass tensors and Python constants to tensor operations");
    }
    values.push_back(*std::move(v));
  }
  for (const auto& [name, a] : kwargs) {
    if (a->kind == VarKind::kScalar) {
      scalar_operands = true;
      kw.push_back({name, ops::Value()});
      continue;
    }
    absl::StatusOr<ops::Value> v = ToValue(a, /*specialize=*/false);
    if (!v.ok()) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                   absl::StrCat(target, "(", name, "=...): ", v.status().message()),
                   "pass tensors and Python constants to tensor operations");
    }
    kw.push_back({name, *std::move(v)});
  }
  const ops::OpEntry* entry = registry_.Find(target);
  if (scalar_operands) {
    if (entry == nullptr) return ScalarValueNeeded(args.empty() ? kwargs[0].second : args[0], target);
    if (absl::Status s = ScalarOperands(*entry, args, kwargs, values, kw); !s.ok()) return s;
  }
  if (entry == nullptr) {
    // The registry is the fast path; a torch operator without an entry asks torch's meta kernels.
    if (Object op = TorchOperator(target)) return CallOpOnMeta(op, target, kind, values, kw, args, kwargs);
    // A method torch.Tensor defines in Python (Tensor.norm over torch.norm,
    // Tensor.unflatten): its code is traced like any function's.
    if (kind == ir::Node::CALL_METHOD && absl::StartsWith(target, "Tensor.") && !args.empty()) {
      Object method = Attr(TorchAttr("Tensor").get(), target.substr(7).c_str());
      python::ClearError();
      if (method && PyFunction_Check(method.get())) {
        VarPtr fn = Var::OfKind(VarKind::kFunction, method);
        fn->self = args[0];
        return Inline(fn, std::vector<VarPtr>(args.begin() + 1, args.end()), kwargs);
      }
    }
    return Break(ir::GraphBreak::UNKNOWN_OP, absl::StrCat(target, " has no entry in the op registry"),
                 "it is no torch operator (meta_fallback.h), so torch's meta kernels cannot describe it");
  }
  // With breaks allowed the rewritten code runs the graph on the real inputs,
  // so an in-place update of an input happens there, in program order.
  if ((entry->tags() & ops::kInplace) && !args.empty() && args[0]->is_tensor() && args[0]->source &&
      !allow_breaks_) {
    return Break(ir::GraphBreak::SIDE_EFFECT,
                 absl::StrCat(target, " mutates ", args[0]->source->ToString(), " in place"),
                 "in-place updates of inputs and parameters are side effects a single graph "
                 "cannot hold; use the out-of-place form");
  }
  absl::StatusOr<ops::Value> result = entry->Infer(values, kw);
  // Under autocast torch's autocast kernels decide the dtypes (inputs cast
  // to the low-precision dtype, or to float32): asked of torch itself.
  if (std::optional<absl::StatusOr<MetaCall>> cast = InferUnderAutocast(target, values, kw)) {
    if (!cast->ok() && result.ok()) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                   absl::StrCat(target, " under autocast: ", cast->status().message()),
                   "the dtypes autocast gives it are known only from torch's own kernels");
    }
    if (cast->ok() && (!result.ok() || !TakeAutocastDTypes(*result, (*cast)->result))) result = (*cast)->result;
  }
  if (!result.ok()) {
    return Break(ir::GraphBreak::OP_FAILS,
                 absl::StrCat(target, " would raise: ", result.status().message()),
                 "the call fails in torch for these argument shapes and dtypes");
  }
  if (DataDependent(*result)) {
    return Break(ir::GraphBreak::DATA_DEPENDENT_SHAPE,
                 absl::StrCat(target, " has an output size that depends on tensor values"),
                 "boolean-mask indexing and nonzero() have data-dependent shapes; use "
                 "torch.where or masked arithmetic");
  }
  if (!grad_enabled_) *result = WithoutGrad(*result);
  absl::StatusOr<ops::SymValue> sym = InferSymbolicResult(*entry, values, kw, args, kwargs, *result);
  if (!sym.ok()) return sym.status();
  if (!HasTensor(*result) && !(entry->tags() & (ops::kInplace | ops::kRandom))) {
    return FromValue(*result);  // metadata-only results: Tensor.dim(), Tensor.size()
  }
  absl::StatusOr<std::string> added = AddCallNode(kind, target, args, kwargs, *result, /*symbolic_result=*/true);
  if (!added.ok()) return added.status();
  const std::string& node = *added;
  absl::StatusOr<VarPtr> out = NewVarFromResult(node, *result);
  if (out.ok() && !sym->is_static()) AttachSymSizes(*out, *sym);
  if (out.ok() && (*out)->kind == VarKind::kTuple) (*out)->fields = ReturnFields(target, (*out)->items.size());
  // An in-place op returns its first argument: the same tensor object.
  if (out.ok() && (*out)->is_tensor() && (entry->tags() & ops::kInplace) && !args.empty() && args[0]->is_tensor()) {
    (*out)->identity = args[0]->tensor_identity();
  }
  return out;
}

bool Translator::AllConstant(const std::vector<VarPtr>& args, const Kwargs& kwargs) {
  for (const VarPtr& a : args) {
    if (!ToPython(a).ok()) return false;
  }
  for (const auto& kv : kwargs) {
    if (!ToPython(kv.second).ok()) return false;
  }
  return true;
}

absl::StatusOr<VarPtr> Translator::CallReal(const VarPtr& fn, const std::vector<VarPtr>& args,
                                            const Kwargs& kwargs) {
  std::vector<Object> py_args;
  for (const VarPtr& a : args) {
    absl::StatusOr<Object> o = ToPython(a);
    if (!o.ok()) {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                   absl::StrCat("calling ", Describe(*fn), " with ", Describe(*a)),
                   "only Python constants are passed to functions evaluated at trace time");
    }
    py_args.push_back(*o);
  }
  Object kw = Object::Steal(PyDict_New());
  for (const auto& [name, a] : kwargs) {
    absl::StatusOr<Object> o = ToPython(a);
    if (!o.ok()) return o.status();
    PyDict_SetItemString(kw.get(), name.c_str(), o->get());
  }
  Object tuple = python::MakeTuple(py_args);
  Object result = Object::Steal(PyObject_Call(fn->object.get(), tuple.get(), kw.get()));
  if (!result) {
    absl::Status error = python::FetchError("");
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat(Describe(*fn), " raises ", error.message()),
                 "the function would raise on these inputs");
  }
  return Wrap(result, nullptr);
}

absl::StatusOr<VarPtr> Translator::Inline(const VarPtr& fn, std::vector<VarPtr> args, Kwargs kwargs) {
  if (frames_.size() >= kMaxInlineDepth) {
    return Break(ir::GraphBreak::OTHER, "calls nest deeper than the translator inlines",
                 "recursion is not traced");
  }
  VarPtr callee = fn;
  Object code, globals;
  if (PyFunction_Check(fn->object.get())) {
    PyObject* f = fn->object.get();
    code = Object::Borrow(PyFunction_GetCode(f));
    globals = Object::Borrow(PyFunction_GetGlobals(f));
    callee = Var::OfKind(VarKind::kFunction, fn->object, fn->source);
    SourcePtr src = fn->source;
    if (PyObject* d = PyFunction_GetDefaults(f)) {
      absl::StatusOr<VarPtr> w = Wrap(Object::Borrow(d), src ? Source::Attr(src, "__defaults__") : nullptr);
      if (!w.ok()) return w.status();
      callee->defaults = *w;
    }
    if (PyObject* kd = PyFunction_GetKwDefaults(f)) {
      absl::StatusOr<VarPtr> w = Wrap(Object::Borrow(kd), src ? Source::Attr(src, "__kwdefaults__") : nullptr);
      if (!w.ok()) return w.status();
      callee->kwdefaults = *w;
    }
    if (PyObject* closure = PyFunction_GetClosure(f)) {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(closure); ++i) {
        // A cell the traced function itself holds (a nested def of the
        // function whose resume this is): the same tracker, so a write is a
        // replayable STORE_DEREF of the traced function's free variable.
        if (auto it = top_cells_.find(PyTuple_GET_ITEM(closure, i)); it != top_cells_.end()) {
          callee->closure.push_back(it->second);
          continue;
        }
        // One tracker per real cell, so that every function sharing it sees
        // a write the trace made.
        if (auto it = outer_cells_.find(PyTuple_GET_ITEM(closure, i)); it != outer_cells_.end()) {
          callee->closure.push_back(it->second);
          continue;
        }
        PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(closure, i));
        SourcePtr cell_source =
            src ? Source::Attr(Source::Item(Source::Attr(src, "__closure__"), i), "cell_contents")
                : nullptr;
        VarPtr value;
        if (contents != nullptr) {
          absl::StatusOr<VarPtr> w = Wrap(Object::Borrow(contents), cell_source);
          if (!w.ok()) return w.status();
          value = *w;
        }
        VarPtr cell = Var::Cell(value);
        // Cells of real closures outlive the call: writing them is a side effect.
        cell->source = cell_source ? cell_source : Source::Local("<closure>");
        if (cell_source) {
          cell->object = Object::Borrow(PyTuple_GET_ITEM(closure, i));  // the real cell, for the replay
          outer_cells_[PyTuple_GET_ITEM(closure, i)] = cell;
        }
        callee->closure.push_back(cell);
      }
    }
  } else if (PyCode_Check(fn->object.get())) {
    code = fn->object;
    globals = fn->globals;
  } else {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("calling ", Describe(*fn)), "");
  }
  if (std::optional<absl::StatusOr<VarPtr>> r = CallModuleTreeGenerator(fn, args, kwargs)) {
    return *std::move(r);
  }
  if (fn->self) args.insert(args.begin(), fn->self);
  Frame frame;
  if (absl::Status s = PrepareFrame(frame, code, globals, /*generator=*/true); !s.ok()) return s;
  if (!frame.top_globals && frame.globals_source && PyFunction_Check(fn->object.get())) {
    // Globals that are no module's (exec'd code: a named tuple's __new__):
    // read through the function itself, whose identity is guarded; for a
    // function the trace reached through no source (the __new__ of a named
    // tuple class made during the trace), they are constants of the trace.
    PyObject* name = PyDict_GetItemString(globals.get(), "__name__");
    PyObject* module = name ? PyDict_GetItemWithError(PyImport_GetModuleDict(), name) : nullptr;
    if (module == nullptr) python::ClearError();
    if (module == nullptr || !PyModule_Check(module) || PyModule_GetDict(module) != globals.get()) {
      frame.globals_source = fn->source ? Source::Attr(fn->source, "__globals__") : nullptr;
      frame.globals_by_item = true;
    }
  }
  std::vector<VarPtr> given = frame.generator ? args : std::vector<VarPtr>();
  frames_.push_back(&frame);  // so argument errors point into the callee
  absl::Status bound = BindArguments(frame, callee, std::move(args), std::move(kwargs));
  frames_.pop_back();
  if (!bound.ok()) return bound;
  if (frame.generator) return MakeGenerator(callee, std::move(frame), std::move(given));
  return RunFrame(frame);
}

// "Is a compiler tracing this code?" asked of torch: yes, we are. Only
// modules already imported are looked at (torch._dynamo is not imported
// for the question).
bool IsCompilingQuery(PyObject* fn) {
  static const std::pair<const char*, const char*> kQueries[] = {
      {"torch.compiler", "is_compiling"},       {"torch.compiler", "is_dynamo_compiling"},
      {"torch._dynamo", "is_compiling"},        {"torch._dynamo.external_utils", "is_compiling"},
      {"torch._utils", "is_compiling"},         {"torch._dynamo.eval_frame", "is_compiling"}};
  PyObject* modules = PyImport_GetModuleDict();
  for (const auto& [module, name] : kQueries) {
    PyObject* m = PyDict_GetItemString(modules, module);  // borrowed
    if (m == nullptr) continue;
    Object f = Attr(m, name);
    if (f && f.get() == fn) return true;
  }
  return false;
}

VarPtr GradModeDecorated(bool enabled, VarPtr fn) {
  VarPtr v = Var::OfKind(VarKind::kGradMode, Object());
  v->grad_enabled = enabled;
  v->value = std::move(fn);
  return v;
}

bool IsLoadedModuleAttr(PyObject* fn, const char* module, const char* name) {
  PyObject* m = PyDict_GetItemString(PyImport_GetModuleDict(), module);  // borrowed
  if (m == nullptr) return false;
  Object f = Attr(m, name);
  return f && f.get() == fn;
}

std::optional<VarPtr> Translator::GradModeExitInput(const Object& obj, const SourcePtr& source) {
  PyObject* o = obj.get();
  if (!PyMethod_Check(o)) return std::nullopt;
  PyObject* self = PyMethod_Self(o);  // borrowed
  PyObject* cls = reinterpret_cast<PyObject*>(Py_TYPE(self));
  std::optional<bool> mode;
  if (cls == TorchAttr("no_grad").get()) mode = false;
  if (cls == TorchAttr("enable_grad").get()) mode = true;
  const bool set_grad = cls == TorchAttr("set_grad_enabled").get();
  Object exit = Attr(cls, "__exit__");
  Object prev = Attr(self, "prev");
  Object set_mode = set_grad ? Attr(self, "mode") : Object();
  python::ClearError();
  if (set_grad && set_mode && PyBool_Check(set_mode.get())) mode = set_mode.get() == Py_True;
  if (!mode || !exit || PyMethod_Function(o) != exit.get() || !prev || !PyBool_Check(prev.get())) {
    return std::nullopt;
  }
  SourcePtr self_source = Source::Attr(source, "__self__");
  guards_.TypeMatch(self_source, Object::Borrow(self));
  guards_.IdMatch(Source::Attr(source, "__func__"), exit);
  guards_.EqualsMatch(Source::Attr(self_source, "prev"), prev);
  if (set_grad) guards_.EqualsMatch(Source::Attr(self_source, "mode"), set_mode);
  VarPtr ctx = Var::OfKind(VarKind::kGradMode, Object());
  ctx->grad_enabled = *mode;
  VarPtr method = Var::Method(ctx, "__exit__");
  method->grad_enabled = prev.get() == Py_True;  // the mode __exit__ restores
  grad_stack_.push_back(method->grad_enabled);
  return method;
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallDescriptorGet(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                                     const Kwargs& kwargs) {
  // Tensor.shape.__get__(x): a C type's getset or member descriptor's
  // __get__ on an object is reading that attribute of it, where the
  // object's class resolves the name to this very descriptor.
  PyObject* o = fn->object.get();
  if (o == nullptr || !kwargs.empty() || args.empty() || args.size() > 2 ||
      std::string(Py_TYPE(o)->tp_name) != "method-wrapper") {
    return std::nullopt;
  }
  Object name = Attr(o, "__name__");
  Object descriptor = Attr(o, "__self__");
  if (!name || !descriptor || python::AsString(name).value_or("") != "__get__" ||
      (Py_TYPE(descriptor.get()) != &PyGetSetDescr_Type && Py_TYPE(descriptor.get()) != &PyMemberDescr_Type)) {
    python::ClearError();
    return std::nullopt;
  }
  Object cls = ClassOf(args[0]);
  Object attr = Attr(descriptor.get(), "__name__");
  absl::StatusOr<std::string> attr_name = attr ? python::AsString(attr) : absl::StatusOr<std::string>("");
  python::ClearError();
  if (!cls || !PyType_Check(cls.get()) || !attr_name.ok() || attr_name->empty() || args[0]->is_none() ||
      _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls.get()), attr.get()) != descriptor.get()) {
    return std::nullopt;
  }
  return GetAttr(args[0], *attr_name);
}

absl::StatusOr<VarPtr> Translator::Call(const VarPtr& fn, std::vector<VarPtr> args, Kwargs kwargs) {
  if ((fn->kind == VarKind::kFunction || fn->kind == VarKind::kOpaque) && fn->object && !fn->self &&
      args.empty() && IsCompilingQuery(fn->object.get())) {
    return Var::Constant(python::FromBool(true));
  }
  if (fn->kind == VarKind::kGradMode && fn->grad_restore && !fn->value && args.size() == 1 && kwargs.empty() &&
      args[0]->kind == VarKind::kFunction) {
    // @torch.set_grad_enabled(mode): making it set the mode, decorating
    // puts the one before back (as torch's __call__ does); the function
    // runs under `mode`.
    if (absl::Status s = SetGradMode(*fn->grad_restore); !s.ok()) return s;
    return GradModeDecorated(fn->grad_enabled, args[0]);
  }
  if (fn->kind == VarKind::kGradMode && !fn->grad_restore) {
    // @torch.no_grad() (or enable_grad()) applied in the trace: the
    // decorated function runs under that mode, restored after it returns.
    if (fn->value) {
      const bool previous = grad_enabled_;
      if (absl::Status s = SetGradMode(fn->grad_enabled); !s.ok()) return s;
      absl::StatusOr<VarPtr> r = Call(fn->value, std::move(args), std::move(kwargs));
      if (!r.ok()) return r;
      if (absl::Status s = SetGradMode(previous); !s.ok()) return s;
      return r;
    }
    if (args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kFunction) {
      return GradModeDecorated(fn->grad_enabled, args[0]);
    }
  }
  if (std::optional<absl::StatusOr<VarPtr>> r = CallHigherOrder(fn, args, kwargs)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = CallByPolicy(fn, args, kwargs)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = CallAutogradFunction(fn, args, kwargs)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = CallFunctools(fn, args, kwargs)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = CallNumpy(fn, args, kwargs)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = CallWithGenerator(fn, args, kwargs)) return *std::move(r);
  bool any_tensor = false;
  for (const VarPtr& a : args) any_tensor |= ContainsTensor(a);
  for (const auto& kv : kwargs) any_tensor |= ContainsTensor(kv.second);
  switch (fn->kind) {
    case VarKind::kOp:
      if (!any_tensor && (absl::StartsWith(fn->name, "operator.") || absl::StartsWith(fn->name, "math."))) {
        return CallReal(fn, args, kwargs);
      }
      return CallOp(fn->name, ir::Node::CALL_FUNCTION, args, kwargs);
    case VarKind::kBuiltin:
      return CallBuiltin(fn, std::move(args), std::move(kwargs));
    case VarKind::kFunction:
      if (fn->object && PyFunction_Check(fn->object.get())) {
        if (std::optional<std::string> rng = GlobalRngStateFunction(fn->object.get())) {
          return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                       absl::StrCat(*rng, "() reads or sets the global random generator's state"),
                       "it runs in Python between two graphs, as under torch.compile; the random ops on "
                       "either side draw from the same stream as eager");
        }
        if (IsLoadedModuleAttr(fn->object.get(), "torch._dynamo.decorators", "graph_break")) {
          return Break(ir::GraphBreak::UNSUPPORTED_CALL, "torch._dynamo.graph_break() called",
                       "the graph ends here by request, as under torch.compile");
        }
        // Two modules' functions are not inlined; their __module__ (a field
        // of the function, no lookup) keeps this off every other call's path.
        PyObject* module = PyFunction_GetModule(fn->object.get());  // borrowed
        if (module != nullptr && PyUnicode_Check(module) && PyUnicode_CompareWithASCIIString(module, "collections") == 0 &&
            IsLoadedModuleAttr(fn->object.get(), "collections", "namedtuple")) {
          return NewNamedTupleClass(fn, args, kwargs);
        }
        // Nothing is FX-tracing while we translate (the runtime raises or
        // steps aside when something is): asked now, not inlined into the
        // deprecation warning's logging.
        if (module != nullptr && PyUnicode_Check(module) &&
            PyUnicode_CompareWithASCIIString(module, "torch.fx._symbolic_trace") == 0 && args.empty() && kwargs.empty()) {
          for (const char* fx : {"is_fx_tracing", "is_fx_tracing_warning", "is_fx_symbolic_tracing"}) {
            if (IsLoadedModuleAttr(fn->object.get(), "torch.fx._symbolic_trace", fx)) return CallReal(fn, args, kwargs);
          }
        }
        // dynamo.disable(f) asks for f to run in Python; an optimized
        // function called from traced code is traced as its original.
        Object disabled = Attr(fn->object.get(), "_dynamo_disable");
        if (disabled && PyObject_IsTrue(disabled.get()) == 1) {
          return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                       absl::StrCat(python::Repr(fn->object), " is marked dynamo.disable"),
                       "it runs in Python by request; remove dynamo.disable to capture it");
        }
        Object original = Attr(fn->object.get(), "_torchdynamo_orig_callable");
        if (original && PyFunction_Check(original.get())) {
          VarPtr inner = Var::OfKind(VarKind::kFunction, original,
                                     fn->source ? Source::Attr(fn->source, "_torchdynamo_orig_callable") : nullptr);
          inner->self = fn->self;
          return Inline(inner, std::move(args), std::move(kwargs));
        }
        python::ClearError();
      }
      return Inline(fn, std::move(args), std::move(kwargs));
    case VarKind::kMethod:
      return CallMethod(fn, std::move(args), std::move(kwargs));
    case VarKind::kNNModule:
      return CallNNModule(fn, std::move(args), std::move(kwargs));
    case VarKind::kClass: {
      PyObject* cls = fn->object.get();
      Object no_grad = TorchAttr("no_grad"), enable_grad = TorchAttr("enable_grad");
      if (cls == no_grad.get() || cls == enable_grad.get()) {
        // torch.no_grad(f) is torch.no_grad()(f): f decorated.
        VarPtr f = args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kFunction ? args[0] : nullptr;
        return GradModeDecorated(cls == enable_grad.get(), f);
      }
      // torch.set_grad_enabled(mode): sets the mode now (as a call), and as
      // a context manager restores the one before at its exit.
      if (Object set_grad = TorchAttr("set_grad_enabled"); set_grad && cls == set_grad.get() &&
          args.size() == 1 && kwargs.empty() && args[0]->is_constant() && PyBool_Check(args[0]->object.get())) {
        VarPtr ctx = Var::OfKind(VarKind::kGradMode, Object());
        ctx->grad_enabled = args[0]->object.get() == Py_True;
        ctx->grad_restore = grad_enabled_;
        if (absl::Status s = SetGradMode(ctx->grad_enabled); !s.ok()) return s;
        return ctx;
      }
      if (PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls),
                           reinterpret_cast<PyTypeObject*>(PyExc_BaseException))) {
        // A real instance when making it runs no Python code (it may be
        // raised and caught in the trace); the class otherwise, which only
        // a raise can take (a graph break).
        if (std::optional<VarPtr> exc = MakeException(cls, args, kwargs)) return *exc;
        return Var::OfKind(VarKind::kOpaque, fn->object);
      }
      if (std::optional<absl::StatusOr<VarPtr>> r = ConstructContainer(fn, args, kwargs)) return *std::move(r);
      if (std::optional<absl::StatusOr<VarPtr>> r = CallStdlibFunction(fn, args, kwargs)) return *std::move(r);
      if (cls == TorchAttr("Size").get() || cls == TorchAttr("device").get() ||
          cls == reinterpret_cast<PyObject*>(&PySlice_Type)) {
        return CallReal(fn, args, kwargs);
      }
      if (std::optional<absl::StatusOr<VarPtr>> r = ConstructTorchModule(fn, args, kwargs)) return *std::move(r);
      if (std::optional<absl::StatusOr<VarPtr>> r = ConstructLegacyTensor(fn, args, kwargs)) return *std::move(r);
      if (std::optional<absl::StatusOr<VarPtr>> r = ConstructAutocast(fn, args, kwargs)) return *std::move(r);
      if (std::optional<absl::StatusOr<VarPtr>> r = ConstructUserObject(fn, args, kwargs)) return *std::move(r);
      return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                   absl::StrCat("constructing ", python::Repr(fn->object)),
                   "objects are not constructed during the trace; build them outside");
    }
    case VarKind::kOpaque: {
      if (std::optional<absl::StatusOr<VarPtr>> r = CallTupleNew(fn, args, kwargs)) return *std::move(r);
      if (std::optional<absl::StatusOr<VarPtr>> r = CallDescriptorGet(fn, args, kwargs)) return *std::move(r);
      if (std::optional<absl::StatusOr<VarPtr>> r = CallCustomOperator(fn, args, kwargs)) return *std::move(r);
      if (std::optional<absl::StatusOr<VarPtr>> r = CallObjectGetattribute(fn, args, kwargs)) {
        return *std::move(r);
      }
      if (std::optional<absl::StatusOr<VarPtr>> r = CallStdlibFunction(fn, args, kwargs)) return *std::move(r);
      // The __torch_function__ override checks: the tensors we trace are plain
      // torch.Tensors (inputs are described, parameters are real ones), so
      // no override applies.
      for (const char* check : {"_C._has_torch_function", "_C._has_torch_function_unary",
                                "_C._has_torch_function_variadic", "overrides.has_torch_function",
                                "overrides.has_torch_function_unary",
                                "overrides.has_torch_function_variadic"}) {
        if (Object f = TorchAttr(check); f && f.get() == fn->object.get()) {
          return Var::Constant(python::FromBool(false));
        }
      }
      // Grad mode is the trace's own: the mode at entry (guarded as
      // grad_mode) as the traced with-blocks changed it.
      if (Object f = TorchAttr("is_grad_enabled"); f && f.get() == fn->object.get() && args.empty()) {
        return Var::Constant(python::FromBool(grad_enabled_));
      }
      // torch.set_grad_enabled(mode) and no_grad's __exit__ end here: a
      // graph node setting the mode, as a traced with-block's.
      if (Object f = TorchAttr("_C._set_grad_enabled"); f && f.get() == fn->object.get() && args.size() == 1 &&
          kwargs.empty() && args[0]->is_constant() && PyBool_Check(args[0]->object.get())) {
        if (absl::Status s = SetGradMode(args[0]->object.get() == Py_True); !s.ok()) return s;
        return Var::Constant(python::None());
      }
      // Interpreter-wide state that shapes torch's Python code paths: read
      // now, guarded, and constant in the graph.
      for (const char* state : {"is_inference_mode_enabled"}) {
        if (Object f = TorchAttr(state); f && f.get() == fn->object.get() && args.empty()) {
          absl::StatusOr<Object> value = python::Call(f);
          if (!value.ok()) return value.status();
          guards_.GlobalState(state, value->get() == Py_True);
          return Var::Constant(*value);
        }
      }
      // Autocast's state (torch.is_autocast_enabled(), get_autocast_dtype()):
      // the trace's own, as traced autocast blocks set it (autocast.cc).
      if (std::optional<absl::StatusOr<VarPtr>> r = AutocastQuery(fn, args, kwargs)) return *std::move(r);
      // Read at trace time: the default dtype is guarded (default_dtype);
      // the private backend's name changes at most once, when a backend
      // registers at start-up (torch._dynamo folds it too); nothing is
      // FX-tracing while we translate (the runtime steps aside when
      // something is).
      for (const char* fixed : {"get_default_dtype", "_C._get_privateuse1_backend_name",
                                "fx._symbolic_trace.is_fx_tracing", "fx._symbolic_trace.is_fx_tracing_warning"}) {
        if (Object f = TorchAttr(fixed); f && f.get() == fn->object.get() && args.empty() && kwargs.empty()) {
          return CallReal(fn, args, kwargs);
        }
      }
      // The mode stacks' depths, read by torch's Python fast paths (nn.
      // MultiheadAttention's): the function-mode stack is guarded whole
      // (torch_function_modes), the dispatch-mode stack's depth here.
      if (Object f = TorchAttr("_C._len_torch_function_stack"); f && f.get() == fn->object.get() && args.empty()) {
        return CallReal(fn, args, kwargs);
      }
      if (Object f = TorchAttr("_C._len_torch_dispatch_stack"); f && f.get() == fn->object.get() && args.empty()) {
        absl::StatusOr<Object> depth = python::Call(f);
        absl::StatusOr<long long> n = depth.ok() ? python::AsLong(*depth) : depth.status();
        if (!n.ok()) return n.status();
        guards_.GlobalInt("torch_dispatch_modes", *n);
        return Var::Constant(*depth);
      }
      // torch's API-usage telemetry: returns None and touches nothing the
      // graph computes.
      if (Object f = TorchAttr("_C._log_api_usage_once"); f && f.get() == fn->object.get()) {
        return Var::Constant(python::None());
      }
      // Nothing is being JIT-traced or scripted while we translate.
      for (const char* tracing : {"_C._is_tracing", "_C._get_tracing_state"}) {
        if (Object f = TorchAttr(tracing); f && f.get() == fn->object.get()) {
          return Var::Constant(absl::string_view(tracing) == "_C._is_tracing" ? python::FromBool(false)
                                                                              : python::None());
        }
      }
      Object module = Attr(fn->object.get(), "__module__");
      absl::StatusOr<std::string> m = module ? python::AsString(module) : absl::NotFoundError("");
      Object self = Attr(fn->object.get(), "__self__");
      bool constant_method = self && IsImmutableConstant(self.get()) && self.get() != Py_None;
      if (PyCFunction_Check(fn->object.get()) && !any_tensor &&
          ((m.ok() && *m == "math") || constant_method)) {
        return CallReal(fn, args, kwargs);
      }
      // "torch.baddbmm", not "<built-in method baddbmm of type object at 0x...>".
      Object fn_name = Attr(fn->object.get(), "__name__");
      absl::StatusOr<std::string> n = fn_name ? python::AsString(fn_name) : absl::NotFoundError("");
      std::string what = n.ok() ? absl::StrCat(m.ok() ? *m : "", m.ok() ? "." : "", *n)
                                : python::Repr(fn->object);
      if (absl::StartsWith(what, "torch._C._VariableFunctions.")) what = "torch." + what.substr(28);
      if (std::optional<std::string> op = TorchOperatorName(fn->object.get())) {
        guards_.IdMatch(fn->source, fn->object);
        return CallOp(*op, ir::Node::CALL_FUNCTION, args, kwargs);
      }
      if (std::optional<absl::StatusOr<VarPtr>> r = SourcedQuery(fn, args, kwargs)) return *std::move(r);
      if (m.ok() && (*m == "torch" || absl::StartsWith(*m, "torch."))) {
        return Break(ir::GraphBreak::UNKNOWN_OP, absl::StrCat(what, " has no entry in the op registry"),
                     "the translator never guesses an op's output; this op needs a registry entry");
      }
      if (m.ok() && (absl::StartsWith(*m, "numpy") || absl::StartsWith(*m, "scipy"))) {
        return Break(ir::GraphBreak::EXTERNAL_LIBRARY, absl::StrCat("calling ", what),
                     "numpy and scipy run outside the graph; keep the computation in torch");
      }
      return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("calling ", what),
                   "the call runs code the translator cannot see into");
    }
    default:
      return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("calling ", Describe(*fn)),
                   "this value is not callable during tracing");
  }
}


Object Translator::ClassOf(const VarPtr& v) {
  auto type_of = [](PyObject* o) { return Object::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))); };
  auto builtin = [](PyTypeObject* t) { return Object::Borrow(reinterpret_cast<PyObject*>(t)); };
  switch (v->kind) {
    case VarKind::kTensor:
      if (v->is_ndarray) {
        PyObject* np = PyDict_GetItemString(PyImport_GetModuleDict(), "numpy");  // borrowed
        if (np != nullptr && v->numpy_scalar) {  // np.float64 and the like
          Object dtype = Object::Steal(
              PyObject_CallMethod(np, "dtype", "s", std::string(ops::DTypeName(v->meta.dtype)).c_str()));
          if (!dtype) python::ClearError();
          return dtype ? Attr(dtype.get(), "type") : Object();
        }
        return np ? Attr(np, "ndarray") : Object();
      }
      return v->tensor_type ? v->tensor_type : TorchAttr("Tensor");
    case VarKind::kTuple:
      if (v->object) return type_of(v->object.get());
      if (v->is_size) return TorchAttr("Size");
      if (v->user_class) return v->user_class->object;
      return v->fields.empty() ? builtin(&PyTuple_Type) : Object();  // torch.return_types.*: not modelled
    case VarKind::kList:
      if (v->object) return type_of(v->object.get());
      return v->container_class ? v->container_class : builtin(&PyList_Type);
    case VarKind::kDict:
      if (v->object) return type_of(v->object.get());
      return v->container_class ? v->container_class : builtin(&PyDict_Type);
    case VarKind::kSlice:
      return builtin(&PySlice_Type);
    case VarKind::kSymInt:
      return builtin(&PyLong_Type);
    case VarKind::kScalar:
      return builtin(v->name == "float" ? &PyFloat_Type : v->name == "bool" ? &PyBool_Type : &PyLong_Type);
    case VarKind::kRange:
      return builtin(&PyRange_Type);
    case VarKind::kSet:
      return builtin(v->name == "frozenset" ? &PyFrozenSet_Type : &PySet_Type);
    case VarKind::kPartial:
      if (v->object) return type_of(v->object.get());
      return Object::Borrow(StdlibObject("functools", "partial"));
    case VarKind::kDictView: {
      Object d = Object::Steal(PyDict_New());
      Object view = Object::Steal(PyObject_CallMethod(d.get(), v->name.c_str(), nullptr));
      if (!view) python::ClearError();
      return view ? type_of(view.get()) : Object();
    }
    case VarKind::kFunction:
      if (v->self) return builtin(&PyMethod_Type);
      return builtin(&PyFunction_Type);
    case VarKind::kConstant:
    case VarKind::kDType:
    case VarKind::kDevice:
    case VarKind::kModule:
    case VarKind::kNNModule:
    case VarKind::kClass:
    case VarKind::kOp:
    case VarKind::kBuiltin:
    case VarKind::kOpaque:
    case VarKind::kUserObject:
      return v->object ? type_of(v->object.get()) : Object();
    case VarKind::kGenerator:
      return GeneratorClass(*v);
    default:
      return Object();  // iterators, methods of trackers, cells: not modelled
  }
}

absl::StatusOr<bool> Translator::TensorIsInstance(const VarPtr& t, const Object& cls) {
  if (t->is_ndarray) {  // a numpy.ndarray: its class answers
    Object ndarray = ClassOf(t);
    int r = ndarray ? PyObject_IsSubclass(ndarray.get(), cls.get()) : 0;
    if (r < 0) return python::FetchError("isinstance");
    return r == 1;
  }
  if (PyTuple_Check(cls.get())) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cls.get()); ++i) {
      absl::StatusOr<bool> r = TensorIsInstance(t, Object::Borrow(PyTuple_GET_ITEM(cls.get(), i)));
      if (!r.ok() || *r) return r;
    }
    return false;
  }
  // torch's legacy types (torch.FloatTensor, torch.cuda.LongTensor) answer
  // isinstance by the tensor's dtype and backend, not by subclassing: a
  // dense tensor of their dtype on the CPU (is_cuda false) or a CUDA device.
  Object legacy = TorchAttr("FloatTensor");
  if (legacy && Py_TYPE(cls.get()) == Py_TYPE(legacy.get())) {
    Object dtype = Object::Steal(PyObject_Str(Attr(cls.get(), "dtype").get()));
    absl::StatusOr<std::string> dtype_name = dtype ? python::AsString(dtype) : absl::UnknownError("dtype");
    if (!dtype_name.ok()) {
      python::ClearError();
      return Break(ir::GraphBreak::OTHER, absl::StrCat("isinstance() with ", python::Repr(cls)), "");
    }
    std::optional<ops::DType> d = ops::DTypeFromName(*dtype_name);
    const bool sparse = Attr(cls.get(), "is_sparse").get() == Py_True;
    const bool cuda = Attr(cls.get(), "is_cuda").get() == Py_True;
    return d && *d == t->meta.dtype && !sparse && t->meta.device.type == (cuda ? "cuda" : "cpu");
  }
  int r = PyObject_IsSubclass(ClassOf(t).get(), cls.get());
  if (r < 0) return python::FetchError("isinstance");
  return r == 1;
}

std::optional<absl::StatusOr<VarPtr>> Translator::SourcedQuery(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                                const Kwargs& kwargs) {
  // A query that reads its object's state and changes nothing: answered
  // now, its answer reached through a call source that the guards call
  // again (a subclass defined later, a storage resized, recompiles).
  if (!args.empty() || !kwargs.empty() || !PyCFunction_Check(fn->object.get()) || !fn->source ||
      fn->source->kind() != Source::Kind::kAttr) {
    return std::nullopt;
  }
  // The name first (every C call the trace makes passes here): the C
  // function's own, which the guards call again by the source's name.
  const std::string& name = fn->source->name();
  if (name != "__subclasses__" && name != "size" && name != "nbytes") return std::nullopt;
  if (name != reinterpret_cast<PyCFunctionObject*>(fn->object.get())->m_ml->ml_name) return std::nullopt;
  PyObject* self = PyCFunction_GET_SELF(fn->object.get());
  bool query = false;
  if (self != nullptr && PyType_Check(self)) {
    query = name == "__subclasses__";
  } else if (Object storage_type = TorchAttr("UntypedStorage"); self != nullptr && storage_type &&
             Py_TYPE(self) == reinterpret_cast<PyTypeObject*>(storage_type.get())) {
    query = name == "size" || name == "nbytes";
  }
  if (!query) return std::nullopt;
  Object answer = Object::Steal(PyObject_CallNoArgs(fn->object.get()));
  if (!answer) return absl::StatusOr<VarPtr>(python::FetchError(name));
  return Wrap(answer, Source::Call(fn->source->base(), name));
}

absl::StatusOr<VarPtr> Translator::NewNamedTupleClass(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                      const Kwargs& kwargs) {
  // collections.namedtuple(name, fields, ...) of constants makes a class now,
  // as each eager call makes one (its source is exec'd Python, not traced);
  // instances of it are then traced as any named tuple's. The class's
  // __module__ is the calling frame's module, which namedtuple would read
  // from sys._getframe(1) -- here the translator's caller.
  Kwargs kw = kwargs;
  if (absl::c_none_of(kw, [](const auto& k) { return k.first == "module"; })) {
    PyObject* name = PyDict_GetItemString(frames_.back()->globals.get(), "__name__");  // borrowed
    if (name != nullptr) kw.emplace_back("module", Var::Constant(Object::Borrow(name)));
  }
  return CallReal(fn, args, kw);
}

std::optional<absl::StatusOr<VarPtr>> Translator::ConstructLegacyTensor(const VarPtr& cls,
                                                                         const std::vector<VarPtr>& args,
                                                                         const Kwargs& kwargs) {
  Object legacy = TorchAttr("FloatTensor");
  if (!legacy || Py_TYPE(cls->object.get()) != Py_TYPE(legacy.get())) return std::nullopt;
  // torch.LongTensor(data) is torch.tensor(data) and torch.LongTensor(2, 3)
  // torch.empty(2, 3), of the class's dtype on its device type; a tensor or
  // storage argument (which the legacy constructor may share) breaks.
  auto unsupported = [&] {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("constructing ", python::Repr(cls->object)),
                 "only data (a list or tuple) or sizes (ints) are traced; torch.tensor(data, dtype=...) is");
  };
  if (!kwargs.empty() || Attr(cls->object.get(), "is_sparse").get() != Py_False) return unsupported();
  absl::StatusOr<VarPtr> dtype = Wrap(Attr(cls->object.get(), "dtype"), nullptr);
  if (!dtype.ok() || (*dtype)->kind != VarKind::kDType) {
    python::ClearError();
    return unsupported();
  }
  const bool cuda = Attr(cls->object.get(), "is_cuda").get() == Py_True;
  Kwargs kw = {{"dtype", *dtype}, {"device", Var::Constant(python::FromString(cuda ? "cuda" : "cpu"))}};
  if (args.size() == 1 && args[0]->is_constant() && PyTuple_Check(args[0]->object.get())) {  // (1.5, 2) as a literal
    return CallOp("torch.tensor", ir::Node::CALL_FUNCTION, args, kw);
  }
  if (args.size() == 1 && (args[0]->kind == VarKind::kList || (args[0]->kind == VarKind::kTuple && !args[0]->is_size))) {
    // NumPy scalars in the data (a[0] of an array) are the numbers they hold.
    std::vector<VarPtr> items;
    for (const VarPtr& item : args[0]->items) {
      if (!item->is_tensor() || !item->is_ndarray || !item->numpy_scalar) {
        items.push_back(item);
        continue;
      }
      auto number = std::make_shared<Var>(*item);
      number->is_ndarray = false;
      number->numpy_scalar = false;
      items.push_back(number);
    }
    // Zero-dimensional tensors (those NumPy scalars) are their values:
    // stacked when the graph runs, as torch.tensor reads them eagerly.
    const bool all_scalars = !items.empty() && absl::c_all_of(items, [](const VarPtr& i) {
      return i->is_tensor() && !i->is_ndarray && i->meta.dim() == 0;
    });
    if (all_scalars) {
      absl::StatusOr<VarPtr> stacked = CallOp("torch.stack", ir::Node::CALL_FUNCTION, {Var::List(std::move(items))}, {});
      if (!stacked.ok()) return stacked;
      return CallOp("Tensor.to", ir::Node::CALL_METHOD, {*stacked}, kw);
    }
    return CallOp("torch.tensor", ir::Node::CALL_FUNCTION, {Var::List(std::move(items))}, kw);
  }
  for (const VarPtr& a : args) {
    if (!AsInt(a).ok() && !(a->kind == VarKind::kTuple && a->is_size)) return unsupported();
  }
  return CallOp("torch.empty", ir::Node::CALL_FUNCTION, args, kw);
}

absl::StatusOr<bool> Translator::HasAttr(const VarPtr& v, const std::string& name) {
  Object owner;  // what hasattr is asked of
  bool instance = false;
  if (MadeInTrace(v)) {
    if (name == "__dict__") return true;
    for (const VarPtr& key : v->keys) {
      if (python::AsString(key->object).value_or("") == name) return true;
    }
    if (v->instance_dict) {
      absl::StatusOr<std::optional<size_t>> at =
          FindDictKey(v->instance_dict->keys, Var::Constant(python::FromString(name)));
      if (!at.ok()) return at.status();
      if (*at) return true;
    }
    owner = FunctionStandIn(v);  // a real function of its code: asked as the instance
    instance = true;
  } else if (v->object && !v->is_tensor()) {
    owner = v->object;
    instance = true;
  } else {
    owner = ClassOf(v);  // a tensor or a container made by the trace: its class's attributes
  }
  if (!owner) return Break(ir::GraphBreak::OTHER, absl::StrCat("hasattr() of ", Describe(*v)), "");
  if (!instance) {
    // A tracker's attributes are its class's, looked up along the MRO as
    // the instance would (not the class object's own, which adds the
    // metaclass's __name__, __qualname__, ...).
    if (!PyType_Check(owner.get())) return Break(ir::GraphBreak::OTHER, absl::StrCat("hasattr() of ", Describe(*v)), "");
    if (_PyType_Lookup(reinterpret_cast<PyTypeObject*>(owner.get()), python::FromString(name).get()) != nullptr) {
      return true;
    }
    // Besides, a real tensor may carry attributes of its own (x.foo = 1):
    // the input's presence is read and guarded. Trackers the trace made
    // (a partial, a container, a new tensor) start with no instance dict.
    PyObject* real = v->is_tensor() ? RealTensor(v) : nullptr;
    if (real == nullptr) return false;
    Object a = Object::Steal(PyObject_GetAttrString(real, name.c_str()));
    if (!a) python::ClearError();
    if (!v->source) {
      if (!a) return false;
      return Break(ir::GraphBreak::OTHER, absl::StrCat("hasattr() of the attribute '", name, "' a tensor carries"),
                   "read it from the tensor as it came in");
    }
    guards_.HasAttr(v->source, name, static_cast<bool>(a));
    return static_cast<bool>(a);
  }
  if (attr_overlay_.contains(std::make_pair(v->object.get(), name))) return true;
  Object a = Object::Steal(PyObject_GetAttrString(owner.get(), name.c_str()));
  if (!a) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
      absl::Status error = python::FetchError("");
      return Break(ir::GraphBreak::OTHER, absl::StrCat("hasattr(", Describe(*v), ", '", name, "') raises ",
                                                       error.message()), "");
    }
    python::ClearError();
  }
  // Presence is a fact read from the input: guarded like its value would be.
  if (v->source) guards_.HasAttr(v->source, name, static_cast<bool>(a));
  return static_cast<bool>(a);
}

PyObject* Translator::RealTensor(const VarPtr& t) {
  for (const auto& [object, node] : attribute_nodes_) {
    if (node == t->tensor_identity()) return object;
  }
  return nullptr;
}

Object Translator::FunctionStandIn(const VarPtr& fn) {
  // A function made during the trace is a code object and its globals: a
  // real function of those answers __name__, __qualname__, __module__, __doc__.
  Object f = Object::Steal(PyFunction_New(fn->object.get(), fn->globals ? fn->globals.get() : top_globals_.get()));
  if (!f) python::ClearError();
  return f;
}

absl::StatusOr<VarPtr> Translator::CallBuiltin(const VarPtr& fn, std::vector<VarPtr> args,
                                               Kwargs kwargs) {
  const std::string& name = fn->name;
  if (std::optional<absl::StatusOr<VarPtr>> r = UserObjectBuiltin(name, args, kwargs)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = CallBuiltinKind(fn, args, kwargs)) return *std::move(r);
  auto arity = [&](size_t lo, size_t hi) -> absl::Status {
    if (args.size() < lo || args.size() > hi) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat(name, "() with ", args.size(), " arguments"),
                   "the call would raise TypeError");
    }
    return absl::OkStatus();
  };
  auto constant = [](Object o) { return Var::Constant(std::move(o)); };

  if (name == "print") {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, "print() is not traced",
                 "print runs in Python: a graph break here (or move the print outside)");
  }
  if (name == "len") {
    if (absl::Status s = arity(1, 1); !s.ok()) return s;
    const VarPtr& v = args[0];
    if (v->is_sequence() || v->kind == VarKind::kDict || v->kind == VarKind::kDictView || v->kind == VarKind::kSet) {
      const VarPtr& c = v->kind == VarKind::kDictView ? v->self : v;
      guards_.LengthMatch(c->source, static_cast<int64_t>(c->items.size()));
      return constant(python::FromLong(static_cast<long long>(c->items.size())));
    }
    if (v->is_tensor()) {
      if (v->meta.sizes.empty()) {
        return Break(ir::GraphBreak::OTHER, "len() of a 0-d tensor", "the call would raise TypeError");
      }
      if (!v->sym_sizes.empty()) return SizeOf(v, 0);
      return constant(python::FromLong(v->meta.sizes[0]));
    }
    if (v->kind == VarKind::kIterator || v->kind == VarKind::kGenerator) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("len() of ", Describe(*v)),
                   "iterators have no len(): the call would raise TypeError");
    }
    if (v->kind == VarKind::kRange) {
      absl::StatusOr<std::vector<VarPtr>> items = Materialize(v);
      if (!items.ok()) return items.status();
      return constant(python::FromLong(static_cast<long long>(items->size())));
    }
    if (v->object) {
      Py_ssize_t n = PyObject_Length(v->object.get());
      if (n < 0) return python::FetchError("len");
      guards_.LengthMatch(v->source, n);
      return constant(python::FromLong(n));
    }
  }
  if (name == "isinstance" || name == "issubclass") {
    if (absl::Status s = arity(2, 2); !s.ok()) return s;
    absl::StatusOr<Object> cls = ToPython(args[1]);
    if (!cls.ok()) return Break(ir::GraphBreak::OTHER, "isinstance() with a non-class", "");
    const VarPtr& v = args[0];
    if (name == "isinstance" && v->is_tensor()) {
      absl::StatusOr<bool> r = TensorIsInstance(v, *cls);
      if (!r.ok()) return r.status();
      return constant(python::FromBool(*r));
    }
    // Everything else is asked of its real class, as CPython would: a
    // container read from the frame is its object's class (a named tuple,
    // an OrderedDict), one made by the trace is the builtin.
    Object subject = name == "issubclass" ? v->object : ClassOf(v);
    if (!subject) return Break(ir::GraphBreak::OTHER, absl::StrCat(name, "() of ", Describe(*v)), "");
    if (name == "isinstance" && v->object && v->source) guards_.TypeMatch(v->source, v->object);
    int r = name == "isinstance" && v->object ? PyObject_IsInstance(v->object.get(), cls->get())
                                              : PyObject_IsSubclass(subject.get(), cls->get());
    if (r < 0) return python::FetchError(name);
    return constant(python::FromBool(r == 1));
  }
  if (name == "range") {
    if (absl::Status s = arity(1, 3); !s.ok()) return s;
    std::vector<int64_t> n;
    for (const VarPtr& a : args) {
      absl::StatusOr<int64_t> i = AsInt(a);
      if (!i.ok()) {
        return Break(ir::GraphBreak::OTHER, absl::StrCat("range() of ", Describe(*a)),
                     "range bounds must be Python ints known at trace time");
      }
      n.push_back(*i);
    }
    VarPtr r = Var::OfKind(VarKind::kRange, Object());
    r->start = n.size() > 1 ? n[0] : 0;
    r->stop = n.size() > 1 ? n[1] : n[0];
    r->step = n.size() > 2 ? n[2] : 1;
    if (r->step == 0) return Break(ir::GraphBreak::OTHER, "range() step is zero", "");
    return r;
  }
  if (name == "enumerate" || name == "zip" || name == "reversed" || name == "list" ||
      name == "tuple" || name == "iter" || name == "sorted" || name == "any" || name == "all" ||
      name == "sum" || name == "map" || name == "filter") {
    if (std::optional<absl::StatusOr<VarPtr>> lazy = LazyOverList(name, args, kwargs)) return *std::move(lazy);
    if (name == "iter" && args.size() == 1 && kwargs.empty()) return GetIter(args[0]);
    if (name == "map" || name == "filter") {
      if (args.size() < 2) return arity(2, 99);
      std::vector<std::vector<VarPtr>> columns;
      for (size_t i = 1; i < args.size(); ++i) {
        absl::StatusOr<std::vector<VarPtr>> items = Materialize(args[i]);
        if (!items.ok()) return items.status();
        columns.push_back(*items);
      }
      std::vector<VarPtr> out;
      for (size_t row = 0; row < columns[0].size(); ++row) {
        std::vector<VarPtr> call_args;
        for (const auto& c : columns) {
          if (row >= c.size()) goto done;
          call_args.push_back(c[row]);
        }
        {
          if (name == "filter" && args[0]->is_none()) {
            absl::StatusOr<bool> t = Truthy(call_args[0]);
            if (!t.ok()) return t.status();
            if (*t) out.push_back(call_args[0]);
            continue;
          }
          absl::StatusOr<VarPtr> r = Call(args[0], call_args, {});
          if (!r.ok()) return r.status();
          if (name == "map") {
            out.push_back(*r);
          } else {
            absl::StatusOr<bool> t = Truthy(*r);
            if (!t.ok()) return t.status();
            if (*t) out.push_back(call_args[0]);
          }
        }
      }
    done:
      return Var::Iterator(std::move(out));
    }
    if (args.empty()) {
      if (name == "list") return Var::List({});
      if (name == "tuple") return Var::Tuple({});
    }
    absl::StatusOr<std::vector<VarPtr>> first = Materialize(args[0]);
    if (!first.ok()) return first.status();
    if (name == "list") return Var::List(*first);
    if (name == "tuple") return Var::Tuple(*first);
    if (name == "iter") return Var::Iterator(*first);
    if (name == "reversed") return Var::Iterator(std::vector<VarPtr>(first->rbegin(), first->rend()));
    if (name == "enumerate") {
      int64_t start = 0;
      if (args.size() > 1) start = AsInt(args[1]).value_or(0);
      for (const auto& [k, v] : kwargs) {
        if (k == "start") start = AsInt(v).value_or(0);
      }
      std::vector<VarPtr> out;
      for (size_t i = 0; i < first->size(); ++i) {
        out.push_back(Var::Tuple({constant(python::FromLong(start + static_cast<int64_t>(i))), (*first)[i]}));
      }
      return Var::Iterator(std::move(out));
    }
    if (name == "zip") {
      std::vector<std::vector<VarPtr>> columns = {*first};
      for (size_t i = 1; i < args.size(); ++i) {
        absl::StatusOr<std::vector<VarPtr>> items = Materialize(args[i]);
        if (!items.ok()) return items.status();
        columns.push_back(*items);
      }
      size_t n = first->size();
      for (const auto& c : columns) n = std::min(n, c.size());
      std::vector<VarPtr> out;
      for (size_t row = 0; row < n; ++row) {
        std::vector<VarPtr> t;
        for (const auto& c : columns) t.push_back(c[row]);
        out.push_back(Var::Tuple(std::move(t)));
      }
      return Var::Iterator(std::move(out));
    }
    if (name == "any" || name == "all") {
      for (const VarPtr& item : *first) {
        absl::StatusOr<bool> t = Truthy(item);
        if (!t.ok()) return t.status();
        if (*t == (name == "any")) return constant(python::FromBool(name == "any"));
      }
      return constant(python::FromBool(name == "all"));
    }
    if (name == "sum") {
      VarPtr total = args.size() > 1 ? args[1] : constant(python::FromLong(0));
      for (const auto& [k, v] : kwargs) {
        if (k == "start") total = v;
      }
      const int add = BinaryOpIndex("NB_ADD");
      for (const VarPtr& item : *first) {
        absl::StatusOr<VarPtr> next = BinaryOp(add, total, item);
        if (!next.ok()) return next.status();
        total = *next;
      }
      return total;
    }
    // sorted: constants only
    args = {Var::List(*first)};
  }
  if (name == "set" || name == "frozenset") {
    if (absl::Status s = arity(0, 1); !s.ok()) return s;
    std::vector<VarPtr> items;
    if (!args.empty()) {
      absl::StatusOr<std::vector<VarPtr>> all = Materialize(args[0]);
      if (!all.ok()) return all.status();
      items = *std::move(all);
    }
    return BuildSet(items, name == "frozenset");
  }
  if (name == "next") {
    if (absl::Status s = arity(1, 2); !s.ok()) return s;
    const VarPtr& it = args[0];
    if (it->kind != VarKind::kIterator && it->kind != VarKind::kGenerator) {
      return Break(ir::GraphBreak::OTHER, "next() of a non-iterator", "the call would raise TypeError");
    }
    absl::StatusOr<std::optional<VarPtr>> next = NextValue(it);
    if (!next.ok()) return next.status();
    if (*next) return **next;
    if (args.size() == 2) return args[1];
    return RaiseNew(PyExc_StopIteration, "");
  }
  if (name == "setattr") {
    // setattr(o, "name", v) is o.name = v.
    if (absl::Status s = arity(3, 3); !s.ok()) return s;
    absl::StatusOr<Object> attr = ToPython(args[1]);
    if (!attr.ok() || !PyUnicode_Check(attr->get())) {
      return Break(ir::GraphBreak::OTHER, "setattr() with a name that is no constant str", "");
    }
    if (absl::Status s = StoreAttr(args[0], *python::AsString(*attr), args[2]); !s.ok()) return s;
    return constant(python::None());
  }
  if (name == "getattr" || name == "hasattr") {
    if (absl::Status s = arity(2, name == "hasattr" ? 2 : 3); !s.ok()) return s;
    absl::StatusOr<Object> attr = ToPython(args[1]);
    absl::StatusOr<std::string> attr_name = attr.ok() ? python::AsString(*attr) : attr.status();
    if (!attr_name.ok()) return Break(ir::GraphBreak::OTHER, "getattr() with a non-constant name", "");
    if (args[0]->kind == VarKind::kUserObject || IsUserDict(args[0])) {
      // An object the trace made: the read itself (a property's getter
      // inlined), AttributeError meaning absent, as Python's getattr does.
      absl::StatusOr<VarPtr> v = GetAttr(args[0], *attr_name);
      if (v.ok()) return name == "hasattr" ? constant(python::FromBool(true)) : *v;
      if ((name == "hasattr" || args.size() == 3) && CatchRaised(v.status(), PyExc_AttributeError)) {
        return name == "hasattr" ? constant(python::FromBool(false)) : args[2];
      }
      return v.status();
    }
    absl::StatusOr<bool> exists = HasAttr(args[0], *attr_name);
    if (!exists.ok()) return exists.status();
    if (name == "hasattr") return constant(python::FromBool(*exists));
    if (!*exists && args.size() == 3) return args[2];
    return GetAttr(args[0], *attr_name);
  }
  if (name == "super") {
    const Frame& f = *frames_.back();
    VarPtr cls, self = f.locals.empty() ? nullptr : f.locals[0];
    for (size_t i = 0; i < f.code->localsplus.size(); ++i) {
      if (f.code->localsplus[i] == "__class__" && f.locals[i] && f.locals[i]->kind == VarKind::kCell) {
        cls = f.locals[i]->value;
      }
    }
    if (args.size() == 2) {
      cls = args[0];
      self = args[1];
    }
    if (!cls || !self || !self->object || !cls->object) {
      return Break(ir::GraphBreak::OTHER, "super() outside a method of a traced object", "");
    }
    absl::StatusOr<Object> s = python::Call(
        Object::Borrow(reinterpret_cast<PyObject*>(&PySuper_Type)), {cls->object, self->object});
    if (!s.ok()) return s.status();
    VarPtr sup = Var::OfKind(VarKind::kOpaque, *s);
    sup->self = self;
    return sup;
  }
  if ((name == "abs") && args.size() == 1 && args[0]->is_ndarray) return NdarrayOperator("abs", args);
  if ((name == "abs") && args.size() == 1 && args[0]->is_tensor()) {
    return CallOp("operator.abs", ir::Node::CALL_FUNCTION, args, {});
  }
  if (name == "type" && args.size() == 1) {
    Object cls = ClassOf(args[0]);
    if (cls) {
      if (args[0]->object && args[0]->source && !args[0]->is_tensor()) {
        guards_.TypeMatch(args[0]->source, args[0]->object);
      }
      return Wrap(cls, nullptr);
    }
  }
  if (name == "callable" && args.size() == 1) {
    Object cls = ClassOf(args[0]);
    if (cls) {
      if (args[0]->object && args[0]->source && !args[0]->is_tensor()) {
        guards_.TypeMatch(args[0]->source, args[0]->object);
      }
      // callable(x) is whether type(x) has a call slot.
      return constant(python::FromBool(reinterpret_cast<PyTypeObject*>(cls.get())->tp_call != nullptr));
    }
  }
  if ((name == "int" || name == "float") && args.size() == 1 && kwargs.empty()) {
    if (std::optional<absl::StatusOr<VarPtr>> r = ScalarConversion(name, args[0])) return *std::move(r);
  }
  if (name == "abs" && args.size() == 1 && kwargs.empty()) {
    if (std::optional<absl::StatusOr<VarPtr>> r = ScalarUnary("abs", args[0])) return *std::move(r);
  }
  if ((name == "int" || name == "float" || name == "bool" || name == "str") && args.size() == 1 &&
      args[0]->is_tensor()) {
    return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH,
                 absl::StrCat(name, "() of a tensor reads its value"),
                 "keep the value a tensor, or use shapes (x.shape, x.size()) which are known");
  }
  if (name == "bool" && args.size() == 1) {
    absl::StatusOr<bool> t = Truthy(args[0]);
    if (!t.ok()) return t.status();
    return constant(python::FromBool(*t));
  }
  // A constant argument (a string raises, as dict() would) runs for real.
  if (name == "dict" && !(args.size() == 1 && args[0]->is_constant())) return BuildDict(args, kwargs);
  if (AllConstant(args, kwargs)) return CallReal(fn, args, kwargs);
  return Break(ir::GraphBreak::UNSUPPORTED_CALL,
               absl::StrCat(name, "() on ", args.empty() ? "no arguments" : Describe(*args[0])),
               "only Python constants, containers and tensor metadata are handled by builtins");
}

absl::StatusOr<VarPtr> Translator::CallMethod(const VarPtr& method, std::vector<VarPtr> args,
                                              Kwargs kwargs) {
  const VarPtr& self = method->self;
  const std::string& name = method->name;
  auto constant = [](Object o) { return Var::Constant(std::move(o)); };
  if (IsUserDict(self)) return CallUserDictMethod(self, name, std::move(args), std::move(kwargs));
  if (IsDeque(self)) return CallDequeMethod(self, name, args, kwargs);
  if (self->is_tensor() && self->is_ndarray) return CallNdarrayMethod(self, name, args, kwargs);
  if (self->is_tensor()) {
    const ops::TensorMeta& m = self->meta;
    auto dim_arg = [&]() -> absl::StatusOr<std::optional<int64_t>> {
      VarPtr d = !args.empty() ? args[0] : nullptr;
      for (const auto& [k, v] : kwargs) {
        if (k == "dim") d = v;
      }
      if (!d || d->is_none()) return std::optional<int64_t>();
      absl::StatusOr<int64_t> i = AsInt(d);
      if (!i.ok()) return i.status();
      int64_t n = m.dim();
      int64_t k = *i < 0 ? *i + n : *i;
      if (k < 0 || k >= std::max<int64_t>(n, 1)) {
        return Break(ir::GraphBreak::OTHER, absl::StrCat("dimension ", *i, " out of range"),
                     "the call would raise IndexError");
      }
      return std::optional<int64_t>(k);
    };
    if (!self->sym_sizes.empty() && !self->is_ndarray && (name == "size" || name == "numel" || name == "nelement")) {
      std::vector<VarPtr> with_self = args;
      with_self.insert(with_self.begin(), self);
      if (std::optional<absl::StatusOr<VarPtr>> r = SymbolicSizeCall(absl::StrCat("Tensor.", name), with_self, kwargs)) {
        return *std::move(r);
      }
    }
    if (name == "size" || name == "stride") {
      SpecializeShape(self);  // answered from the sizes seen: guard them
      absl::StatusOr<std::optional<int64_t>> d = dim_arg();
      if (!d.ok()) return d.status();
      const std::vector<int64_t>& values = name == "size" ? m.sizes : m.strides;
      if (name == "stride" && !m.has_strides()) {
        return Break(ir::GraphBreak::OTHER, "stride() of a tensor whose layout is not tracked",
                     "use .contiguous() before reading strides");
      }
      if (*d) return constant(python::FromLong(m.sizes.empty() ? 1 : values[static_cast<size_t>(**d)]));
      std::vector<VarPtr> items;
      for (int64_t v : values) items.push_back(constant(python::FromLong(v)));
      VarPtr t = Var::Tuple(std::move(items));
      t->is_size = name == "size";
      return t;
    }
    if (name == "dim" || name == "ndimension") return constant(python::FromLong(m.dim()));
    if (name == "numel" || name == "nelement") return constant(python::FromLong(m.numel()));
    if (name == "is_floating_point") return constant(python::FromBool(ops::IsFloating(m.dtype)));
    if (name == "is_complex") return constant(python::FromBool(ops::IsComplex(m.dtype)));
    if (name == "is_contiguous" && m.has_strides()) {
      VarPtr format = args.empty() ? nullptr : args[0];
      for (const auto& [k, v] : kwargs) {
        if (k == "memory_format") format = v;
      }
      if (!format || (format->object && format->object.get() == TorchAttr("contiguous_format").get())) {
        return constant(python::FromBool(ops::IsContiguous(m)));
      }
      // Channels-last contiguity: strides grow over C, then W, H(, D), N,
      // dimensions of size 1 being free (torch's definition); only for the
      // rank each format is defined for.
      const bool cl2 = format->object && format->object.get() == TorchAttr("channels_last").get();
      const bool cl3 = format->object && format->object.get() == TorchAttr("channels_last_3d").get();
      if (!cl2 && !cl3) {
        return Break(ir::GraphBreak::OTHER, absl::StrCat("is_contiguous(memory_format=", Describe(*format), ")"),
                     "only contiguous_format, channels_last and channels_last_3d are traced");
      }
      std::vector<size_t> order = cl2 ? std::vector<size_t>{1, 3, 2, 0} : std::vector<size_t>{1, 4, 3, 2, 0};
      if (m.dim() != static_cast<int64_t>(order.size())) return constant(python::FromBool(false));
      int64_t expected = 1;
      bool contiguous = true;
      for (size_t d : order) {
        if (m.sizes[d] == 1) continue;
        if (m.strides[d] != expected) contiguous = false;
        expected *= m.sizes[d];
      }
      if (m.numel() == 0) contiguous = true;
      return constant(python::FromBool(contiguous));
    }
    if (name == "get_device") return constant(python::FromLong(m.device.type == "cpu" ? -1 : m.device.index));
    if (name == "__len__" && args.empty() && kwargs.empty()) {  // x.__len__() is len(x)
      VarPtr len = Var::OfKind(VarKind::kBuiltin, Object::Borrow(PyDict_GetItemString(PyEval_GetBuiltins(), "len")));
      len->name = "len";
      return CallBuiltin(len, {self}, {});
    }
    if (name == "numpy") return TensorToNdarray(self, args, kwargs);
    if (name == "untyped_storage" && args.empty() && kwargs.empty() && self->source) {
      // An input's storage (its size is a query the guards ask again).
      if (PyObject* real = RealTensor(self)) {
        Object storage = Object::Steal(PyObject_CallMethod(real, "untyped_storage", nullptr));
        if (!storage) return python::FetchError("Tensor.untyped_storage()");
        return Wrap(storage, Source::Call(self->source, "untyped_storage"));
      }
    }
    if (capture_scalars_ && (name == "item" || name == "tolist") && args.empty() && kwargs.empty()) {
      return name == "item" ? TensorItem(self, name) : TensorToList(self);
    }
    if (name == "item" || name == "tolist" || name == "__bool__") {
      return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH,
                   absl::StrCat("Tensor.", name, "() reads the tensor's values"),
                   "keep the computation in tensors; values are not known while tracing");
    }
    if (std::optional<absl::StatusOr<VarPtr>> r = CallLegacyTensorMethod(self, name, args, kwargs)) {
      return *std::move(r);
    }
    args.insert(args.begin(), self);
    return CallOp(absl::StrCat("Tensor.", name), ir::Node::CALL_METHOD, args, kwargs);
  }
  if (self->kind == VarKind::kAutocast) {
    if (name != "__exit__") {
      return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("calling ", name, " of ", Describe(*self)),
                   "a torch.autocast object is entered and left by a with statement");
    }
    if (absl::Status s = ExitAutocast(); !s.ok()) return s;
    return constant(python::None());
  }
  if (self->kind == VarKind::kGradMode) {
    if (name == "__exit__") {
      if (grad_stack_.empty()) return absl::InternalError("__exit__ without __enter__");
      bool previous = grad_stack_.back();
      grad_stack_.pop_back();
      if (absl::Status s = SetGradMode(previous); !s.ok()) return s;
    }
    return constant(python::None());
  }
  if (std::optional<absl::StatusOr<VarPtr>> r = CallSetMethod(self, name, args, kwargs)) return *std::move(r);
  const bool is_set = self->is_constant() &&
                      (PySet_Check(self->object.get()) || PyFrozenSet_Check(self->object.get()));
  if (is_set) {
    static const char* const kReadOnly[] = {"union", "intersection", "difference",
                                            "symmetric_difference", "issubset", "issuperset",
                                            "isdisjoint", "copy", "__contains__", "__len__"};
    bool read_only = false;
    for (const char* m : kReadOnly) read_only |= name == m;
    if (!read_only && (self->source || !PySet_Check(self->object.get()))) {
      return Break(ir::GraphBreak::SIDE_EFFECT,
                   absl::StrCat(name, "() on a set that outlives the call"),
                   "mutating sets that outlive the call is a side effect; copy it first");
    }
  }
  if (is_set && (name == "add" || name == "discard" || name == "update")) {
    std::vector<VarPtr> items = args;
    if (name == "update" && args.size() == 1) {
      absl::StatusOr<std::vector<VarPtr>> all = Materialize(args[0]);
      if (!all.ok()) return all.status();
      items = *all;
    }
    for (const VarPtr& item : items) {
      if (name == "discard") {
        absl::StatusOr<Object> value = ToPython(item);
        if (!value.ok() || PySet_Discard(self->object.get(), value->get()) < 0) {
          python::ClearError();
          return Break(ir::GraphBreak::OTHER, "set.discard of a non-constant", "");
        }
      } else if (absl::Status s = AddToSet(self, item); !s.ok()) {  // may make it a kSet
        return s;
      }
    }
    return constant(python::None());
  }
  if (is_set) {
    // Other set methods on a set the trace owns (or read-only ones): run them.
    Object bound = Attr(self->object.get(), name.c_str());
    if (!bound) return Break(ir::GraphBreak::OTHER, absl::StrCat("sets have no method ", name), "");
    absl::StatusOr<VarPtr> r = CallReal(Var::OfKind(VarKind::kOpaque, bound), args, kwargs);
    return r;
  }
  if (self->kind == VarKind::kList || self->kind == VarKind::kDict || self->kind == VarKind::kTuple) {
    static const char* const kMutating[] = {"append", "extend", "insert", "pop", "clear", "reverse",
                                            "remove", "update", "setdefault", "popitem", "sort"};
    bool mutating = false;
    for (const char* m : kMutating) mutating |= name == m;
    if (mutating && self->kind != VarKind::kTuple) {
      if (absl::Status s = WillMutate(self, absl::StrCat(name, "()")); !s.ok()) return s;
    } else if (mutating && self->source) {
      return Break(ir::GraphBreak::SIDE_EFFECT,
                   absl::StrCat(name, "() mutates ", self->source->ToString()),
                   "mutating containers that outlive the call is a side effect; copy it first");
    }
    if (std::optional<absl::StatusOr<VarPtr>> r = CallContainerMethod(self, name, args, kwargs)) {
      return *std::move(r);
    }
    if (self->kind == VarKind::kList) {
      if (name == "append" && args.size() == 1) {
        self->items.push_back(args[0]);
        return constant(python::None());
      }
      if (name == "extend" && args.size() == 1) {
        absl::StatusOr<std::vector<VarPtr>> items = Materialize(args[0]);
        if (!items.ok()) return items.status();
        self->items.insert(self->items.end(), items->begin(), items->end());
        return constant(python::None());
      }
      if (name == "insert" && args.size() == 2) {
        absl::StatusOr<int64_t> i = AsInt(args[0]);
        if (!i.ok()) return i.status();
        int64_t n = static_cast<int64_t>(self->items.size());
        int64_t k = std::clamp<int64_t>(*i < 0 ? *i + n : *i, 0, n);
        self->items.insert(self->items.begin() + k, args[1]);
        return constant(python::None());
      }
      if (name == "pop" && args.size() <= 1 && !self->items.empty()) {
        int64_t n = static_cast<int64_t>(self->items.size());
        int64_t i = args.empty() ? n - 1 : AsInt(args[0]).value_or(n - 1);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Break(ir::GraphBreak::OTHER, "pop index out of range", "");
        VarPtr v = self->items[static_cast<size_t>(i)];
        self->items.erase(self->items.begin() + i);
        return v;
      }
      if (name == "reverse" && args.empty()) {
        std::reverse(self->items.begin(), self->items.end());
        return constant(python::None());
      }
    }
    if (self->kind == VarKind::kDict) {
      if ((name == "items" || name == "keys" || name == "values") && args.empty()) {
        // A view: live in Python, so it is read when it is used, not now.
        VarPtr view = Var::OfKind(VarKind::kDictView, Object());
        view->self = self;
        view->name = name;
        return view;
      }
      if (name == "get" && !args.empty()) {
        absl::StatusOr<std::optional<size_t>> at = FindDictKey(self->keys, args[0]);
        if (!at.ok()) return at.status();
        if (*at) return self->items[**at];
        return args.size() > 1 ? args[1] : constant(python::None());
      }
    }
    if (self->is_size && name == "numel") {
      int64_t n = 1;
      for (const VarPtr& item : self->items) n *= AsInt(item).value_or(1);
      return constant(python::FromLong(n));
    }
    // Read-only methods of containers of constants (index, count, copy).
    absl::StatusOr<Object> real = ToPython(self);
    if (real.ok() && !mutating) {
      Object bound = Attr(real->get(), name.c_str());
      if (bound) return CallReal(Var::OfKind(VarKind::kOpaque, bound), args, kwargs);
    }
  }
  return Break(ir::GraphBreak::UNSUPPORTED_CALL,
               absl::StrCat("method ", name, "() of ", Describe(*self)),
               "this method is not traced");
}

absl::StatusOr<VarPtr> Translator::TensorAttr(const VarPtr& t, const std::string& name) {
  const ops::TensorMeta& m = t->meta;
  if (name == "shape" && !t->sym_sizes.empty()) return ShapeOf(t);
  if (name == "shape") {
    std::vector<VarPtr> items;
    for (int64_t s : m.sizes) items.push_back(Var::Constant(python::FromLong(s)));
    VarPtr size = Var::Tuple(std::move(items));
    size->is_size = true;
    return size;
  }
  if (name == "dtype") return FromValue(ops::Value(m.dtype));
  if (name == "device") return FromValue(ops::Value(m.device));
  if (name == "ndim") return Var::Constant(python::FromLong(m.dim()));
  if (name == "requires_grad") return Var::Constant(python::FromBool(m.requires_grad));
  // is_cpu, is_cuda, is_meta, ...: the device's type, which the tensor's
  // guard checks.
  static constexpr std::pair<const char*, const char*> kDeviceFlags[] = {
      {"is_cpu", "cpu"}, {"is_cuda", "cuda"}, {"is_meta", "meta"}, {"is_xpu", "xpu"},
      {"is_mps", "mps"}, {"is_xla", "xla"}, {"is_ipu", "ipu"}, {"is_hpu", "hpu"},
      {"is_mtia", "mtia"}, {"is_vulkan", "vulkan"}, {"is_maia", "maia"}};
  for (const auto& [flag, type] : kDeviceFlags) {
    if (name == flag) return Var::Constant(python::FromBool(m.device.type == type));
  }
  // Traced tensors are dense, strided, unquantized and not nested: the
  // capture's inputs say so and every op the registry knows keeps it so.
  for (const char* dense_false : {"is_nested", "is_sparse", "is_quantized", "is_mkldnn",
                                  "is_sparse_csr"}) {
    if (name == dense_false) return Var::Constant(python::FromBool(false));
  }
  if (name == "layout") return Wrap(TorchAttr("strided"), nullptr);
  // The class the tensor's guard checks (torch.Tensor, nn.Parameter, a subclass).
  if (name == "__class__") return Wrap(ClassOf(t), nullptr);
  // .data: the same storage, outside autograd, which is what detach() gives
  // (as a graph value; a write through it reaches the tensor, as in eager).
  if (name == "data" && !t->is_ndarray) return CallOp("Tensor.detach", ir::Node::CALL_METHOD, {t}, {});
  if (name == "T" || name == "mT") {
    std::vector<VarPtr> args = {t};
    if (name == "T") {
      for (int64_t d = m.dim() - 1; d >= 0; --d) args.push_back(Var::Constant(python::FromLong(d)));
      return CallOp("Tensor.permute", ir::Node::CALL_METHOD, args, {});
    }
    args.push_back(Var::Constant(python::FromLong(-2)));
    args.push_back(Var::Constant(python::FromLong(-1)));
    return CallOp("Tensor.transpose", ir::Node::CALL_METHOD, args, {});
  }
  if (name == "grad" && !t->is_ndarray) {
    // A tensor the function was given: its real .grad, read and guarded
    // (None, or a tensor that becomes a graph input). One the graph makes
    // has none: no backward runs inside a trace.
    PyObject* real = RealTensor(t);
    if (real == nullptr) return Var::Constant(python::None());
    if (t->source) {
      Object grad = Attr(real, "grad");
      if (!grad) return python::FetchError("reading a tensor's .grad");
      return Wrap(grad, Source::Attr(t->source, "grad"));
    }
  }
  // Anything else must be a method of torch.Tensor; properties we do not
  // model (.data, .layout, ...) are refused, never guessed.
  Object cls_attr = Attr(TorchAttr("Tensor").get(), name.c_str());
  bool is_method = cls_attr && PyCallable_Check(cls_attr.get()) &&
                   !python::HasAttr(cls_attr.get(), "__set__");
  if (!is_method) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("the tensor attribute .", name, " is not traced"),
                 "read shapes, dtypes and devices; other tensor state is not known while tracing");
  }
  return Var::Method(t, name);
}

absl::StatusOr<SourcePtr> Translator::SuperAttrSource(const VarPtr& sup, const std::string& name,
                                                      const Object& value) {
  const VarPtr& self = sup->self;
  if (!self->source || !self->object) {
    return SourcePtr();  // self made during the trace: nothing to guard
  }
  // super(cls, self).name looks in type(self).__mro__ after cls; in a
  // classmethod, super(cls, klass) looks in klass.__mro__ itself.
  Object start = Attr(sup->object.get(), "__thisclass__");
  PyObject* holder = self->object.get();
  const bool of_class = start && PyType_Check(start.get()) && PyType_Check(holder) &&
                        PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(holder),
                                         reinterpret_cast<PyTypeObject*>(start.get()));
  PyObject* mro = of_class ? reinterpret_cast<PyTypeObject*>(holder)->tp_mro : Py_TYPE(holder)->tp_mro;
  SourcePtr mro_source = Source::Attr(of_class ? self->source : Source::Attr(self->source, "__class__"), "__mro__");
  if (!start || mro == nullptr) return Break(ir::GraphBreak::OTHER, "super() of an unusual class", "");
  Py_ssize_t i = 0, n = PyTuple_GET_SIZE(mro);
  while (i < n && PyTuple_GET_ITEM(mro, i) != start.get()) ++i;
  for (++i; i < n; ++i) {
    PyObject* raw = python::TypeDictItem(reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i)), name.c_str());
    if (raw == nullptr) continue;
    SourcePtr entry = Source::Item(Source::Attr(Source::Item(mro_source, i), "__dict__"), name);
    // A plain class attribute is the value itself; a function is bound to
    // self by the method path (the entry is its path).
    if (raw == value.get() || PyFunction_Check(raw)) {
      if (PyFunction_Check(raw)) guards_.IdMatch(entry, Object::Borrow(raw));
      return entry;
    }
    // A descriptor (a function, a property): the very one is guarded; its
    // result is only known for functions and class/static methods.
    if (!PyFunction_Check(raw) && !PyObject_TypeCheck(raw, &PyClassMethod_Type) &&
        !PyObject_TypeCheck(raw, &PyStaticMethod_Type)) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("super().", name, " runs a descriptor"),
                   "its result is not known while tracing");
    }
    guards_.IdMatch(entry, Object::Borrow(raw));
    return SourcePtr();
  }
  return Break(ir::GraphBreak::OTHER, absl::StrCat("super().", name, " is not found in a base class's dict"),
               "attributes reached through super() are traced when a base class defines them");
}

std::optional<absl::StatusOr<VarPtr>> Translator::SuperDictMethod(const VarPtr& sup, const std::string& name) {
  static constexpr const char* kReadOnly[] = {"get", "keys", "values", "items", "copy"};
  if (sup->kind != VarKind::kOpaque || !sup->self || !sup->object ||
      !PyObject_TypeCheck(sup->object.get(), &PySuper_Type)) {
    return std::nullopt;
  }
  const VarPtr& self = sup->self;
  if (self->kind != VarKind::kOpaque || !self->source || !self->object || !PyDict_Check(self->object.get()) ||
      std::find(std::begin(kReadOnly), std::end(kReadOnly), name) == std::end(kReadOnly)) {
    return std::nullopt;
  }
  // The method super() finds must be dict's own, and the items are read
  // (and guarded, as self[key]) through dict's protocol, which the class
  // must keep.
  PyTypeObject* type = Py_TYPE(self->object.get());
  PyTypeObject* dict = &PyDict_Type;
  for (const char* kept : {"__getitem__", "__iter__", "__len__", "keys"}) {
    Object key = python::FromString(kept);
    if (_PyType_Lookup(type, key.get()) != _PyType_Lookup(dict, key.get())) return std::nullopt;
  }
  if (SuperDefiner(sup, name.c_str()) != dict) return std::nullopt;
  absl::StatusOr<VarPtr> items = WrapDictItems(self->object, self->source);
  if (!items.ok()) return absl::StatusOr<VarPtr>(items.status());
  if ((*items)->kind != VarKind::kDict) return std::nullopt;
  return absl::StatusOr<VarPtr>(Var::Method(*items, name));
}

absl::StatusOr<VarPtr> Translator::GetAttr(const VarPtr& obj, const std::string& name) {
  if (obj->kind == VarKind::kUserObject) return UserObjectAttr(obj, name);
  if (IsUserDict(obj)) return UserDictAttr(obj, name);
  if (std::optional<absl::StatusOr<VarPtr>> r = UserDictSuperAttr(obj, name)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = DictSubclassAttr(obj, name)) return *std::move(r);
  if (obj->kind == VarKind::kOpaque && obj->self && obj->self->kind == VarKind::kUserObject &&
      name == "__init__" && PyObject_TypeCheck(obj->object.get(), &PySuper_Type)) {
    // super().__init__ of a tracked instance: the first class after
    // __thisclass__ in the MRO that defines it.
    Object start = Attr(obj->object.get(), "__thisclass__");
    PyObject* mro = Py_TYPE(obj->self->object.get())->tp_mro;
    bool after = false;
    for (Py_ssize_t i = 0; start && mro && i < PyTuple_GET_SIZE(mro); ++i) {
      PyObject* c = PyTuple_GET_ITEM(mro, i);
      if (!after) {
        after = c == start.get();
        continue;
      }
      PyObject* init = python::TypeDictItem(reinterpret_cast<PyTypeObject*>(c), "__init__");
      if (init == nullptr) continue;
      if (c == reinterpret_cast<PyObject*>(&PyBaseObject_Type)) {
        VarPtr m = Var::OfKind(VarKind::kOpaque, Object::Borrow(init));
        m->self = obj->self;
        return m;
      }
      break;
    }
  }
  if (std::optional<absl::StatusOr<VarPtr>> r = ObjectGetattribute(obj, name)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = SuperDictMethod(obj, name)) return *std::move(r);
  if (obj->object && !attr_overlay_.empty()) {
    if (auto it = attr_overlay_.find(std::make_pair(obj->object.get(), name)); it != attr_overlay_.end()) {
      return it->second;
    }
    // The real __dict__ does not hold the attributes the trace has set
    // (replayed after the graph): reading it now would miss them.
    if (name == "__dict__" || name == "__getattribute__") {
      for (const auto& [key, value] : attr_overlay_) {
        if (key.first != obj->object.get()) continue;
        return Break(ir::GraphBreak::SIDE_EFFECT,
                     absl::StrCat("reading .", name, " of ", Describe(*obj), " after setting its attribute '",
                                  key.second, "' in the trace"),
                     "the assignment is replayed after the graph, so the object does not hold it yet");
      }
    }
  }
  switch (obj->kind) {
    case VarKind::kTensor:
      if (obj->is_ndarray) return NdarrayAttr(obj, name);
      return TensorAttr(obj, name);
    case VarKind::kPartial:
      if (name == "func") return obj->self;
      if (name == "args") return obj->defaults;
      if (name == "keywords") return obj->kwdefaults;
      break;
    case VarKind::kTuple:
      for (size_t i = 0; i < obj->fields.size(); ++i) {
        if (obj->fields[i] == name) return obj->items[i];
      }
      if (obj->user_class) {
        if (std::optional<absl::StatusOr<VarPtr>> r = UserTupleAttr(obj, name)) return *std::move(r);
      }
      return Var::Method(obj, name);
    case VarKind::kAutocast:
      if (name != "__enter__" && name != "__exit__") {
        return Break(ir::GraphBreak::OTHER, absl::StrCat("reading .", name, " of ", Describe(*obj)),
                     "a torch.autocast object is entered and left by a with statement");
      }
      return Var::Method(obj, name);
    case VarKind::kList:
    case VarKind::kDict:
    case VarKind::kGradMode:
      if (IsDeque(obj)) return DequeAttr(obj, name);
      if (IsDefaultDict(obj) && name == "default_factory") return obj->default_factory;
      return Var::Method(obj, name);
    case VarKind::kSet:
      return SetAttr(obj, name);
    case VarKind::kNull:
    case VarKind::kIterator:
    case VarKind::kCell:
      break;
    case VarKind::kConstant:
      if (PySet_Check(obj->object.get()) || PyFrozenSet_Check(obj->object.get())) {
        return Var::Method(obj, name);  // CallMethod knows which set methods mutate
      }
      [[fallthrough]];
    case VarKind::kFunction:
      if (obj->kind == VarKind::kFunction && obj->object && PyCode_Check(obj->object.get())) {
        // Made during the trace: defaults are trackers; the rest is fixed
        // by its code and globals.
        if (name == "__defaults__" || name == "__kwdefaults__") {
          VarPtr d = name == "__defaults__" ? obj->defaults : obj->kwdefaults;
          return d ? d : Var::Constant(python::None());
        }
        if (name == "__dict__") return FunctionDict(obj);
        for (size_t i = 0; i < obj->keys.size(); ++i) {  // __name__ and the like, once set
          if (python::AsString(obj->keys[i]->object).value_or("") == name) return obj->items[i];
        }
        if (obj->instance_dict) {
          absl::StatusOr<std::optional<size_t>> at =
              FindDictKey(obj->instance_dict->keys, Var::Constant(python::FromString(name)));
          if (!at.ok()) return at.status();
          if (*at) return obj->instance_dict->items[**at];
        }
        if (name == "__closure__" || name == "__self__") break;
        Object stand_in = FunctionStandIn(obj);
        Object value = stand_in ? Object::Steal(PyObject_GetAttrString(stand_in.get(), name.c_str())) : Object();
        if (!value) {
          python::ClearError();
          break;
        }
        return Wrap(value, nullptr);
      }
      [[fallthrough]];
    default: {
      if (!obj->object) break;
      if (!PyType_Check(obj->object.get())) {
        // A Python __getattribute__ runs user code on every read (it may
        // make a new object each time, as a tensor built in it): reading
        // through it here would freeze one call's answer.
        PyObject* key = python::Interned("__getattribute__");
        PyObject* getattribute = key ? _PyType_Lookup(Py_TYPE(obj->object.get()), key) : nullptr;  // borrowed
        if (getattribute != nullptr && PyFunction_Check(getattribute) && obj->source) {
          // An object read from the frame: the override is inlined as the
          // interpreter calls it, type(obj).__getattribute__(obj, name), so
          // every answer comes from its code on this call (transformers'
          // PretrainedConfig maps names through attribute_map this way).
          // Its super().__getattribute__ is object's read (GenericAttr).
          SourcePtr fn_source = Source::Attr(Source::Attr(obj->source, "__class__"), "__getattribute__");
          guards_.IdMatch(fn_source, Object::Borrow(getattribute));
          VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(getattribute), fn_source);
          return Inline(fn, {obj, Var::Constant(python::FromString(name))}, {});
        }
        if (getattribute != nullptr && PyFunction_Check(getattribute)) {
          return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                       absl::StrCat("reading .", name, " of ", Describe(*obj), " runs its class's Python __getattribute__"),
                       "read the attribute outside the compiled function, or drop the __getattribute__ override");
        }
      }
      if (!PyType_Check(obj->object.get()) && !obj->self) {
        // A property or another descriptor written in Python runs user code
        // on every read (it may count calls, build a tensor): read for real
        // here, the trace would keep one call's answer and the guards would
        // run the code again on every check. A property's getter is inlined
        // as the read; any other Python __get__ is a graph break.
        PyObject* key = python::Interned(name);
        PyObject* d = key ? _PyType_Lookup(Py_TYPE(obj->object.get()), key) : nullptr;  // borrowed
        if (d != nullptr && Py_TYPE(d) == &PyProperty_Type) {
          Object fget = Attr(d, "fget");
          if (fget && PyFunction_Check(fget.get())) {
            SourcePtr property_source =
                obj->source ? Source::Attr(Source::Attr(obj->source, "__class__"), name) : nullptr;
            guards_.IdMatch(property_source, Object::Borrow(d));
            VarPtr fn = Var::OfKind(VarKind::kFunction, fget,
                                    property_source ? Source::Attr(property_source, "fget") : nullptr);
            return Inline(fn, {obj}, {});
          }
        } else if (d != nullptr && (Py_TYPE(d)->tp_flags & Py_TPFLAGS_HEAPTYPE) && Py_TYPE(d)->tp_descr_get != nullptr) {
          return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                       absl::StrCat("reading .", name, " of ", Describe(*obj), " runs the Python descriptor ",
                                    python::TypeName(Object::Borrow(d)), ".__get__"),
                       "its answer is only known by running it");
        }
      }
      // A submodule, a parameter, an instance attribute: found where
      // Python would find it, without running nn.Module.__getattr__.
      PyObject* key = python::Interned(name);
      Object value;
      if (key == nullptr || python::LookupWithoutPython(obj->object.get(), key, &value) != python::Found::kFound) {
        value = key != nullptr ? Object::Steal(PyObject_GetAttr(obj->object.get(), key)) : Object();
      }
      if (!value) {
        absl::Status error = python::FetchError("");
        return Break(ir::GraphBreak::OTHER,
                     absl::StrCat("reading .", name, " of ", Describe(*obj), " raises ", error.message()),
                     "the attribute does not exist on this object");
      }
      SourcePtr super_source;
      if (obj->self) {
        // super().name: found in a base class's __dict__, which is a path
        // from self (its class is guarded): that entry is guarded.
        absl::StatusOr<SourcePtr> s = SuperAttrSource(obj, name, value);
        if (!s.ok()) return s.status();
        super_source = *s;
      }
      // Methods bound to the object we hold a tracker for stay bound to
      // that tracker (self.helper(x), super().forward(x)).
      PyObject* owner = obj->self ? obj->self->object.get() : obj->object.get();
      if (PyMethod_Check(value.get()) && PyMethod_Self(value.get()) == owner &&
          PyFunction_Check(PyMethod_Function(value.get()))) {
        SourcePtr fn_source = obj->source && !obj->self
                                  ? Source::Attr(Source::Attr(obj->source, name), "__func__") : super_source;
        // The function it binds (a class attribute someone may reassign
        // between calls) is what the trace inlines: guarded by identity.
        if (fn_source && fn_source != super_source) {
          guards_.IdMatch(fn_source, Object::Borrow(PyMethod_Function(value.get())));
        }
        VarPtr fn = Var::OfKind(VarKind::kFunction, Object::Borrow(PyMethod_Function(value.get())), fn_source);
        fn->self = obj->self ? obj->self : obj;
        return fn;
      }
      SourcePtr source = obj->source && !obj->self ? Source::Attr(obj->source, name) : super_source;
      const bool was = module_attribute_;
      module_attribute_ = obj->kind == VarKind::kNNModule;
      absl::StatusOr<VarPtr> wrapped = Wrap(value, source);
      module_attribute_ = was;
      return wrapped;
    }
  }
  return Break(ir::GraphBreak::OTHER, absl::StrCat("reading .", name, " of ", Describe(*obj)), "");
}

absl::StatusOr<TraceResult> Translator::Run(const TraceRequest& request, BreakInfo* on_break) {
  auto done = [&](absl::Status s) -> absl::StatusOr<TraceResult> {
    if (break_ && on_break) *on_break = *break_;
    return s;
  };
  if (!request.function || !PyFunction_Check(request.function.get())) {
    return absl::InvalidArgumentError("Trace needs a Python function");
  }
  PyObject* fn = request.function.get();
  allow_breaks_ = request.allow_breaks;
  capture_scalars_ = request.capture_scalar_outputs;
  stop_at_ = request.stop_at;
  dynamic_ = request.dynamic;
  top_globals_ = Object::Borrow(PyFunction_GetGlobals(fn));
  Object grad = TorchAttr("is_grad_enabled");
  absl::StatusOr<Object> enabled = grad ? python::Call(grad) : absl::UnknownError("torch");
  if (!enabled.ok()) return enabled.status();
  grad_enabled_ = enabled->get() == Py_True;
  guards_.GlobalState("grad_mode", grad_enabled_);
  if (absl::Status s = InitAutocast(); !s.ok()) return s;
  // Which kernels run (and what a compiled backward checks) depends on
  // torch.use_deterministic_algorithms: a graph compiled under one setting
  // is not reused under the other (torch._dynamo's global state guard).
  Object deterministic = TorchAttr("are_deterministic_algorithms_enabled");
  absl::StatusOr<Object> det = deterministic ? python::Call(deterministic) : absl::UnknownError("torch");
  if (!det.ok()) return det.status();
  guards_.GlobalState("deterministic_algorithms", det->get() == Py_True);
  // So does TF32 in cuBLAS matmuls (torch.backends.cuda.matmul.allow_tf32):
  // a compiled backend bakes it into the kernels it picks.
  if (Object tf32 = TorchAttr("_C._get_cublas_allow_tf32")) {
    absl::StatusOr<Object> allowed = python::Call(tf32);
    if (!allowed.ok()) return allowed.status();
    guards_.GlobalState("cublas_allow_tf32", allowed->get() == Py_True);
  }
  // Factory functions, Python floats and int-to-float promotion make
  // tensors of torch.get_default_dtype(): inference uses the interpreter's,
  // and the capture holds only under it.
  Object get_default = TorchAttr("get_default_dtype");
  absl::StatusOr<Object> default_dtype = get_default ? python::Call(get_default) : absl::UnknownError("torch");
  if (!default_dtype.ok()) return default_dtype.status();
  absl::StatusOr<std::string> dtype_name = python::AsString(Object::Steal(PyObject_Str(default_dtype->get())));
  std::optional<ops::DType> default_float = dtype_name.ok() ? ops::DTypeFromName(*dtype_name) : std::nullopt;
  if (!default_float) return absl::UnimplementedError("torch.get_default_dtype() is a dtype libdynamo does not know");
  ops::DefaultFloatScope default_float_scope(*default_float);
  guards_.GlobalDType("default_dtype", *default_float);
  // torch.set_default_device and `with torch.device(...)` are a DeviceContext
  // on torch's function-mode stack: factory functions infer their device
  // from it. Any other mode can change what every torch call returns, so
  // the frame is not traced through one. Either way the capture holds only
  // under the stack it was traced under.
  absl::StatusOr<std::string> modes = python::TorchFunctionModes();
  if (!modes.ok()) return modes.status();
  guards_.GlobalString("torch_function_modes", *modes);
  std::optional<ops::Device> default_device;
  // `with torch.device(...)` under torch.set_default_device stacks a second
  // DeviceContext: the topmost one fills in device= first, and wins.
  for (absl::string_view mode : absl::StrSplit(*modes, ',', absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&mode, "device=")) {
      return done(absl::UnimplementedError(absl::StrCat(
          "a TorchFunctionMode is active (", *modes, "): libdynamo does not trace through function modes")));
    }
    absl::StatusOr<ops::Device> device = ops::ParseDevice(mode);
    if (!device.ok()) {
      return done(absl::UnimplementedError(absl::StrCat("torch's default device: ", device.status().message())));
    }
    default_device = *device;
  }
  ops::DefaultDeviceScope default_device_scope(default_device);

  Frame frame;
  if (absl::Status s = PrepareFrame(frame, Object::Borrow(PyFunction_GetCode(fn)), top_globals_); !s.ok()) {
    return done(s);
  }
  top_code_ = frame.code;
  const std::vector<std::string>& names = frame.code->localsplus;
  auto* co = reinterpret_cast<PyCodeObject*>(frame.code->code.get());
  const size_t argcount = static_cast<size_t>(co->co_argcount);
  const size_t kwonly = static_cast<size_t>(co->co_kwonlyargcount);
  const std::string varargs = (co->co_flags & CO_VARARGS) ? names[argcount + kwonly] : "";
  const std::string varkw = (co->co_flags & CO_VARKEYWORDS)
                                ? names[argcount + kwonly + ((co->co_flags & CO_VARARGS) ? 1 : 0)]
                                : "";

  // The traced function's defaults are not wrapped here: every parameter
  // the call leaves to its default is bound below, read from its local
  // (L['n']) like an argument, so a tensor default has a path.
  VarPtr function = Var::OfKind(VarKind::kFunction, request.function);
  if (PyObject* closure = PyFunction_GetClosure(fn)) {
    size_t nfree = static_cast<size_t>(PyTuple_GET_SIZE(closure));
    for (size_t i = 0; i < nfree; ++i) {
      const std::string& free_name = names[names.size() - nfree + i];
      PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(closure, static_cast<Py_ssize_t>(i)));
      VarPtr value;
      if (contents != nullptr) {
        absl::StatusOr<VarPtr> w = Wrap(Object::Borrow(contents), Source::Local(free_name));
        if (!w.ok()) return done(w.status());
        value = *w;
      }
      VarPtr cell = Var::Cell(value);
      cell->source = Source::Local(free_name);
      function->closure.push_back(cell);
      top_cells_[PyTuple_GET_ITEM(closure, static_cast<Py_ssize_t>(i))] = cell;
    }
  }

  // Inputs become trackers whose sources are the parameters they bind to.
  std::vector<ir::InputSpec> specs;
  std::function<absl::StatusOr<VarPtr>(const TraceInput&, SourcePtr)> input =
      [&](const TraceInput& in, SourcePtr source) -> absl::StatusOr<VarPtr> {
    std::string label = source->ToString();
    if (in.kind == TraceInput::Kind::kTensor ||
        (in.kind == TraceInput::Kind::kObject && IsInstanceOf(in.object.get(), "Tensor"))) {
      ops::TensorMeta meta = in.tensor;
      if (in.kind == TraceInput::Kind::kObject) {
        // f(a, a): the second parameter is the same node; OBJECT_ALIASING
        // (GuardAliasing) tells f(a, a) from f(a, b).
        if (attribute_nodes_.contains(in.object.get())) return WrapTensor(in.object, source);
        absl::StatusOr<ops::TensorMeta> m = MetaOf(in.object.get());
        if (!m.ok()) return m.status();
        meta = *m;
      }
      std::string placeholder = AttributeTarget(*source, &nn_module_has_);
      std::string node = graph_.AddPlaceholder(placeholder.substr(placeholder[0] == '_' ? 1 : 0), meta);
      std::vector<ops::SymExpr> sym_strides;
      std::vector<ops::SymExpr> sym_sizes =
          InputSymbols(source, in.kind == TraceInput::Kind::kObject ? in.object.get() : nullptr, meta,
                       in.dim_symbols, &sym_strides);
      guards_.TensorMatch(source, meta, sym_sizes, sym_strides);
      placeholder_sources_.push_back(source);
      ir::InputSpec spec;
      spec.set_name(label);
      *spec.mutable_tensor() = ops::ToProto(meta);
      if (!sym_sizes.empty()) {
        ops::SetSymDims(sym_sizes, spec.mutable_tensor()->mutable_sizes());
        ops::SetSymDims(sym_strides, spec.mutable_tensor()->mutable_strides());
        node_sym_sizes_[node] = sym_sizes;
      }
      specs.push_back(std::move(spec));
      VarPtr t = Var::Tensor(node, meta, source);
      t->sym_sizes = std::move(sym_sizes);
      if (in.kind == TraceInput::Kind::kObject) {
        attribute_nodes_[in.object.get()] = node;
        NoteTensorSource(source, in.object.get());
        if (reinterpret_cast<PyObject*>(Py_TYPE(in.object.get())) != TorchAttr("Tensor").get()) {
          t->tensor_type = Object::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(in.object.get())));
        }
      }
      return t;
    }
    if (in.kind == TraceInput::Kind::kObject && absl::StartsWith(label, "L['___stack")) {
      // A resume function continuing inside `with torch.no_grad():` (or
      // enable_grad / set_grad_enabled) gets the block's __exit__ on its
      // stack: the same tracker the block's BEFORE_WITH makes, so a break
      // further in the block resumes inside it again.
      if (std::optional<VarPtr> exit = GradModeExitInput(in.object, source)) return *exit;
      if (std::optional<VarPtr> exit = AutocastExitInput(in.object, source)) return *exit;
    }
    if (in.kind == TraceInput::Kind::kObject) {
      absl::StatusOr<VarPtr> v = Wrap(in.object, source);
      if (v.ok() && (*v)->is_constant()) {
        absl::StatusOr<ops::Value> value = ToValue(*v);
        absl::StatusOr<ir::Argument> arg = value.ok() ? ops::ToArgument(*value) : value.status();
        if (arg.ok()) {
          ir::InputSpec spec;
          spec.set_name(label);
          *spec.mutable_constant() = *arg;
          specs.push_back(std::move(spec));
        }
      }
      return v;
    }
    std::vector<VarPtr> items;
    for (size_t i = 0; i < in.items.size(); ++i) {
      SourcePtr item_source = in.kind == TraceInput::Kind::kDict ? Source::Item(source, in.keys[i])
                                                                 : Source::Item(source, static_cast<int64_t>(i));
      absl::StatusOr<VarPtr> v = input(in.items[i], item_source);
      if (!v.ok()) return v.status();
      items.push_back(*v);
    }
    // Inputs described by specs have no object; the kind says which type.
    guards_.TypeMatch(source, in.kind == TraceInput::Kind::kDict   ? Object::Steal(PyDict_New())
                              : in.kind == TraceInput::Kind::kList ? python::MakeList({})
                                                                   : python::MakeTuple({}));
    guards_.LengthMatch(source, static_cast<int64_t>(items.size()));
    if (in.kind == TraceInput::Kind::kDict) {
      std::vector<VarPtr> keys;
      for (const std::string& k : in.keys) keys.push_back(Var::Constant(python::FromString(k)));
      return Var::Dict(std::move(keys), std::move(items), source);
    }
    return in.kind == TraceInput::Kind::kTuple ? Var::Tuple(std::move(items), source)
                                               : Var::List(std::move(items), source);
  };

  std::vector<VarPtr> args;
  size_t position = 0;
  frames_.push_back(&frame);
  if (request.self) {
    root_ = request.self;
    absl::StatusOr<VarPtr> self = Wrap(request.self, Source::Local(names.empty() ? "self" : names[0]));
    if (!self.ok()) return done(self.status());
    args.push_back(*self);
    position = 1;
  }
  for (const TraceInput& in : request.args) {
    SourcePtr source = position < argcount ? Source::Local(names[position])
                       : !varargs.empty()  ? Source::Item(Source::Local(varargs),
                                                          static_cast<int64_t>(position - argcount))
                                           : Source::Local(absl::StrCat("arg", position));
    absl::StatusOr<VarPtr> v = input(in, source);
    if (!v.ok()) return done(v.status());
    args.push_back(*v);
    ++position;
  }
  Kwargs kwargs;
  for (const auto& [key, in] : request.kwargs) {
    bool named = false;
    for (size_t i = 0; i < argcount + kwonly; ++i) named |= names[i] == key;
    SourcePtr source = named || varkw.empty() ? Source::Local(key) : Source::Item(Source::Local(varkw), key);
    absl::StatusOr<VarPtr> v = input(in, source);
    if (!v.ok()) return done(v.status());
    kwargs.emplace_back(key, *v);
  }
  // Parameters the call leaves to their defaults are, in the frame, locals
  // holding the default: bind them here with that source (L['n']) so the
  // trace guards them like any argument.
  PyObject* defaults = PyFunction_GetDefaults(fn);
  PyObject* kwdefaults = PyFunction_GetKwDefaults(fn);
  const size_t ndefaults = defaults ? static_cast<size_t>(PyTuple_GET_SIZE(defaults)) : 0;
  auto given_by_name = [&kwargs](const std::string& n) {
    for (const auto& kv : kwargs) {
      if (kv.first == n) return true;
    }
    return false;
  };
  bool positional = true;
  for (size_t i = args.size(); i < argcount + kwonly; ++i) {
    const std::string& name = names[i];
    if (given_by_name(name)) {
      positional = false;
      continue;
    }
    PyObject* value = nullptr;
    if (i < argcount && i + ndefaults >= argcount) {
      value = PyTuple_GET_ITEM(defaults, static_cast<Py_ssize_t>(i + ndefaults - argcount));
    } else if (i >= argcount && kwdefaults != nullptr) {
      value = PyDict_GetItemString(kwdefaults, name.c_str());  // borrowed
    }
    if (value == nullptr) {  // missing: BindArguments reports it as Python would
      positional = false;
      continue;
    }
    absl::StatusOr<VarPtr> v = Wrap(Object::Borrow(value), Source::Local(name));
    if (!v.ok()) return done(v.status());
    if (positional && i < argcount) {
      args.push_back(*v);
    } else {
      positional = false;
      kwargs.emplace_back(name, *v);
    }
  }
  absl::Status bound = BindArguments(frame, function, std::move(args), std::move(kwargs));
  frames_.pop_back();
  if (!bound.ok()) return done(bound);

  absl::StatusOr<VarPtr> result = RunFrame(frame);
  if (result.ok()) {
    // What the function returns may be graph outputs: as good as used.
    std::function<void(const VarPtr&, int)> returned = [&](const VarPtr& v, int depth) {
      if (!v || depth > 32) return;
      NoteIdentity(v);
      for (const VarPtr& item : v->items) returned(item, depth + 1);
    };
    returned(*result, 0);
  }
  GuardAliasing();
  if (!result.ok()) {
    if (stop_) return Stopped(*std::move(stop_));
    return done(result.status());
  }
  if (raised_) {  // a raise some C++ path dropped: never continue past one
    return done(absl::InternalError("an exception raised in the trace was not handled"));
  }
  frames_.push_back(&frame);
  absl::StatusOr<ir::Argument> output =
      ContainsNdarray(*result) ? absl::InvalidArgumentError("a numpy.ndarray") : ToArgument(*result);
  if (allow_breaks_) {
    // The rewritten code returns the value itself, after replaying effects:
    // one shape of result for every trace with breaks allowed.
    frames_.pop_back();
    StopState st;
    st.kind = StopState::Kind::kReturn;
    st.index = frame.ip;
    st.stack = {*result};
    st.locals = frame.locals;
    return Stopped(std::move(st));
  }
  if (!output.ok()) {
    absl::Status s = Break(ir::GraphBreak::OTHER,
                           absl::StrCat("the function returns ", Describe(**result)),
                           "return tensors, Python constants, or tuples and lists of them");
    return done(s);
  }
  frames_.pop_back();
  graph_.SetOutputs({*output});
  EliminateDeadCode();

  TraceResult out;
  out.graph = std::move(graph_).Finish();
  out.guards = std::move(guards_).Take();
  FinishShapes(out.guards, out.graph);
  out.attributes = std::move(attributes_);
  out.inputs = std::move(specs);
  out.placeholder_sources = std::move(placeholder_sources_);
  out.code = top_code_;
  out.globals = top_globals_;
  return out;
}

void Translator::EliminateDeadCode() {
  // Every call the code made runs, used or not, as in eager: an unused op can
  // still raise (an index out of range, a failed check), advance the random
  // generator or switch grad mode, and leaving it out is the backend's
  // decision (Inductor makes it), as with torch._dynamo. What goes unused is
  // only what cannot fail or act — torch._dynamo's own short list: reads of
  // parameters, getitem, a tensor's sizes and arithmetic on such numbers.
  absl::flat_hash_set<std::string> numbers;  // nodes whose value is a Python number
  auto is_number = [](const ir::Argument& a) { return a.has_int_value() || a.has_float_value() || a.has_bool_value(); };
  for (const ir::Node& n : graph_.graph().nodes()) {
    if (n.meta().has_scalar() || (n.meta().has_constant() && is_number(n.meta().constant()))) numbers.insert(n.name());
  }
  auto number_arg = [&](const ir::Argument& a) { return a.has_node() ? numbers.contains(a.node()) : is_number(a); };
  static constexpr absl::string_view kAccessors[] = {"Tensor.size", "Tensor.stride", "Tensor.numel",
                                                     "Tensor.nelement", "Tensor.dim", "Tensor.storage_offset"};
  graph_.EliminateDeadCode([&](const ir::Node& n) {
    if (n.kind() == ir::Node::GET_ATTR || n.target() == "operator.getitem") return false;
    if (!numbers.contains(n.name())) return true;
    if (n.kind() == ir::Node::CALL_METHOD && absl::c_linear_search(kAccessors, n.target())) return false;
    for (const ir::Argument& a : n.args()) {
      if (!number_arg(a)) return true;
    }
    for (const ir::KeywordArgument& k : n.kwargs()) {
      if (!number_arg(k.value())) return true;
    }
    return false;
  });
}

absl::StatusOr<TraceResult> Translator::Stopped(StopState st) {
  CloseAutocastBlocks();
  absl::flat_hash_set<std::string> inputs;
  for (const ir::Node& n : graph_.graph().nodes()) {
    if (n.kind() == ir::Node::PLACEHOLDER || n.kind() == ir::Node::GET_ATTR) inputs.insert(n.name());
  }
  // Every tensor the frame still reaches that the graph computed leaves the
  // graph; inputs and parameters are rebuilt from their sources instead.
  std::vector<std::string> outputs;
  absl::flat_hash_set<std::string> seen;
  absl::flat_hash_set<const Var*> visited;
  std::function<void(const VarPtr&)> visit = [&](const VarPtr& v) {
    if (!v || !visited.insert(v.get()).second) return;
    if (v->is_tensor()) {
      if (!inputs.contains(v->node) && seen.insert(v->node).second) outputs.push_back(v->node);
      return;
    }
    if (v->kind == VarKind::kScalar) {  // Python gets it from the graph
      if (seen.insert(v->node).second) outputs.push_back(v->node);
      return;
    }
    if (v->kind == VarKind::kSymInt) {
      // A size the guards fixed (it was used as a plain int) is that int;
      // any other the graph computes, and Python gets it from the graph.
      absl::StatusOr<ops::SymExpr> fixed = shape_env_.Simplify(v->sym.expr());
      if (fixed.ok() && fixed->is_constant()) {
        v->kind = VarKind::kConstant;
        v->object = python::FromLong(*fixed->constant());
        v->node.clear();
        return;
      }
      if (!v->source && seen.insert(v->node).second) outputs.push_back(v->node);  // else read from its input
      return;
    }
    for (const VarPtr& i : v->items) visit(i);
    for (const VarPtr& k : v->keys) visit(k);
    for (const VarPtr& c : v->closure) visit(c);
    visit(v->self);
    visit(v->value);
    visit(v->defaults);
    visit(v->kwdefaults);
    visit(v->instance_dict);  // a dict subclass's attributes
  };
  for (const VarPtr& v : st.stack) visit(v);
  for (const VarPtr& v : st.locals) {
    // After a return only the function's own cells live on (closures the
    // trace made): the other locals are dead, and a tensor in one is no output.
    if (st.kind == StopState::Kind::kReturn && (!v || v->kind != VarKind::kCell)) continue;
    visit(v);
  }
  visit(st.kw_names);
  for (const SideEffect& e : side_effects_) {
    visit(e.target);
    visit(e.value);
  }
  ir::Argument out;
  out.mutable_list()->set_is_tuple(true);
  for (const std::string& node : outputs) *out.mutable_list()->add_items() = Ref(node);
  graph_.SetOutputs({out});
  EliminateDeadCode();
  bool has_calls = false;
  for (const ir::Node& n : graph_.graph().nodes()) {
    has_calls |= n.kind() == ir::Node::CALL_FUNCTION || n.kind() == ir::Node::CALL_METHOD ||
                 n.kind() == ir::Node::CALL_MODULE;
  }
  st.progress = has_calls || !side_effects_.empty();

  TraceResult result;
  result.graph = std::move(graph_).Finish();
  result.guards = std::move(guards_).Take();
  FinishShapes(result.guards, result.graph);
  result.attributes = std::move(attributes_);
  result.placeholder_sources = std::move(placeholder_sources_);
  result.array_placeholders.assign(array_placeholders_.begin(), array_placeholders_.end());
  std::sort(result.array_placeholders.begin(), result.array_placeholders.end());
  // The graph's inputs by where they come from (L['x']), in placeholder order.
  size_t placeholder = 0;
  for (const ir::Node& n : result.graph.nodes()) {
    if (n.kind() != ir::Node::PLACEHOLDER) continue;
    ir::InputSpec spec;
    const SourcePtr& source = placeholder < result.placeholder_sources.size()
                                  ? result.placeholder_sources[placeholder] : nullptr;
    ++placeholder;
    spec.set_name(source ? source->ToString() : n.name());
    *spec.mutable_tensor() = n.meta().tensor();
    result.inputs.push_back(std::move(spec));
  }
  result.stop = std::move(st);
  result.side_effects = std::move(side_effects_);
  result.output_nodes = std::move(outputs);
  result.code = top_code_;
  result.globals = top_globals_;
  return result;
}

absl::StatusOr<std::string> Translator::AddCallNode(ir::Node::Kind kind, const std::string& target,
                                                const std::vector<VarPtr>& args, const Kwargs& kwargs,
                                                const ops::Value& result, bool symbolic_result) {
  if (!symbolic_result && has_symbols()) {
    // `result` was computed for the sizes seen (torch's meta kernels, a
    // policy's own inference): it holds for those sizes only.
    for (const VarPtr& a : args) ops::SpecializeAll({SymOf(a)}, shape_env_);
    for (const auto& kv : kwargs) ops::SpecializeAll({SymOf(kv.second)}, shape_env_);
  }
  std::vector<ir::Argument> pb_args;
  std::vector<ir::KeywordArgument> pb_kwargs;
  for (const VarPtr& a : args) {
    absl::StatusOr<ir::Argument> arg = ToArgument(a);
    if (!arg.ok()) return arg.status();
    pb_args.push_back(*std::move(arg));
  }
  for (const auto& [name, a] : kwargs) {
    absl::StatusOr<ir::Argument> arg = ToArgument(a);
    if (!arg.ok()) return arg.status();
    ir::KeywordArgument k;
    k.set_name(name);
    *k.mutable_value() = *std::move(arg);
    pb_kwargs.push_back(std::move(k));
  }
  absl::StatusOr<ir::ValueMeta> meta = ops::ToValueMeta(result);
  if (!meta.ok()) return meta.status();
  return graph_.AddCall(kind, target, std::move(pb_args), std::move(pb_kwargs), *std::move(meta),
                        CurrentLocation());
}

absl::Status Translator::WillMutate(const VarPtr& container, absl::string_view how) {
  if (!container->source) return absl::OkStatus();  // made by the trace: nobody else sees it
  if (!allow_breaks_) {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat(how, " mutates ", container->source->ToString()),
                 "mutating containers that outlive the call is a side effect; copy it first");
  }
  MarkMutated(container);
  return absl::OkStatus();
}

void Translator::MarkMutated(const VarPtr& container) {
  if (!mutated_.insert(container.get()).second) return;
  SideEffect e;
  e.kind = container->kind == VarKind::kDict ? SideEffect::Kind::kDictContents
                                             : SideEffect::Kind::kListContents;
  e.target = container;
  side_effects_.push_back(std::move(e));
}

VarPtr Translator::FunctionDict(const VarPtr& fn) {
  if (!fn->instance_dict) fn->instance_dict = Var::Dict({}, {});
  return fn->instance_dict;
}

absl::Status Translator::StoreFunctionAttr(const VarPtr& fn, const std::string& name, const VarPtr& value) {
  if (FunctionSlot(name)) {
    // The types CPython's setters take (None also deletes __doc__'s text).
    bool right_type = true;
    if (name == "__name__" || name == "__qualname__") {
      right_type = value->is_constant() && PyUnicode_Check(value->object.get());
    } else if (name == "__annotations__") {
      right_type = value->kind == VarKind::kDict && !value->container_class;
    } else if (name == "__type_params__") {
      right_type = value->kind == VarKind::kTuple || (value->is_constant() && PyTuple_Check(value->object.get()));
    }
    if (!right_type) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("setting a function's ", name, " to ", Describe(*value)),
                   "the type is not one the attribute takes: the function would raise TypeError");
    }
    return AddDictEntry(fn->keys, fn->items, Var::Constant(python::FromString(name)), value);
  }
  if (name == "__code__" || name == "__defaults__" || name == "__kwdefaults__" || name == "__globals__" ||
      name == "__closure__" || name == "__dict__" || name == "__builtins__") {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat("setting ", name, " of a function made in the trace"),
                 "only plain attributes and what functools.wraps copies are traced");
  }
  return DictSet(FunctionDict(fn), Var::Constant(python::FromString(name)), value);
}

absl::Status Translator::StoreAttr(const VarPtr& obj, const std::string& name, const VarPtr& value) {
  if (obj->kind == VarKind::kUserObject) return StoreUserObjectAttr(obj, name, value);
  if (MadeInTrace(obj)) return StoreFunctionAttr(obj, name, value);
  if (IsUserDict(obj)) return StoreUserDictAttr(obj, name, value, /*through_class=*/true);
  const bool settable = obj->object && (obj->kind == VarKind::kNNModule || obj->kind == VarKind::kOpaque);
  if (!settable || value->kind == VarKind::kNNModule ||
      (value->is_tensor() && !value->source && !obj->source)) {
    return Break(ir::GraphBreak::SIDE_EFFECT,
                 absl::StrCat("setting attribute '", name, "' on ", Describe(*obj)),
                 "only plain attributes of modules and objects the function can reach are replayed");
  }
  attr_overlay_[std::make_pair(obj->object.get(), name)] = value;
  SideEffect e;
  e.kind = SideEffect::Kind::kStoreAttr;
  e.target = obj;
  e.name = name;
  e.value = value;
  side_effects_.push_back(std::move(e));
  return absl::OkStatus();
}

bool HasTensor(const ops::Value& v) {
  if (v.is_tensor()) return true;
  if (v.is_list()) {
    for (const ops::Value& item : v.items()) {
      if (HasTensor(item)) return true;
    }
  }
  return false;
}

}  // namespace dynamo::trace
