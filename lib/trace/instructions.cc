// The translator's instruction handlers: one small function per operation,
// dispatched from a table keyed by the target interpreter's opcode names.
// An operation whose encoding differs between versions (3.11's
// POP_JUMP_FORWARD_IF_TRUE and 3.12's POP_JUMP_IF_TRUE; LOAD_METHOD and
// LOAD_ATTR's method bit; KW_NAMES + CALL and CALL_KW) is written once and
// listed under each name; the names the target lacks are simply absent from
// its table. An opcode without a handler is a graph break naming it.
#include <Python.h>

#include <array>

#include "absl/strings/str_cat.h"
#include "lib/bytecode/opcodes.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

using bytecode::Instruction;
namespace op = bytecode::generated;

namespace {

// 3.13's COMPARE_OP converts its result to bool when this oparg bit is set
// (the compiler's fusion of COMPARE_OP and TO_BOOL).
constexpr int kCompareToBool = op::kPythonMinor >= 13 ? 16 : 0;
// CALL_INTRINSIC_1's operands (CPython's pycore_intrinsics.h, 3.12 and 3.13).
constexpr int kIntrinsicUnaryPositive = 5;
constexpr int kIntrinsicListToTuple = 6;
constexpr int kIntrinsicStopIterationError = 3;

}  // namespace

struct OpTable {
  struct Row {
    const char* name;
    Translator::OpHandler handler;
    bool runs_alone;  // see CanRunAlone
  };
  // Every name of every supported version; each target keeps those it has.
  static constexpr Row kRows[] = {
      {"NOP", &Translator::OpNop, false},
      {"RESUME", &Translator::OpNop, false},
      {"PRECALL", &Translator::OpNop, false},
      {"POP_TOP", &Translator::OpPopTop, false},
      {"PUSH_NULL", &Translator::OpPushNull, false},
      {"COPY", &Translator::OpCopy, false},
      {"SWAP", &Translator::OpSwap, false},
      {"END_FOR", &Translator::OpEndFor, false},
      {"LOAD_CONST", &Translator::OpLoadConst, false},
      {"RETURN_CONST", &Translator::OpReturnConst, false},
      {"LOAD_FAST", &Translator::OpLoadFast, false},
      {"LOAD_FAST_CHECK", &Translator::OpLoadFast, false},
      {"LOAD_CLOSURE", &Translator::OpLoadFast, false},
      {"LOAD_FAST_AND_CLEAR", &Translator::OpLoadFastAndClear, false},
      {"LOAD_FAST_LOAD_FAST", &Translator::OpLoadFastLoadFast, false},
      {"STORE_FAST", &Translator::OpStoreFast, false},
      {"STORE_FAST_STORE_FAST", &Translator::OpStoreFastStoreFast, false},
      {"STORE_FAST_LOAD_FAST", &Translator::OpStoreFastLoadFast, false},
      {"DELETE_FAST", &Translator::OpDeleteFast, false},
      {"MAKE_CELL", &Translator::OpMakeCell, false},
      {"COPY_FREE_VARS", &Translator::OpCopyFreeVars, false},
      {"LOAD_DEREF", &Translator::OpLoadDeref, false},
      {"STORE_DEREF", &Translator::OpStoreDeref, false},
      {"LOAD_GLOBAL", &Translator::OpLoadGlobal, false},
      {"LOAD_ATTR", &Translator::OpLoadAttr, true},
      {"LOAD_METHOD", &Translator::OpLoadMethod, true},
      {"LOAD_SUPER_ATTR", &Translator::OpLoadSuperAttr, false},
      {"STORE_ATTR", &Translator::OpStoreAttr, true},
      {"DELETE_ATTR", &Translator::OpDeleteAttr, true},
      {"STORE_GLOBAL", &Translator::OpStoreGlobal, false},
      {"KW_NAMES", &Translator::OpKwNames, false},
      {"CALL", &Translator::OpCall, true},
      {"CALL_KW", &Translator::OpCallKw, true},
      {"CALL_FUNCTION_EX", &Translator::OpCallFunctionEx, true},
      {"MAKE_FUNCTION", &Translator::OpMakeFunction, false},
      {"SET_FUNCTION_ATTRIBUTE", &Translator::OpSetFunctionAttribute, false},
      {"BINARY_OP", &Translator::OpBinaryOp, true},
      {"COMPARE_OP", &Translator::OpCompareOp, true},
      {"IS_OP", &Translator::OpIsOp, false},
      {"CONTAINS_OP", &Translator::OpContainsOp, true},
      {"UNARY_NEGATIVE", &Translator::OpUnary, true},
      {"UNARY_POSITIVE", &Translator::OpUnary, true},
      {"UNARY_INVERT", &Translator::OpUnary, true},
      {"UNARY_NOT", &Translator::OpUnaryNot, true},
      {"TO_BOOL", &Translator::OpToBool, true},
      {"CALL_INTRINSIC_1", &Translator::OpCallIntrinsic1, false},
      {"BINARY_SUBSCR", &Translator::OpBinarySubscr, true},
      {"STORE_SUBSCR", &Translator::OpStoreSubscr, true},
      {"DELETE_SUBSCR", nullptr, true},
      {"BINARY_SLICE", &Translator::OpBinarySlice, true},
      {"STORE_SLICE", &Translator::OpStoreSlice, true},
      {"BUILD_SLICE", &Translator::OpBuildSlice, false},
      {"BUILD_TUPLE", &Translator::OpBuildTuple, false},
      {"BUILD_LIST", &Translator::OpBuildList, false},
      {"BUILD_MAP", &Translator::OpBuildMap, false},
      {"BUILD_CONST_KEY_MAP", &Translator::OpBuildConstKeyMap, false},
      {"BUILD_SET", &Translator::OpBuildSet, false},
      {"SET_ADD", &Translator::OpSetAdd, false},
      {"SET_UPDATE", &Translator::OpSetAdd, false},
      {"LIST_APPEND", &Translator::OpListAppend, false},
      {"LIST_EXTEND", &Translator::OpListExtend, false},
      {"LIST_TO_TUPLE", &Translator::OpListToTuple, false},
      {"MAP_ADD", &Translator::OpMapAdd, false},
      {"DICT_UPDATE", &Translator::OpDictUpdate, false},
      {"DICT_MERGE", &Translator::OpDictUpdate, false},
      {"UNPACK_SEQUENCE", &Translator::OpUnpackSequence, true},
      {"UNPACK_EX", &Translator::OpUnpackEx, false},
      {"GET_ITER", &Translator::OpGetIter, true},
      {"FOR_ITER", &Translator::OpForIter, false},
      {"JUMP_FORWARD", &Translator::OpJump, false},
      {"JUMP_BACKWARD", &Translator::OpJump, false},
      {"JUMP_BACKWARD_NO_INTERRUPT", &Translator::OpJump, false},
      // Conditional jumps run alone only forwards: a resume function cannot
      // jump back into the loop it would be called from.
      {"POP_JUMP_FORWARD_IF_TRUE", &Translator::OpPopJumpIfTrue, true},
      {"POP_JUMP_BACKWARD_IF_TRUE", &Translator::OpPopJumpIfTrue, false},
      {"POP_JUMP_IF_TRUE", &Translator::OpPopJumpIfTrue, true},
      {"POP_JUMP_FORWARD_IF_FALSE", &Translator::OpPopJumpIfFalse, true},
      {"POP_JUMP_BACKWARD_IF_FALSE", &Translator::OpPopJumpIfFalse, false},
      {"POP_JUMP_IF_FALSE", &Translator::OpPopJumpIfFalse, true},
      {"POP_JUMP_FORWARD_IF_NONE", &Translator::OpPopJumpIfNone, false},
      {"POP_JUMP_BACKWARD_IF_NONE", &Translator::OpPopJumpIfNone, false},
      {"POP_JUMP_IF_NONE", &Translator::OpPopJumpIfNone, false},
      {"POP_JUMP_FORWARD_IF_NOT_NONE", &Translator::OpPopJumpIfNotNone, false},
      {"POP_JUMP_BACKWARD_IF_NOT_NONE", &Translator::OpPopJumpIfNotNone, false},
      {"POP_JUMP_IF_NOT_NONE", &Translator::OpPopJumpIfNotNone, false},
      {"JUMP_IF_TRUE_OR_POP", &Translator::OpJumpIfTrueOrPop, true},
      {"JUMP_IF_FALSE_OR_POP", &Translator::OpJumpIfFalseOrPop, true},
      {"RETURN_VALUE", &Translator::OpReturnValue, false},
      {"BEFORE_WITH", &Translator::OpBeforeWith, false},
      {"FORMAT_VALUE", &Translator::OpFormatValue, true},
      {"CONVERT_VALUE", &Translator::OpConvertValue, true},
      {"FORMAT_SIMPLE", &Translator::OpFormatSimple, true},
      {"FORMAT_WITH_SPEC", &Translator::OpFormatWithSpec, true},
      {"BUILD_STRING", &Translator::OpBuildString, true},
      {"LOAD_ASSERTION_ERROR", &Translator::OpLoadAssertionError, false},
      {"RAISE_VARARGS", &Translator::OpRaiseVarargs, false},
      {"IMPORT_NAME", &Translator::OpImportName, false},
      {"IMPORT_FROM", &Translator::OpImportFrom, false},
      {"RETURN_GENERATOR", &Translator::OpReturnGenerator, false},
      {"YIELD_VALUE", &Translator::OpYieldValue, false},
      {"GET_YIELD_FROM_ITER", &Translator::OpGetYieldFromIter, false},
      {"SEND", &Translator::OpSend, false},
      {"END_SEND", &Translator::OpEndSend, false},
      {"PUSH_EXC_INFO", &Translator::OpPushExcInfo, false},
      {"POP_EXCEPT", &Translator::OpPopExcept, false},
      {"CHECK_EXC_MATCH", &Translator::OpCheckExcMatch, false},
      {"RERAISE", &Translator::OpReraise, false},
  };

  std::array<Translator::OpHandler, 256> handlers{};
  std::array<bool, 256> runs_alone{};

  OpTable() {
    for (int opcode = 0; opcode < 256; ++opcode) {
      const char* name = bytecode::Opcode(opcode).name;
      if (name == nullptr) continue;
      for (const Row& row : kRows) {
        if (absl::string_view(row.name) != name) continue;
        handlers[static_cast<size_t>(opcode)] = row.handler;
        runs_alone[static_cast<size_t>(opcode)] = row.runs_alone;
      }
    }
  }
  static const OpTable& Get() {
    static const OpTable table;
    return table;
  }
};

bool CanRunAlone(int opcode) { return OpTable::Get().runs_alone[static_cast<size_t>(opcode & 0xff)]; }

absl::Status Translator::Step(Frame& f, const Instruction& in, std::optional<VarPtr>& result) {
  OpHandler handler = OpTable::Get().handlers[static_cast<size_t>(in.opcode & 0xff)];
  if (handler == nullptr) {
    return Break(ir::GraphBreak::UNSUPPORTED_OPCODE,
                 absl::StrCat("the translator does not implement ", in.name),
                 "rewrite the construct, or report it with the source line");
  }
  return (this->*handler)(f, in, result);
}

void Translator::PushCallable(Frame& f, VarPtr callable) {
  if (!kCallableFirst) f.stack.push_back(Var::Null());
  f.stack.push_back(std::move(callable));
  if (kCallableFirst) f.stack.push_back(Var::Null());
}

// --- the stack ---

absl::Status Translator::OpNop(Frame&, const Instruction&, std::optional<VarPtr>&) { return absl::OkStatus(); }

absl::Status Translator::OpPopTop(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  return absl::OkStatus();
}
absl::Status Translator::OpPushNull(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  f.stack.push_back(Var::Null());
  return absl::OkStatus();
}
absl::Status Translator::OpCopy(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  if (f.stack.size() < static_cast<size_t>(in.arg)) return absl::InternalError("COPY underflow");
  f.stack.push_back(f.stack[f.stack.size() - static_cast<size_t>(in.arg)]);
  return absl::OkStatus();
}
absl::Status Translator::OpSwap(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  if (f.stack.size() < static_cast<size_t>(in.arg)) return absl::InternalError("SWAP underflow");
  std::swap(f.stack.back(), f.stack[f.stack.size() - static_cast<size_t>(in.arg)]);
  return absl::OkStatus();
}
// Reached only by falling into it, which the compiler never does (FOR_ITER
// jumps over it at a loop's end): pops what CPython's END_FOR pops.
absl::Status Translator::OpEndFor(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  const int pops = -bytecode::StackEffect(in.opcode, in.arg, false);
  for (int i = 0; i < pops; ++i) {
    POP_OR_RETURN(v);
  }
  return absl::OkStatus();
}

// --- constants, locals, cells ---

absl::Status Translator::OpLoadConst(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  f.stack.push_back(Var::Constant(f.code->Constant(in.argument.index)));
  return absl::OkStatus();
}
absl::Status Translator::OpReturnConst(Frame& f, const Instruction& in, std::optional<VarPtr>& result) {
  result = Var::Constant(f.code->Constant(in.argument.index));
  return absl::OkStatus();
}

// The one place locals are read and written, for every LOAD_FAST/STORE_FAST
// form of every version.
absl::Status Translator::PushLocal(Frame& f, int slot, absl::string_view name) {
  if (slot < 0 || static_cast<size_t>(slot) >= f.locals.size()) return absl::InternalError("local slot out of range");
  const VarPtr& v = f.locals[static_cast<size_t>(slot)];
  if (!v) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("local variable '", name, "' is read before it is set"),
                 "the function would raise UnboundLocalError");
  }
  f.stack.push_back(v);
  return absl::OkStatus();
}
absl::Status Translator::StoreLocal(Frame& f, int slot, VarPtr v) {
  if (slot < 0 || static_cast<size_t>(slot) >= f.locals.size()) return absl::InternalError("local slot out of range");
  // A NULL saved by LOAD_FAST_AND_CLEAR restores an unbound variable.
  f.locals[static_cast<size_t>(slot)] = v->kind == VarKind::kNull ? nullptr : std::move(v);
  return absl::OkStatus();
}

absl::Status Translator::OpLoadFast(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  return PushLocal(f, in.arg, in.argument.text);
}
// 3.12's inlined comprehensions save the variable they shadow (NULL when
// unbound) and restore it with STORE_FAST afterwards.
absl::Status Translator::OpLoadFastAndClear(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  if (static_cast<size_t>(in.arg) >= f.locals.size()) return absl::InternalError("local slot out of range");
  VarPtr& slot = f.locals[static_cast<size_t>(in.arg)];
  f.stack.push_back(slot ? std::move(slot) : Var::Null());
  slot = nullptr;
  return absl::OkStatus();
}
// 3.13's superinstructions on two locals (the decoder's index, index2).
absl::Status Translator::OpLoadFastLoadFast(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  if (absl::Status s = PushLocal(f, in.argument.index, in.argument.text); !s.ok()) return s;
  return PushLocal(f, in.argument.index2, in.argument.text2);
}
absl::Status Translator::OpStoreFast(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  return StoreLocal(f, in.arg, std::move(v));
}
absl::Status Translator::OpStoreFastStoreFast(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  for (int slot : {in.argument.index, in.argument.index2}) {
    POP_OR_RETURN(v);
    if (absl::Status s = StoreLocal(f, slot, std::move(v)); !s.ok()) return s;
  }
  return absl::OkStatus();
}
absl::Status Translator::OpStoreFastLoadFast(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  if (absl::Status s = StoreLocal(f, in.argument.index, std::move(v)); !s.ok()) return s;
  return PushLocal(f, in.argument.index2, in.argument.text2);
}
absl::Status Translator::OpDeleteFast(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  f.locals[static_cast<size_t>(in.arg)] = nullptr;
  return absl::OkStatus();
}
absl::Status Translator::OpMakeCell(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  VarPtr& slot = f.locals[static_cast<size_t>(in.arg)];
  slot = Var::Cell(slot);
  return absl::OkStatus();
}
absl::Status Translator::OpCopyFreeVars(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  size_t n = static_cast<size_t>(in.arg);
  if (f.closure.size() != n) return absl::InternalError("closure size mismatch");
  for (size_t i = 0; i < n; ++i) f.locals[f.locals.size() - n + i] = f.closure[i];
  return absl::OkStatus();
}
absl::Status Translator::OpLoadDeref(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  const VarPtr& cell = f.locals[static_cast<size_t>(in.arg)];
  if (!cell || cell->kind != VarKind::kCell || !cell->value) {
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat("free variable '", in.argument.text, "' is read before it is set"),
                 "the function would raise NameError");
  }
  f.stack.push_back(cell->value);
  return absl::OkStatus();
}
absl::Status Translator::OpStoreDeref(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  const VarPtr& cell = f.locals[static_cast<size_t>(in.arg)];
  if (!cell || cell->kind != VarKind::kCell) return absl::InternalError("STORE_DEREF without a cell");
  if (cell->source && allow_breaks_ && !frames_.empty()) {
    // A free variable of the traced function itself: replayed as a
    // STORE_DEREF into the same slot of the rewritten code.
    const std::vector<VarPtr>& top = frames_.front()->locals;
    for (size_t slot = 0; slot < top.size(); ++slot) {
      if (top[slot] != cell) continue;
      cell->value = v;
      SideEffect e;
      e.kind = SideEffect::Kind::kStoreCell;
      e.slot = static_cast<int>(slot);
      e.value = std::move(v);
      side_effects_.push_back(std::move(e));
      return absl::OkStatus();
    }
  }
  const SourcePtr& contents = cell->source;
  if (contents && allow_breaks_ && contents->kind() == Source::Kind::kAttr && contents->name() == "cell_contents" &&
      cell->object) {
    // A cell of a closure the frame reaches (f.__closure__[i]): the trace
    // reads the new value from the tracker (the same one for every function
    // sharing the cell), and the store is replayed as
    // f.__closure__[i].cell_contents = value after the graph.
    cell->value = v;
    SideEffect e;
    e.kind = SideEffect::Kind::kStoreAttr;
    e.target = Var::OfKind(VarKind::kOpaque, cell->object, contents->base());
    e.name = "cell_contents";
    e.value = std::move(v);
    side_effects_.push_back(std::move(e));
    return absl::OkStatus();
  }
  if (cell->source) {
    return Break(ir::GraphBreak::SIDE_EFFECT,
                 absl::StrCat("assigning the enclosing function's variable '", in.argument.text, "'"),
                 "nonlocal assignments to variables outside the traced function are side "
                 "effects; return the value instead");
  }
  cell->value = std::move(v);
  return absl::OkStatus();
}

// --- globals and attributes ---

absl::Status Translator::OpLoadGlobal(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  const std::string name(in.argument.text);
  auto push = [&](VarPtr v) {
    if (in.argument.flags & 1) {
      PushCallable(f, std::move(v));
    } else {
      f.stack.push_back(std::move(v));
    }
  };
  if (f.globals.get() == top_globals_.get() && !global_overlay_.empty()) {
    if (auto it = global_overlay_.find(name); it != global_overlay_.end()) {
      push(it->second);
      return absl::OkStatus();
    }
  }
  PyObject* value = PyDict_GetItemString(f.globals.get(), name.c_str());  // borrowed
  SourcePtr source;
  if (value != nullptr) {
    source = f.top_globals ? Source::Global(name)
             : f.globals_source ? (f.globals_by_item ? Source::Item(f.globals_source, name)
                                                   : Source::Attr(f.globals_source, name))
                               : nullptr;
  } else {
    PyObject* builtins = PyDict_GetItemString(f.globals.get(), "__builtins__");
    if (builtins != nullptr && PyModule_Check(builtins)) builtins = PyModule_GetDict(builtins);
    value = builtins != nullptr ? PyDict_GetItemString(builtins, name.c_str()) : nullptr;
    if (value == nullptr) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("name '", name, "' is not defined"),
                   "the function would raise NameError");
    }
  }
  ASSIGN_OR_RETURN(v, Wrap(python::Object::Borrow(value), source));
  push(std::move(v));
  return absl::OkStatus();
}
// 3.12+ LOAD_ATTR with the method bit is 3.11's LOAD_METHOD. Either way the
// shape is (bound attribute, NULL slot): GetAttr binds methods.
absl::Status Translator::OpLoadAttr(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(obj);
  ASSIGN_OR_RETURN(v, GetAttr(obj, std::string(in.argument.text)));
  if (in.argument.flags & 1) {
    PushCallable(f, std::move(v));
  } else {
    f.stack.push_back(std::move(v));
  }
  return absl::OkStatus();
}
absl::Status Translator::OpLoadMethod(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(obj);
  ASSIGN_OR_RETURN(v, GetAttr(obj, std::string(in.argument.text)));
  PushCallable(f, std::move(v));
  return absl::OkStatus();
}
// 3.12+: super().name with super, __class__ and the first argument on the
// stack. The zero-argument form (oparg bit 1 clear) is super(__class__,
// self), which is what the compiler loaded; a `super` that is not the
// builtin is called as the source wrote it.
absl::Status Translator::OpLoadSuperAttr(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(self);
  POP_OR_RETURN(cls);
  POP_OR_RETURN(super_fn);
  const bool builtin = super_fn->object.get() == reinterpret_cast<PyObject*>(&PySuper_Type);
  std::vector<VarPtr> args;
  if ((in.argument.flags & 2) || builtin) args = {cls, self};
  ASSIGN_OR_RETURN(sup, Call(super_fn, std::move(args), {}));
  ASSIGN_OR_RETURN(v, GetAttr(sup, std::string(in.argument.text)));
  if (in.argument.flags & 1) {
    PushCallable(f, std::move(v));
  } else {
    f.stack.push_back(std::move(v));
  }
  return absl::OkStatus();
}
absl::Status Translator::OpStoreAttr(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(obj);
  POP_OR_RETURN(value);
  // A tracked instance is new: setting its attributes is no side effect.
  if (allow_breaks_ || obj->kind == VarKind::kUserObject || IsUserDict(obj)) {
    return StoreAttr(obj, std::string(in.argument.text), value);
  }
  return Break(ir::GraphBreak::SIDE_EFFECT,
               absl::StrCat("setting attribute '", in.argument.text, "' on ", Describe(*obj)),
               "attribute assignment is a side effect that a single graph cannot hold");
}
absl::Status Translator::OpDeleteAttr(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(obj);
  if (obj->kind == VarKind::kUserObject) return DeleteUserObjectAttr(obj, std::string(in.argument.text));
  return Break(ir::GraphBreak::SIDE_EFFECT,
               absl::StrCat("deleting attribute '", in.argument.text, "' of ", Describe(*obj)),
               "deleting attributes of objects the trace did not make is a side effect it does not replay");
}

absl::Status Translator::OpStoreGlobal(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  if (allow_breaks_ && f.globals.get() == top_globals_.get()) {
    POP_OR_RETURN(v);
    std::string name(in.argument.text);
    global_overlay_[name] = v;
    SideEffect e;
    e.kind = SideEffect::Kind::kStoreGlobal;
    e.name = name;
    e.value = v;
    side_effects_.push_back(std::move(e));
    return absl::OkStatus();
  }
  return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat("assigning the global '", in.argument.text, "'"),
               "global assignment is a side effect that a single graph cannot hold");
}

// --- calls and functions ---

absl::Status Translator::OpKwNames(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  f.kw_names = Var::Constant(f.code->Constant(in.argument.index));
  return absl::OkStatus();
}
absl::Status Translator::OpCall(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  size_t argc = static_cast<size_t>(in.arg);
  ASSIGN_OR_RETURN(values, PopN(f, argc + 2));
  // (NULL, callable) or (method, self) below the arguments; 3.13:
  // (callable, NULL) or (method, self).
  VarPtr callable = values[0];
  std::vector<VarPtr> args(values.begin() + 2, values.end());
  if (!kCallableFirst && callable->kind == VarKind::kNull) {
    callable = values[1];
  } else if (values[1]->kind != VarKind::kNull) {
    args.insert(args.begin(), values[1]);  // method form: self first
  }
  Kwargs kwargs;
  if (f.kw_names) {
    PyObject* names = f.kw_names->object.get();
    size_t nk = static_cast<size_t>(PyTuple_GET_SIZE(names));
    if (nk > args.size()) return absl::InternalError("more keyword names than arguments");
    for (size_t i = 0; i < nk; ++i) {
      ASSIGN_OR_RETURN(key, python::AsString(python::Object::Borrow(
                                PyTuple_GET_ITEM(names, static_cast<Py_ssize_t>(i)))));
      kwargs.emplace_back(key, args[args.size() - nk + i]);
    }
    args.resize(args.size() - nk);
    f.kw_names = nullptr;
  }
  ASSIGN_OR_RETURN(r, Call(callable, std::move(args), std::move(kwargs)));
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
// 3.13: the keyword names are a tuple on top of the stack, not KW_NAMES.
absl::Status Translator::OpCallKw(Frame& f, const Instruction& in, std::optional<VarPtr>& result) {
  POP_OR_RETURN(names);
  if (!names->is_constant() || !PyTuple_Check(names->object.get())) {
    return absl::InternalError("CALL_KW without a tuple of names");
  }
  f.kw_names = std::move(names);
  return OpCall(f, in, result);
}
absl::Status Translator::OpCallFunctionEx(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  VarPtr kwargs_var;
  if (in.arg & 1) {
    POP_OR_RETURN(k);
    kwargs_var = std::move(k);
  }
  POP_OR_RETURN(args_var);
  POP_OR_RETURN(upper);
  POP_OR_RETURN(lower);
  VarPtr callable = kCallableFirst ? lower : upper;  // the other is a NULL
  ASSIGN_OR_RETURN(args, Materialize(args_var));
  Kwargs kwargs;
  if (kwargs_var) {
    if (kwargs_var->kind != VarKind::kDict) return Break(ir::GraphBreak::OTHER, "** of a non-dict", "pass a dict");
    for (size_t i = 0; i < kwargs_var->keys.size(); ++i) {
      ASSIGN_OR_RETURN(key, python::AsString(kwargs_var->keys[i]->object));
      kwargs.emplace_back(key, kwargs_var->items[i]);
    }
  }
  ASSIGN_OR_RETURN(r, Call(callable, std::move(args), std::move(kwargs)));
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
// MAKE_FUNCTION: up to 3.12 its oparg says which attributes lie below the
// code object (popped closure first); 3.13 makes a bare function and sets
// each with SET_FUNCTION_ATTRIBUTE.
absl::Status Translator::OpMakeFunction(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(fn, MakeFunction(f));
  for (int flag : {0x08, 0x04, 0x02, 0x01}) {
    if (!(in.arg & flag)) continue;
    POP_OR_RETURN(value);
    if (absl::Status s = SetFunctionAttribute(fn, flag, value); !s.ok()) return s;
  }
  f.stack.push_back(std::move(fn));
  return absl::OkStatus();
}
absl::Status Translator::OpSetFunctionAttribute(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(fn);
  POP_OR_RETURN(value);
  if (fn->kind != VarKind::kFunction) return absl::InternalError("SET_FUNCTION_ATTRIBUTE without a function");
  if (absl::Status s = SetFunctionAttribute(fn, in.arg, value); !s.ok()) return s;
  f.stack.push_back(std::move(fn));
  return absl::OkStatus();
}

// --- operators ---

absl::Status Translator::OpBinaryOp(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(b);
  POP_OR_RETURN(a);
  ASSIGN_OR_RETURN(r, BinaryOp(in.arg, a, b));
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
absl::Status Translator::OpCompareOp(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(b);
  POP_OR_RETURN(a);
  ASSIGN_OR_RETURN(r, Compare(std::string(in.argument.text), a, b));
  // 3.13 fuses the truth test of a condition into the comparison. A tensor
  // comparison stays a tensor here, in the graph: the jump (or `not`) that
  // takes it needs its truth and breaks there, as on 3.11 and 3.12, and the
  // rewrite runs TO_BOOL before it (3.13's jumps take only bools).
  if ((in.arg & kCompareToBool) && r->kind != VarKind::kTensor) {
    ASSIGN_OR_RETURN(t, Truthy(r));
    r = Var::Constant(python::FromBool(t));
  }
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
absl::Status Translator::OpIsOp(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(b);
  POP_OR_RETURN(a);
  ASSIGN_OR_RETURN(same, Identical(a, b));
  f.stack.push_back(Var::Constant(python::FromBool(same != (in.arg == 1))));
  return absl::OkStatus();
}
absl::Status Translator::OpContainsOp(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(container);
  POP_OR_RETURN(item);
  if (container->kind == VarKind::kGenerator) {
    ASSIGN_OR_RETURN(found, GeneratorContains(container, item));
    f.stack.push_back(Var::Constant(python::FromBool(found != (in.arg == 1))));
    return absl::OkStatus();
  }
  VarPtr computed;
  ASSIGN_OR_RETURN(found, Contains(container, item, in.arg == 1 ? nullptr : &computed));
  f.stack.push_back(computed ? computed : Var::Constant(python::FromBool(found != (in.arg == 1))));
  return absl::OkStatus();
}

namespace {
// -x, +x, ~x by the operator module's names.
const char* UnaryName(absl::string_view opname) {
  if (opname == "UNARY_NEGATIVE") return "neg";
  if (opname == "UNARY_INVERT") return "invert";
  return "pos";
}
}  // namespace

absl::StatusOr<VarPtr> Translator::UnaryOperator(const char* name, const VarPtr& v) {
  if (v->is_ndarray) return NdarrayOperator(name, {v});
  if (v->kind == VarKind::kTensor) {
    return CallOp(absl::StrCat("operator.", name), ir::Node::CALL_FUNCTION, {v}, {});
  }
  if (std::optional<absl::StatusOr<VarPtr>> r = ScalarUnary(name, v)) return *std::move(r);
  if (v->kind == VarKind::kSymInt && std::string(name) == "neg") {  // -n is 0 - n, a graph value
    if (std::optional<absl::StatusOr<VarPtr>> r = SymArithmetic("sub", Var::Constant(python::FromLong(0)), v)) {
      return *std::move(r);
    }
  }
  ASSIGN_OR_RETURN(fn, python::Import("operator"));
  return CallReal(Var::Constant(*python::GetAttr(fn, name)), {v}, {});
}

absl::Status Translator::OpUnary(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(r, UnaryOperator(UnaryName(in.name), v));
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
absl::Status Translator::OpUnaryNot(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(t, Truthy(v));
  f.stack.push_back(Var::Constant(python::FromBool(!t)));
  return absl::OkStatus();
}
// 3.13: the condition of a jump is made a bool first.
absl::Status Translator::OpToBool(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(t, Truthy(v));
  f.stack.push_back(Var::Constant(python::FromBool(t)));
  return absl::OkStatus();
}
// 3.12+: the operations moved out of the opcode space. Only those plain
// functions use; the rest (import *, type parameters, async generators) are
// breaks naming the intrinsic.
absl::Status Translator::OpCallIntrinsic1(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  if (in.arg == kIntrinsicListToTuple) {
    POP_OR_RETURN(v);
    f.stack.push_back(Var::Tuple(v->items));
    return absl::OkStatus();
  }
  if (in.arg == kIntrinsicUnaryPositive) {
    POP_OR_RETURN(v);
    ASSIGN_OR_RETURN(r, UnaryOperator("pos", v));
    f.stack.push_back(std::move(r));
    return absl::OkStatus();
  }
  if (in.arg == kIntrinsicStopIterationError) {
    // A generator's own handler (3.12+): an exception leaving its body
    // passes on, a StopIteration as RuntimeError (PEP 479).
    POP_OR_RETURN(exc);
    if (exc->object && PyErr_GivenExceptionMatches(exc->object.get(), PyExc_StopIteration)) {
      return Break(ir::GraphBreak::OTHER, "a generator raises StopIteration",
                   "the function would raise RuntimeError (PEP 479)");
    }
    f.stack.push_back(std::move(exc));
    return absl::OkStatus();
  }
  return Break(ir::GraphBreak::UNSUPPORTED_OPCODE,
               absl::StrCat("the translator does not implement CALL_INTRINSIC_1 ", in.arg, " (",
                            in.argument.text, ")"),
               "rewrite the construct, or report it with the source line");
}

// --- subscripts and slices ---

absl::Status Translator::OpBinarySubscr(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(index);
  POP_OR_RETURN(obj);
  ASSIGN_OR_RETURN(r, Subscript(obj, index));
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
absl::Status Translator::OpStoreSubscr(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(index);
  POP_OR_RETURN(obj);
  POP_OR_RETURN(value);
  if (std::optional<absl::StatusOr<VarPtr>> r = UserDictSpecial(obj, "__setitem__", {index, value})) {
    return r->ok() ? absl::OkStatus() : r->status();
  }
  return StoreItem(obj, index, value);
}

namespace {
absl::StatusOr<VarPtr> MakeSlice(std::vector<VarPtr> parts) {
  if (parts.size() == 2) parts.push_back(Var::Constant(python::None()));
  VarPtr s = Var::OfKind(VarKind::kSlice, python::Object());
  s->items = std::move(parts);
  return s;
}
}  // namespace

absl::Status Translator::OpBuildSlice(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(parts, PopN(f, static_cast<size_t>(in.arg)));
  for (const VarPtr& p : parts) {
    // A size int stays one (x[:, :x.size(1)]); read as a Python int, it is guarded.
    if (!p->is_none() && p->kind != VarKind::kSymInt && !(p->is_constant() && PyLong_Check(p->object.get()))) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("slice bound is ", Describe(*p)), "slice with Python ints");
    }
  }
  ASSIGN_OR_RETURN(s, MakeSlice(std::move(parts)));
  f.stack.push_back(std::move(s));
  return absl::OkStatus();
}
// 3.12+: container[start:end] without a slice object on the stack.
absl::Status Translator::OpBinarySlice(Frame& f, const Instruction& in, std::optional<VarPtr>& result) {
  Instruction build = in;
  build.arg = 2;
  if (absl::Status s = OpBuildSlice(f, build, result); !s.ok()) return s;
  return OpBinarySubscr(f, in, result);
}
absl::Status Translator::OpStoreSlice(Frame& f, const Instruction& in, std::optional<VarPtr>& result) {
  Instruction build = in;
  build.arg = 2;
  if (absl::Status s = OpBuildSlice(f, build, result); !s.ok()) return s;
  return OpStoreSubscr(f, in, result);
}

// --- containers ---

absl::Status Translator::OpBuildTuple(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(items, PopN(f, static_cast<size_t>(in.arg)));
  f.stack.push_back(Var::Tuple(std::move(items)));
  return absl::OkStatus();
}
absl::Status Translator::OpBuildList(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(items, PopN(f, static_cast<size_t>(in.arg)));
  f.stack.push_back(Var::List(std::move(items)));
  return absl::OkStatus();
}
absl::Status Translator::OpBuildMap(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(kv, PopN(f, static_cast<size_t>(in.arg) * 2));
  std::vector<VarPtr> keys, values;
  for (size_t i = 0; i < kv.size(); i += 2) {
    if (absl::Status s = AddDictEntry(keys, values, kv[i], kv[i + 1]); !s.ok()) return s;
  }
  f.stack.push_back(Var::Dict(std::move(keys), std::move(values)));
  return absl::OkStatus();
}
// {1: a, True: b} is {1: b}: a key equal to an earlier one keeps that one's
// place and spelling and takes the later value, as dict does.
absl::Status Translator::AddDictEntry(std::vector<VarPtr>& keys, std::vector<VarPtr>& values, const VarPtr& key,
                                      const VarPtr& value) {
  ASSIGN_OR_RETURN(at, FindDictKey(keys, key));
  if (at) {
    values[*at] = value;
    return absl::OkStatus();
  }
  keys.push_back(key);
  values.push_back(value);
  return absl::OkStatus();
}
absl::Status Translator::OpBuildConstKeyMap(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(keys_var);
  ASSIGN_OR_RETURN(values, PopN(f, static_cast<size_t>(in.arg)));
  std::vector<VarPtr> keys, merged;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys_var->object.get()); ++i) {
    VarPtr key = Var::Constant(python::Object::Borrow(PyTuple_GET_ITEM(keys_var->object.get(), i)));
    if (absl::Status s = AddDictEntry(keys, merged, key, values[static_cast<size_t>(i)]); !s.ok()) return s;
  }
  f.stack.push_back(Var::Dict(std::move(keys), std::move(merged)));
  return absl::OkStatus();
}
absl::Status Translator::OpBuildSet(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  // A set of constants is a real Python set the trace owns: it iterates in
  // Python's own (hash) order, which a tracker could not reproduce.
  ASSIGN_OR_RETURN(items, PopN(f, static_cast<size_t>(in.arg)));
  ASSIGN_OR_RETURN(set, BuildSet(items, /*frozen=*/false));
  f.stack.push_back(std::move(set));
  return absl::OkStatus();
}
absl::Status Translator::OpSetAdd(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  VarPtr& target = f.stack[f.stack.size() - static_cast<size_t>(in.arg)];
  if (!(target->is_constant() && PySet_Check(target->object.get()) && !target->source) &&
      target->kind != VarKind::kSet) {
    return absl::InternalError("SET_ADD/SET_UPDATE without a set made by the trace");
  }
  std::vector<VarPtr> items = {v};
  if (in.name == "SET_UPDATE") {
    ASSIGN_OR_RETURN(all, Materialize(v));
    items = all;
  }
  if (target->source) {  // a set the frame handed over (a resume function's stack)
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat(in.name, " mutates ", target->source->ToString()),
                 "mutating a set that outlives the call is not replayed");
  }
  for (const VarPtr& item : items) {
    if (absl::Status added = AddToSet(target, item); !added.ok()) return added;
  }
  return absl::OkStatus();
}
absl::Status Translator::OpListAppend(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  VarPtr& list = f.stack[f.stack.size() - static_cast<size_t>(in.arg)];
  // The list may be one a resume function was handed (built before a break).
  if (absl::Status s = WillMutate(list, "LIST_APPEND"); !s.ok()) return s;
  list->items.push_back(std::move(v));
  return absl::OkStatus();
}
absl::Status Translator::OpListExtend(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(items, Materialize(v));
  VarPtr& list = f.stack[f.stack.size() - static_cast<size_t>(in.arg)];
  if (absl::Status s = WillMutate(list, "LIST_EXTEND"); !s.ok()) return s;
  list->items.insert(list->items.end(), items.begin(), items.end());
  return absl::OkStatus();
}
absl::Status Translator::OpListToTuple(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  f.stack.push_back(Var::Tuple(v->items));
  return absl::OkStatus();
}
absl::Status Translator::OpMapAdd(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(value);
  POP_OR_RETURN(key);
  VarPtr& dict = f.stack[f.stack.size() - static_cast<size_t>(in.arg)];
  if (absl::Status s = WillMutate(dict, "MAP_ADD"); !s.ok()) return s;
  return DictSet(dict, key, value);  // a repeated key keeps its place, takes the new value
}
absl::Status Translator::OpDictUpdate(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(other);
  if (other->kind != VarKind::kDict) return Break(ir::GraphBreak::OTHER, "dict update from a non-dict", "");
  VarPtr& dict = f.stack[f.stack.size() - static_cast<size_t>(in.arg)];
  if (in.name == "DICT_MERGE") {  // f(**a, **b): a key twice is the call's TypeError
    for (const VarPtr& k : other->keys) {
      for (const VarPtr& existing : dict->keys) {
        absl::StatusOr<VarPtr> eq = Compare("==", existing, k);
        if (!eq.ok()) return eq.status();
        if ((*eq)->is_constant() && (*eq)->object.get() == Py_True) {
          return Break(ir::GraphBreak::OTHER, "a keyword argument given twice through **",
                       "the call would raise TypeError");
        }
      }
    }
  }
  if (absl::Status s = WillMutate(dict, in.name); !s.ok()) return s;
  return UpdateDict(dict, {other}, {});  // dict.update's rules: a repeated key takes the new value
}
absl::Status Translator::OpUnpackSequence(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(items, Unpack(v, static_cast<size_t>(in.arg)));
  for (auto it = items.rbegin(); it != items.rend(); ++it) f.stack.push_back(*it);
  return absl::OkStatus();
}
absl::Status Translator::OpUnpackEx(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(items, Materialize(v));
  size_t before = static_cast<size_t>(in.arg & 0xff), after = static_cast<size_t>(in.arg >> 8);
  if (items.size() < before + after) {
    return Break(ir::GraphBreak::OTHER, "not enough values to unpack", "the function would raise ValueError");
  }
  std::vector<VarPtr> middle(items.begin() + static_cast<long>(before), items.end() - static_cast<long>(after));
  for (size_t i = 0; i < after; ++i) f.stack.push_back(items[items.size() - 1 - i]);
  f.stack.push_back(Var::List(std::move(middle)));
  for (size_t i = before; i > 0; --i) f.stack.push_back(items[i - 1]);
  return absl::OkStatus();
}

// --- iteration and control flow ---

absl::Status Translator::OpGetIter(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(it, GetIter(v));
  f.stack.push_back(std::move(it));
  return absl::OkStatus();
}
absl::Status Translator::EndLoop(Frame& f, const Instruction& in) {
  f.stack.pop_back();
  if (absl::Status s = Jump(f, in); !s.ok()) return s;
  // 3.12+ FOR_ITER jumps to the loop's END_FOR but continues after it (and
  // after 3.13's POP_TOP that follows), the iterator already dropped.
  const std::vector<Instruction>& ins = f.code->instructions;
  if (f.ip < ins.size() && ins[f.ip].name == "END_FOR") {
    ++f.ip;
    if (op::kPythonMinor >= 13 && f.ip < ins.size() && ins[f.ip].name == "POP_TOP") ++f.ip;
  }
  return absl::OkStatus();
}
absl::Status Translator::OpForIter(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  VarPtr& it = f.stack.back();
  if (it->kind == VarKind::kGenerator) return ForIterGenerator(f, in);
  if (it->kind != VarKind::kIterator) {
    return Break(ir::GraphBreak::UNSUPPORTED_OPCODE,
                 absl::StrCat("iterating over ", Describe(*it), " made outside the trace"),
                 "iterate over a list, tuple, range or tensor the function can see");
  }
  ASSIGN_OR_RETURN(next, NextValue(it));
  if (next) {
    f.stack.push_back(*std::move(next));
    return absl::OkStatus();
  }
  return EndLoop(f, in);
}
absl::Status Translator::OpJump(Frame& f, const Instruction& in, std::optional<VarPtr>&) { return Jump(f, in); }
absl::Status Translator::OpPopJumpIfTrue(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(t, Truthy(v));
  return t ? Jump(f, in) : absl::OkStatus();
}
absl::Status Translator::OpPopJumpIfFalse(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(t, Truthy(v));
  return t ? absl::OkStatus() : Jump(f, in);
}
absl::Status Translator::OpPopJumpIfNone(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  return v->is_none() ? Jump(f, in) : absl::OkStatus();
}
absl::Status Translator::OpPopJumpIfNotNone(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  return v->is_none() ? absl::OkStatus() : Jump(f, in);
}
absl::Status Translator::OpJumpIfTrueOrPop(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(t, Truthy(f.stack.back()));
  if (t) return Jump(f, in);
  f.stack.pop_back();
  return absl::OkStatus();
}
absl::Status Translator::OpJumpIfFalseOrPop(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(t, Truthy(f.stack.back()));
  if (!t) return Jump(f, in);
  f.stack.pop_back();
  return absl::OkStatus();
}
absl::Status Translator::OpReturnValue(Frame& f, const Instruction&, std::optional<VarPtr>& result) {
  POP_OR_RETURN(v);
  result = std::move(v);
  return absl::OkStatus();
}
absl::Status Translator::OpBeforeWith(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(manager);
  if (manager->kind == VarKind::kAutocast) return EnterAutocast(f, manager);
  if (manager->kind != VarKind::kGradMode) return EnterUserContext(f, manager);
  if (manager->value) {  // a function decorated with no_grad(): no context manager
    return Break(ir::GraphBreak::OTHER, "a with block over a function decorated with a grad mode",
                 "the function has no __enter__: the block would raise");
  }
  const bool restore = manager->grad_restore.value_or(grad_enabled_);
  grad_stack_.push_back(restore);
  VarPtr exit = Var::Method(manager, "__exit__");
  exit->grad_enabled = restore;  // the mode __exit__ restores (lib/rewrite re-enters from it)
  if (absl::Status s = SetGradMode(manager->grad_enabled); !s.ok()) return s;
  f.stack.push_back(exit);
  f.stack.push_back(Var::Constant(python::None()));
  return absl::OkStatus();
}

// A context manager whose class defines __enter__ and __exit__ in Python (a
// user's class, contextlib's nullcontext and @contextmanager): __enter__ is
// traced now, and its bound __exit__ waits on the stack for the block's end,
// where the code calls it with three Nones (an exception in the block is a
// graph break, so the exceptional exit runs in Python).
absl::Status Translator::EnterUserContext(Frame& f, const VarPtr& manager) {
  python::Object cls = ClassOf(manager);
  auto python_method = [&](const char* name) {
    if (!cls || !PyType_Check(cls.get())) return false;
    python::Object n = python::FromString(name);
    PyObject* m = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls.get()), n.get());  // borrowed
    return m != nullptr && PyFunction_Check(m);
  };
  const bool traced_kind = manager->kind == VarKind::kUserObject ||
                           (manager->kind == VarKind::kOpaque && manager->object);
  if (!traced_kind || !python_method("__enter__") || !python_method("__exit__")) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("'with' over ", Describe(*manager)),
                 "context managers are traced when their class defines __enter__ and __exit__ in Python "
                 "(and torch.no_grad(), enable_grad(), set_grad_enabled())");
  }
  // BEFORE_WITH's order: both methods looked up, then __enter__ called.
  ASSIGN_OR_RETURN(enter, GetAttr(manager, "__enter__"));
  ASSIGN_OR_RETURN(exit, GetAttr(manager, "__exit__"));
  ASSIGN_OR_RETURN(entered, Call(enter, {}, {}));
  f.stack.push_back(exit);
  f.stack.push_back(entered);
  return absl::OkStatus();
}

// --- f-strings ---

// str(), repr() or ascii() of a traced value, as FORMAT_VALUE's and
// CONVERT_VALUE's conversion 1, 2 or 3 (0: none) does it.
absl::StatusOr<python::Object> Translator::Converted(const VarPtr& v, int conversion) {
  ASSIGN_OR_RETURN(value, ToPython(v));
  static constexpr const char* kConverters[] = {nullptr, "str", "repr", "ascii"};
  if (conversion < 0 || conversion > 3) return absl::InternalError("unknown conversion");
  if (kConverters[conversion] == nullptr) return value;
  python::Object builtins = python::Object::Borrow(PyEval_GetBuiltins());
  python::Object conv = python::Object::Borrow(PyDict_GetItemString(builtins.get(), kConverters[conversion]));
  return python::Call(conv, {value});
}

namespace {
absl::StatusOr<VarPtr> Formatted(const python::Object& value, const VarPtr& spec) {
  python::Object formatted =
      python::Object::Steal(PyObject_Format(value.get(), spec ? spec->object.get() : nullptr));
  if (!formatted) return python::FetchError("format");
  return Var::Constant(formatted);
}
}  // namespace

absl::Status Translator::OpFormatValue(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  VarPtr spec;
  if (in.arg & 4) {
    POP_OR_RETURN(s);
    spec = std::move(s);
  }
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(value, Converted(v, in.arg & 3));
  ASSIGN_OR_RETURN(r, Formatted(value, spec));
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
absl::Status Translator::OpConvertValue(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(value, Converted(v, in.arg));
  f.stack.push_back(Var::Constant(value));
  return absl::OkStatus();
}
absl::Status Translator::OpFormatSimple(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(value, Converted(v, 0));
  ASSIGN_OR_RETURN(r, Formatted(value, nullptr));
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
absl::Status Translator::OpFormatWithSpec(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(spec);
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(value, Converted(v, 0));
  ASSIGN_OR_RETURN(r, Formatted(value, spec));
  f.stack.push_back(std::move(r));
  return absl::OkStatus();
}
absl::Status Translator::OpBuildString(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(parts, PopN(f, static_cast<size_t>(in.arg)));
  std::string s;
  for (const VarPtr& p : parts) {
    ASSIGN_OR_RETURN(piece, python::AsString(p->object));
    s += piece;
  }
  f.stack.push_back(Var::Constant(python::FromString(s)));
  return absl::OkStatus();
}

// --- the rest ---

absl::Status Translator::OpLoadAssertionError(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  f.stack.push_back(Var::OfKind(VarKind::kClass, python::Object::Borrow(PyExc_AssertionError)));
  return absl::OkStatus();
}
absl::Status Translator::OpImportName(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(fromlist);
  POP_OR_RETURN(level);
  ASSIGN_OR_RETURN(level_int, AsInt(level));
  python::Object module = python::Object::Steal(PyImport_ImportModuleLevelObject(
      python::FromString(in.argument.text).get(), f.globals.get(), nullptr, fromlist->object.get(),
      static_cast<int>(level_int)));
  if (!module) return python::FetchError("import");
  // Read through sys.modules by its name, so what the trace reads of it
  // (`from m import SCALE`) is guarded like any global.
  python::Object name = python::Object::Steal(PyObject_GetAttrString(module.get(), "__name__"));
  absl::StatusOr<std::string> import_name = name ? python::AsString(name) : python::FetchError("__name__");
  python::ClearError();
  ASSIGN_OR_RETURN(v, Wrap(module, import_name.ok() ? Source::Module(*import_name) : nullptr));
  f.stack.push_back(std::move(v));
  return absl::OkStatus();
}
absl::Status Translator::OpImportFrom(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  ASSIGN_OR_RETURN(v, GetAttr(f.stack.back(), std::string(in.argument.text)));
  f.stack.push_back(std::move(v));
  return absl::OkStatus();
}
absl::Status Translator::OpReturnGenerator(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  return ReturnGenerator(f);
}
absl::Status Translator::OpYieldValue(Frame& f, const Instruction&, std::optional<VarPtr>& result) {
  return YieldValue(f, result);
}

// `yield from it`: iter(it), unless it is a generator already.
absl::Status Translator::OpGetYieldFromIter(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(v);
  ASSIGN_OR_RETURN(it, GetIter(v));
  f.stack.push_back(std::move(it));
  return absl::OkStatus();
}
// The delegation loop's step: the sub-iterator's next value (then yielded
// by the YIELD_VALUE after it), or, once it is exhausted, what it returned,
// and a jump out of the loop. Only None is ever sent in: the trace resumes
// generators with next(); send() and throw() are not traced.
absl::Status Translator::OpSend(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  POP_OR_RETURN(sent);
  if (f.stack.empty()) return absl::InternalError("SEND without a receiver");
  if (!sent->is_none()) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, "send() of a value into a delegated generator",
                 "generators are traced when driven by iteration");
  }
  VarPtr receiver = f.stack.back();
  ASSIGN_OR_RETURN(next, NextValue(receiver));
  if (next) {
    f.stack.push_back(*std::move(next));
    return absl::OkStatus();
  }
  VarPtr returned = ReturnedValue(receiver);
  // 3.12+ jump to END_SEND, which drops the receiver below the value; 3.11
  // replaces the receiver itself.
  ASSIGN_OR_RETURN(target, IndexOf(f, in.argument.jump_target));
  if (f.code->instructions[target].name != "END_SEND") f.stack.pop_back();
  f.stack.push_back(std::move(returned));
  return Jump(f, in);
}
absl::Status Translator::OpEndSend(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(value);
  POP_OR_RETURN(receiver);
  f.stack.push_back(std::move(value));
  return absl::OkStatus();
}

#undef POP_OR_RETURN
#undef ASSIGN_OR_RETURN

}  // namespace dynamo::trace
