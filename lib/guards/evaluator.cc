#include "lib/guards/evaluator.h"

#include <Python.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/guards/versions.h"
#include "lib/ops/meta.h"
#include "lib/ops/proto_conversion.h"
#include "lib/ops/sym.h"
#include "lib/python/error.h"
#include "lib/python/torch_modes.h"

namespace dynamo::guards {

using python::Object;

namespace {

// ---------------------------------------------------------------------------
// Source paths: the grammar of python/dynamo/guards.py's _TOKEN.

struct Token {
  // kDictKey / kDictValue: `.keys()[i]` / `.values()[i]`, a dict's i-th
  // entry in iteration order (lib/trace/source.h).
  // kCall: `.name()`, a method called with no arguments (a pure query:
  // cls.__subclasses__(), t.untyped_storage()).
  enum Kind { kLocal, kGlobal, kModule, kAttr, kIndex, kKey, kDictKey, kDictValue, kCall };
  Kind kind = kLocal;
  std::string name;   // local/global/module/attribute name, or the str key
  int64_t index = 0;  // kIndex, kDictKey, kDictValue
  size_t end = 0;     // where the token ends in the source text
};

// A quoted key ('...', with \' and \\ escapes) starting at `pos`.
bool ParseQuoted(absl::string_view s, size_t& pos, std::string* out) {
  if (pos >= s.size() || s[pos] != '\'') return false;
  out->clear();
  for (++pos; pos < s.size(); ++pos) {
    char c = s[pos];
    if (c == '\'') {
      ++pos;
      return true;
    }
    if (c == '\\' && pos + 1 < s.size()) {
      char next = s[++pos];
      if (next != '\'' && next != '\\') out->push_back('\\');  // as _unquote leaves it
      out->push_back(next);
      continue;
    }
    out->push_back(c);
  }
  return false;
}

// The steps of source `s` from `from` on: the whole source (root first)
// from 0, or from a token boundary the steps that follow (no root).
absl::StatusOr<std::vector<Token>> ParseSource(absl::string_view s, size_t from = 0) {
  std::vector<Token> tokens;
  size_t pos = from;
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("cannot parse source '", s, "' at ", pos, ": ", what));
  };
  while (true) {
    while (pos < s.size() && absl::ascii_isspace(static_cast<unsigned char>(s[pos]))) ++pos;
    if (pos >= s.size()) break;
    Token t;
    absl::string_view rest = s.substr(pos);
    bool root = false;
    if (absl::StartsWith(rest, "L[") || absl::StartsWith(rest, "G[") ||
        absl::StartsWith(rest, "sys.modules[")) {
      root = true;
      t.kind = rest[0] == 'L' ? Token::kLocal : rest[0] == 'G' ? Token::kGlobal : Token::kModule;
      pos += t.kind == Token::kModule ? 12 : 2;
      if (!ParseQuoted(s, pos, &t.name) || pos >= s.size() || s[pos] != ']') return bad("a quoted name");
      ++pos;
    } else if (rest[0] == '.') {
      t.kind = Token::kAttr;
      size_t start = ++pos;
      while (pos < s.size() && (absl::ascii_isalnum(static_cast<unsigned char>(s[pos])) || s[pos] == '_')) ++pos;
      if (pos == start || absl::ascii_isdigit(static_cast<unsigned char>(s[start]))) return bad("an attribute name");
      t.name = std::string(s.substr(start, pos - start));
      if ((t.name == "keys" || t.name == "values") && absl::StartsWith(s.substr(pos), "()[")) {
        t.kind = t.name == "keys" ? Token::kDictKey : Token::kDictValue;
        pos += 3;
        size_t digits = pos;
        while (pos < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
        if (!absl::SimpleAtoi(s.substr(digits, pos - digits), &t.index)) return bad("a dict position");
        if (pos >= s.size() || s[pos] != ']') return bad("']'");
        ++pos;
      } else if (absl::StartsWith(s.substr(pos), "()")) {
        t.kind = Token::kCall;
        pos += 2;
      }
    } else if (rest[0] == '[') {
      ++pos;
      if (pos < s.size() && s[pos] == '\'') {
        t.kind = Token::kKey;
        if (!ParseQuoted(s, pos, &t.name)) return bad("a quoted key");
      } else {
        t.kind = Token::kIndex;
        size_t start = pos;
        if (pos < s.size() && s[pos] == '-') ++pos;
        while (pos < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
        if (!absl::SimpleAtoi(s.substr(start, pos - start), &t.index)) return bad("an index");
      }
      if (pos >= s.size() || s[pos] != ']') return bad("']'");
      ++pos;
    } else {
      return bad("an unexpected character");
    }
    if (root != (tokens.empty() && from == 0)) {
      return bad(root ? "a second root" : "no root (L[...], G[...], sys.modules[...])");
    }
    t.end = pos;
    tokens.push_back(std::move(t));
  }
  if (tokens.empty()) return bad("an empty source");
  return tokens;
}

// ---------------------------------------------------------------------------
// Small C-API helpers.

Object Intern(absl::string_view s) { return Object::Borrow(python::Interned(s)); }

// d[key] as a new reference; KeyError (like a Python dict) when missing.
Object DictItem(PyObject* dict, PyObject* key) {
  if (dict == nullptr) {
    PyErr_SetObject(PyExc_KeyError, key);
    return {};
  }
  PyObject* v = PyDict_GetItemWithError(dict, key);
  if (v == nullptr && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
  return Object::Borrow(v);
}

// A dict whose lookups, membership and iteration are dict's own C code.
bool IsPlainDict(PyObject* d) { return PyDict_CheckExact(d) || Py_IS_TYPE(d, &PyODict_Type); }

std::string TypeShortName(PyObject* v) { return _PyType_Name(Py_TYPE(v)); }

// The pending exception's repr ("KeyError('x')"), clearing it.
std::string TakeErrorRepr() {
  if (!PyErr_Occurred()) return "no exception";
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) || PyErr_ExceptionMatches(PyExc_SystemExit)) {
    python::ClearError();  // set aside for the boundary to raise again
    return "interrupted";
  }
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  Object t = Object::Steal(type), v = Object::Steal(value), b = Object::Steal(tb);
  return v ? python::Repr(v) : python::Repr(t);
}

std::string Str(PyObject* o) {
  Object s = Object::Steal(PyObject_Str(o));
  absl::StatusOr<std::string> text = s ? python::AsString(s) : absl::UnknownError("");
  if (!text.ok()) {
    python::ClearError();
    return "<str failed>";
  }
  return *text;
}

using python::IdentityName;

// A type as it was when a fast path was planned: valid while the object's
// type is this one and the type (and its bases) has not been modified since,
// which CPython records by changing the version tag. No reference is held:
// CPython never hands a version tag out twice, so a type that died and a new
// one at its address differ in their tags, and a plan never keeps a class
// (and, through its methods' code objects, the cache holding the plan) alive.
// (HasValidTypeTag, lib/guards/versions.h, says when a tag is valid.)

struct PinnedType {
  PyTypeObject* type = nullptr;
  unsigned int tag = 0;

  bool Pin(PyTypeObject* t) {
    if (!HasValidTypeTag(t)) return false;
    type = t;
    tag = t->tp_version_tag;
    return true;
  }
  bool Holds(PyObject* v) const {
    PyTypeObject* t = Py_TYPE(v);
    return t == type && t->tp_version_tag == tag && HasValidTypeTag(t);
  }
};

// Whether the program's identity pins all still stand (see Program::Keep).
// Shared with the weak references' callback, which may outlive the program.
struct Life {
  bool dead = false;
  std::function<void()> on_death;
};

// A call step's value: only the pure queries the trace asks through call
// sources (lib/trace/source.h), each on the type it is defined for -- a
// capture file is data, and its guards must not call anything else.
Object CallQuery(PyObject* base, PyObject* name) {
  const char* n = PyUnicode_AsUTF8(name);
  if (n == nullptr) return {};
  if (std::strcmp(n, "__subclasses__") == 0 && PyType_Check(base)) {
    // type's own method, whatever the class defines under that name.
    return Object::Steal(PyObject_CallMethod(reinterpret_cast<PyObject*>(&PyType_Type), "__subclasses__", "O", base));
  }
  if (std::strcmp(n, "__reduce__") == 0 && python::IsTupleIterator(base)) {
    // A tuple's iterator: (iter, (tuple,), position), its state.
    return Object::Steal(PyObject_CallMethodNoArgs(base, name));
  }
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed; loaded if base is torch's
  const char* type = std::strcmp(n, "untyped_storage") == 0                          ? "Tensor"
                     : std::strcmp(n, "size") == 0 || std::strcmp(n, "nbytes") == 0 ? "UntypedStorage"
                                                                                      : nullptr;
  Object cls = torch != nullptr && type != nullptr ? Object::Steal(PyObject_GetAttrString(torch, type)) : Object();
  python::ClearError();
  const bool of_type = cls && PyType_Check(cls.get()) &&
                       (std::strcmp(type, "Tensor") == 0
                            ? PyObject_TypeCheck(base, reinterpret_cast<PyTypeObject*>(cls.get()))
                            : Py_TYPE(base) == reinterpret_cast<PyTypeObject*>(cls.get()));
  if (!of_type) {
    PyErr_Format(PyExc_TypeError, "a guard source may call only cls.__subclasses__(), tensor.untyped_storage(), "
                 "storage.size() / nbytes() and a tuple iterator's __reduce__(), not %s() of a %s", n,
                 Py_TYPE(base)->tp_name);
    return {};
  }
  return Object::Steal(PyObject_CallMethodNoArgs(base, name));
}

// ---------------------------------------------------------------------------
// The program.

enum class StepKind : uint8_t { kLocal, kGlobal, kModule, kAttr, kIndex, kKey, kDictKey, kDictValue, kCall };

// How an attribute, item or length is read, decided from the object found at
// compile time (see the header).
enum class Plan : uint8_t {
  kGeneric,      // PyObject_GetAttr / PyObject_GetItem / PyObject_Length
  kDict,         // attribute: the instance __dict__ (a module's dict), else generic
  kNnModule,     // attribute: __dict__, then _parameters, _buffers, _modules
  kSequential,   // item / len: nn.Sequential over _modules
  kModuleList,   // item / len: nn.ModuleList over _modules
  kModuleDict,   // item / len: nn.ModuleDict over _modules
};

struct Step {
  StepKind kind = StepKind::kLocal;
  Plan plan = Plan::kGeneric;
  int slot = -1;      // kLocal
  bool cell = false;  // kLocal: a cell or free variable
  Object key;         // interned name / attribute / str key; a Python int for kIndex
  int64_t index = 0;  // kIndex, kDictKey, kDictValue
  Object index_key;   // kModuleList with index >= 0: str(index)
  PinnedType pin;     // the type the plan was made for
};

// The size symbols bound by the TENSOR_MATCH guards of the check in
// progress on this thread (dynamic shapes), for the SHAPE_ENV guard after
// them; null when none is in progress. Per thread, and saved and restored
// per check: a guard that runs Python code (a __getattr__) may let another
// thread check the same program, or check another program on this one.
thread_local ops::SymBindings* t_bindings = nullptr;

class BindingsScope {
 public:
  explicit BindingsScope(ops::SymBindings* b) : saved_(t_bindings) { t_bindings = b; }
  ~BindingsScope() { t_bindings = saved_; }
  BindingsScope(const BindingsScope&) = delete;
  BindingsScope& operator=(const BindingsScope&) = delete;

 private:
  ops::SymBindings* saved_;
};

struct TensorSpec {
  PyObject* exact_type = nullptr;  // the tensor's exact type (Program::Keep)
  PinnedType type;   // the same type; the C getters are valid under its tag
  bool fast = false;
  PyGetSetDef* shape = nullptr;
  PyGetSetDef* dtype_get = nullptr;
  PyGetSetDef* device_get = nullptr;
  PyGetSetDef* requires_grad_get = nullptr;
  PyGetSetDef* is_cpu_get = nullptr;  // set when the expected device is the CPU
  PyObject* stride = nullptr;  // the method descriptor; kept alive by the type
  Object dtype;                // torch.float32
  Object device;               // torch.device('cpu')
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  bool check_strides = false;
  bool requires_grad = false;
  // Dynamic shapes: a dim whose size is a symbol binds it (or, bound
  // already, must equal it); one that is an expression must equal its
  // value; strides are expressions over the symbols.
  bool symbolic = false;
  std::vector<std::string> size_symbols;         // per dim: the symbol, or ""
  std::vector<std::optional<ops::SymExpr>> size_exprs;  // per dim: an expression that is no lone symbol
  std::vector<ops::SymExpr> stride_exprs;
  std::string expected_text;                     // "[s0, 3]" for messages
  // torch's own check of a tensor's metadata (torch._C._dynamo.guards.
  // TensorGuards: type, dispatch keys, dtype, device, requires_grad, sizes
  // and strides read in C++, without the tuples the Python getters make),
  // made from the first tensor this spec's own check passes on. Its True
  // implies every field below holds; its False is decided by them (it is
  // stricter: dispatch keys), so it only ever saves time.
  mutable Object fast_check;  // the bound check method; null: not made yet, or none
  mutable bool fast_tried = false;
};

// SHAPE_ENV: each symbol's range, then the relations.
struct ShapeCheck {
  struct Symbol {
    std::string name, source;
    int dim = 0;
    int64_t min = 0, max = 0;  // max 0: unbounded
  };
  std::vector<Symbol> symbols;
  std::vector<ops::SymRelation> relations;
};

// What ID_MATCH and TYPE_MATCH compare by address. Each part is kept by
// Program::Keep: weakly where its type allows, so that a dead one kills the
// program before its address can be reused.
struct Identity {
  // kMethod: a bound method, made afresh on every attribute read: the same
  // function bound to the same object. kBuiltinMethod: a builtin bound to an
  // object (list.append of one list): the same C function of the same type
  // bound to the same object.
  enum Kind : uint8_t { kObject, kMethod, kBuiltinMethod };
  Kind kind = kObject;
  PyObject* object = nullptr;  // the object; kMethod: the function
  PyObject* self = nullptr;    // kMethod, kBuiltinMethod: what it is bound to
  PyTypeObject* type = nullptr;    // kBuiltinMethod
  PyMethodDef* method = nullptr;   // kBuiltinMethod
};

struct CompiledCheck {
  ir::Guard::Kind kind = ir::Guard::KIND_UNSPECIFIED;
  int guard = -1;     // index in the compiled guard list
  Object object;      // EQUALS_MATCH: the value; HASATTR: the name
  Identity identity;  // ID_MATCH: the object; TYPE_MATCH: the type
  int64_t length = 0; // LENGTH_MATCH
  Plan plan = Plan::kGeneric;  // LENGTH_MATCH on nn containers
  PinnedType pin;
  int tensor = -1;    // TENSOR_MATCH: index into Program::tensors
  bool present = false;  // HASATTR: whether the attribute (`object`, interned) exists
  bool item = false;     // HASATTR of a key: `object in value` instead
};

int Cost(ir::Guard::Kind kind) {
  switch (kind) {
    case ir::Guard::ID_MATCH:
    case ir::Guard::IS_NONE:
      return 0;
    case ir::Guard::TYPE_MATCH:
      return 1;
    case ir::Guard::EQUALS_MATCH:
      return 2;
    case ir::Guard::LENGTH_MATCH:
      return 3;
    default:
      return 4;
  }
}

// One accessor of the program. Nodes are stored in preorder, so Check() is
// one loop: a node's parent is the last node seen one level up.
struct Node {
  Step step;
  int parent = -1;       // index of the parent node; -1 for a root
  int depth = 0;         // 0 for roots
  int check_begin = 0;   // its checks: Program::checks[check_begin, check_end),
  int check_end = 0;     // cheapest first
  int subtree_end = 0;   // the first node after its descendants
  // Version stamps (lib/guards/versions.h): what of this node's value the
  // stamp of the subtree it is in records, and, for the root of a stamped
  // subtree, its index in Program::memos (-1: none).
  StampNeeds needs;
  int memo = -1;
  int stamped_by = -1;   // the memo of the stamped subtree it is inside
  bool aliased = false;  // an OBJECT_ALIASING guard reads it
  int alias_slot = -1;   // where in its memo's `aliased` the value is recorded
};

// The stamp of one subtree whose guards all held when it was recorded: while
// every part matches, they all hold again without being read, and the nodes
// aliasing guards read hold the objects recorded (borrowed, as the parts).
struct Memo {
  bool valid = false;
  std::vector<StampPart> parts;
  std::vector<std::pair<int, PyObject*>> aliased;  // (node, value)
};

struct GlobalCheck {
  // Whether torch._C._dynamo.guards.GlobalStateGuard compares this state
  // (grad mode, autocast on cpu and cuda, deterministic algorithms, the
  // default dtype, TF32): see Program::GlobalsHold.
  bool in_snapshot = false;
  Object reader;  // torch.is_grad_enabled, ...; null for the function-mode stack
  bool expected = false;
  Object expected_object;  // a state that is not a bool (the default dtype): the value itself
  std::string expected_modes;  // the function-mode stack (python::TorchFunctionModes())
  // For "autocast off on cpu / cuda": torch._C._is_any_autocast_enabled,
  // which answers False for both at once in about half the time of one
  // per-device read (every call of every capture checks both).
  Object none_enabled;
};

// OBJECT_ALIASING: the accessors of the compared values and their groups.
struct AliasCheck {
  std::vector<int> nodes;   // flat node indexes, parallel to the guard's sources
  std::vector<int> groups;
};

struct GuardRef {
  int node = -1;   // -1: a global check or an aliasing check
  int check = -1;  // index into Program::checks, or into Program::globals
  int alias = -1;  // index into Program::aliases
  int shape = -1;  // index into Program::shapes
};

// Same type at every level and equal values: 1, 0, or -1 with an exception.
// A NaN equals a NaN here: the guard asks whether the value is the one the
// trace saw, not what == says.
int SameConstant(PyObject* v, PyObject* e) {
  if (v == e) return 1;
  PyTypeObject* t = Py_TYPE(e);
  if (Py_TYPE(v) != t) return 0;
  if (t == &PyFloat_Type) {
    double a = PyFloat_AS_DOUBLE(v), b = PyFloat_AS_DOUBLE(e);
    return a == b || (std::isnan(a) && std::isnan(b));
  }
  if (PyTuple_Check(e) || PyList_Check(e)) {
    bool tuple = PyTuple_Check(e);
    Py_ssize_t n = tuple ? PyTuple_GET_SIZE(e) : PyList_GET_SIZE(e);
    if ((tuple ? PyTuple_GET_SIZE(v) : PyList_GET_SIZE(v)) != n) return 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
      // Lists are read item by item: nothing here runs Python code that could
      // resize them.
      PyObject* a = tuple ? PyTuple_GET_ITEM(v, i) : PyList_GET_ITEM(v, i);
      PyObject* b = tuple ? PyTuple_GET_ITEM(e, i) : PyList_GET_ITEM(e, i);
      int same = SameConstant(a, b);
      if (same != 1) return same;
    }
    return 1;
  }
  if (t == &PyDict_Type) {
    if (PyDict_Size(v) != PyDict_Size(e)) return 0;
    Py_ssize_t pos = 0;
    PyObject *k = nullptr, *b = nullptr;
    while (PyDict_Next(e, &pos, &k, &b)) {
      PyObject* a = PyDict_GetItemWithError(v, k);
      if (a == nullptr) return PyErr_Occurred() ? -1 : 0;
      int same = SameConstant(a, b);
      if (same != 1) return same;
    }
    return 1;
  }
  return PyObject_RichCompareBool(v, e, Py_EQ);
}

// ID_MATCH: the very object (see Identity).
bool SameObject(PyObject* v, const Identity& id) {
  switch (id.kind) {
    case Identity::kObject:
      return v == id.object;
    case Identity::kMethod:
      return PyMethod_Check(v) && PyMethod_Function(v) == id.object && PyMethod_Self(v) == id.self;
    case Identity::kBuiltinMethod:
      return Py_TYPE(v) == id.type && PyCFunction_GetSelf(v) == id.self &&
             reinterpret_cast<PyCFunctionObject*>(v)->m_ml == id.method;
  }
  return false;
}

// Constants that cannot change in place, so the object found at compile time
// can stand for the expected value (torch.Size, bytes, torch.dtype, ...).
bool DeeplyImmutable(PyObject* v) {
  if (v == Py_None || v == Py_Ellipsis || PyBool_Check(v) || PyLong_CheckExact(v) ||
      PyFloat_CheckExact(v) || PyComplex_CheckExact(v) || PyUnicode_CheckExact(v) ||
      PyBytes_CheckExact(v) || PyCode_Check(v) || PySlice_Check(v)) {
    return true;
  }
  const char* type_name = Py_TYPE(v)->tp_name;
  if (PyTuple_CheckExact(v) || std::strcmp(type_name, "torch.Size") == 0) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); ++i) {
      if (!DeeplyImmutable(PyTuple_GET_ITEM(v, i))) return false;
    }
    return true;
  }
  for (const char* name : {"torch.dtype", "torch.device", "torch.memory_format", "torch.layout"}) {
    if (std::strcmp(type_name, name) == 0) return true;
  }
  return python::IsNumpyNumber(v);  // NumPy's number and bool scalars are values
}

std::string Ints(const std::vector<int64_t>& v) { return absl::StrCat("[", absl::StrJoin(v, ", "), "]"); }

// A tuple of ints (torch.Size, a stride tuple) into `out`; false if it is not.
bool ReadInts(PyObject* t, std::vector<int64_t>* out) {
  if (t == nullptr || !PyTuple_Check(t)) return false;
  out->clear();
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) {
    long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    if (x == -1 && PyErr_Occurred()) return false;
    out->push_back(x);
  }
  return true;
}

bool IntsEqual(PyObject* t, const std::vector<int64_t>& want) {
  if (t == nullptr || !PyTuple_Check(t) || PyTuple_GET_SIZE(t) != static_cast<Py_ssize_t>(want.size())) {
    return false;
  }
  for (size_t i = 0; i < want.size(); ++i) {
    long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(t, static_cast<Py_ssize_t>(i)));
    if (x != want[i] || (x == -1 && PyErr_Occurred())) return false;
  }
  return true;
}

}  // namespace

struct GuardEvaluator::Program {
  // As compiled, for messages: views into `owned_guards` or into guards
  // `guards_owner` keeps alive and unchanged (a live capture's).
  std::vector<const ir::Guard*> guards;
  std::vector<ir::Guard> owned_guards;
  std::shared_ptr<const void> guards_owner;
  std::vector<GuardRef> refs;      // parallel to guards
  std::vector<Node> nodes;             // preorder
  std::vector<CompiledCheck> checks;   // grouped by node
  int max_depth = 0;
  std::vector<GlobalCheck> globals;
  // One GlobalStateGuard snapshot of the global state, taken when every
  // global check held: while torch's one check() of it says nothing has
  // changed, the checks it covers hold without their reads (~0.1 us a call).
  mutable Object snapshot_check;  // its bound check method
  mutable bool snapshot_unavailable = false;
  bool GlobalsHold() const;
  std::vector<AliasCheck> aliases;
  std::vector<TensorSpec> tensors;
  std::vector<ShapeCheck> shapes;
  // Per stamped subtree (Node::memo); written by Run, hence mutable (all
  // under the GIL).
  mutable std::vector<Memo> memos;
  bool ShapeHolds(const ShapeCheck& c, std::string* why) const;
  bool SymbolicTensorHolds(const TensorSpec& t, PyObject* v, PyObject* shape, std::string* why) const;
  Object s_parameters, s_buffers, s_modules, s_shape, s_dtype, s_device, s_requires_grad, s_stride;
  // Identity pins: what ID_MATCH / TYPE_MATCH / a tensor's exact type
  // compare by address, kept without keeping them alive (see Keep).
  std::shared_ptr<Life> life = std::make_shared<Life>();
  Object on_death;                // the weak references' callback, bound to `life`
  std::vector<Object> watches;    // weak references to the pinned objects
  std::vector<Object> kept;       // pinned objects that cannot be weakly referenced
  absl::flat_hash_set<PyObject*> pinned;  // what is already watched or kept

  // Makes `o` safe to compare by address for the life of the program: a
  // class that is not a heap type lives as long as the interpreter; any
  // other object is watched through a weak reference whose callback kills
  // the program (Check() fails from then on, and the owner is told), so a
  // new object at a dead one's address never matches; an object that
  // cannot be weakly referenced (a list, a dict, a tuple) is held, as
  // torch._dynamo cannot do either: it only checks their id, we keep them.
  absl::Status Keep(PyObject* o);

  Object Read(const Step& s, PyObject* base, const FrameView& f) const;
  Object ReadAttr(const Step& s, PyObject* base) const;
  Object ReadIndex(const Step& s, PyObject* base) const;
  Object ReadKey(const Step& s, PyObject* base) const;
  static Object ReadDictEntry(const Step& s, PyObject* base);
  Object ModulesOf(PyObject* v) const;
  Py_ssize_t Length(const CompiledCheck& c, PyObject* v) const;
  Object TensorField(const TensorSpec& t, PyObject* v, PyGetSetDef* fast, PyObject* name) const;
  bool TensorHolds(const TensorSpec& t, PyObject* v, std::string* why) const;
  bool FieldsHold(const TensorSpec& t, PyObject* v, std::string* why) const;
  void MakeFastCheck(const TensorSpec& t, PyObject* v) const;
  bool Holds(const CompiledCheck& c, PyObject* v, std::string* why) const;
  bool GlobalHolds(const GlobalCheck& g, std::string* why) const;
  // `matched`: per memo, whether Run found its stamp unchanged (null: none).
  // With `quiet_since`: the memos of `matched` held at that dict epoch
  // (versions.h), and still hold while no dict has changed since.
  bool AliasHolds(size_t guard, const AliasCheck& a, const FrameView& f, std::string* why,
                  const std::vector<char>* matched = nullptr, uint64_t* quiet_since = nullptr) const;
  // Sets (*matched)[m] for each memo whose stamp held.
  bool Run(const FrameView& f, std::vector<char>* matched) const;
  // The value of `node` in `f`, or null with the Python exception set.
  Object Resolve(int node, const FrameView& f) const;
  std::optional<std::string> ExplainGuard(size_t i, const FrameView& f) const;
};

using Program = GuardEvaluator::Program;

namespace {

absl::StatusOr<Object> TorchAttr(absl::string_view name);

// Process-wide, under the GIL: how often the fast paths answered.
uint64_t torch_tensor_count = 0;
uint64_t snapshot_hit_count = 0;

// The weak references' callback: `self` is a capsule holding the program's
// Life. Runs in the middle of the dying object's deallocation (or the
// garbage collector's sweep), with the GIL.
PyObject* OnPinnedDeath(PyObject* self, PyObject* weakref) {
  auto* life = static_cast<std::shared_ptr<Life>*>(PyCapsule_GetPointer(self, "dynamo.guards.Life"));
  if (life == nullptr) return nullptr;
  std::shared_ptr<Life> keep = *life;  // the owner may drop the program (and this capsule) below
  Object ref = Object::Borrow(weakref);
  if (!keep->dead) {
    keep->dead = true;
    std::function<void()> tell = std::move(keep->on_death);
    keep->on_death = nullptr;
    if (tell) tell();
  }
  Py_RETURN_NONE;
}

PyMethodDef kOnPinnedDeath = {"guard_object_died", OnPinnedDeath, METH_O, nullptr};

}  // namespace

absl::Status Program::Keep(PyObject* o) {
  if (PyType_Check(o) && !(reinterpret_cast<PyTypeObject*>(o)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    return absl::OkStatus();  // a static type: never freed
  }
  if (!pinned.insert(o).second) return absl::OkStatus();
  if (!on_death) {
    Object capsule = Object::Steal(PyCapsule_New(new std::shared_ptr<Life>(life), "dynamo.guards.Life", [](PyObject* c) {
      delete static_cast<std::shared_ptr<Life>*>(PyCapsule_GetPointer(c, "dynamo.guards.Life"));
    }));
    if (!capsule) return python::FetchError("making a guard's weak-reference callback");
    on_death = Object::Steal(PyCFunction_New(&kOnPinnedDeath, capsule.get()));
    if (!on_death) return python::FetchError("making a guard's weak-reference callback");
  }
  Object ref = Object::Steal(PyWeakref_NewRef(o, on_death.get()));
  if (ref) {
    watches.push_back(std::move(ref));
    return absl::OkStatus();
  }
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return python::FetchError("watching a guarded object");
  python::ClearError();  // no weak references for this type: held
  kept.push_back(Object::Borrow(o));
  return absl::OkStatus();
}

Object Program::Read(const Step& s, PyObject* base, const FrameView& f) const {
  switch (s.kind) {
    case StepKind::kLocal: {
      PyObject* v = nullptr;
      if (f.locals != nullptr && (f.names == nullptr || static_cast<size_t>(s.slot) < f.names->size())) {
        v = f.locals[s.slot];
        if (v != nullptr && s.cell && PyCell_Check(v)) v = PyCell_GET(v);
      }
      if (v == nullptr) PyErr_SetObject(PyExc_KeyError, s.key.get());
      return Object::Borrow(v);
    }
    case StepKind::kGlobal:
      return DictItem(f.globals, s.key.get());
    case StepKind::kModule:
      return DictItem(PyImport_GetModuleDict(), s.key.get());
    case StepKind::kAttr:
      return ReadAttr(s, base);
    case StepKind::kIndex:
      return ReadIndex(s, base);
    case StepKind::kKey:
      return ReadKey(s, base);
    case StepKind::kDictKey:
    case StepKind::kDictValue:
      return ReadDictEntry(s, base);
    case StepKind::kCall:
      return CallQuery(base, s.key.get());
  }
  return {};
}

// list(d.keys())[i] / list(d.values())[i]: an exact dict walked in place
// (its storage order is its iteration order), any other mapping through
// its own keys() / values().
Object Program::ReadDictEntry(const Step& s, PyObject* base) {
  const bool key = s.kind == StepKind::kDictKey;
  if (PyDict_CheckExact(base)) {
    Py_ssize_t pos = 0, at = 0;
    PyObject *k = nullptr, *v = nullptr;
    while (PyDict_Next(base, &pos, &k, &v)) {
      if (at++ == s.index) return Object::Borrow(key ? k : v);
    }
    PyErr_SetString(PyExc_IndexError, "dict position out of range");
    return {};
  }
  Object view = Object::Steal(PyObject_CallMethod(base, key ? "keys" : "values", nullptr));
  Object list = view ? Object::Steal(PySequence_List(view.get())) : Object();
  if (!list) return {};
  if (s.index >= PyList_GET_SIZE(list.get())) {
    PyErr_SetString(PyExc_IndexError, "dict position out of range");
    return {};
  }
  return Object::Borrow(PyList_GET_ITEM(list.get(), s.index));
}

Object Program::ReadAttr(const Step& s, PyObject* base) const {
  if (s.plan != Plan::kGeneric && s.pin.Holds(base)) {
    Object dict = Object::Steal(PyObject_GenericGetDict(base, nullptr));
    if (!dict) return {};
    if (PyObject* v = PyDict_GetItemWithError(dict.get(), s.key.get())) return Object::Borrow(v);
    if (PyErr_Occurred()) return {};
    if (s.plan == Plan::kNnModule) {
      // nn.Module.__getattr__, which Python runs after a miss in __dict__.
      for (PyObject* which : {s_parameters.get(), s_buffers.get(), s_modules.get()}) {
        PyObject* d = PyDict_GetItemWithError(dict.get(), which);
        if (d == nullptr) {
          if (PyErr_Occurred()) return {};
          continue;
        }
        if (!IsPlainDict(d)) return Object::Steal(PyObject_GetAttr(base, s.key.get()));
        if (PyObject* v = PyDict_GetItemWithError(d, s.key.get())) return Object::Borrow(v);
        if (PyErr_Occurred()) return {};
      }
      PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute '%U'", _PyType_Name(Py_TYPE(base)),
                   s.key.get());
      return {};
    }
  }
  return Object::Steal(PyObject_GetAttr(base, s.key.get()));
}

Object Program::ModulesOf(PyObject* v) const {
  Object dict = Object::Steal(PyObject_GenericGetDict(v, nullptr));
  if (!dict) {
    python::ClearError();
    return {};
  }
  PyObject* m = PyDict_GetItemWithError(dict.get(), s_modules.get());
  if (m == nullptr || !IsPlainDict(m)) {
    python::ClearError();
    return {};
  }
  return Object::Borrow(m);
}

Object Program::ReadIndex(const Step& s, PyObject* base) const {
  if (PyList_CheckExact(base) || PyTuple_CheckExact(base)) {
    bool list = PyList_CheckExact(base);
    Py_ssize_t n = Py_SIZE(base);
    Py_ssize_t i = static_cast<Py_ssize_t>(s.index);
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
      PyErr_SetString(PyExc_IndexError, list ? "list index out of range" : "tuple index out of range");
      return {};
    }
    return Object::Borrow(list ? PyList_GET_ITEM(base, i) : PyTuple_GET_ITEM(base, i));
  }
  if ((s.plan == Plan::kSequential || s.plan == Plan::kModuleList) && s.pin.Holds(base)) {
    if (Object modules = ModulesOf(base)) {
      PyObject* m = modules.get();
      Py_ssize_t n = PyDict_Size(m);
      Py_ssize_t i = static_cast<Py_ssize_t>(s.index);
      if (i < -n || i >= n) {
        PyErr_Format(PyExc_IndexError, "index %lld is out of range", static_cast<long long>(s.index));
        return {};
      }
      if (i < 0) i += n;
      if (s.plan == Plan::kModuleList) {  // _modules[str(i)]
        Object key = s.index >= 0 ? s.index_key : Object::Steal(PyUnicode_FromFormat("%zd", i));
        return key ? DictItem(m, key.get()) : Object();
      }
      // Sequential: the i-th value, in the dict's own order.
      if (PyDict_CheckExact(m)) {
        Py_ssize_t pos = 0, at = 0;
        PyObject *k = nullptr, *v = nullptr;
        while (PyDict_Next(m, &pos, &k, &v)) {
          if (at++ == i) return Object::Borrow(v);
        }
      } else {  // an OrderedDict keeps its order apart from the dict's
        Object it = Object::Steal(PyObject_GetIter(m));
        for (Py_ssize_t at = 0; it; ++at) {
          Object k = Object::Steal(PyIter_Next(it.get()));
          if (!k) break;
          if (at == i) return DictItem(m, k.get());
        }
      }
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "_modules changed size");
      return {};
    }
  }
  return Object::Steal(PyObject_GetItem(base, s.key.get()));
}

Object Program::ReadKey(const Step& s, PyObject* base) const {
  if (PyDict_CheckExact(base)) return DictItem(base, s.key.get());
  if (s.plan == Plan::kModuleDict && s.pin.Holds(base)) {
    if (Object modules = ModulesOf(base)) return DictItem(modules.get(), s.key.get());
  }
  return Object::Steal(PyObject_GetItem(base, s.key.get()));
}

Py_ssize_t Program::Length(const CompiledCheck& c, PyObject* v) const {
  if (c.plan != Plan::kGeneric && c.pin.Holds(v)) {
    if (Object modules = ModulesOf(v)) return PyDict_Size(modules.get());
  }
  return PyObject_Length(v);
}

Object Program::TensorField(const TensorSpec& t, PyObject* v, PyGetSetDef* fast, PyObject* name) const {
  if (t.fast && fast != nullptr && t.type.Holds(v)) return Object::Steal(fast->get(v, fast->closure));
  return Object::Steal(PyObject_GetAttr(v, name));
}

bool Program::TensorHolds(const TensorSpec& t, PyObject* v, std::string* why) const {
  // Only for a class whose metadata getters are torch's C ones (t.fast),
  // unchanged since (a Python `shape` of a subclass could say otherwise
  // than the C++ sizes torch's check reads).
  if (why == nullptr && t.fast_check && t.type.Holds(v)) {
    Object same = Object::Steal(PyObject_CallOneArg(t.fast_check.get(), v));
    if (same.get() == Py_True) {
      ++torch_tensor_count;
      return true;
    }
    if (!same) python::ClearError();
  }
  if (!FieldsHold(t, v, why)) return false;
  if (!t.fast_tried && t.fast && !t.symbolic) MakeFastCheck(t, v);
  return true;
}

void Program::MakeFastCheck(const TensorSpec& t, PyObject* v) const {
  t.fast_tried = true;
  absl::StatusOr<Object> guard_class = TorchAttr("_C._dynamo.guards.TensorGuards");
  Object sizes = Object::Steal(PyList_New(0)), strides = Object::Steal(PyList_New(0));
  for (size_t i = 0; sizes && strides && i < t.sizes.size(); ++i) {
    Object size = Object::Steal(PyLong_FromLongLong(t.sizes[i]));
    Object stride = t.check_strides ? Object::Steal(PyLong_FromLongLong(t.strides[i])) : Object::Borrow(Py_None);
    if (!size || !stride || PyList_Append(sizes.get(), size.get()) != 0 ||
        PyList_Append(strides.get(), stride.get()) != 0) {
      sizes = Object();
    }
  }
  Object args = Object::Steal(PyTuple_Pack(1, v));
  Object all_sizes = sizes ? Object::Steal(PyList_New(1)) : Object();
  Object all_strides = strides ? Object::Steal(PyList_New(1)) : Object();
  Object kwargs = Object::Steal(PyDict_New());
  if (!guard_class.ok() || !args || !all_sizes || !all_strides || !kwargs) {
    python::ClearError();
    return;  // an older torch, or no memory: the fields are read
  }
  PyList_SET_ITEM(all_sizes.get(), 0, sizes.release());
  PyList_SET_ITEM(all_strides.get(), 0, strides.release());
  if (PyDict_SetItemString(kwargs.get(), "dynamic_dims_sizes", all_sizes.get()) != 0 ||
      PyDict_SetItemString(kwargs.get(), "dynamic_dims_strides", all_strides.get()) != 0) {
    python::ClearError();
    return;
  }
  Object guard = Object::Steal(PyObject_Call(guard_class->get(), args.get(), kwargs.get()));
  Object check = guard ? Object::Steal(PyObject_GetAttrString(guard.get(), "check")) : Object();
  if (!check) {
    python::ClearError();
    return;
  }
  // Made from a tensor the fields hold on; it must say so too, or it is
  // not used (a tensor torch's check does not describe as we do).
  Object same = Object::Steal(PyObject_CallOneArg(check.get(), v));
  if (same.get() == Py_True) t.fast_check = check;
  python::ClearError();
}

bool Program::FieldsHold(const TensorSpec& t, PyObject* v, std::string* why) const {
  if (reinterpret_cast<PyObject*>(Py_TYPE(v)) != t.exact_type) {
    if (why != nullptr) {
      // A tensor of another class (nn.Parameter for torch.Tensor) or no tensor.
      bool is_tensor = false;
      PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
      if (torch != nullptr) {
        Object cls = Object::Steal(PyObject_GetAttrString(torch, "Tensor"));
        is_tensor = cls && PyObject_IsInstance(v, cls.get()) == 1;
        python::ClearError();
      }
      *why = is_tensor ? absl::StrCat("type: expected ", IdentityName(t.exact_type), ", got ",
                                      IdentityName(reinterpret_cast<PyObject*>(Py_TYPE(v))))
                       : absl::StrCat("expected a tensor, got ", TypeShortName(v));
    }
    return false;
  }
  // python/dynamo/guards.py's field order, so Explain names the same field.
  Object dtype = TensorField(t, v, t.dtype_get, s_dtype.get());
  if (dtype.get() != t.dtype.get()) {
    if (why != nullptr) *why = absl::StrCat("dtype: expected ", Str(t.dtype.get()), ", got ", dtype ? Str(dtype.get()) : TakeErrorRepr());
    return false;
  }
  // A CPU tensor's device is always torch.device('cpu'): is_cpu answers
  // without making a device object.
  Object device;
  bool same_device = false;
  if (t.is_cpu_get != nullptr && t.type.Holds(v)) {
    Object is_cpu = Object::Steal(t.is_cpu_get->get(v, t.is_cpu_get->closure));
    same_device = is_cpu.get() == Py_True;
  } else {
    device = TensorField(t, v, t.device_get, s_device.get());
    same_device = device && PyObject_RichCompareBool(device.get(), t.device.get(), Py_EQ) == 1;
  }
  if (!same_device) {
    if (why != nullptr) {
      python::ClearError();
      if (!device) device = TensorField(t, v, t.device_get, s_device.get());
      *why = absl::StrCat("device: expected ", Str(t.device.get()), ", got ", device ? Str(device.get()) : TakeErrorRepr());
    }
    return false;
  }
  Object shape = TensorField(t, v, t.shape, s_shape.get());
  if (t.symbolic) {
    if (!SymbolicTensorHolds(t, v, shape.get(), why)) return false;
  } else if (!IntsEqual(shape.get(), t.sizes)) {
    if (why != nullptr) {
      std::vector<int64_t> got;
      *why = absl::StrCat("sizes: expected ", Ints(t.sizes), ", got ", ReadInts(shape.get(), &got) ? Ints(got) : TakeErrorRepr());
    }
    return false;
  }
  if (t.check_strides && !t.symbolic) {
    Object strides = t.fast && t.type.Holds(v) ? Object::Steal(PyObject_Vectorcall(t.stride, &v, 1, nullptr))
                                               : Object::Steal(PyObject_CallMethodNoArgs(v, s_stride.get()));
    if (!IntsEqual(strides.get(), t.strides)) {
      if (why != nullptr) {
        std::vector<int64_t> got;
        *why = absl::StrCat("strides: expected ", Ints(t.strides), ", got ",
                            ReadInts(strides.get(), &got) ? Ints(got) : TakeErrorRepr());
      }
      return false;
    }
  }
  Object grad = TensorField(t, v, t.requires_grad_get, s_requires_grad.get());
  if (grad.get() != (t.requires_grad ? Py_True : Py_False)) {
    if (why != nullptr) {
      *why = absl::StrCat("requires_grad: expected ", t.requires_grad ? "True" : "False", ", got ",
                          grad ? Str(grad.get()) : TakeErrorRepr());
    }
    return false;
  }
  return true;
}

bool Program::SymbolicTensorHolds(const TensorSpec& t, PyObject* v, PyObject* shape, std::string* why) const {
  std::vector<int64_t> got;
  auto fail = [&](const std::string& detail) {
    if (why != nullptr) {
      *why = absl::StrCat("sizes: expected ", t.expected_text, ", got ",
                          got.empty() && !ReadInts(shape, &got) ? TakeErrorRepr() : Ints(got), detail);
    }
    return false;
  };
  if (shape == nullptr || !ReadInts(shape, &got) || got.size() != t.size_symbols.size()) {
    python::ClearError();
    return fail("");
  }
  ops::SymBindings local;
  ops::SymBindings& b = t_bindings != nullptr ? *t_bindings : local;
  for (size_t d = 0; d < got.size(); ++d) {
    if (!t.size_symbols[d].empty()) {
      auto [it, fresh] = b.try_emplace(t.size_symbols[d], got[d]);
      if (!fresh && it->second != got[d]) {
        return fail(absl::StrCat(" (", t.size_symbols[d], " is ", it->second, " elsewhere)"));
      }
    } else if (!t.size_exprs[d] && got[d] != t.sizes[d]) {
      return fail("");
    }
  }
  for (size_t d = 0; d < got.size(); ++d) {
    if (!t.size_exprs[d]) continue;
    absl::StatusOr<int64_t> want = t.size_exprs[d]->Evaluate(b);
    if (!want.ok() || *want != got[d]) return fail("");
  }
  if (!t.stride_exprs.empty()) {
    Object strides = t.fast && t.type.Holds(v) ? Object::Steal(PyObject_Vectorcall(t.stride, &v, 1, nullptr))
                                               : Object::Steal(PyObject_CallMethodNoArgs(v, s_stride.get()));
    std::vector<int64_t> have;
    bool same = strides && ReadInts(strides.get(), &have) && have.size() == t.stride_exprs.size();
    for (size_t d = 0; same && d < have.size(); ++d) {
      absl::StatusOr<int64_t> want = t.stride_exprs[d].Evaluate(b);
      same = want.ok() && *want == have[d];
    }
    if (!same) {
      if (why != nullptr) {
        std::vector<std::string> texts;
        for (const ops::SymExpr& e : t.stride_exprs) texts.push_back(e.ToString());
        *why = absl::StrCat("strides: expected [", absl::StrJoin(texts, ", "), "], got ",
                            strides ? Ints(have) : TakeErrorRepr());
      }
      python::ClearError();
      return false;
    }
  }
  return true;
}

bool Program::ShapeHolds(const ShapeCheck& c, std::string* why) const {
  static const ops::SymBindings kNone;
  const ops::SymBindings& b = t_bindings != nullptr ? *t_bindings : kNone;
  for (const ShapeCheck::Symbol& sym : c.symbols) {
    auto it = b.find(sym.name);
    if (it == b.end()) {
      if (why != nullptr) *why = absl::StrCat(sym.name, " (", sym.source, ".size(", sym.dim, ")) is bound by no tensor");
      return false;
    }
    if (it->second < sym.min || (sym.max != 0 && it->second > sym.max)) {
      if (why != nullptr) {
        *why = absl::StrCat(sym.source, ".size(", sym.dim, ") = ", it->second, ": ", sym.name, " must be in [",
                            sym.min, ", ", sym.max != 0 ? absl::StrCat(sym.max) : "inf", "]");
      }
      return false;
    }
  }
  for (const ops::SymRelation& r : c.relations) {
    absl::StatusOr<bool> holds = r.Evaluate(b);
    if (holds.ok() && *holds) continue;
    if (why != nullptr) {
      std::vector<std::string> values;
      for (const ops::SymExpr* side : {&r.lhs, &r.rhs}) {
        for (const std::string& name : side->Symbols()) {
          auto it = b.find(name);
          std::string v = absl::StrCat(name, " = ", it != b.end() ? absl::StrCat(it->second) : "?");
          if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
        }
      }
      *why = absl::StrCat(r.ToString(), " failed: ", holds.ok() ? absl::StrJoin(values, ", ") : holds.status().message());
    }
    return false;
  }
  return true;
}

bool Program::Holds(const CompiledCheck& c, PyObject* v, std::string* why) const {
  const ir::Guard& g = *guards[static_cast<size_t>(c.guard)];
  switch (c.kind) {
    case ir::Guard::ID_MATCH:
      if (SameObject(v, c.identity)) return true;
      if (why != nullptr) {
        std::string got = IdentityName(v);
        *why = absl::StrCat("expected ", g.value().string_value(), ", got ",
                            got == g.value().string_value() ? "another object named " : "", got);
      }
      return false;
    case ir::Guard::TYPE_MATCH:
      if (reinterpret_cast<PyObject*>(Py_TYPE(v)) == c.identity.object) return true;
      if (why != nullptr) {
        *why = absl::StrCat("expected type ", g.value().string_value(), ", got ",
                            IdentityName(reinterpret_cast<PyObject*>(Py_TYPE(v))));
      }
      return false;
    case ir::Guard::IS_NONE:
      if (v == Py_None) return true;
      if (why != nullptr) *why = absl::StrCat("expected None, got ", TypeShortName(v));
      return false;
    case ir::Guard::EQUALS_MATCH:
      if (SameConstant(v, c.object.get()) == 1) return true;
      if (why != nullptr) {
        python::ClearError();
        *why = absl::StrCat("expected ", python::Repr(c.object), ", got ", python::Repr(Object::Borrow(v)));
      }
      return false;
    case ir::Guard::LENGTH_MATCH: {
      Py_ssize_t n = Length(c, v);
      if (n == c.length) return true;
      if (why != nullptr) {
        *why = absl::StrCat("expected length ", c.length, ", got ", n >= 0 ? absl::StrCat(n) : TakeErrorRepr());
      }
      return false;
    }
    case ir::Guard::TENSOR_MATCH:
      return TensorHolds(tensors[static_cast<size_t>(c.tensor)], v, why);
    case ir::Guard::HASATTR: {
      if (c.item) {  // `key in value`, by the container's own rule
        int r = PySequence_Contains(v, c.object.get());
        if (r == (c.present ? 1 : 0)) return true;
        if (r < 0) python::ClearError();
        if (why != nullptr) {
          *why = r < 0 ? "'in' raised" : absl::StrCat("expected the key to be ", c.present ? "present" : "absent");
        }
        return false;
      }
      // hasattr's rule: only AttributeError means absent; any other error
      // fails the guard.
      Object a = Object::Steal(PyObject_GetAttr(v, c.object.get()));
      bool error = !a && !PyErr_ExceptionMatches(PyExc_AttributeError);
      if (!a) python::ClearError();
      if (!error && static_cast<bool>(a) == c.present) return true;
      if (why != nullptr) {
        *why = error ? "hasattr raised" : absl::StrCat("expected the attribute to be ", c.present ? "present" : "absent");
      }
      return false;
    }
    default:
      if (why != nullptr) *why = "unknown guard kind";
      return false;
  }
}

bool Program::GlobalsHold() const {
  bool snapshot_holds = false;
  if (snapshot_check) {
    Object same = Object::Steal(PyObject_CallNoArgs(snapshot_check.get()));
    snapshot_holds = same.get() == Py_True;
    snapshot_hit_count += snapshot_holds ? 1 : 0;
    if (!same) python::ClearError();
  }
  for (const GlobalCheck& g : globals) {
    if (snapshot_holds && g.in_snapshot) continue;
    if (!GlobalHolds(g, nullptr)) {
      python::ClearError();
      return false;
    }
  }
  if (!snapshot_holds && !snapshot_unavailable) {
    // Every check held: the state now is one they hold in. (A change of
    // something only the snapshot compares, the thread count say, lands
    // here once and is snapshotted again.)
    absl::StatusOr<Object> guard_class = TorchAttr("_C._dynamo.guards.GlobalStateGuard");
    absl::StatusOr<Object> snapshot = guard_class.ok() ? python::Call(*guard_class, {}) : guard_class.status();
    absl::StatusOr<Object> check = snapshot.ok() ? python::GetAttr(*snapshot, "check") : snapshot.status();
    if (check.ok()) {
      snapshot_check = *check;
    } else {
      python::ClearError();
      snapshot_unavailable = true;  // an older torch: every check is read
    }
  }
  return true;
}

bool Program::GlobalHolds(const GlobalCheck& g, std::string* why) const {
  if (!g.reader) {
    absl::StatusOr<std::string> modes = python::TorchFunctionModes();
    if (modes.ok() && *modes == g.expected_modes) return true;
    if (why != nullptr) {
      *why = absl::StrCat("expected '", g.expected_modes, "', got ",
                          modes.ok() ? absl::StrCat("'", *modes, "'") : std::string(modes.status().message()));
    }
    return false;
  }
  if (g.none_enabled) {
    Object any = Object::Steal(PyObject_CallNoArgs(g.none_enabled.get()));
    if (any.get() == Py_False) return true;
    python::ClearError();
  }
  Object got = Object::Steal(PyObject_CallNoArgs(g.reader.get()));
  if (g.expected_object) {
    if (got && SameConstant(got.get(), g.expected_object.get()) == 1) return true;
  } else if (got.get() == (g.expected ? Py_True : Py_False)) {
    return true;
  }
  if (why != nullptr) {
    python::ClearError();
    *why = absl::StrCat("expected ", g.expected_object ? Str(g.expected_object.get()) : g.expected ? "True" : "False",
                        ", got ", got ? Str(got.get()) : TakeErrorRepr());
  }
  return false;
}

namespace {
uint64_t skipped_count = 0;  // process-wide, under the GIL
uint64_t quiet_alias_count = 0;  // recorded objects used without comparing stamps again

bool StampMatches(const Memo& m) {
  if (!m.valid) return false;
  for (const StampPart& part : m.parts) {  // in preorder: holders first
    if (!PartMatches(part)) return false;
  }
  return true;
}
}  // namespace

bool Program::AliasHolds(size_t guard, const AliasCheck& a, const FrameView& f, std::string* why,
                         const std::vector<char>* matched, uint64_t* quiet_since) const {
  // Borrowed while no Python code has run since they were taken (a
  // recorded object is alive while its stamp holds), held from the first
  // read that may run some: it could drop an earlier one, and a new object
  // could then take its address.
  absl::InlinedVector<PyObject*, 32> values;
  absl::InlinedVector<Object, 8> held;
  size_t held_upto = 0;  // values[0, held_upto) are in `held`
  absl::InlinedVector<int, 4> still;  // memos found unchanged again here
  // No dict anywhere has changed since the memos matched: every one of them
  // still holds, without comparing its stamp again. (0: a dict has changed,
  // seen by an earlier aliasing check of this call.)
  bool quiet = quiet_since != nullptr && *quiet_since != 0;
  for (int node : a.nodes) {
    // Inside a subtree whose stamp held on this call: the object recorded,
    // once the stamp is known to hold still (Python code run by other guards
    // since may have changed it; the recorded objects are only alive while
    // it holds).
    PyObject* recorded = nullptr;
    const Node& n = nodes[static_cast<size_t>(node)];
    int memo = n.stamped_by;
    if (matched != nullptr && memo >= 0 && (*matched)[static_cast<size_t>(memo)]) {
      const Memo& m = memos[static_cast<size_t>(memo)];
      bool holds = quiet || std::find(still.begin(), still.end(), memo) != still.end();
      if (!holds && StampMatches(m)) {
        still.push_back(memo);
        holds = true;
      }
      const auto slot = static_cast<size_t>(n.alias_slot);
      if (holds && slot < m.aliased.size() && m.aliased[slot].first == node) recorded = m.aliased[slot].second;
      if (quiet && recorded != nullptr) ++quiet_alias_count;
    }
    if (recorded == nullptr) {
      for (; held_upto < values.size(); ++held_upto) held.push_back(Object::Borrow(values[held_upto]));
      held.push_back(Resolve(node, f));
      // Reading it may have run Python code (a __getattr__).
      if (quiet && !DictsUnchangedSince(*quiet_since, quiet_since)) {
        quiet = false;
        *quiet_since = 0;  // for the aliasing checks after this one too
      }
      recorded = held.back().get();
      held_upto = values.size() + 1;  // this one, pushed next, is held too
    }
    values.push_back(recorded);
    if (recorded == nullptr) {
      if (why != nullptr) {
        *why = absl::StrCat(guards[guard]->sources(static_cast<int>(values.size() - 1)), " cannot be read (",
                            TakeErrorRepr(), ")");
      }
      python::ClearError();
      return false;
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t j = i + 1; j < values.size(); ++j) {
      bool same = values[i] == values[j];
      if (same == (a.groups[i] == a.groups[j])) continue;
      if (why != nullptr) {
        *why = absl::StrCat(guards[guard]->sources(static_cast<int>(i)), " is ",
                            guards[guard]->sources(static_cast<int>(j)), ": expected ", same ? "False" : "True",
                            ", got ", same ? "True" : "False");
      }
      return false;
    }
  }
  return true;
}

bool Program::Run(const FrameView& f, std::vector<char>* matched) const {
  // values[d]: the value of the node last read at depth d, which in preorder
  // is the parent of the next node at depth d + 1.
  absl::InlinedVector<Object, 8> values(static_cast<size_t>(max_depth) + 1);
  // The stamp being recorded while a stamped subtree is walked in full.
  Memo recording;
  int recording_for = -1;
  size_t recording_end = 0;
  for (size_t i = 0; i < nodes.size();) {
    const Node& n = nodes[i];
    size_t d = static_cast<size_t>(n.depth);
    values[d] = Read(n.step, d > 0 ? values[d - 1].get() : nullptr, f);
    PyObject* v = values[d].get();
    if (v == nullptr) return false;
    for (int c = n.check_begin; c < n.check_end; ++c) {
      if (!Holds(checks[static_cast<size_t>(c)], v, nullptr)) return false;
    }
    if (n.memo >= 0) {
      // The node's own checks (its identity among them) held: its
      // descendants hold as they did if nothing their stamp covers changed.
      if (StampMatches(memos[static_cast<size_t>(n.memo)])) {
        ++skipped_count;
        (*matched)[static_cast<size_t>(n.memo)] = 1;
        i = static_cast<size_t>(n.subtree_end);
        continue;
      }
      recording_for = n.memo;
      recording_end = static_cast<size_t>(n.subtree_end);
      recording = Memo();
      recording.valid = true;
    }
    if (recording_for >= 0) {
      if (n.needs.any()) {
        StampPart part;
        if (RecordPart(v, n.needs, &part)) recording.parts.push_back(part);
        else recording.valid = false;
      }
      if (n.aliased) recording.aliased.emplace_back(static_cast<int>(i), v);
      if (i + 1 == recording_end) {
        // Kept only if nothing recorded changed while the rest of the
        // subtree was read (a guard may run a __getattr__).
        Memo& memo = memos[static_cast<size_t>(recording_for)];
        recording_for = -1;
        if (recording.valid && StampMatches(recording)) memo = std::move(recording);
        recording = Memo();
      }
    }
    ++i;
  }
  return true;
}


Object Program::Resolve(int node, const FrameView& f) const {
  std::vector<int> chain;
  for (int i = node; i >= 0; i = nodes[static_cast<size_t>(i)].parent) chain.push_back(i);
  Object v;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    v = Read(nodes[static_cast<size_t>(*it)].step, v.get(), f);
    if (!v) return {};
  }
  return v;
}

std::optional<std::string> Program::ExplainGuard(size_t i, const FrameView& f) const {
  const GuardRef& ref = refs[i];
  const std::string& source = guards[i]->source();
  std::string why;
  if (ref.shape >= 0) {
    if (ShapeHolds(shapes[static_cast<size_t>(ref.shape)], &why)) return std::nullopt;
    return absl::StrCat("sizes: ", why);
  }
  if (ref.alias >= 0) {
    if (AliasHolds(i, aliases[static_cast<size_t>(ref.alias)], f, &why)) return std::nullopt;
  } else if (ref.node < 0) {
    if (GlobalHolds(globals[static_cast<size_t>(ref.check)], &why)) return std::nullopt;
  } else {
    Object v = Resolve(ref.node, f);
    if (!v) return absl::StrCat(source, ": cannot be read (", TakeErrorRepr(), ")");
    if (Holds(checks[static_cast<size_t>(ref.check)], v.get(), &why)) return std::nullopt;
  }
  python::ClearError();
  return absl::StrCat(source, ": ", why);
}

// ---------------------------------------------------------------------------
// Compilation.

namespace {

// What the fast paths compare against, borrowed from CPython and torch
// (both keep them alive for the life of the process).
struct Known {
  PyObject* module_getattribute = nullptr;  // types.ModuleType.__getattribute__
  PyObject* nn_module_getattr = nullptr;    // torch.nn.Module.__getattr__
  struct Container {
    Plan plan;
    PyObject* getitem = nullptr;
    PyObject* len = nullptr;
    PyObject* helper = nullptr;   // _get_item_by_idx / _get_abs_string_index
    const char* helper_name = nullptr;
  };
  std::vector<Container> containers;
};

PyObject* ClassAttr(PyObject* module, const char* cls, const char* name) {
  Object c = Object::Steal(PyObject_GetAttrString(module, cls));
  if (!c || !PyType_Check(c.get())) {
    python::ClearError();
    return nullptr;
  }
  return python::TypeDictItem(reinterpret_cast<PyTypeObject*>(c.get()), name);
}

Known FindKnown() {
  Known k;
  k.module_getattribute = python::TypeDictItem(&PyModule_Type, "__getattribute__");
  PyObject* modules = PyImport_GetModuleDict();
  if (PyObject* m = PyDict_GetItemString(modules, "torch.nn.modules.module")) {
    k.nn_module_getattr = ClassAttr(m, "Module", "__getattr__");
  }
  if (PyObject* m = PyDict_GetItemString(modules, "torch.nn.modules.container")) {
    k.containers = {
        {Plan::kSequential, ClassAttr(m, "Sequential", "__getitem__"), ClassAttr(m, "Sequential", "__len__"),
         ClassAttr(m, "Sequential", "_get_item_by_idx"), "_get_item_by_idx"},
        {Plan::kModuleList, ClassAttr(m, "ModuleList", "__getitem__"), ClassAttr(m, "ModuleList", "__len__"),
         ClassAttr(m, "ModuleList", "_get_abs_string_index"), "_get_abs_string_index"},
        {Plan::kModuleDict, ClassAttr(m, "ModuleDict", "__getitem__"), ClassAttr(m, "ModuleDict", "__len__"),
         nullptr, nullptr},
    };
  }
  python::ClearError();
  return k;
}

PyObject* TypeLookup(PyTypeObject* t, const char* name) {
  PyObject* n = python::Interned(name);
  return n ? _PyType_Lookup(t, n) : nullptr;
}

PyObject* TypeLookup(PyTypeObject* t, const python::Name& name) {
  PyObject* n = name.get();
  return n ? _PyType_Lookup(t, n) : nullptr;
}

const python::Name kGetattributeName("__getattribute__"), kGetattrName("__getattr__");

// object.__getattribute__ or any wrapper of the generic lookup.
bool IsGenericGetattribute(PyObject* ga) {
  return ga != nullptr && Py_IS_TYPE(ga, &PyWrapperDescr_Type) &&
         reinterpret_cast<PyWrapperDescrObject*>(ga)->d_wrapped == reinterpret_cast<void*>(&PyObject_GenericGetAttr);
}

bool HasInstanceDict(PyTypeObject* t) {
  return t->tp_dictoffset != 0 || (t->tp_flags & Py_TPFLAGS_MANAGED_DICT);
}

// How `step` (an attribute) reads from objects like `base`.
void PlanAttr(Step& step, PyObject* base, const Known& k) {
  PyTypeObject* t = Py_TYPE(base);
  PyObject* ga = TypeLookup(t, kGetattributeName);
  bool generic = IsGenericGetattribute(ga);
  bool module = ga != nullptr && ga == k.module_getattribute;
  if ((!generic && !module) || !HasInstanceDict(t)) return;
  PyObject* descr = _PyType_Lookup(t, step.key.get());
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) return;  // a data descriptor wins
  Plan plan = Plan::kDict;
  if (generic && descr == nullptr && k.nn_module_getattr != nullptr &&
      TypeLookup(t, kGetattrName) == k.nn_module_getattr) {
    plan = Plan::kNnModule;
  }
  if (step.pin.Pin(t)) step.plan = plan;
}

// Sequential / ModuleList / ModuleDict, when `v`'s class uses their methods.
Plan PlanContainer(PyObject* v, PinnedType* pin, const Known& k, bool for_len) {
  PyTypeObject* t = Py_TYPE(v);
  if (!HasInstanceDict(t) || !IsGenericGetattribute(TypeLookup(t, kGetattributeName))) return Plan::kGeneric;
  PyObject* descr = TypeLookup(t, "_modules");
  if (descr != nullptr) return Plan::kGeneric;
  PyObject* getitem = TypeLookup(t, "__getitem__");
  PyObject* len = TypeLookup(t, "__len__");
  for (const Known::Container& c : k.containers) {
    if (c.len == nullptr || len != c.len) continue;
    if (!for_len) {
      if (c.getitem == nullptr || getitem != c.getitem) continue;
      if (c.helper_name != nullptr && TypeLookup(t, c.helper_name) != c.helper) continue;
    }
    return pin->Pin(t) ? c.plan : Plan::kGeneric;
  }
  return Plan::kGeneric;
}

// The value of one step at compile time, with Python's own semantics.
Object ReadGeneric(const Step& s, PyObject* base, const FrameView& f, const Program& p) {
  switch (s.kind) {
    case StepKind::kLocal:
    case StepKind::kGlobal:
    case StepKind::kModule:
      return p.Read(s, base, f);
    case StepKind::kAttr: {
      Object found;  // a submodule or parameter without nn.Module.__getattr__
      if (python::LookupWithoutPython(base, s.key.get(), &found) == python::Found::kFound) return found;
      return Object::Steal(PyObject_GetAttr(base, s.key.get()));
    }
    case StepKind::kIndex:
    case StepKind::kKey:
      return Object::Steal(PyObject_GetItem(base, s.key.get()));
    case StepKind::kDictKey:
    case StepKind::kDictValue:
      return Program::ReadDictEntry(s, base);
    case StepKind::kCall:
      return CallQuery(base, s.key.get());
  }
  return {};
}

// torch.<name>, a dotted name walked attribute by attribute ("_C._get_...").
absl::StatusOr<Object> TorchAttr(absl::string_view name) {
  absl::StatusOr<Object> object = python::Import("torch");
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    if (!object.ok()) break;
    object = python::GetAttr(*object, part);
  }
  return object;
}

absl::StatusOr<Object> DeviceObject(const ir::Device& d) {
  absl::StatusOr<Object> device = TorchAttr("device");
  if (!device.ok()) return device.status();
  std::vector<Object> args = {python::FromString(d.type().empty() ? "cpu" : d.type())};
  if (d.index() >= 0 && d.type() != "cpu") args.push_back(python::FromLong(d.index()));  // as loader.device_of
  return python::Call(*device, args);
}

// An IR constant as a fresh Python object.
absl::StatusOr<Object> FromArgument(const ir::Argument& a);

// FromArgument's cases; a null result means the C API failed (a string that
// is not UTF-8, say) and its exception is pending.
absl::StatusOr<Object> ConstantOf(const ir::Argument& a) {
  switch (a.value_case()) {
    case ir::Argument::kIntValue:
      return Object::Steal(PyLong_FromLongLong(a.int_value()));
    case ir::Argument::kFloatValue:
      return Object::Steal(PyFloat_FromDouble(a.float_value()));
    case ir::Argument::kBoolValue:
      return python::FromBool(a.bool_value());
    case ir::Argument::kStringValue:
      return python::FromString(a.string_value());
    case ir::Argument::kNone:
      return python::None();
    case ir::Argument::kEllipsis:
      return Object::Borrow(Py_Ellipsis);
    case ir::Argument::kList: {
      std::vector<Object> items;
      for (const ir::Argument& item : a.list().items()) {
        absl::StatusOr<Object> o = FromArgument(item);
        if (!o.ok()) return o.status();
        items.push_back(*std::move(o));
      }
      return a.list().is_tuple() ? python::MakeTuple(items) : python::MakeList(items);
    }
    case ir::Argument::kDict: {
      if (a.dict().keys_size() != a.dict().values_size()) return absl::InvalidArgumentError("a dict with unpaired keys");
      Object d = Object::Steal(PyDict_New());
      for (int i = 0; i < a.dict().keys_size(); ++i) {
        absl::StatusOr<Object> o = FromArgument(a.dict().values(i));
        if (!o.ok()) return o.status();
        Object key = python::FromString(a.dict().keys(i));
        if (!key || PyDict_SetItem(d.get(), key.get(), o->get()) < 0) {
          return python::FetchError("building a dict constant");
        }
      }
      return d;
    }
    case ir::Argument::kDtype: {
      absl::StatusOr<ops::DType> dt = ops::FromProto(a.dtype());
      if (!dt.ok()) return dt.status();
      return TorchAttr(ops::DTypeName(*dt));
    }
    case ir::Argument::kDevice:
      return DeviceObject(a.device());
    case ir::Argument::kMemoryFormat:
      switch (a.memory_format()) {
        case ir::MEMORY_FORMAT_CONTIGUOUS:
          return TorchAttr("contiguous_format");
        case ir::MEMORY_FORMAT_CHANNELS_LAST:
          return TorchAttr("channels_last");
        case ir::MEMORY_FORMAT_CHANNELS_LAST_3D:
          return TorchAttr("channels_last_3d");
        case ir::MEMORY_FORMAT_PRESERVE:
          return TorchAttr("preserve_format");
        default:
          return absl::InvalidArgumentError("an unknown memory format");
      }
    case ir::Argument::kLayout:
      return TorchAttr(a.layout());
    case ir::Argument::kSlice: {
      auto bound = [](bool has, int64_t v) { return has ? python::FromLong(v) : python::None(); };
      const ir::Slice& s = a.slice();
      Object start = bound(s.has_start(), s.start()), stop = bound(s.has_stop(), s.stop()),
             step = bound(s.has_step(), s.step());
      return Object::Steal(PySlice_New(start.get(), stop.get(), step.get()));
    }
    default:
      return absl::InvalidArgumentError("an expected value that is not a constant");
  }
}

absl::StatusOr<Object> FromArgument(const ir::Argument& a) {
  absl::StatusOr<Object> o = ConstantOf(a);
  if (o.ok() && !*o) return python::FetchError("an IR constant");
  return o;
}

absl::StatusOr<TensorSpec> CompileTensor(const ir::TensorMeta& meta, PyObject* v, Program& p) {
  TensorSpec t;
  absl::StatusOr<Object> tensor_class = TorchAttr("Tensor");
  if (!tensor_class.ok()) return tensor_class.status();
  if (PyObject_IsInstance(v, tensor_class->get()) != 1) {
    python::ClearError();
    return absl::FailedPreconditionError(absl::StrCat("expected a tensor, the frame holds ", TypeShortName(v)));
  }
  absl::StatusOr<ops::DType> dt = ops::FromProto(meta.dtype());
  if (!dt.ok()) return dt.status();
  absl::StatusOr<Object> dtype = TorchAttr(ops::DTypeName(*dt));
  if (!dtype.ok()) return dtype.status();
  t.dtype = *dtype;
  absl::StatusOr<Object> device = DeviceObject(meta.device());
  if (!device.ok()) return device.status();
  t.device = *device;
  std::vector<std::string> texts;
  for (const ir::Dim& d : meta.sizes()) {
    t.size_symbols.emplace_back();
    t.size_exprs.emplace_back();
    t.sizes.push_back(0);
    if (d.value_case() == ir::Dim::kSize) {
      t.sizes.back() = d.size();
      texts.push_back(absl::StrCat(d.size()));
      continue;
    }
    t.symbolic = true;
    if (d.value_case() == ir::Dim::kSymbol) {
      absl::StatusOr<ops::SymExpr> e = ops::ParseSymExpr(d.symbol());
      if (!e.ok() || !e->symbol_name()) return absl::InvalidArgumentError(absl::StrCat("size symbol '", d.symbol(), "' is no name"));
      t.size_symbols.back() = d.symbol();
      texts.push_back(d.symbol());
      continue;
    }
    absl::StatusOr<ops::SymExpr> e = ops::ParseSymExpr(d.expr());
    if (!e.ok()) return absl::InvalidArgumentError(absl::StrCat("size: ", e.status().message()));
    t.size_exprs.back() = *e;
    texts.push_back(e->ToString());
  }
  t.expected_text = absl::StrCat("[", absl::StrJoin(texts, ", "), "]");
  for (const ir::Dim& d : meta.strides()) {
    if (d.value_case() == ir::Dim::kSize) {
      t.strides.push_back(d.size());
      t.stride_exprs.emplace_back(d.size());
      continue;
    }
    absl::StatusOr<ops::SymExpr> e = ops::ParseSymExpr(d.value_case() == ir::Dim::kSymbol ? d.symbol() : d.expr());
    if (!e.ok()) return absl::InvalidArgumentError(absl::StrCat("stride: ", e.status().message()));
    t.symbolic = true;
    t.strides.push_back(0);
    t.stride_exprs.push_back(*e);
  }
  if (!t.symbolic) t.stride_exprs.clear();
  t.check_strides = !t.strides.empty();
  t.requires_grad = meta.requires_grad();

  // The exact type, and its C getters when the generic lookup would find
  // them (getset descriptors are data descriptors: an instance __dict__
  // cannot shadow them).
  PyTypeObject* type = Py_TYPE(v);
  auto getset = [&](const char* name) -> PyGetSetDef* {
    PyObject* d = TypeLookup(type, name);
    if (d == nullptr || !Py_IS_TYPE(d, &PyGetSetDescr_Type)) return nullptr;
    PyGetSetDef* def = reinterpret_cast<PyGetSetDescrObject*>(d)->d_getset;
    return def->get != nullptr ? def : nullptr;
  };
  t.shape = getset("shape");
  t.dtype_get = getset("dtype");
  t.device_get = getset("device");
  t.requires_grad_get = getset("requires_grad");
  PyObject* stride = TypeLookup(type, "stride");
  t.stride = stride != nullptr && Py_IS_TYPE(stride, &PyMethodDescr_Type) ? stride : nullptr;
  bool generic = IsGenericGetattribute(TypeLookup(type, kGetattributeName));
  t.exact_type = reinterpret_cast<PyObject*>(type);
  if (absl::Status kept = p.Keep(t.exact_type); !kept.ok()) return kept;
  bool pinned = t.type.Pin(type);
  t.fast = pinned && generic && t.shape && t.dtype_get && t.device_get && t.requires_grad_get && t.stride;
  if (t.fast && (meta.device().type().empty() || meta.device().type() == "cpu")) t.is_cpu_get = getset("is_cpu");
  return t;
}

// What an ID_MATCH on `v` compares, its parts kept by `p`.
absl::StatusOr<Identity> IdentityOf(PyObject* v, Program& p) {
  Identity id;
  id.object = v;
  if (PyMethod_Check(v)) {
    id.kind = Identity::kMethod;
    id.object = PyMethod_Function(v);
    id.self = PyMethod_Self(v);
  } else if (PyCFunction_Check(v)) {
    PyObject* self = PyCFunction_GetSelf(v);
    if (self != nullptr && !PyModule_Check(self)) {  // module functions are stable objects
      id.kind = Identity::kBuiltinMethod;
      id.object = nullptr;
      id.self = self;
      id.type = Py_TYPE(v);
      id.method = reinterpret_cast<PyCFunctionObject*>(v)->m_ml;
    }
  }
  for (PyObject* part : {id.object, id.self, reinterpret_cast<PyObject*>(id.type)}) {
    if (part == nullptr) continue;
    if (absl::Status kept = p.Keep(part); !kept.ok()) return kept;
  }
  return id;
}

absl::StatusOr<CompiledCheck> CompileCheck(const ir::Guard& g, PyObject* v, Program& p, const Known& k) {
  CompiledCheck c;
  c.kind = g.kind();
  auto name_mismatch = [&](const std::string& found) {
    return absl::FailedPreconditionError(absl::StrCat("expected ", g.value().string_value(),
                                                      ", the frame holds ", found));
  };
  switch (g.kind()) {
    case ir::Guard::ID_MATCH: {
      std::string name = IdentityName(v);
      if (g.value().value_case() != ir::Argument::kStringValue) return absl::InvalidArgumentError("no name recorded");
      if (name != g.value().string_value()) return name_mismatch(name);
      absl::StatusOr<Identity> id = IdentityOf(v, p);
      if (!id.ok()) return id.status();
      c.identity = *id;
      return c;
    }
    case ir::Guard::TYPE_MATCH: {
      PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(v));
      std::string name = IdentityName(type);
      if (g.value().value_case() != ir::Argument::kStringValue) return absl::InvalidArgumentError("no name recorded");
      if (name != g.value().string_value()) return name_mismatch(name);
      if (absl::Status kept = p.Keep(type); !kept.ok()) return kept;
      c.identity.object = type;
      return c;
    }
    case ir::Guard::IS_NONE:
      return c;
    case ir::Guard::EQUALS_MATCH: {
      if (DeeplyImmutable(v)) {
        // The very constant the frame holds stands for the recorded one; it
        // must be the one the trace recorded.
        bool same = false;
        if (g.value().value_case() == ir::Argument::kStringValue && !PyUnicode_CheckExact(v)) {
          same = python::Repr(Object::Borrow(v)) == g.value().string_value();  // not an IR constant: its repr
        } else {
          absl::StatusOr<Object> recorded = FromArgument(g.value());
          if (!recorded.ok()) return recorded.status();
          // SameConstant, not ==: a NaN the trace read is the NaN the guard
          // expects (torch._dynamo guards it with math.isnan).
          same = SameConstant(v, recorded->get()) == 1;
          python::ClearError();
        }
        if (!same) {
          return absl::FailedPreconditionError(
              absl::StrCat("the frame holds ", python::Repr(Object::Borrow(v)), ", not the recorded value"));
        }
        c.object = Object::Borrow(v);
      } else if (g.value().value_case() == ir::Argument::kStringValue && PyAnySet_Check(v)) {
        // A set has no IR constant: the trace recorded its repr. A copy of
        // the set the frame holds (it may change in place) stands for it.
        if (python::Repr(Object::Borrow(v)) != g.value().string_value()) {
          return absl::FailedPreconditionError(
              absl::StrCat("the frame holds ", python::Repr(Object::Borrow(v)), ", not the recorded value"));
        }
        c.object = Object::Steal(PySet_CheckExact(v) ? PySet_New(v) : PyFrozenSet_New(v));
        if (!c.object) return python::FetchError("copying a guarded set");
      } else {
        // A container that may change in place: a fresh copy of the recorded value.
        absl::StatusOr<Object> recorded = FromArgument(g.value());
        if (!recorded.ok()) return recorded.status();
        c.object = *recorded;
      }
      return c;
    }
    case ir::Guard::LENGTH_MATCH:
      c.length = g.value().int_value();
      c.plan = PlanContainer(v, &c.pin, k, /*for_len=*/true);
      return c;
    case ir::Guard::HASATTR: {
      // Compiled on the object; the source's last step is the attribute,
      // or the key whose membership is checked.
      absl::StatusOr<std::vector<Token>> tokens = ParseSource(g.source());
      if (!tokens.ok()) return tokens.status();
      const Token& last = tokens->back();
      if (tokens->size() < 2) return absl::InvalidArgumentError("HASATTR of a source with no attribute or key");
      c.item = last.kind != Token::kAttr;
      c.object = last.kind == Token::kAttr  ? Intern(last.name)
                 : last.kind == Token::kKey ? python::FromString(last.name)
                                            : python::FromLong(last.index);
      if (!c.object) return python::FetchError("the attribute or key of a HASATTR guard");
      c.present = g.value().bool_value();
      return c;
    }
    case ir::Guard::TENSOR_MATCH: {
      if (!g.has_tensor()) return absl::InvalidArgumentError("no tensor metadata");
      absl::StatusOr<TensorSpec> t = CompileTensor(g.tensor(), v, p);
      if (!t.ok()) return t.status();
      c.tensor = static_cast<int>(p.tensors.size());
      p.tensors.push_back(*std::move(t));
      return c;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown guard kind ", static_cast<int>(g.kind())));
  }
}

// The accessor tree as it is built, before it is laid out in preorder.
struct TreeNode {
  Step step;
  int parent = -1;
  std::vector<CompiledCheck> checks;
  std::vector<int> children;
  // Version stamps: whether the node's value and checks follow from its
  // parent's value and what the stamp records of it (`needs`, of this
  // node's value, is what its children and checks ask to be recorded).
  bool pure = true;
  bool identified = false;  // it has an ID_MATCH check
  StampNeeds needs;
};

// How a step's value follows from its base's, for version stamps.
enum class Follows : uint8_t {
  kNo,          // it may change without any recorded tag changing
  kImmutably,   // a tuple's item, a bound method's __func__ / __self__
  kAttributes,  // the base's instance __dict__ or its class
  kNnDicts,     // the base's _parameters / _buffers / _modules
  kOwnDict,     // the base is a dict: its own tag
};

Follows Classify(const Step& step, PyObject* base, PyObject* value) {
  switch (step.kind) {
    case StepKind::kAttr: {
      if (PyMethod_Check(base)) {
        const char* name = PyUnicode_AsUTF8(step.key.get());
        bool fixed = name != nullptr && (std::strcmp(name, "__func__") == 0 || std::strcmp(name, "__self__") == 0);
        return fixed ? Follows::kImmutably : Follows::kNo;
      }
      PyTypeObject* t = Py_TYPE(base);
      if (!HasInstanceDict(t) || !IsGenericGetattribute(TypeLookup(t, kGetattributeName))) return Follows::kNo;
      PyObject* descr = _PyType_Lookup(t, step.key.get());
      if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) return Follows::kNo;  // runs code
      Object dict = Object::Steal(PyObject_GenericGetDict(base, nullptr));
      if (!dict) {
        python::ClearError();
        return Follows::kNo;
      }
      PyObject* found = PyDict_GetItemWithError(dict.get(), step.key.get());
      if (found != nullptr) return found == value ? Follows::kAttributes : Follows::kNo;
      python::ClearError();
      if (descr != nullptr) {
        // From the class: a plain value, or one of its functions bound to base.
        if (Py_TYPE(descr)->tp_descr_get == nullptr) return descr == value ? Follows::kAttributes : Follows::kNo;
        bool bound = PyFunction_Check(descr) && PyMethod_Check(value) && PyMethod_Function(value) == descr &&
                     PyMethod_Self(value) == base;
        return bound ? Follows::kAttributes : Follows::kNo;
      }
      return step.plan == Plan::kNnModule ? Follows::kNnDicts : Follows::kNo;
    }
    case StepKind::kIndex:
      if (PyTuple_CheckExact(base)) return Follows::kImmutably;
      return step.plan == Plan::kSequential || step.plan == Plan::kModuleList ? Follows::kNnDicts : Follows::kNo;
    case StepKind::kKey:
      if (PyDict_CheckExact(base)) return Follows::kOwnDict;
      return step.plan == Plan::kModuleDict ? Follows::kNnDicts : Follows::kNo;
    case StepKind::kDictKey:
    case StepKind::kDictValue:
      return PyDict_CheckExact(base) ? Follows::kOwnDict : Follows::kNo;
    default:
      return Follows::kNo;
  }
}

void Need(Follows how, StampNeeds* needs) {
  needs->attributes |= how == Follows::kAttributes || how == Follows::kNnDicts;
  needs->nn_dicts |= how == Follows::kNnDicts;
  needs->own_tag |= how == Follows::kOwnDict;
}

// Whether check `c` on `v` gives the same result while `v` is the same
// object and what `needs` records of it is unchanged.
bool Memoizable(const CompiledCheck& c, PyObject* v, StampNeeds* needs) {
  switch (c.kind) {
    case ir::Guard::ID_MATCH:
    case ir::Guard::IS_NONE:
      return true;
    case ir::Guard::TYPE_MATCH:
      // Only __class__ assignment changes an object's class, which builtin
      // classes (modules aside) refuse; for the others the type is recorded.
      if (!(Py_TYPE(v)->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyModule_Check(v)) return true;
      needs->attributes = true;
      return true;
    case ir::Guard::EQUALS_MATCH:
      return DeeplyImmutable(v);
    case ir::Guard::LENGTH_MATCH:
      if (PyTuple_CheckExact(v)) return true;
      if (c.plan != Plan::kGeneric) {
        needs->attributes = needs->nn_dicts = true;
        return true;
      }
      if (IsPlainDict(v)) {
        needs->own_tag = true;
        return true;
      }
      return false;
    default:
      return false;
  }
}

// Lays the tree out in preorder, checks cheapest first within each node.
void Flatten(std::vector<TreeNode>& tree, const std::vector<int>& roots, Program& p,
             std::vector<int>* flat_of) {
  flat_of->assign(tree.size(), -1);
  std::vector<std::pair<int, int>> stack;  // (tree index, parent's flat index)
  for (auto r = roots.rbegin(); r != roots.rend(); ++r) stack.emplace_back(*r, -1);
  while (!stack.empty()) {
    auto [t, parent] = stack.back();
    stack.pop_back();
    TreeNode& tn = tree[static_cast<size_t>(t)];
    Node n;
    n.step = std::move(tn.step);
    n.parent = parent;
    n.depth = parent < 0 ? 0 : p.nodes[static_cast<size_t>(parent)].depth + 1;
    p.max_depth = std::max(p.max_depth, n.depth);
    int index = static_cast<int>(p.nodes.size());
    (*flat_of)[static_cast<size_t>(t)] = index;
    std::stable_sort(tn.checks.begin(), tn.checks.end(),
                     [](const CompiledCheck& a, const CompiledCheck& b) { return Cost(a.kind) < Cost(b.kind); });
    n.check_begin = static_cast<int>(p.checks.size());
    for (CompiledCheck& c : tn.checks) {
      p.refs[static_cast<size_t>(c.guard)] = GuardRef{index, static_cast<int>(p.checks.size())};
      p.checks.push_back(std::move(c));
    }
    n.check_end = static_cast<int>(p.checks.size());
    n.needs = tn.needs;
    p.nodes.push_back(std::move(n));
    for (auto c = tn.children.rbegin(); c != tn.children.rend(); ++c) stack.emplace_back(*c, index);
  }
}

// Picks the subtrees checked once per version (lib/guards/versions.h): the
// topmost nodes with an identity check whose descendants are all pure and
// whose recorded parts can be recorded. Sets each node's subtree_end.
void PlanStamps(const std::vector<TreeNode>& tree, const std::vector<Object>& seen,
                const std::vector<int>& flat_of, Program& p) {
  const size_t n = p.nodes.size();
  std::vector<bool> pure(n), identified(n), recordable(n, true), below_pure(n, true);
  for (size_t t = 0; t < tree.size(); ++t) {
    size_t i = static_cast<size_t>(flat_of[t]);
    pure[i] = tree[t].pure;
    identified[i] = tree[t].identified;
    StampPart part;
    if (tree[t].needs.any()) recordable[i] = RecordPart(seen[t].get(), tree[t].needs, &part);
  }
  std::vector<int> open;  // ancestors of the node being placed
  for (size_t i = 0; i < n; ++i) {
    p.nodes[i].subtree_end = static_cast<int>(n);
    while (!open.empty() && p.nodes[static_cast<size_t>(open.back())].depth >= p.nodes[i].depth) {
      p.nodes[static_cast<size_t>(open.back())].subtree_end = static_cast<int>(i);
      open.pop_back();
    }
    open.push_back(static_cast<int>(i));
  }
  for (size_t i = n; i-- > 0;) {
    int parent = p.nodes[i].parent;
    if (parent >= 0 && !(below_pure[i] && pure[i] && recordable[i])) below_pure[static_cast<size_t>(parent)] = false;
  }
  if (!VersionTagsReliable()) return;
  for (size_t i = 0; i < n;) {
    Node& node = p.nodes[i];
    if (identified[i] && below_pure[i] && recordable[i] && node.needs.any() &&
        node.subtree_end > static_cast<int>(i) + 1) {
      node.memo = static_cast<int>(p.memos.size());
      p.memos.emplace_back();
      // Run() records the aliased nodes of the subtree, its root's
      // included, in preorder: each one's place is known now.
      int slot = 0;
      for (int j = static_cast<int>(i); j < node.subtree_end; ++j) {
        Node& inside = p.nodes[static_cast<size_t>(j)];
        if (j > static_cast<int>(i)) inside.stamped_by = node.memo;
        if (inside.aliased) inside.alias_slot = slot++;
      }
      i = static_cast<size_t>(node.subtree_end);
    } else {
      ++i;
    }
  }
}

}  // namespace

absl::StatusOr<GuardEvaluator> GuardEvaluator::Compile(
    const google::protobuf::RepeatedPtrField<ir::Guard>& guards, const FrameView& at_capture,
    std::shared_ptr<const void> owner) {
  if (!owner) return Compile(std::vector<ir::Guard>(guards.begin(), guards.end()), at_capture);
  auto p = std::make_shared<Program>();
  p->guards.assign(guards.pointer_begin(), guards.pointer_end());
  p->guards_owner = std::move(owner);
  return Compile(std::move(p), at_capture);
}

absl::StatusOr<GuardEvaluator> GuardEvaluator::Compile(std::vector<ir::Guard> owned, const FrameView& at_capture) {
  auto p = std::make_shared<Program>();
  p->owned_guards = std::move(owned);
  for (const ir::Guard& g : p->owned_guards) p->guards.push_back(&g);
  return Compile(std::move(p), at_capture);
}

absl::StatusOr<GuardEvaluator> GuardEvaluator::Compile(std::shared_ptr<Program> p, const FrameView& at_capture) {
  if (at_capture.locals == nullptr || at_capture.names == nullptr || at_capture.globals == nullptr) {
    return absl::InvalidArgumentError("the frame needs locals, names and globals");
  }
  const std::vector<const ir::Guard*>& guards = p->guards;  // never changed again: views into them stay valid
  p->refs.resize(guards.size());
  const std::pair<Object*, const char*> interned[] = {
      {&p->s_parameters, "_parameters"}, {&p->s_buffers, "_buffers"}, {&p->s_modules, "_modules"},
      {&p->s_shape, "shape"},            {&p->s_dtype, "dtype"},      {&p->s_device, "device"},
      {&p->s_requires_grad, "requires_grad"}, {&p->s_stride, "stride"}};
  for (const auto& [slot, name] : interned) *slot = Intern(name);
  const Known known = FindKnown();
  // A source's prefix text (a view into the guards, which outlive the
  // compile) -> its node: the same text parses to the same steps.
  absl::flat_hash_map<absl::string_view, int> node_of;
  std::vector<TreeNode> tree;
  std::vector<int> roots;
  std::vector<Object> seen;                       // per node: its value in `at_capture`

  // A source as the node of its longest prefix already in the tree (-1:
  // none) and its steps after that prefix. Most guards read one step past
  // a node an earlier guard made: that prefix is found at the source's last
  // '.' or '[' and only the step after it is parsed, where a full parse of
  // the long text and a lookup per prefix was most of a compile. Otherwise
  // the full parse decides.
  struct Split {
    int node = -1;
    std::vector<Token> rest;
  };
  auto split = [&](absl::string_view source) -> absl::StatusOr<Split> {
    if (auto it = node_of.find(source); it != node_of.end()) return Split{it->second, {}};
    // The last step's start (or a cut inside its quoted key, whose prefix
    // is no source's text): a shorter known prefix may not be the longest.
    const size_t dot = source.rfind('.'), bracket = source.rfind('[');
    const size_t cut = dot == absl::string_view::npos    ? bracket
                       : bracket == absl::string_view::npos ? dot
                                                            : std::max(dot, bracket);
    if (cut != absl::string_view::npos && cut > 0) {
      const absl::string_view prefix = source.substr(0, cut);
      auto it = node_of.find(prefix);
      // `.keys()[i]` is one step (a dict's i-th key), not a call and an index.
      if (it != node_of.end() && !(source[cut] == '[' && (absl::EndsWith(prefix, ".keys()") ||
                                                          absl::EndsWith(prefix, ".values()")))) {
        absl::StatusOr<std::vector<Token>> rest = ParseSource(source, cut);
        if (rest.ok()) return Split{it->second, *std::move(rest)};
      }
    }
    absl::StatusOr<std::vector<Token>> tokens = ParseSource(source);
    if (!tokens.ok()) return tokens.status();
    for (size_t k = tokens->size(); k > 0; --k) {
      if (auto it = node_of.find(source.substr(0, (*tokens)[k - 1].end)); it != node_of.end()) {
        tokens->erase(tokens->begin(), tokens->begin() + static_cast<std::ptrdiff_t>(k));
        return Split{it->second, *std::move(tokens)};
      }
    }
    return Split{-1, *std::move(tokens)};
  };

  // The accessor node (a tree index) of a source: the node of its known
  // prefix, `parent` (-1: none), then one new node per step after it.
  auto path = [&](absl::string_view source, int parent, const std::vector<Token>& tokens) -> absl::StatusOr<int> {
    for (size_t ti = 0; ti < tokens.size(); ++ti) {
      const Token& t = tokens[ti];
      const absl::string_view key = absl::string_view(source).substr(0, t.end);
      Step step;
      step.kind = static_cast<StepKind>(t.kind);
      step.index = t.index;
      // A str key of a dict is any text (interned names live for the
      // process); attribute, local and global names are identifiers.
      step.key = t.kind == Token::kIndex ? python::FromLong(t.index)
                 : t.kind == Token::kKey ? python::FromString(t.name)
                                         : Intern(t.name);
      if (!step.key) return python::FetchError("interning a source name");
      if (t.kind == Token::kLocal) {
        const std::vector<std::string>& names = *at_capture.names;
        auto found = std::find(names.begin(), names.end(), t.name);
        if (found == names.end()) return absl::InvalidArgumentError(absl::StrCat("the frame has no local '", t.name, "'"));
        step.slot = static_cast<int>(found - names.begin());
        step.cell = at_capture.cells != nullptr && static_cast<size_t>(step.slot) < at_capture.cells->size() &&
                    (*at_capture.cells)[static_cast<size_t>(step.slot)];
      }
      PyObject* base = parent >= 0 ? seen[static_cast<size_t>(parent)].get() : nullptr;
      if (t.kind == Token::kAttr) {
        PlanAttr(step, base, known);
      } else if (t.kind == Token::kIndex && !PyList_CheckExact(base) && !PyTuple_CheckExact(base)) {
        step.plan = PlanContainer(base, &step.pin, known, /*for_len=*/false);
        if (step.plan == Plan::kModuleDict) step.plan = Plan::kGeneric;
        if (step.plan == Plan::kModuleList && t.index >= 0) step.index_key = Intern(std::to_string(t.index));
      } else if (t.kind == Token::kKey && !PyDict_CheckExact(base)) {
        step.plan = PlanContainer(base, &step.pin, known, /*for_len=*/false);
        if (step.plan != Plan::kModuleDict) step.plan = Plan::kGeneric;
      }
      // An item of torch's own nn.Sequential / ModuleList / ModuleDict (their
      // __getitem__, __len__ and helpers torch's, the type pinned), over a
      // plain dict `_modules`: the plan reads what their __getitem__ would
      // return, without running it (Python, about 2 us, for ~200 items of
      // a mobilenet_v2 capture).
      Object value;
      if (step.plan == Plan::kSequential || step.plan == Plan::kModuleList || step.plan == Plan::kModuleDict) {
        value = p->Read(step, base, at_capture);
        if (!value) python::ClearError();
      }
      if (!value) {
        value = ReadGeneric(step, base, at_capture, *p);
        if (!value) {
          return absl::FailedPreconditionError(absl::StrCat(
              source.substr(0, t.end), " cannot be read in the frame it is compiled against: ", TakeErrorRepr()));
        }
        if (step.plan != Plan::kGeneric) {
          // The fast path must find what Python found; if not, Python's way it is.
          Object fast = p->Read(step, base, at_capture);
          if (fast.get() != value.get()) step.plan = Plan::kGeneric;
          python::ClearError();
        }
      }
      TreeNode node;
      if (parent >= 0) {
        Follows how = Classify(step, base, value.get());
        node.pure = how != Follows::kNo;
        Need(how, &tree[static_cast<size_t>(parent)].needs);
      }
      node.step = std::move(step);
      node.parent = parent;
      int index = static_cast<int>(tree.size());
      tree.push_back(std::move(node));
      seen.push_back(std::move(value));
      (parent >= 0 ? tree[static_cast<size_t>(parent)].children : roots).push_back(index);
      node_of.emplace(key, index);
      parent = index;
    }
    return parent;
  };

  for (size_t gi = 0; gi < guards.size(); ++gi) {
    const ir::Guard& g = *guards[gi];
    auto fail = [&](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat("guard ", ir::Guard::Kind_Name(g.kind()), " ", g.source(), ": ",
                                                 s.message()));
    };
    if (g.kind() == ir::Guard::GLOBAL_STATE) {
      // A fixed table (lib/trace reads these states), never a torch function
      // named by the guard: the same as python/dynamo/guards.py.
      static const auto* kStates = new absl::flat_hash_map<std::string, std::string>{
          {"grad_mode", "is_grad_enabled"},
          // torch.is_autocast_enabled(device): partials of it, built below
          // (is_autocast_cpu_enabled() warns that it is deprecated).
          {"is_autocast_enabled", "is_autocast_enabled"},
          {"is_autocast_cpu_enabled", "is_autocast_enabled"},
          {"is_inference_mode_enabled", "is_inference_mode_enabled"},
          // The C binding: torch.are_deterministic_algorithms_enabled is a
          // Python wrapper, and guards run no Python functions.
          {"deterministic_algorithms", "_C._get_deterministic_algorithms"},
          {"default_dtype", "get_default_dtype"},
          {"torch_dispatch_modes", "_C._len_torch_dispatch_stack"},
          {"cublas_allow_tf32", "_C._get_cublas_allow_tf32"},
          // torch.get_autocast_dtype(device): a partial of it, built below
          // (the one-device spellings warn that they are deprecated).
          {"autocast_gpu_dtype", "get_autocast_dtype"},
          {"autocast_cpu_dtype", "get_autocast_dtype"}};
      if (g.source() == "torch_function_modes") {
        if (g.value().value_case() != ir::Argument::kStringValue) {
          return fail(absl::InvalidArgumentError("torch_function_modes needs a str value"));
        }
        p->refs[gi] = GuardRef{-1, static_cast<int>(p->globals.size())};
        p->globals.push_back(GlobalCheck{false, Object(), false, Object(), g.value().string_value(), Object()});
        continue;
      }
      auto state = kStates->find(g.source());
      absl::StatusOr<Object> reader = state == kStates->end() ? absl::StatusOr<Object>(absl::NotFoundError(g.source()))
                                                              : TorchAttr(state->second);
      const bool per_device = g.source() == "autocast_gpu_dtype" || g.source() == "autocast_cpu_dtype" ||
                              g.source() == "is_autocast_enabled" || g.source() == "is_autocast_cpu_enabled";
      if (reader.ok() && per_device) {
        absl::StatusOr<Object> functools = python::Import("functools");
        Object partial = functools.ok() ? Object::Steal(PyObject_GetAttrString(functools->get(), "partial")) : Object();
        const bool cpu = g.source() == "autocast_cpu_dtype" || g.source() == "is_autocast_cpu_enabled";
        Object device = python::FromString(cpu ? "cpu" : "cuda");
        reader = partial ? python::Call(partial, {*reader, device}) : absl::StatusOr<Object>(absl::UnknownError(""));
      }
      if (!reader.ok() || !PyCallable_Check(reader->get())) {
        python::ClearError();
        return fail(absl::InvalidArgumentError("unknown global state"));
      }
      GlobalCheck check{false, *reader, g.value().bool_value(), Object(), "", Object()};
      static const auto* kInSnapshot = new absl::flat_hash_set<std::string>{
          "grad_mode", "is_autocast_enabled", "is_autocast_cpu_enabled", "deterministic_algorithms",
          "default_dtype", "cublas_allow_tf32"};
      check.in_snapshot = kInSnapshot->contains(g.source());
      if (per_device && g.value().value_case() == ir::Argument::kBoolValue && !g.value().bool_value() &&
          absl::StartsWith(g.source(), "is_autocast")) {
        // False on every autocast device torch knows (cpu and cuda among
        // them); where it answers True, the per-device read decides.
        absl::StatusOr<Object> any = TorchAttr("_C._is_any_autocast_enabled");
        if (any.ok() && PyCallable_Check(any->get())) check.none_enabled = *any;
        python::ClearError();
      }
      if (g.value().value_case() != ir::Argument::kBoolValue) {
        absl::StatusOr<Object> expected = FromArgument(g.value());
        if (!expected.ok()) return fail(expected.status());
        check.expected_object = *expected;
      }
      p->refs[gi] = GuardRef{-1, static_cast<int>(p->globals.size())};
      p->globals.push_back(std::move(check));
      continue;
    }
    if (g.kind() == ir::Guard::SHAPE_ENV) {
      ShapeCheck c;
      for (const ir::SizeSymbol& sym : g.shape_env().symbols()) {
        absl::StatusOr<ops::SymExpr> name = ops::ParseSymExpr(sym.name());
        if (!name.ok() || !name->symbol_name()) {
          return fail(absl::InvalidArgumentError(absl::StrCat("size symbol '", sym.name(), "' is no name")));
        }
        c.symbols.push_back({sym.name(), sym.source(), sym.dim(), sym.min(), sym.max()});
      }
      for (const std::string& text : g.shape_env().relations()) {
        absl::StatusOr<ops::SymRelation> r = ops::ParseSymRelation(text);
        if (!r.ok()) return fail(r.status());
        c.relations.push_back(*std::move(r));
      }
      p->refs[gi] = GuardRef{-1, -1, -1, static_cast<int>(p->shapes.size())};
      p->shapes.push_back(std::move(c));
      continue;
    }
    if (g.kind() == ir::Guard::OBJECT_ALIASING) {
      if (g.sources_size() < 2 || g.sources_size() != g.groups_size()) {
        return fail(absl::InvalidArgumentError("OBJECT_ALIASING needs two or more sources and their groups"));
      }
      AliasCheck a;
      for (const std::string& source : g.sources()) {
        absl::StatusOr<Split> parts = split(source);
        if (!parts.ok()) return fail(parts.status());
        absl::StatusOr<int> node = path(source, parts->node, parts->rest);
        if (!node.ok()) return fail(node.status());
        a.nodes.push_back(*node);  // a tree index until Flatten
      }
      a.groups.assign(g.groups().begin(), g.groups().end());
      p->refs[gi] = GuardRef{-1, -1, static_cast<int>(p->aliases.size())};
      p->aliases.push_back(std::move(a));
      continue;
    }
    // HASATTR is checked on the object: every step but the attribute.
    absl::string_view source = g.source();
    if (g.kind() == ir::Guard::HASATTR) {
      absl::StatusOr<std::vector<Token>> tokens = ParseSource(source);
      if (!tokens.ok()) return fail(tokens.status());
      const size_t steps = tokens->size();
      if (steps < 2 || (tokens->back().kind != Token::kAttr && tokens->back().kind != Token::kKey &&
                        tokens->back().kind != Token::kIndex)) {
        return fail(absl::InvalidArgumentError("HASATTR needs a source ending in an attribute or key"));
      }
      source = source.substr(0, (*tokens)[steps - 2].end);
    }
    absl::StatusOr<Split> parts = split(source);
    if (!parts.ok()) return fail(parts.status());
    absl::StatusOr<int> node = path(source, parts->node, parts->rest);
    if (!node.ok()) return fail(node.status());
    int parent = *node;
    absl::StatusOr<CompiledCheck> check = CompileCheck(g, seen[static_cast<size_t>(parent)].get(), *p, known);
    if (!check.ok()) return fail(check.status());
    check->guard = static_cast<int>(gi);
    TreeNode& at = tree[static_cast<size_t>(parent)];
    if (!Memoizable(*check, seen[static_cast<size_t>(parent)].get(), &at.needs)) at.pure = false;
    at.identified |= g.kind() == ir::Guard::ID_MATCH;
    at.checks.push_back(*std::move(check));
  }
  std::vector<int> flat_of;
  Flatten(tree, roots, *p, &flat_of);
  for (AliasCheck& a : p->aliases) {
    for (int& node : a.nodes) {
      node = flat_of[static_cast<size_t>(node)];
      p->nodes[static_cast<size_t>(node)].aliased = true;
    }
  }
  PlanStamps(tree, seen, flat_of, *p);
  // Compiled against the frame the trace saw, every guard must hold there:
  // one walk of the tree (which also records the stamps, so the next call
  // already skips what they cover), and the guards one by one only to name
  // the one that does not.
  GuardEvaluator evaluator(p);
  if (evaluator.Check(at_capture)) return evaluator;
  ops::SymBindings bindings;
  BindingsScope scope(&bindings);
  for (size_t gi = 0; gi < guards.size(); ++gi) {
    if (std::optional<std::string> why = p->ExplainGuard(gi, at_capture)) {
      return absl::FailedPreconditionError(absl::StrCat("guard does not hold on the frame it is compiled against: ", *why));
    }
  }
  return absl::FailedPreconditionError("the guards do not hold on the frame they are compiled against");
}

bool GuardEvaluator::Check(const FrameView& frame) const {
  const Program& p = *program_;
  if (p.life->dead) return false;
  ops::SymBindings bindings;
  BindingsScope scope(&bindings);
  if (!p.GlobalsHold()) return false;
  std::vector<char> matched(p.memos.size(), 0);
  // Aliasing checks that read objects a stamp recorded need that stamp to
  // hold still after Run: known at the cost of two dict writes when no dict
  // changed during Run, rather than comparing the stamps again.
  const bool watch = !p.aliases.empty() && !p.memos.empty();
  uint64_t epoch = watch ? ReadDictEpoch() : 0;
  if (!p.Run(frame, &matched)) {
    python::ClearError();
    return false;
  }
  const bool quiet = watch && DictsUnchangedSince(epoch, &epoch);
  for (size_t i = 0; i < p.aliases.size(); ++i) {
    if (!p.AliasHolds(0, p.aliases[i], frame, nullptr, &matched, quiet ? &epoch : nullptr)) return false;
  }
  for (const ShapeCheck& c : p.shapes) {
    if (!p.ShapeHolds(c, nullptr)) return false;
  }
  return true;
}

int GuardEvaluator::FirstFailing(const FrameView& frame) const {
  if (program_->life->dead) return 0;
  ops::SymBindings bindings;
  BindingsScope scope(&bindings);
  for (size_t i = 0; i < program_->guards.size(); ++i) {
    if (program_->ExplainGuard(i, frame)) return static_cast<int>(i);
  }
  return -1;
}

std::optional<std::string> GuardEvaluator::Explain(const FrameView& frame) const {
  if (program_->life->dead) return "an object the guards identify by address has been freed";
  ops::SymBindings bindings;
  BindingsScope scope(&bindings);
  for (size_t i = 0; i < program_->guards.size(); ++i) {
    if (std::optional<std::string> why = program_->ExplainGuard(i, frame)) return why;
  }
  return std::nullopt;
}

size_t GuardEvaluator::size() const { return program_->guards.size(); }
bool GuardEvaluator::alive() const { return !program_->life->dead; }
void GuardEvaluator::OnDeath(std::function<void()> f) const { program_->life->on_death = std::move(f); }
size_t GuardEvaluator::watched_count() const { return program_->watches.size(); }
size_t GuardEvaluator::accessor_count() const { return program_->nodes.size(); }
size_t GuardEvaluator::stamped_count() const { return program_->memos.size(); }
uint64_t GuardEvaluator::skipped_subtrees() { return skipped_count; }
uint64_t GuardEvaluator::quiet_aliases() { return quiet_alias_count; }
uint64_t GuardEvaluator::torch_tensor_checks() { return torch_tensor_count; }
uint64_t GuardEvaluator::global_snapshot_hits() { return snapshot_hit_count; }

// ---------------------------------------------------------------------------
// OwnedFrame.

namespace {

absl::StatusOr<std::vector<std::string>> Names(const Object& code, const char* field) {
  absl::StatusOr<Object> tuple = python::GetAttr(code, field);
  if (!tuple.ok()) return tuple.status();
  absl::StatusOr<std::vector<Object>> items = python::AsVector(*tuple);
  if (!items.ok()) return items.status();
  std::vector<std::string> out;
  for (const Object& item : *items) {
    absl::StatusOr<std::string> s = python::AsString(item);
    if (!s.ok()) return s.status();
    out.push_back(*std::move(s));
  }
  return out;
}

}  // namespace

absl::StatusOr<OwnedFrame> OwnedFrame::ForCode(const Object& code, const Object& locals, const Object& globals) {
  if (!code || !PyCode_Check(code.get())) return absl::InvalidArgumentError("ForCode needs a code object");
  if (!locals || !PyDict_Check(locals.get())) return absl::InvalidArgumentError("locals must be a dict");
  absl::StatusOr<std::vector<std::string>> varnames = Names(code, "co_varnames");
  absl::StatusOr<std::vector<std::string>> cellvars = Names(code, "co_cellvars");
  absl::StatusOr<std::vector<std::string>> freevars = Names(code, "co_freevars");
  if (!varnames.ok()) return varnames.status();
  if (!cellvars.ok()) return cellvars.status();
  if (!freevars.ok()) return freevars.status();
  OwnedFrame f;
  f.globals_ = globals;
  auto is_cell = [&](const std::string& n) {
    return std::find(cellvars->begin(), cellvars->end(), n) != cellvars->end();
  };
  for (const std::string& n : *varnames) {
    f.names_.push_back(n);
    f.cells_.push_back(is_cell(n));
  }
  for (const std::string& n : *cellvars) {
    if (std::find(varnames->begin(), varnames->end(), n) != varnames->end()) continue;
    f.names_.push_back(n);
    f.cells_.push_back(true);
  }
  for (const std::string& n : *freevars) {
    f.names_.push_back(n);
    f.cells_.push_back(true);
  }
  f.values_.resize(f.names_.size());
  Py_ssize_t pos = 0;
  PyObject *k = nullptr, *v = nullptr;
  while (PyDict_Next(locals.get(), &pos, &k, &v)) {
    absl::StatusOr<std::string> name = python::AsString(Object::Borrow(k));
    if (!name.ok()) return name.status();
    if (!f.Set(*name, Object::Borrow(v))) {
      return absl::InvalidArgumentError(absl::StrCat("the code object has no local '", *name, "'"));
    }
  }
  f.Sync();
  return f;
}

absl::StatusOr<OwnedFrame> OwnedFrame::FromDict(const Object& locals, const Object& globals) {
  if (!locals || !PyDict_Check(locals.get())) return absl::InvalidArgumentError("locals must be a dict");
  OwnedFrame f;
  f.globals_ = globals;
  Py_ssize_t pos = 0;
  PyObject *k = nullptr, *v = nullptr;
  while (PyDict_Next(locals.get(), &pos, &k, &v)) {
    absl::StatusOr<std::string> name = python::AsString(Object::Borrow(k));
    if (!name.ok()) return name.status();
    f.names_.push_back(*name);
    f.cells_.push_back(false);
    f.values_.push_back(Object::Borrow(v));
  }
  f.Sync();
  return f;
}

bool OwnedFrame::Set(absl::string_view name, Object value) {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) {
      values_[i] = std::move(value);
      Sync();
      return true;
    }
  }
  return false;
}

void OwnedFrame::Sync() {
  raw_.resize(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) raw_[i] = values_[i].get();
}

FrameView OwnedFrame::view() const {
  return FrameView{raw_.data(), &names_, &cells_, globals_.get()};
}

}  // namespace dynamo::guards
