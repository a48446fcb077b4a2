// What the symbolic interpreter knows about each Python value while it
// traces: a variable tracker. A tensor is its metadata and the graph node that
// produces it; anything else is a real Python object (read, never run) or a
// container of trackers. Every tracker remembers its Source (source.h) when it
// came from the frame, so the guards can name it.
//
//   VarPtr x = Var::Tensor("x", meta, Source::Local("x"));
//   VarPtr two = Var::Constant(python::FromLong(2));
//   VarPtr pair = Var::Tuple({x, two});
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/ops/sym.h"
#include "lib/ops/value.h"
#include "lib/python/object.h"
#include "lib/trace/source.h"

namespace dynamo::trace {

enum class VarKind {
  kNull,          // the NULL that PUSH_NULL / LOAD_GLOBAL push below a callable
  kConstant,      // an immutable Python value: None, bool, int, float, str, bytes, Ellipsis, code
  kTensor,        // a tensor: metadata + the graph node producing it
  kTuple,         // a tuple (or torch.Size when is_size) of trackers
  kList,          // a list of trackers (mutable only when made during the trace)
  kDict,          // a dict with constant keys
  kSlice,         // slice(start, stop, step) of constants
  kRange,         // range(start, stop, step)
  kIterator,      // an iterator: over a list (`self`), read live; otherwise over precomputed items
  kDType,         // torch.dtype
  kDevice,        // torch.device
  kModule,        // a Python module (torch, torch.nn.functional, math, ...)
  kOp,            // a callable with an op-registry entry (torch.sin, F.relu)
  kBuiltin,       // a Python builtin the translator implements (len, range, ...)
  kFunction,      // a Python function to inline (with its defaults and closure)
  kNNModule,      // a torch.nn.Module instance (its forward is inlined)
  kMethod,        // a method bound to a tracker (Tensor.add, list.append)
  kGradMode,      // torch.no_grad() / torch.enable_grad() as a context manager
  kAutocast,      // a torch.autocast object (`object`, made at trace time): its device type,
                  // dtype, enabled and cache_enabled are read from it (autocast.cc)
  kCell,          // a closure cell (its contents is `value`)
  kClass,         // a Python class (for isinstance and attribute reads)
  kDictView,      // d.keys() / d.values() / d.items(): a live view of the kDict `self`
  kOpaque,        // any other Python object: attributes readable, nothing callable
  kGenerator,     // a generator run lazily by the trace (generators.cc)
  kPartial,       // functools.partial: `self` the function, `defaults` its args (kTuple),
                  // `kwdefaults` its keywords (kDict) (functools.cc)
  kUserObject,    // an instance of a plain Python class made during the trace (user_objects.cc)
  kSymInt,        // an int that is a size expression (dynamic shapes): `sym`, asked of `shape_env`
  kScalar,        // a Python number read from tensor values when the graph runs (Tensor.item()
                  // and the like where scalar outputs are captured, scalars.cc): `node` the
                  // graph value, `name` its type ("int", "float", "bool"); its value is unknown
  kSet,           // a set or frozenset (`name`) made during the trace holding a tracker that is
                  // not a Python constant: `items` its distinct members in insertion order
                  // (sets.cc); a set of constants stays a real set (kConstant)
};

struct Var;
struct GeneratorState;  // generators.cc
using VarPtr = std::shared_ptr<Var>;

struct Var {
  VarKind kind = VarKind::kOpaque;
  SourcePtr source;
  python::Object object;  // the real object, when there is one

  // kTensor
  std::string node;       // the graph node (or placeholder) producing it
  // The node of the tensor object it is, when that is not `node`: an
  // in-place op (x.add_(1), x += 1) returns its first argument itself.
  std::string identity;
  ops::TensorMeta meta;
  // kTensor with dynamic shapes: one expression per dim when some size is
  // symbolic (meta.sizes holds the hints); empty: static.
  std::vector<ops::SymExpr> sym_sizes;
  // kTensor: a numpy.ndarray over this tensor (numpy.cc). NumPy's rules,
  // not torch's, apply to it; no torch operation takes it (ToValue).
  bool is_ndarray = false;
  // is_ndarray: a 0-d result NumPy hands back as a scalar (np.float64), as
  // reductions and ufuncs on 0-d operands do.
  bool numpy_scalar = false;
  // kTensor read from a real tensor: its class (nn.Parameter, a subclass);
  // empty: torch.Tensor, what every op the registry knows returns.
  python::Object tensor_type;

  // kTuple, kList, kIterator, kDict values, kSlice (3 items)
  std::vector<VarPtr> items;
  std::vector<VarPtr> keys;  // kDict keys (constants), parallel to items
  // kDict or kList made during the trace as another class: OrderedDict and
  // defaultdict (containers.cc), deque (kList, collection_types.cc); empty:
  // a dict or list. One read from a source is its object's.
  python::Object container_class;
  // kDict as a defaultdict: its default_factory (a callable, or None).
  VarPtr default_factory;
  // kList as a deque: its maxlen, -1 for none.
  int64_t maxlen = -1;
  bool is_size = false;      // kTuple: a torch.Size
  std::vector<std::string> fields;  // kTuple: a named tuple's field names (torch.return_types)
  size_t position = 0;       // kIterator: next item

  // kRange; a kNNModule sliced from another (its `self`): the first index
  // and the step into that one's children
  int64_t start = 0, stop = 0, step = 1;

  // kOp: registry name; kBuiltin: builtin name; kMethod: method name;
  // kDictView: "keys", "values" or "items"
  std::string name;
  // kMethod: the receiver; kFunction: the bound self (methods of modules);
  // kTensor: the input an array view is of (x.numpy(), torch.from_numpy(a));
  // kDictView: the dict; kIterator: the list it reads live (CPython's list
  // iterator indexes the list at each step, so it sees appends made after
  // it), or the dict whose keys it holds (a change of size raises)
  VarPtr self;
  // kFunction made during the trace (object is then its code object): the
  // globals it was made with
  python::Object globals;
  // kFunction: defaults, keyword defaults, closure cells (trackers)
  VarPtr defaults;      // a kTuple or null
  VarPtr kwdefaults;    // a kDict or null
  std::vector<VarPtr> closure;
  // kCell
  VarPtr value;
  // kGenerator: its suspended frame or adapter. A generator expression also
  // keeps its function in `self` and its arguments in `items`, and counts
  // the values taken in `position`: untouched, it is rebuilt by calling again.
  std::shared_ptr<GeneratorState> generator;
  // kUserObject, and a kTuple made by calling a named tuple class: the
  // class's tracker. A kNNModule the trace constructed (a torch.nn module
  // without weights): its class, called on `items` (the last keys.size()
  // of them by the names in `keys`) to make it again. A kUserObject's `object` is a blank stand-in made by
  // object.__new__ (for class lookups, isinstance, super(); never emitted)
  // and its instance attributes are `keys` (constant names) and `items`.
  VarPtr user_class;
  // kDict made by calling a Python subclass of dict (user_dicts.cc): its
  // instance attributes, the kDict that obj.__dict__ reads; `object` is a
  // blank stand-in made by the base's __new__, as for kUserObject. A
  // kFunction made during the trace: its __dict__ (attributes set on it,
  // functools.wraps's __wrapped__), made when first needed; its __name__,
  // __qualname__, __doc__ and __module__ once set are `keys` / `items`.
  VarPtr instance_dict;
  // kSymInt: the size expression and its example value (the hint), and the
  // trace's ShapeEnv, which guards a use of the int as a plain Python int
  // (AsInt, ToValue: the trace then holds for that value only).
  ops::SymInt sym;
  ops::ShapeEnv* shape_env = nullptr;
  // kDType / kDevice / kGradMode
  ops::DType dtype = ops::DType::kFloat32;
  ops::Device device;
  bool grad_enabled = true;
  // kGradMode made by torch.set_grad_enabled(mode), which sets the mode when
  // it is made: the mode before, which leaving its `with` block restores.
  std::optional<bool> grad_restore;

  static VarPtr Null();
  static VarPtr Constant(python::Object object, SourcePtr source = nullptr);
  static VarPtr Tensor(std::string node, ops::TensorMeta meta, SourcePtr source = nullptr);
  static VarPtr Tuple(std::vector<VarPtr> items, SourcePtr source = nullptr);
  static VarPtr List(std::vector<VarPtr> items, SourcePtr source = nullptr);
  static VarPtr Dict(std::vector<VarPtr> keys, std::vector<VarPtr> values,
                     SourcePtr source = nullptr);
  static VarPtr Iterator(std::vector<VarPtr> items);
  static VarPtr Method(VarPtr self, std::string name);
  static VarPtr Cell(VarPtr contents);
  static VarPtr OfKind(VarKind kind, python::Object object, SourcePtr source = nullptr);
  // A size int: a kSymInt when `value` is symbolic, else a constant.
  static VarPtr SymInt(const ops::SymInt& value, ops::ShapeEnv* env);

  bool is_constant() const { return kind == VarKind::kConstant; }
  bool is_tensor() const { return kind == VarKind::kTensor; }
  bool is_sequence() const { return kind == VarKind::kTuple || kind == VarKind::kList; }
  bool is_none() const;
  // kTensor: which tensor object it is (see `identity`).
  const std::string& tensor_identity() const { return identity.empty() ? node : identity; }
};

// "tensor float32[2, 3]", "constant 3", "list of 2" — for messages.
std::string Describe(const Var& var);

// A tracker as an op-registry argument: tensors become metadata, constants,
// dtypes, devices, slices and (nested) tuples/lists their values. Anything
// else (a module, a function) is an error naming it.
// A size int (kSymInt) is specialised (guarded to its value) unless
// `specialize` is false: an op call passes its symbolic side separately.
absl::StatusOr<ops::Value> ToValue(const VarPtr& var, bool specialize = true);

// A constant as a Python int/float/bool, for C++ control (range bounds, dims).
// A kSymInt is specialised: its hint, guarded (ShapeEnv::Specialize).
absl::StatusOr<int64_t> AsInt(const VarPtr& var);
// A kSymInt's value as a plain int, guarded as AsInt does; null for others.
python::Object SpecializedInt(const VarPtr& var);

// True when the tracker, or anything inside it, is a tensor.
bool ContainsTensor(const VarPtr& var);
// The __exit__ of a torch.no_grad() / enable_grad() block the trace is in
// (BEFORE_WITH pushes it); its grad_enabled is the mode __enter__ replaced.
bool IsGradModeExit(const VarPtr& var);
// The __exit__ of a torch.autocast block the trace is in (autocast.cc).
bool IsAutocastExit(const VarPtr& var);
// Either: a block the rewrite enters again where the trace stops inside it,
// so the instruction and the resume function run inside it as in eager.
inline bool IsReenteredExit(const VarPtr& var) { return IsGradModeExit(var) || IsAutocastExit(var); }
// True when the tracker, or anything inside it, is a numpy.ndarray.
bool ContainsNdarray(const VarPtr& var);

}  // namespace dynamo::trace
