// The Translator class behind Trace() (translator.h), split over
// translator.cc (frames and opcodes), calls.cc (calls, attributes, and
// turning real Python objects into trackers) and generators.cc (generator
// expressions run lazily). Not a public header.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "lib/bytecode/decoder.h"
#include "lib/ops/registry.h"
#include "lib/trace/graph_builder.h"
#include "lib/trace/meta_fallback.h"
#include "lib/trace/guards.h"
#include "lib/trace/translator.h"
#include "lib/ops/sym_shapes.h"
#include "lib/trace/variables.h"

namespace dynamo::trace {

using Kwargs = std::vector<std::pair<std::string, VarPtr>>;

inline constexpr size_t kMaxSteps = 2'000'000;  // instructions per trace, unrolled loops included
inline constexpr size_t kMaxInlineDepth = 48;   // nested inlined calls

// A call_function target naming a function dynamo.allow_in_graph put in the
// graph (call_policy.cc): it has effects the graph must keep.
bool IsAllowedFunctionTarget(absl::string_view target);

// Whether a call's result holds a tensor (itself, or an item of a list or
// tuple, at any depth): a call without one is no graph node (calls.cc).
bool HasTensor(const ops::Value& v);

using python::Attr;

// The class super() `sup` finds `name` in: the first class after its
// __thisclass__ in the MRO of its object's type that defines it (null:
// none does). `sup` is a super tracker with self (user_objects.cc).
PyTypeObject* SuperDefiner(const VarPtr& sup, const char* name);

// Calling class `cls` is type.__call__ (its metaclass, if any, keeps it):
// cls.__new__, then __init__; false for an abstract class (user_objects.cc).
bool TypeCallConstructs(PyObject* cls);

// A kDict made by calling a Python subclass of dict (user_dicts.cc).
bool IsUserDict(const VarPtr& v);
// A deque / defaultdict made during the trace (collection_types.cc).
bool IsDeque(const VarPtr& v);
bool IsDefaultDict(const VarPtr& v);
bool IsDequeObject(PyObject* o);  // exactly a collections.deque
// source.name, or no source where `source` is none (a value the trace made).
inline SourcePtr AttrOf(const SourcePtr& source, const std::string& name) {
  return source ? Source::Attr(source, name) : nullptr;
}

// Whether `o` is a numpy.ndarray (exactly; numpy.cc). False when the
// program has not imported numpy.
bool IsNumpyArray(PyObject* o);

// A standard-library object (functools.partial, itertools.chain, ...):
// resolved once per process and leaked on purpose, as the interpreter's own;
// nullptr when the module lacks it.
PyObject* StdlibObject(const char* module, const char* name);
// Whether fn is `name` of the module `module`, where that module is loaded
// (never imported here: a program that has not imported it cannot call it).
// torch._dynamo.graph_break, torch.ops.higher_order.cond (calls.cc).
bool IsLoadedModuleAttr(PyObject* fn, const char* module, const char* name);
// torch's attribute at a dotted path ("nn.Module", "amp.autocast_mode.autocast"),
// resolved once per process; null when torch lacks it (calls.cc).
python::Object TorchAttr(const char* dotted);
// A torch.dtype object's DType; nullopt for anything else, or a dtype
// libdynamo does not model (calls.cc).
std::optional<ops::DType> DTypeOf(PyObject* dtype);
// `registry`'s result with each tensor's dtype the one torch's autocast gave
// (`cast`); false when the two do not describe the same tensors, and then
// torch's answer is to be taken whole (autocast.cc).
bool TakeAutocastDTypes(ops::Value& registry, const ops::Value& cast);
// A grad-mode object (no_grad(), enable_grad()), or with `fn` the function
// it decorates, which runs under `enabled` when called (calls.cc).
VarPtr GradModeDecorated(bool enabled, VarPtr fn);
// The class of the iterator a kGenerator stands for (a generator, map, zip,
// itertools.chain, ...); null where unknown (generators.cc).
python::Object GeneratorClass(const Var& v);

// For instruction handlers: pop the frame's top into `var`; bind `lhs` to
// a StatusOr's value. Either returns the error.
#define POP_OR_RETURN(var)                      \
  absl::StatusOr<VarPtr> var##_or = Pop(f);     \
  if (!var##_or.ok()) return var##_or.status(); \
  VarPtr var = *std::move(var##_or)
#define ASSIGN_OR_RETURN(lhs, expr)             \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

// The translator's operations (Translator::Op<Name>, instructions.cc).
#define DYNAMO_TRANSLATOR_OPS(X)                                                               \
  X(Nop) X(PopTop) X(PushNull) X(Copy) X(Swap) X(EndFor) X(LoadConst) X(ReturnConst)        \
  X(LoadFast) X(LoadFastAndClear) X(LoadFastLoadFast) X(StoreFast) X(StoreFastStoreFast)      \
  X(StoreFastLoadFast) X(DeleteFast) X(MakeCell) X(CopyFreeVars) X(LoadDeref) X(StoreDeref)   \
  X(LoadGlobal) X(LoadAttr) X(LoadMethod) X(LoadSuperAttr) X(StoreAttr) X(DeleteAttr) X(StoreGlobal)        \
  X(KwNames) X(Call) X(CallKw) X(CallFunctionEx) X(MakeFunction) X(SetFunctionAttribute)      \
  X(BinaryOp) X(CompareOp) X(IsOp) X(ContainsOp) X(Unary) X(UnaryNot) X(ToBool)               \
  X(CallIntrinsic1) X(BinarySubscr) X(StoreSubscr) X(BinarySlice) X(StoreSlice) X(BuildSlice) \
  X(BuildTuple) X(BuildList) X(BuildMap) X(BuildConstKeyMap) X(BuildSet) X(SetAdd)            \
  X(ListAppend) X(ListExtend) X(ListToTuple) X(MapAdd) X(DictUpdate) X(UnpackSequence)        \
  X(UnpackEx) X(GetIter) X(ForIter) X(Jump) X(PopJumpIfTrue) X(PopJumpIfFalse)                \
  X(PopJumpIfNone) X(PopJumpIfNotNone) X(JumpIfTrueOrPop) X(JumpIfFalseOrPop) X(ReturnValue)  \
  X(BeforeWith) X(FormatValue) X(ConvertValue) X(FormatSimple) X(FormatWithSpec)              \
  X(BuildString) X(LoadAssertionError) X(RaiseVarargs) X(ImportName) X(ImportFrom)            \
  X(ReturnGenerator) X(YieldValue) X(GetYieldFromIter) X(Send) X(EndSend) X(PushExcInfo) X(PopExcept) X(CheckExcMatch) X(Reraise)

// Whether Python may take over at this instruction after a break: it
// consumes its operands from the top of the stack and falls through (or, for
// the conditional jumps, goes to one of two known places).
bool CanRunAlone(int opcode);

// BINARY_OP's oparg for an NB_ operator name ("NB_ADD"), or -1 (builtins.cc).
int BinaryOpIndex(absl::string_view nb_name);

class Translator {
 public:
  explicit Translator(const ops::Registry& registry);
  absl::StatusOr<TraceResult> Run(const TraceRequest& request, BreakInfo* on_break);
  // After a break: the top-frame instruction it happened in (a break inside
  // an inlined call is the call instruction of the top frame).
  std::optional<size_t> break_top_index() const { return break_top_index_; }
  // The top frame's value stack when it broke (which `with` blocks are open).
  const std::vector<VarPtr>& break_top_stack() const { return break_top_stack_; }
  std::shared_ptr<const bytecode::DecodedCode> top_code() const { return top_code_; }

 private:
  struct Frame {
    std::shared_ptr<const bytecode::DecodedCode> code;
    python::Object globals;   // the function's __globals__
    // How guards reach those globals: G['name'] for the traced function's own
    // module, sys.modules['mod'].name for another module's, none for torch's
    // internals (torch is not expected to be monkey-patched mid-run).
    bool top_globals = false;
    SourcePtr globals_source;
    bool globals_by_item = false;  // globals_source is a dict (fn.__globals__), read by item
    std::vector<VarPtr> stack;
    std::vector<VarPtr> locals;  // one per localsplus slot
    std::vector<VarPtr> closure; // cells for COPY_FREE_VARS
    size_t ip = 0;               // index of the current instruction
    VarPtr kw_names;             // set by KW_NAMES for the next CALL
    bool generator = false;      // a generator's frame, resumed by generators.cc
    bool yielded = false;        // RunFrame returned at a YIELD_VALUE
  };
  friend struct GeneratorState;

  // --- frames and opcodes (translator.cc) ---
  absl::StatusOr<VarPtr> RunFrame(Frame& frame);

  // --- exceptions raised and caught in the trace (exceptions.cc) ---
  // `exc` (a real exception instance, kOpaque) is raised: the status every
  // caller passes up until a frame's exception table has a handler for the
  // instruction it is at (Unwind). One that reaches the traced function's
  // own frame is a graph break there: its try blocks run in Python.
  absl::Status Raise(VarPtr exc);
  static bool IsRaised(const absl::Status& s);
  // Raises a new `type(message)` (a builtin exception class), as the
  // operation Python runs would.
  absl::Status RaiseNew(PyObject* type, const std::string& message);
  // Whether `s` raised an instance of `type`; if so the exception is taken
  // (the caller handles it, as a C function catching it does).
  bool CatchRaised(const absl::Status& s, PyObject* type);
  // Jumps f to the handler for instruction `in` with the raised exception
  // pushed, as CPython's exception_unwind does; false when f has none.
  bool Unwind(Frame& f, const bytecode::Instruction& in);
  // What RAISE_VARARGS raises for a value: an exception instance (a class
  // is called, when that runs no Python code); an error otherwise.
  absl::StatusOr<VarPtr> ExceptionInstance(const VarPtr& v);
  // cls(*args) for an exception class: a real instance when the class's
  // construction is C code and the arguments constants; nothing otherwise.
  std::optional<VarPtr> MakeException(PyObject* cls, const std::vector<VarPtr>& args, const Kwargs& kwargs);
  absl::Status Step(Frame& f, const bytecode::Instruction& in, std::optional<VarPtr>& result);
  // One handler per operation (instructions.cc), dispatched by opcode from a
  // table built from the target's opcode names: an operation is written once
  // whatever its encoding in 3.11, 3.12 or 3.13.
  using OpHandler = absl::Status (Translator::*)(Frame&, const bytecode::Instruction&,
                                                 std::optional<VarPtr>&);
  friend struct OpTable;
#define DYNAMO_DECLARE_OP(name) \
  absl::Status Op##name(Frame& f, const bytecode::Instruction& in, std::optional<VarPtr>& result);
  DYNAMO_TRANSLATOR_OPS(DYNAMO_DECLARE_OP)
#undef DYNAMO_DECLARE_OP
  // Pushes local `slot` (a break when it is unbound); stores into it.
  absl::Status PushLocal(Frame& f, int slot, absl::string_view name);
  absl::Status StoreLocal(Frame& f, int slot, VarPtr v);
  // del obj.name of an object the trace made (user_objects.cc); generic:
  // object.__delattr__'s, never the class's own override.
  absl::Status DeleteUserObjectAttr(const VarPtr& obj, const std::string& name, bool generic = false);
  // BEFORE_WITH over anything but a grad-mode manager (instructions.cc).
  absl::Status EnterUserContext(Frame& f, const VarPtr& manager);
  // The callable with its NULL (or self) slot, in the target's stack order.
  void PushCallable(Frame& f, VarPtr callable);
  // FOR_ITER at its end: the iterator is dropped and execution continues
  // after the loop's END_FOR (3.12+; the jump target itself before).
  absl::Status EndLoop(Frame& f, const bytecode::Instruction& in);
  // OK for a value a dict may take as a key; a break (Python would raise
  // TypeError, or a Python __hash__ would run) otherwise.
  absl::Status CheckHashable(const VarPtr& key);
  // Whether a dict holding key `a` takes `b` as the same key (1, 1.0 and
  // True are one key; a tensor is only itself), as dict's hash and == do.
  absl::StatusOr<bool> SameDictKey(const VarPtr& a, const VarPtr& b);
  // Where a dict with `keys` holds `key` (nullopt: absent): every lookup,
  // store, get/pop/setdefault and `in` of a dict goes through it, so that
  // they agree on hashability and on which keys are one.
  absl::StatusOr<std::optional<size_t>> FindDictKey(const std::vector<VarPtr>& keys, const VarPtr& key);
  // A function made during the trace: its __dict__ tracker, and attribute
  // stores into it (or into __name__ and the like; see Var::instance_dict).
  VarPtr FunctionDict(const VarPtr& fn);
  absl::Status StoreFunctionAttr(const VarPtr& fn, const std::string& name, const VarPtr& value);
  // One key: value pair of a dict display or item store, merged into an
  // equal earlier key.
  absl::Status AddDictEntry(std::vector<VarPtr>& keys, std::vector<VarPtr>& values, const VarPtr& key,
                            const VarPtr& value);
  absl::Status StoreItem(const VarPtr& obj, const VarPtr& index, const VarPtr& value);
  // -x, +x, ~x by the operator module's name ("neg", "pos", "invert").
  absl::StatusOr<VarPtr> UnaryOperator(const char* name, const VarPtr& v);
  absl::StatusOr<python::Object> Converted(const VarPtr& v, int conversion);
  // MAKE_FUNCTION/SET_FUNCTION_ATTRIBUTE's flags: 1 defaults, 2 kwdefaults,
  // 4 annotations, 8 closure.
  absl::Status SetFunctionAttribute(const VarPtr& fn, int flag, const VarPtr& value);
  absl::StatusOr<size_t> IndexOf(const Frame& f, int offset);
  absl::Status Jump(Frame& f, const bytecode::Instruction& in);
  absl::StatusOr<VarPtr> Pop(Frame& f);
  absl::StatusOr<std::vector<VarPtr>> PopN(Frame& f, size_t n);
  absl::StatusOr<bool> Truthy(const VarPtr& v);
  absl::StatusOr<VarPtr> BinaryOp(int nb_op, const VarPtr& a, const VarPtr& b);
  absl::StatusOr<VarPtr> Compare(const std::string& op, const VarPtr& a, const VarPtr& b);
  absl::StatusOr<python::Object> TypingArgument(const VarPtr& v);
  absl::StatusOr<VarPtr> Subscript(const VarPtr& obj, const VarPtr& index);
  absl::StatusOr<std::vector<VarPtr>> Unpack(const VarPtr& v, size_t expected);
  absl::StatusOr<VarPtr> GetIter(const VarPtr& v);
  absl::StatusOr<std::vector<VarPtr>> Materialize(const VarPtr& iterable);
  absl::StatusOr<VarPtr> MakeFunction(Frame& f);
  absl::Status BindArguments(Frame& frame, const VarPtr& function, std::vector<VarPtr> args,
                             Kwargs kwargs);
  absl::StatusOr<std::shared_ptr<const bytecode::DecodedCode>> Decoded(const python::Object& code);
  // A generator's code is refused unless `generator`: the frame then runs
  // only through generators.cc.
  absl::Status PrepareFrame(Frame& frame, const python::Object& code, const python::Object& globals,
                            bool generator = false);

  // --- generators (generators.cc) ---
  // Generator expressions are traced lazily: calling one makes a generator
  // tracker holding its suspended frame; whatever iterates it (FOR_ITER,
  // next, any/all, list, sum, ...) resumes the frame up to its next
  // YIELD_VALUE, as CPython does.
  static bool IsGeneratorExpression(const bytecode::DecodedCode& code);
  VarPtr MakeGenerator(const VarPtr& function, Frame frame, std::vector<VarPtr> args);
  // The next value of a generator or iterator tracker; nothing at its end.
  absl::StatusOr<std::optional<VarPtr>> NextValue(const VarPtr& iterator);
  // NextValue of a kIterator (see Var::self: a list's is read live).
  absl::StatusOr<std::optional<VarPtr>> IteratorNext(const VarPtr& iterator);
  absl::StatusOr<std::vector<VarPtr>> DrainGenerator(const VarPtr& generator);
  absl::Status YieldValue(Frame& f, std::optional<VarPtr>& result);
  // What an exhausted iterator returned (StopIteration.value): a generator
  // function's return value, None for anything else.
  VarPtr ReturnedValue(const VarPtr& exhausted);
  absl::Status ReturnGenerator(Frame& f);
  absl::Status ForIterGenerator(Frame& f, const bytecode::Instruction& in);
  absl::StatusOr<bool> GeneratorContains(const VarPtr& generator, const VarPtr& item);
  // A call with a generator argument: the builtins that consume it lazily
  // (any, all, next, iter, enumerate, zip, map, filter), dict/min/max and
  // str.join (which take all of it), inlined functions (which iterate it as
  // Python would); anything else is a graph break. Nothing when no argument
  // is a generator or the call proceeds as usual with `args` rewritten.
  // enumerate/zip/map/filter as lazy adapters (generators.cc): over any
  // iterable (LazyAdapter), and chosen for lists by LazyOverList.
  std::optional<absl::StatusOr<VarPtr>> LazyAdapter(const std::string& name, const std::vector<VarPtr>& args,
                                                    const Kwargs& kwargs);
  std::optional<absl::StatusOr<VarPtr>> LazyOverList(const std::string& name, const std::vector<VarPtr>& args,
                                                     const Kwargs& kwargs);
  std::optional<absl::StatusOr<VarPtr>> CallWithGenerator(const VarPtr& fn,
                                                          std::vector<VarPtr>& args,
                                                          Kwargs& kwargs);
  // itertools.chain over `iterables` and itertools.islice over an
  // iterator (stop -1: none), as lazy adapters.
  // iter(seq) where type(seq).__iter__ is collections.abc.Sequence's: its
  // loop over seq[0], seq[1], ... until IndexError, run natively.
  VarPtr MakeSequenceIterator(const VarPtr& iter_function, VarPtr sequence);
  VarPtr MakeChain(std::vector<VarPtr> iterables);
  VarPtr MakeIslice(VarPtr iterator, int64_t start, int64_t stop, int64_t step);
  // itertools.chain.from_iterable over an iterator of iterables.
  VarPtr MakeChainFromIterable(VarPtr source);
  // itertools' lazy iterators by name, their arguments bound:
  //   count(value, step)   repeat(value, times; -1: for ever)
  //   cycle(iterator)      accumulate(iterator, function, initial = value)
  //   groupby(iterator, function = key)
  // Null arguments are absent ones.
  VarPtr MakeItertool(const std::string& name, VarPtr iterator, VarPtr function, VarPtr value, VarPtr step,
                      int64_t times);
  // groupby_step: the groupby's next value and its key; false at the end.
  absl::StatusOr<bool> GroupbyStep(const VarPtr& groupby);
  // `a == b` as a truth value (groupby compares keys so).
  absl::StatusOr<bool> KeysEqual(const VarPtr& a, const VarPtr& b);
  // nn.Module's own generator methods over its module tree (modules,
  // children, parameters, buffers and their named_ forms): read from the
  // real module, an iterator over what they yield, each with its path from
  // the module. Nothing for any other function or arguments.
  std::optional<absl::StatusOr<VarPtr>> CallModuleTreeGenerator(const VarPtr& fn,
                                                                const std::vector<VarPtr>& args,
                                                                const Kwargs& kwargs);
  // Guards the part of the module tree under `module` (at `source`) that
  // those generators read: every _modules dict on the way (its entries'
  // identities), and for parameters/buffers which names hold None.
  absl::Status GuardModuleTree(PyObject* module, const SourcePtr& source, bool recurse, absl::string_view kind,
                               absl::flat_hash_set<PyObject*>& seen);

  // --- the standard library's functional helpers (functools.cc) ---
  // functools.partial/reduce, itertools.chain/islice and calls of a
  // partial. Nothing when `fn` is none of those.
  std::optional<absl::StatusOr<VarPtr>> InspectSignature(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                         const Kwargs& kwargs);
  std::optional<absl::StatusOr<VarPtr>> CallFunctools(const VarPtr& fn, std::vector<VarPtr>& args,
                                                      Kwargs& kwargs);
  // itertools.count/repeat/cycle/accumulate/groupby, lazy (MakeItertool).
  std::optional<absl::StatusOr<VarPtr>> CallItertool(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                     const Kwargs& kwargs);
  // itertools.product(*its, repeat=n) and itertools.combinations(it, r).
  absl::StatusOr<VarPtr> Combinatoric(bool product, const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // A real functools.partial read from `source`: a kPartial tracker whose
  // function, args and keywords are guarded. Nothing for any other object.
  std::optional<absl::StatusOr<VarPtr>> WrapPartial(const python::Object& obj, const SourcePtr& source);

  // --- lists and dicts (containers.cc) ---
  // list[slice] = iterable, as list_ass_subscript does.
  absl::Status AssignSlice(const VarPtr& list, const VarPtr& slice, const VarPtr& value);
  // dict[key] = value on a dict tracker (constant keys).
  absl::Status DictSet(const VarPtr& dict, const VarPtr& key, const VarPtr& value);
  // dict(arg, **kwargs).
  absl::StatusOr<VarPtr> BuildDict(const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // d.update(arg, **kwargs) on a dict tracker (dict_update_arg's order).
  absl::Status UpdateDict(const VarPtr& d, const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // A dict's keys view as a real set of its (constant) keys, for the set
  // comparisons and operators the view supports; `v` itself otherwise.
  VarPtr KeysViewAsSet(const VarPtr& v);
  // Both operands as sets, when one is a keys view and the other a keys
  // view or a set; nothing otherwise.
  std::optional<std::pair<VarPtr, VarPtr>> KeysViewOperands(const VarPtr& a, const VarPtr& b);
  // d.pop(), d.update(), d.setdefault() (mutation recorded by the caller).
  std::optional<absl::StatusOr<VarPtr>> CallDictMethod(const VarPtr& self, const std::string& name,
                                                       const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // dict.fromkeys / OrderedDict.fromkeys / defaultdict.fromkeys; nothing for other callables.
  std::optional<absl::StatusOr<VarPtr>> DictFromKeys(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                     const Kwargs& kwargs);
  // collections.OrderedDict(...) (the class `fn` is guarded by identity);
  // nothing for other classes.
  // torch.nn's own modules made in the traced code from constants, without
  // parameters or buffers (nn.Softmax(dim=-1)(x)): made now, for real
  // (module_calls.cc); nullopt for other classes.
  std::optional<absl::StatusOr<VarPtr>> ConstructTorchModule(const VarPtr& cls, const std::vector<VarPtr>& args,
                                                             const Kwargs& kwargs);
  // np.array / np.asarray of a list of arrays of one shape (their stack), or
  // of constants holding NumPy scalars (the numbers, with the dtype NumPy
  // gives the literal); nullopt for other calls (numpy.cc).
  std::optional<absl::StatusOr<VarPtr>> NumpyArrayLiteral(const std::string& target, const std::vector<VarPtr>& args,
                                                          const Kwargs& kwargs);
  // cls.__subclasses__(), storage.size() / nbytes() of a value the trace
  // reached through a source: the answer, read through a call source the
  // guards read again; nullopt for other calls.
  std::optional<absl::StatusOr<VarPtr>> SourcedQuery(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                     const Kwargs& kwargs);
  // collections.namedtuple(...) called in the trace: the class, made now.
  absl::StatusOr<VarPtr> NewNamedTupleClass(const VarPtr& fn, const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // torch.FloatTensor(data or sizes) and the other legacy tensor types, as
  // torch.tensor / torch.empty; nullopt for other classes.
  std::optional<absl::StatusOr<VarPtr>> ConstructLegacyTensor(const VarPtr& cls, const std::vector<VarPtr>& args,
                                                              const Kwargs& kwargs);
  std::optional<absl::StatusOr<VarPtr>> ConstructContainer(const VarPtr& cls, const std::vector<VarPtr>& args,
                                                           const Kwargs& kwargs);
  // clear() and copy() of a list or dict tracker (mutations are recorded by
  // the caller); nothing for other methods.
  std::optional<absl::StatusOr<VarPtr>> CallContainerMethod(const VarPtr& self, const std::string& name,
                                                            const std::vector<VarPtr>& args,
                                                            const Kwargs& kwargs);

  // --- collections.defaultdict and deque made in the trace (collection_types.cc) ---
  // defaultdict(factory, ...) / deque(iterable, maxlen); nothing for other classes.
  std::optional<absl::StatusOr<VarPtr>> ConstructCollection(const VarPtr& cls, const std::vector<VarPtr>& args,
                                                            const Kwargs& kwargs);
  // d[key] of a defaultdict without key: default_factory() stored and returned.
  absl::StatusOr<VarPtr> DefaultDictMissing(const VarPtr& d, const VarPtr& key);
  // A defaultdict read from the frame: its factory, read and guarded, when
  // the trace can call it (then missing keys are traced).
  absl::Status ReadDefaultFactory(const VarPtr& d, const python::Object& obj);
  absl::StatusOr<VarPtr> DequeAttr(const VarPtr& q, const std::string& name);
  // A deque read from the frame: its items by index, type, length and
  // maxlen guarded; the trace reads it but does not change it (a break).
  absl::StatusOr<VarPtr> WrapDeque(const python::Object& obj, SourcePtr source);
  // A tuple's iterator read from the frame (an argument, or one a resume
  // function is handed): its remaining items, read through its state
  // it.__reduce__() = (iter, (tuple,), position) with the tuple's length
  // and the position guarded, as an iterator the trace advances; its final
  // position is replayed on the real one after the graph.
  absl::StatusOr<VarPtr> WrapTupleIterator(const python::Object& obj, SourcePtr source);
  absl::StatusOr<VarPtr> CallDequeMethod(const VarPtr& q, const std::string& name, const std::vector<VarPtr>& args,
                                         const Kwargs& kwargs);
  // operator.<name>(a, b) with a deque among them.
  absl::StatusOr<VarPtr> DequeOperator(const std::string& name, const VarPtr& a, const VarPtr& b);

  // --- sets and frozensets (sets.cc) ---
  // How a set finds a member: tensors and objects by identity, constants
  // by hash and ==.
  struct SetMember {
    enum How { kIdentity, kValue } how;
    python::Object value;  // kValue: the constant; kIdentity: the object (empty for a tensor)
  };
  absl::StatusOr<SetMember> AsSetMember(const VarPtr& item);
  absl::StatusOr<bool> SameSetMember(const VarPtr& a, const VarPtr& b);
  // Adds to a set the trace made: a real set of constants stays one; the
  // first member that is not a constant turns it into a kSet in place.
  absl::Status AddToSet(const VarPtr& set, const VarPtr& item);
  absl::StatusOr<VarPtr> BuildSet(const std::vector<VarPtr>& items, bool frozen);
  absl::StatusOr<bool> SetContains(const VarPtr& set, const VarPtr& item);
  // A kSet's members in iteration order: known only with at most one.
  absl::StatusOr<std::vector<VarPtr>> SetMembers(const VarPtr& set);
  // `item in frozenset` for a frozenset read from the frame; nothing for
  // other containers.
  std::optional<absl::StatusOr<bool>> ContainsInRealSet(const VarPtr& container, const VarPtr& item);
  // An attribute of a kSet: its type's methods (bound to the tracker) and
  // __class__; a missing one breaks where CPython raises AttributeError.
  absl::StatusOr<VarPtr> SetAttr(const VarPtr& set, const std::string& name);
  // Methods of a kSet; nothing for other receivers.
  std::optional<absl::StatusOr<VarPtr>> CallSetMethod(const VarPtr& self, const std::string& name,
                                                      const std::vector<VarPtr>& args, const Kwargs& kwargs);

  // --- builtins and the operator module (builtins.cc) ---
  // `a is b`, as IS_OP answers it (tensors by the object they are).
  absl::StatusOr<bool> Identical(const VarPtr& a, const VarPtr& b);
  // Builtins whose CPython semantics calls.cc's general path misses;
  // nothing: proceed there.
  std::optional<absl::StatusOr<VarPtr>> CallBuiltinKind(const VarPtr& fn, std::vector<VarPtr>& args, Kwargs& kwargs);
  absl::StatusOr<VarPtr> ZipStrict(const std::vector<VarPtr>& args, const Kwargs& kwargs);
  absl::StatusOr<VarPtr> Sorted(const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // C functions of the standard library (operator.*, sys.intern, pow) and
  // torch.iinfo/finfo; nothing for anything else.
  std::optional<absl::StatusOr<VarPtr>> CallStdlibFunction(const VarPtr& fn, std::vector<VarPtr>& args,
                                                           Kwargs& kwargs);

  // --- Tensor.new and Tensor.type (tensor_legacy.cc) ---
  // Nothing when the call is not one of those forms (it then reaches the
  // registry as Tensor.<name>).
  std::optional<absl::StatusOr<VarPtr>> CallLegacyTensorMethod(const VarPtr& self, const std::string& name,
                                                               const std::vector<VarPtr>& args,
                                                               const Kwargs& kwargs);

  // --- user classes and their instances (user_objects.cc) ---
  // cls(*args, **kw) for a plain Python class (object.__new__, then its
  // __init__ inlined) or a named tuple class (its __new__ inlined); nothing
  // for any other class, which stays a graph break.
  std::optional<absl::StatusOr<VarPtr>> ConstructUserObject(const VarPtr& cls, std::vector<VarPtr>& args,
                                                            Kwargs& kwargs);
  // tuple.__new__(cls, iterable), as a named tuple's __new__ calls it.
  // torch.cond (torch.ops.higher_order.cond) in the trace: a constant
  // predicate runs its branch inline; a tensor one makes both branches
  // subgraphs of one cond node (higher_order.cc).
  std::optional<absl::StatusOr<VarPtr>> CallHigherOrder(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                        const Kwargs& kwargs);
  struct Branch;
  absl::StatusOr<Branch> TraceBranch(const VarPtr& fn, const std::vector<VarPtr>& operands);
  // The __exit__ of a grad-mode with block a resume function is handed,
  // as the block's tracker (its mode guarded); nothing for anything else.
  std::optional<VarPtr> GradModeExitInput(const python::Object& obj, const SourcePtr& source);
  std::optional<absl::StatusOr<VarPtr>> CallDescriptorGet(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                          const Kwargs& kwargs);
  std::optional<absl::StatusOr<VarPtr>> CallTupleNew(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                     const Kwargs& kwargs);
  // object.__getattribute__ as a value: super().__getattribute__ inside a
  // class's own __getattribute__ (bound to the traced self), or the slot
  // read from `object` (nothing for any other attribute).
  std::optional<absl::StatusOr<VarPtr>> ObjectGetattribute(const VarPtr& obj, const std::string& name);
  // Calling it: object.__getattribute__(obj, name), the generic read of an
  // object read from the frame (GenericAttr); nothing for other callables.
  std::optional<absl::StatusOr<VarPtr>> CallObjectGetattribute(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                               const Kwargs& kwargs);
  // CPython's generic attribute read (PyObject_GenericGetAttr) of an object
  // read from the frame, bypassing its class's own __getattribute__: a data
  // descriptor of the class, then the instance __dict__, then the class.
  absl::StatusOr<VarPtr> GenericAttr(const VarPtr& obj, const std::string& name);
  absl::StatusOr<python::Object> InstanceDict(PyObject* o);
  // obj.name of a kUserObject, or of a named tuple made by the trace
  // (nothing: not a class attribute, the tuple's own methods answer).
  absl::StatusOr<VarPtr> UserObjectAttr(const VarPtr& obj, const std::string& name);
  // What `found`, class cls_var's attribute `name`, reads as through obj:
  // functions bind, staticmethod and classmethod unwrap, properties run
  // their getter inlined; its identity is guarded through the class.
  absl::StatusOr<VarPtr> ClassMember(const VarPtr& obj, const VarPtr& cls_var, const std::string& name,
                                     PyObject* found);
  std::optional<absl::StatusOr<VarPtr>> UserTupleAttr(const VarPtr& obj, const std::string& name);
  // obj.name = value on an object the trace made; generic: object.__setattr__'s
  // store, never the class's own override.
  absl::Status StoreUserObjectAttr(const VarPtr& obj, const std::string& name, const VarPtr& value,
                                   bool generic = false);
  // The truth value of an instance of a Python class: type(v).__bool__,
  // then __len__, then True (CPython's order); nothing when v's class is
  // not one whose protocol is known.
  std::optional<absl::StatusOr<bool>> UserTruthy(const VarPtr& v);
  // iter(v) of an object of a Python class: type(v).__iter__ inlined; its
  // result must be an iterator the trace models. Nothing for other values.
  std::optional<absl::StatusOr<VarPtr>> UserIter(const VarPtr& v);
  // type(v).<name>(v, *args) inlined, where that special method of an
  // object of a Python class is a Python function (obj[k]: __getitem__,
  // k in obj: __contains__); nothing otherwise.
  std::optional<absl::StatusOr<VarPtr>> CallUserSpecial(const VarPtr& v, const char* name, std::vector<VarPtr> args);
  // The same for an nn.Module `v` whose class has a Python special method
  // `name` of its own: inlined, the function guarded through the class;
  // nullopt where it has none, or (torch_nn_too false) where it is
  // torch.nn's own (ModuleList.__getitem__, traced by the container rules).
  std::optional<absl::StatusOr<VarPtr>> CallModuleSpecial(const VarPtr& v, const char* name, std::vector<VarPtr> args,
                                                          bool torch_nn_too);
  // a == b / a != b with a tracked instance: identity when neither side's
  // class defines its own comparison; anything else is a graph break.
  absl::StatusOr<VarPtr> UserObjectCompare(const std::string& op, const VarPtr& a, const VarPtr& b);
  // a op b (operator module's name: "add", "iadd", "and_") where an operand
  // is an instance of a Python class: its __op__ / __iop__ / __rop__ inlined
  // in Python's order; nullopt when no operand is one.
  std::optional<absl::StatusOr<VarPtr>> UserObjectOperator(const std::string& name, const VarPtr& a, const VarPtr& b);
  // A builtin given a tracked instance: len() runs type(obj).__len__, the
  // builtins that ask only its class or attributes (isinstance, type,
  // getattr, super, ...) proceed; any other is a graph break, since the
  // instance has no real object to hand to it. Nothing: proceed.
  std::optional<absl::StatusOr<VarPtr>> UserObjectBuiltin(const std::string& name, const std::vector<VarPtr>& args,
                                                          const Kwargs& kwargs);

  // os.environ[key] / key in os.environ, guarded (containers.cc).
  std::optional<absl::StatusOr<VarPtr>> EnvironItem(const VarPtr& env, const VarPtr& key);
  std::optional<absl::StatusOr<bool>> EnvironHas(const VarPtr& env, const VarPtr& key);

  // --- calling an nn.Module (module_calls.cc) ---
  // m(*args, **kwargs): its forward pre-hooks, forward and forward hooks,
  // every hook dict read guarded; backward hooks are a graph break.
  absl::StatusOr<VarPtr> CallNNModule(const VarPtr& module, std::vector<VarPtr> args, Kwargs kwargs);
  // A lazy module not yet initialized (torch.nn.LazyLinear, any
  // LazyModuleMixin) is initialized for real from the arguments' metadata.
  absl::Status InitializeLazyModule(const VarPtr& fn, const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // m.forward(*args, **kwargs) as __call__ runs it (an instance attribute
  // `forward` shadows the class's).
  absl::StatusOr<VarPtr> CallForward(const VarPtr& module, std::vector<VarPtr> args, Kwargs kwargs);
  struct ModuleHook {
    VarPtr fn;
    bool with_kwargs = false;
  };
  // The forward pre-hooks (pre) or forward hooks of a call of `module`,
  // torch's per-process ones first, as _call_impl runs them; guarded.
  absl::StatusOr<std::vector<ModuleHook>> ModuleHooks(const VarPtr& module, bool pre);
  // sys.modules['torch.nn.modules.module'].<name>, one of its per-process
  // hook dicts: made once per trace (every module call reads four).
  SourcePtr GlobalHookSource(const char* name);
  absl::flat_hash_map<std::string, SourcePtr> global_hook_sources_;

  // --- instances of Python dict subclasses made by the trace (user_dicts.cc) ---
  // cls(*args, **kw) for a Python subclass of dict or OrderedDict whose
  // special methods are ones the trace routes (IsUserDict); nothing for
  // any other class.
  std::optional<absl::StatusOr<VarPtr>> ConstructUserDict(const VarPtr& cls, std::vector<VarPtr>& args,
                                                          Kwargs& kwargs);
  // d.name: the class's data descriptors, the instance dict, the class's
  // Python members, then dict's own methods (a kMethod on d).
  absl::StatusOr<VarPtr> UserDictAttr(const VarPtr& d, const std::string& name);
  // d.name = value: through the class's Python __setattr__ when it has one
  // and `through_class`, else object's (the instance dict).
  absl::Status StoreUserDictAttr(const VarPtr& d, const std::string& name, const VarPtr& value,
                                 bool through_class);
  // type(d).<name>(d, *args) inlined where a Python class of d's MRO
  // defines that special method; nothing where dict's slot answers.
  std::optional<absl::StatusOr<VarPtr>> UserDictSpecial(const VarPtr& d, const char* name,
                                                        std::vector<VarPtr> args);
  // super().name inside a method of d's class: the next Python definition
  // (inlined), or dict's / object's own method on d.
  std::optional<absl::StatusOr<VarPtr>> UserDictSuperAttr(const VarPtr& sup, const std::string& name);
  // d.name of a dict subclass read from the frame (a kDict with its object):
  // a Python member of its class or an instance attribute; nothing for
  // dict's own methods.
  std::optional<absl::StatusOr<VarPtr>> DictSubclassAttr(const VarPtr& d, const std::string& name);
  // dict's (or object's) C method `name` called on d, bypassing the class.
  absl::StatusOr<VarPtr> CallUserDictMethod(const VarPtr& d, const std::string& name, std::vector<VarPtr> args,
                                            Kwargs kwargs);

  // --- NumPy arrays over tensors (numpy.cc) ---
  // A numpy.ndarray read from the frame: a graph input (torch.as_tensor of
  // it), its type, dtype and layout guarded.
  absl::StatusOr<VarPtr> WrapNdarray(const python::Object& array, SourcePtr source);
  // Tensor.numpy(force=...): the same tensor as an array.
  absl::StatusOr<VarPtr> TensorToNdarray(const VarPtr& tensor, const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // numpy.* callables (and torch.from_numpy of an array); nothing for others.
  std::optional<absl::StatusOr<VarPtr>> CallNumpy(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                  const Kwargs& kwargs);
  // The callables CallNumpy handles besides NumpyTargets' (set on its first call).
  std::optional<absl::flat_hash_set<PyObject*>> numpy_callables_;
  absl::StatusOr<VarPtr> NdarrayAttr(const VarPtr& array, const std::string& name);
  absl::StatusOr<VarPtr> CallNdarrayMethod(const VarPtr& array, const std::string& name,
                                           const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // operator.<name>(*args) with an array among them (a + b, a[i], a[i] = v).
  absl::StatusOr<VarPtr> NdarrayOperator(const std::string& name, std::vector<VarPtr> args);
  // One graph node running torch._numpy's `target` (numpy_bridge.py).
  absl::StatusOr<VarPtr> NumpyNode(const std::string& target, std::vector<VarPtr> args, Kwargs kwargs);
  absl::StatusOr<VarPtr> NumpyArgument(const VarPtr& v);
  absl::StatusOr<ops::Value> NumpyValue(const VarPtr& v, const std::string& what);

  // --- calls the user chose a treatment for (call_policy.cc) ---
  // dynamo.allow_in_graph / disallow_in_graph / assume_constant_result /
  // is_compiling: the answer for fn, or nothing when fn has no entry.
  // A torch.library operator outside aten (torch.ops.mylib.foo[.default]):
  // one graph node, as dynamo.allow_in_graph makes (its fake/meta kernel
  // gives the metadata); nullopt for anything else.
  std::optional<absl::StatusOr<VarPtr>> CallCustomOperator(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                           const Kwargs& kwargs);
  std::optional<absl::StatusOr<VarPtr>> CallByPolicy(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                     const Kwargs& kwargs);
  // `why`: the user's request ("dynamo.allow_in_graph") or the kind of
  // callable ("autograd.Function"), for messages.
  absl::StatusOr<VarPtr> CallAllowed(const VarPtr& fn, const std::string& name, const std::string& target,
                                     const std::vector<VarPtr>& args, const Kwargs& kwargs, const std::string& why);
  // MyFn.apply(*args) of a torch.autograd.Function subclass: one graph node
  // calling it (forward and the user's backward run as in eager), its
  // metadata from forward run on meta tensors; nothing for other callables.
  std::optional<absl::StatusOr<VarPtr>> CallAutogradFunction(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                             const Kwargs& kwargs);
  absl::StatusOr<VarPtr> CallConstantResult(const VarPtr& fn, const std::string& name,
                                            const std::vector<VarPtr>& args, const Kwargs& kwargs);

  // --- torch operators without a registry entry (op_fallback.cc) ---
  // `op` is TorchOperator(target): the node's metadata comes from torch's
  // meta kernels; what meta cannot know is a graph break.
  absl::StatusOr<VarPtr> CallOpOnMeta(const python::Object& op, const std::string& target, ir::Node::Kind kind,
                                      const std::vector<ops::Value>& values, const std::vector<ops::Kwarg>& kw,
                                      const std::vector<VarPtr>& args, const Kwargs& kwargs);
  // The op given out=`out`, its result inferred as `result`: a node that
  // writes into `out` (and returns it), or a break where it would resize it.
  absl::StatusOr<VarPtr> CallOutVariant(const std::string& target, ir::Node::Kind kind,
                                        const std::vector<VarPtr>& args, const Kwargs& kwargs,
                                        const ops::Value& result, const VarPtr& out);

  // --- calls, attributes, wrapping (calls.cc) ---
  absl::StatusOr<VarPtr> Call(const VarPtr& fn, std::vector<VarPtr> args, Kwargs kwargs);
  absl::StatusOr<VarPtr> CallBuiltin(const VarPtr& fn, std::vector<VarPtr> args, Kwargs kwargs);
  absl::StatusOr<VarPtr> CallMethod(const VarPtr& method, std::vector<VarPtr> args,
                                    Kwargs kwargs);
  absl::StatusOr<VarPtr> CallOp(const std::string& target, ir::Node::Kind kind,
                                const std::vector<VarPtr>& args, const Kwargs& kwargs);
  absl::StatusOr<VarPtr> Inline(const VarPtr& function, std::vector<VarPtr> args,
                                Kwargs kwargs);
  absl::StatusOr<VarPtr> CallReal(const VarPtr& fn, const std::vector<VarPtr>& args,
                                  const Kwargs& kwargs);
  // Whether every argument has a Python value (a constant), so a pure
  // builtin may be called for real at trace time.
  bool AllConstant(const std::vector<VarPtr>& args, const Kwargs& kwargs);
  absl::StatusOr<VarPtr> GetAttr(const VarPtr& obj, const std::string& name);
  absl::StatusOr<VarPtr> TensorAttr(const VarPtr& tensor, const std::string& name);
  // The path of super().name's entry in a base class's __dict__ (guarded by
  // identity when it is a function); null when it needs no path.
  // super().get/keys/values/items/copy inside a method of a dict subclass
  // read from the frame whose class keeps dict's item protocol: dict's
  // method over its items (WrapDictItems); nothing otherwise.
  std::optional<absl::StatusOr<VarPtr>> SuperDictMethod(const VarPtr& sup, const std::string& name);
  absl::StatusOr<VarPtr> WrapDictItems(const python::Object& obj, SourcePtr source);
  absl::StatusOr<SourcePtr> SuperAttrSource(const VarPtr& sup, const std::string& name,
                                            const python::Object& value);
  // The Python class of the value a tracker stands for (empty: not known).
  python::Object ClassOf(const VarPtr& v);
  // isinstance(t, cls) for a traced tensor, as torch answers it.
  absl::StatusOr<bool> TensorIsInstance(const VarPtr& t, const python::Object& cls);
  // hasattr(v, name), with the answer guarded when v has a source.
  absl::StatusOr<bool> HasAttr(const VarPtr& v, const std::string& name);
  // A real function standing for one made during the trace (a code object).
  python::Object FunctionStandIn(const VarPtr& fn);
  // `item in container` (CONTAINS_OP), with Python's semantics. With
  // `computed` given and numbers read from tensors captured
  // (capture_scalars_), a membership that only the last element's tensor
  // comparison decides (`1 in [x]`) is that comparison's truth, a number
  // the graph computes: *computed is set to it (the bool returned is then
  // meaningless).
  absl::StatusOr<bool> Contains(const VarPtr& container, const VarPtr& item, VarPtr* computed = nullptr);
  absl::StatusOr<VarPtr> Wrap(const python::Object& obj, SourcePtr source);
  absl::StatusOr<VarPtr> WrapTensor(const python::Object& tensor, SourcePtr source);
  // Every real tensor reached from a source that is (or aliases) a graph
  // input: GuardAliasing() guards which of those paths are the same object.
  void NoteTensorSource(const SourcePtr& source, PyObject* tensor);
  void GuardAliasing();
  // The source of the index-th child of an nn.Module container: [i], or .name
  // when nn names the child otherwise (so get_attr targets are module paths).
  SourcePtr ChildSource(const VarPtr& container, int64_t index);
  // The source of what iterating module container `container` yielded at
  // `index`: a key (ModuleDict's, ParameterDict's) is that key of the dict
  // the container iterates, anything else the child (ChildSource).
  SourcePtr IteratedSource(const VarPtr& container, int64_t index, PyObject* item);
  absl::StatusOr<VarPtr> FromValue(const ops::Value& value);
  absl::StatusOr<python::Object> ToPython(const VarPtr& v);
  absl::StatusOr<ir::Argument> ToArgument(const VarPtr& v);
  absl::StatusOr<VarPtr> NewVarFromResult(const std::string& node, const ops::Value& value);
  absl::Status SetGradMode(bool enabled);

  // Mutations of Python state (see SideEffect): recorded, replayed by the
  // rewritten code, and visible to the rest of the trace.
  absl::Status StoreAttr(const VarPtr& obj, const std::string& name, const VarPtr& value);
  void MarkMutated(const VarPtr& container);
  // Before changing a list or dict in place: one read from a source is
  // replayed after the graph (MarkMutated), or, where breaks are not
  // allowed, a SIDE_EFFECT break naming `how` ("append()", "+=").
  absl::Status WillMutate(const VarPtr& container, absl::string_view how);
  // One call node for `target` on the trackers `args`/`kwargs` whose output
  // is `result` (from the registry or a meta run): its name.
  absl::StatusOr<std::string> AddCallNode(ir::Node::Kind kind, const std::string& target,
                                          const std::vector<VarPtr>& args, const Kwargs& kwargs,
                                          const ops::Value& result, bool symbolic_result = false);
  // list += iterable, list *= int: in place (`name` is "iadd" or "imul").
  absl::StatusOr<VarPtr> ListInPlace(const std::string& name, const VarPtr& list, const VarPtr& other);
  // The result of a trace that stopped (or returned with effects): the graph
  // outputs every tensor the frame holds.
  absl::StatusOr<TraceResult> Stopped(StopState state);
  void EliminateDeadCode();

  // A graph break at the current instruction of the innermost frame.
  absl::Status Break(ir::GraphBreak::Reason reason, std::string message, std::string hint);
  ir::SourceLocation CurrentLocation() const;
  bool InTorchInternals(const Frame& f) const;

  // ---- dynamic shapes (dynamic_shapes.cc) ----
  // The symbolic sizes of a tensor input at `source` (empty: static), and
  // its strides as expressions; makes the symbols.
  std::vector<ops::SymExpr> InputSymbols(const SourcePtr& source, PyObject* tensor,
                                         const ops::TensorMeta& meta, const std::vector<std::string>& names,
                                         std::vector<ops::SymExpr>* strides);
  // x.size(d) / x.shape[d] where the size is symbolic: a graph node.
  absl::StatusOr<VarPtr> SizeOf(const VarPtr& tensor, int64_t dim);
  // x.shape / x.size() with some size symbolic.
  absl::StatusOr<VarPtr> ShapeOf(const VarPtr& tensor);
  // + - * // % on a size int (a kSymInt and an int): a graph node, or
  // nullopt when the operation is not one of sizes (floats, others).
  std::optional<absl::StatusOr<VarPtr>> SymArithmetic(const std::string& op, const VarPtr& a, const VarPtr& b);
  // == != < <= > >= on a size int: decided (and guarded) by the ShapeEnv.
  std::optional<absl::StatusOr<VarPtr>> SymCompare(const std::string& op, const VarPtr& a, const VarPtr& b);
  // bool(size): a decision on != 0.
  absl::StatusOr<bool> SymTruth(const VarPtr& v);
  // An op's arguments' symbolic side; empty when nothing is symbolic.
  ops::SymValue SymOf(const VarPtr& v);
  // After the registry inferred `result` for an op call: its symbolic
  // sizes, or the inputs specialised when no rule applies.
  absl::StatusOr<ops::SymValue> InferSymbolicResult(const ops::OpEntry& entry, const std::vector<ops::Value>& values,
                                                    const std::vector<ops::Kwarg>& kw,
                                                    const std::vector<VarPtr>& args, const Kwargs& kwargs,
                                                    const ops::Value& result);
  // Tensor.size(), Tensor.numel() of a tensor with symbolic sizes: size ints
  // (graph values); nullopt for any other call.
  std::optional<absl::StatusOr<VarPtr>> SymbolicSizeCall(const std::string& target, const std::vector<VarPtr>& args,
                                                         const Kwargs& kwargs);
  // Guards a tensor's symbolic sizes to the values seen: for code that
  // answers from meta.sizes (stride(), iteration, NumPy's attributes).
  void SpecializeShape(const VarPtr& t);
  // Gives an op's output trackers their symbolic sizes.
  void AttachSymSizes(const VarPtr& out, const ops::SymValue& sym);
  // The SHAPE_ENV guard and symbolic node metadata, when the trace has symbols.
  void FinishShapes(google::protobuf::RepeatedPtrField<ir::Guard>& guards, ir::Graph& graph);
  bool has_symbols() const { return !shape_env_.symbols().empty(); }

  // ---- numbers read from tensors (scalars.cc) ----
  VarPtr NewScalar(const std::string& node, const std::string& python_type);
  // The break for a use of a kScalar that needs its value.
  absl::Status ScalarValueNeeded(const VarPtr& v, absl::string_view what);
  // Tensor.item() (and int()/float()/tolist() of a one-element tensor).
  absl::StatusOr<VarPtr> TensorItem(const VarPtr& self, const std::string& method);
  absl::StatusOr<VarPtr> TensorToList(const VarPtr& self);
  // a op b / op v with a kScalar operand and no tensor: an operator node;
  // nullopt when no operand is a kScalar.
  std::optional<absl::StatusOr<VarPtr>> ScalarArithmetic(const std::string& op, const VarPtr& a, const VarPtr& b);
  std::optional<absl::StatusOr<VarPtr>> ScalarUnary(const std::string& op, const VarPtr& v);
  // int(v) / float(v) of a kScalar, or of a tensor where scalars are captured.
  std::optional<absl::StatusOr<VarPtr>> ScalarConversion(const std::string& builtin, const VarPtr& v);
  // torch.tensor(data) of data holding numbers the graph computes: stacks
  // of 0-d torch.full nodes, of the dtype torch.tensor gives; nullopt for
  // other calls.
  std::optional<absl::StatusOr<VarPtr>> TensorOfScalars(const std::string& target, const std::vector<VarPtr>& args,
                                                        const Kwargs& kwargs);
  // A list or tuple holding a number the graph computes (at any depth).
  bool HoldsScalar(const VarPtr& v);
  // The registry's view of a value holding such numbers: each replaced by
  // one of its Python type.
  absl::StatusOr<ops::Value> StandIn(const VarPtr& v);
  // An op call's kScalar arguments: stand-ins of their type in `values` /
  // `kw` where the op's metadata depends on the type alone, else a break.
  absl::Status ScalarOperands(const ops::OpEntry& entry, const std::vector<VarPtr>& args, const Kwargs& kwargs,
                              std::vector<ops::Value>& values, std::vector<ops::Kwarg>& kw);
  bool capture_scalars_ = false;

  ops::ShapeEnv shape_env_;
  DynamicShapes dynamic_;
  struct SymbolSource {
    std::string source;  // "L['x']"
    int dim = 0;
  };
  std::vector<std::pair<std::string, SymbolSource>> symbol_sources_;  // in creation order
  // "node#dim" -> its size int (one Tensor.size node per size read).
  absl::flat_hash_map<std::string, VarPtr> size_nodes_;
  // Ops whose inputs were specialised for want of a rule, and why.
  std::vector<std::string> specialized_by_;
  // node -> symbolic sizes, for graph metadata
  absl::flat_hash_map<std::string, std::vector<ops::SymExpr>> node_sym_sizes_;

  const ops::Registry& registry_;
  GraphBuilder graph_{"graph_0"};
  // While a torch.cond branch is traced into a subgraph (higher_order.cc),
  // graph_ is that subgraph and this the top graph: inputs and attributes
  // read for the first time inside a branch are the top graph's (their
  // nodes are cached by tensor), and the branch takes them as inputs.
  GraphBuilder* inputs_graph_ = nullptr;
  GraphBuilder& InputGraph() { return inputs_graph_ != nullptr ? *inputs_graph_ : graph_; }
  GuardSet guards_;
  std::vector<GraphAttribute> attributes_;
  absl::flat_hash_set<std::string> attribute_targets_;  // attributes_' targets
  absl::flat_hash_map<PyObject*, std::string> attribute_nodes_;  // real tensor -> get_attr node
  // A get_attr path's part -> whether nn.Module's class has an attribute of
  // that name (AttributeTarget asks once per name a trace sees).
  absl::flat_hash_map<std::string, bool> nn_module_has_;
  // The real tensor a tracker is (an input, a parameter; its in-place
  // results), from attribute_nodes_; nullptr for one the trace made.
  PyObject* RealTensor(const VarPtr& t);
  const absl::flat_hash_map<PyObject*, std::string>& op_names_;  // callable -> registry name
  absl::flat_hash_map<PyObject*, std::string> builtins_;   // builtin -> its name
  absl::flat_hash_map<PyObject*, std::shared_ptr<const bytecode::DecodedCode>> decoded_;
  python::Object top_globals_;    // the traced function's module globals
  python::Object root_;           // the bound self, whose attributes get short paths
  std::vector<Frame*> frames_;    // innermost last
  bool grad_enabled_ = true;
  std::vector<bool> grad_stack_;  // modes to restore at each with-exit

  // --- torch.autocast (autocast.cc) ---
  // The autocast state where the trace is, per device type ("cpu", "cuda"):
  // the interpreter's at entry (guarded), as traced autocast blocks change it.
  struct AutocastMode {
    bool enabled = false;
    ops::DType dtype = ops::DType::kBFloat16;
    bool from_entry = true;  // still the entry state (a read of it guards its dtype)
  };
  std::vector<std::pair<std::string, AutocastMode>> autocast_;
  bool autocast_cache_enabled_ = true;
  // What each open autocast block's exit restores, innermost last.
  struct AutocastRestore {
    std::string device_type;
    AutocastMode mode;
    bool cache_enabled = true;
  };
  std::vector<AutocastRestore> autocast_stack_;
  python::Object fake_mode_;  // a torch FakeTensorMode, made at the first op under autocast
  // Inference under autocast, by the call's description: repeated layers ask once.
  absl::flat_hash_map<std::string, MetaCall> autocast_calls_;
  absl::Status InitAutocast();
  AutocastMode* AutocastOf(absl::string_view device_type);
  // torch.is_autocast_enabled(...), get_autocast_dtype(...) and their older
  // spellings, torch._C._is_autocast_available(device): the trace's state
  // (the entry state is guarded); nullopt for other calls.
  std::optional<absl::StatusOr<VarPtr>> AutocastQuery(const VarPtr& fn, const std::vector<VarPtr>& args,
                                                      const Kwargs& kwargs);
  // torch.autocast(...) / torch.amp.autocast / torch.cpu.amp.autocast /
  // torch.cuda.amp.autocast: the real object, made now (its constructor only
  // checks and stores its arguments); nullopt for other classes.
  std::optional<absl::StatusOr<VarPtr>> ConstructAutocast(const VarPtr& cls, const std::vector<VarPtr>& args,
                                                          const Kwargs& kwargs);
  // BEFORE_WITH over a kAutocast: the state set in the graph, its exit pushed.
  absl::Status EnterAutocast(Frame& f, const VarPtr& manager);
  // The block's __exit__: the state it replaced, set back in the graph.
  absl::Status ExitAutocast();
  // At a stop inside autocast blocks: the graph leaves them (innermost
  // first), so the interpreter's state is the entry state again when the
  // rewritten code enters them for real.
  void CloseAutocastBlocks();
  // The __exit__ of an autocast block a resume function is handed, as the
  // block's tracker (what it restores guarded); nothing for anything else.
  std::optional<VarPtr> AutocastExitInput(const python::Object& obj, const SourcePtr& source);
  // The call's inference under the autocast state (torch's own autocast
  // kernels, on fake tensors), when autocast is enabled for the device of a
  // tensor argument; nullopt otherwise.
  std::optional<absl::StatusOr<MetaCall>> InferUnderAutocast(const std::string& target,
                                                             const std::vector<ops::Value>& values,
                                                             const std::vector<ops::Kwarg>& kw);
  // The callable a registry target names ("torch.mm", "Tensor.add",
  // "operator.matmul"), for inference by calling it; null if none.
  python::Object OpCallable(const std::string& target);
  // Whether a tensor among the arguments is on a device autocast is enabled for.
  bool AutocastApplies(const std::vector<ops::Value>& values, const std::vector<ops::Kwarg>& kw);
  // MetaOptions for a call: fake tensors under the trace's autocast state
  // when that applies to `values` (InferUnderAutocast).
  // Fake tensors under the trace's autocast state (fake_mode unset where
  // torch's FakeTensorMode cannot be made).
  MetaOptions AutocastOptions();
  MetaOptions CallOptions(const std::vector<ops::Value>& values, const std::vector<ops::Kwarg>& kw);
  absl::Status SetAutocast(const std::string& device_type, const AutocastMode& mode, bool cache_enabled);
  size_t steps_ = 0;
  std::optional<BreakInfo> break_;
  std::optional<size_t> break_top_index_;
  std::vector<VarPtr> break_top_stack_;
  std::shared_ptr<const bytecode::DecodedCode> top_code_;
  bool allow_breaks_ = false;
  bool module_attribute_ = false;  // Wrap() is reading an nn.Module's attribute
  int stop_at_ = -1;
  std::optional<StopState> stop_;
  std::vector<SideEffect> side_effects_;
  VarPtr raised_;   // the exception being raised (Raise), until a handler takes it
  VarPtr handled_;  // the exception being handled (PUSH_EXC_INFO), null: none
  std::vector<SourcePtr> placeholder_sources_;
  absl::flat_hash_set<size_t> array_placeholders_;  // placeholders read from numpy arrays
  // Tensor nodes whose identity the trace compared (is, ==-free membership,
  // dict keys, set members): an aliasing fact it relied on (GuardAliasing).
  absl::flat_hash_set<std::string> identity_nodes_;
  void NoteIdentity(const VarPtr& v) {
    if (v && v->is_tensor()) identity_nodes_.insert(v->tensor_identity());
  }
  std::vector<SourcePtr> alias_sources_;  // see NoteTensorSource
  std::vector<const void*> alias_ids_;
  // Lists and dicts read from a source are one tracker per real object, so a
  // mutation is seen through every path that reaches it.
  absl::flat_hash_map<PyObject*, VarPtr> containers_;
  // The lists, tuples and dicts Wrap is reading the items of, outermost
  // first: one met again is a cycle (a list holding itself), and past
  // kMaxWrapDepth nesting the rest stays opaque; either way Wrap's recursion
  // ends (it once overflowed the C++ stack on a recursive list).
  std::vector<PyObject*> wrapping_;
  static constexpr size_t kMaxWrapDepth = 256;
  absl::flat_hash_set<const Var*> mutated_;
  // Attributes and globals assigned during the trace, read back from here.
  absl::flat_hash_map<std::pair<PyObject*, std::string>, VarPtr> attr_overlay_;
  absl::flat_hash_map<std::string, VarPtr> global_overlay_;
  absl::flat_hash_map<PyObject*, VarPtr> top_cells_;  // real cell -> the top frame's tracker
  // Real cells of closures the frame reaches -> their trackers (each holds
  // its cell in `object`, which keeps it alive while the map holds it).
  absl::flat_hash_map<PyObject*, VarPtr> outer_cells_;
};

}  // namespace dynamo::trace
