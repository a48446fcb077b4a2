#include "lib/trace/translator.h"

#include <Python.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/bytecode/opcodes.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {

using bytecode::Instruction;
namespace op = bytecode::generated;

namespace {


// CO_* flags (Python.h's macros, named here for reading).
constexpr int kVarArgs = CO_VARARGS;
constexpr int kVarKeywords = CO_VARKEYWORDS;

// NB_* operator index -> the operator-module name torch graphs use.
std::string OperatorName(int nb_op) {
  std::string name = bytecode::generated::kBinaryOps[nb_op].name;  // "NB_INPLACE_ADD"
  name = name.substr(3);
  bool inplace = absl::StartsWith(name, "INPLACE_");
  if (inplace) name = name.substr(8);
  static const std::pair<const char*, const char*> kNames[] = {
      {"ADD", "add"}, {"AND", "and_"}, {"FLOOR_DIVIDE", "floordiv"}, {"LSHIFT", "lshift"},
      {"MATRIX_MULTIPLY", "matmul"}, {"MULTIPLY", "mul"}, {"REMAINDER", "mod"}, {"OR", "or_"},
      {"POWER", "pow"}, {"RSHIFT", "rshift"}, {"SUBTRACT", "sub"}, {"TRUE_DIVIDE", "truediv"},
      {"XOR", "xor"}};
  for (const auto& [nb, py] : kNames) {
    if (name == nb) {
      std::string base = py;
      if (!inplace) return base;
      if (base.back() == '_') base.pop_back();  // and_ -> iand
      return "i" + base;
    }
  }
  return "";
}

std::string CompareName(const std::string& symbol) {
  if (symbol == "<") return "lt";
  if (symbol == "<=") return "le";
  if (symbol == "==") return "eq";
  if (symbol == "!=") return "ne";
  if (symbol == ">") return "gt";
  return "ge";
}

}  // namespace

TraceInput TraceInput::Tensor(ops::TensorMeta meta) {
  TraceInput t;
  t.kind = Kind::kTensor;
  t.tensor = std::move(meta);
  return t;
}
TraceInput TraceInput::Object(python::Object object) {
  TraceInput t;
  t.kind = Kind::kObject;
  t.object = std::move(object);
  return t;
}
TraceInput TraceInput::Tuple(std::vector<TraceInput> items) {
  TraceInput t;
  t.kind = Kind::kTuple;
  t.items = std::move(items);
  return t;
}
TraceInput TraceInput::List(std::vector<TraceInput> items) {
  TraceInput t;
  t.kind = Kind::kList;
  t.items = std::move(items);
  return t;
}
TraceInput TraceInput::Dict(std::vector<std::string> keys, std::vector<TraceInput> items) {
  TraceInput t;
  t.kind = Kind::kDict;
  t.keys = std::move(keys);
  t.items = std::move(items);
  return t;
}

std::string FormatBreak(const BreakInfo& b) {
  std::string out = absl::StrCat(b.file, ":", b.line, ": graph break: ", b.message, " [",
                                 ir::GraphBreak::Reason_Name(b.reason), "]");
  if (!b.text.empty()) absl::StrAppend(&out, " | ", b.text);
  if (!b.hint.empty()) absl::StrAppend(&out, " | hint: ", b.hint);
  return out;
}

namespace {

bool IsBackwardJump(int opcode) { return bytecode::Opcode(opcode).Has(bytecode::kBackwardJump); }

// The instructions control reaches from the entry without an exception.
// From 3.12 a `with` block's exit handler ends in a backward jump to the
// code after the block, which is no loop: it is reached only by raising.
std::vector<bool> NormallyReached(const bytecode::DecodedCode& code) {
  const std::vector<bytecode::Instruction>& ins = code.instructions;
  std::vector<bool> seen(ins.size(), false);
  std::vector<size_t> work = {0};
  while (!work.empty()) {
    const size_t i = work.back();
    work.pop_back();
    if (i >= ins.size() || seen[i]) continue;
    seen[i] = true;
    const bytecode::OpcodeInfo& info = bytecode::Opcode(ins[i].opcode);
    if (info.IsJump()) {
      if (const bytecode::Instruction* t = code.At(ins[i].argument.jump_target)) {
        work.push_back(static_cast<size_t>(t - ins.data()));
      }
    }
    if (!info.Has(bytecode::kUnconditionalJump) && !info.Has(bytecode::kScopeExit)) work.push_back(i + 1);
  }
  return seen;
}

// Where to stop a trace that broke at top-frame instruction `at` (see
// StopState): the instruction itself when Python can run it alone and
// continue in a resume function; otherwise the entry of the outermost loop,
// `with` or `try` block around it, from where the rest runs in Python.
// Loops: a resume function per iteration would nest a call per iteration;
// blocks: the instruction must run under the block's exception handler.
std::pair<StopState::Kind, size_t> ChooseStop(const bytecode::DecodedCode& code, size_t at,
                                              const std::vector<VarPtr>& stack) {
  const std::vector<bytecode::Instruction>& ins = code.instructions;
  size_t entry = at;
  const std::vector<bool> reached = NormallyReached(code);
  for (size_t j = 0; j < ins.size(); ++j) {
    if (!IsBackwardJump(ins[j].opcode) || !reached[j]) continue;
    const bytecode::Instruction* target = code.At(ins[j].argument.jump_target);
    if (target == nullptr) continue;
    size_t head = static_cast<size_t>(target - ins.data());
    if (head <= at && at <= j) {
      // A for loop's state before its first iteration is the iterable, not
      // a half-consumed iterator.
      if (ins[head].opcode == op::kForIter && head > 0 && ins[head - 1].opcode == op::kGetIter) --head;
      entry = std::min(entry, head);
    }
  }
  // Exception-table ranges: widen to the outermost block around `entry`,
  // except the bodies of `with torch.no_grad()` / `enable_grad()` and
  // `with torch.autocast(...)` blocks,
  // which the rewrite re-enters around the instruction and the resume
  // function continues inside (StopState::grad_enabled).
  for (bool changed = true; changed;) {
    changed = false;
    for (const bytecode::ExceptionTableEntry& e : code.exception_table) {
      if (e.start <= ins[entry].offset && ins[entry].offset < e.end) {
        const bytecode::Instruction* start = code.At(e.start);
        if (start == nullptr) continue;
        size_t s = static_cast<size_t>(start - ins.data());
        const bool grad_with = s > 0 && ins[s - 1].opcode == op::kBeforeWith && e.depth >= 1 &&
                               static_cast<size_t>(e.depth) <= stack.size() &&
                               IsReenteredExit(stack[static_cast<size_t>(e.depth) - 1]);
        if (grad_with) continue;
        if (s > 0 && ins[s - 1].opcode == op::kBeforeWith) --s;  // the with statement itself
        if (s < entry) {
          entry = s;
          changed = true;
        }
      }
    }
  }
  if (entry == at && CanRunAlone(ins[at].opcode)) return {StopState::Kind::kInstruction, at};
  return {StopState::Kind::kRegion, entry};
}

}  // namespace

absl::StatusOr<TraceResult> Trace(const TraceRequest& request, const ops::Registry& registry,
                                  BreakInfo* on_break) {
  BreakInfo why;
  Translator first(registry);
  absl::StatusOr<TraceResult> r = first.Run(request, &why);
  const bool broke = !r.ok() && r.status().code() == absl::StatusCode::kUnimplemented &&
                     first.break_top_index().has_value();
  if (broke && on_break != nullptr) *on_break = why;
  if (!broke || !request.allow_breaks || !first.top_code()) return r;
  // Trace again, stopping cleanly before the chosen instruction: the second
  // run reaches the same state (tracing is deterministic) without the
  // half-executed instruction's effects on the graph and the trackers.
  auto [kind, index] = ChooseStop(*first.top_code(), *first.break_top_index(), first.break_top_stack());
  TraceRequest again = request;
  again.stop_at = static_cast<int>(index);
  Translator second(registry);
  absl::StatusOr<TraceResult> stopped = second.Run(again, nullptr);
  if (!stopped.ok()) return stopped.status();
  if (!stopped->stop) {
    return absl::InternalError(absl::StrCat("the trace did not reach instruction ", index,
                                            " again after a break there"));
  }
  stopped->stop->kind = kind;
  stopped->break_info = why;
  return stopped;
}

namespace {

// Which real callables are registry ops, by identity, so aliases (F.relu and
// torch.nn.functional.relu) agree. Resolved once per registry: hundreds of
// imports and attribute reads that do not change while the process runs.
const absl::flat_hash_map<PyObject*, std::string>& OpNames(const ops::Registry& registry) {
  // Leaked on purpose: the keys are borrowed objects kept alive by `owners`.
  static auto* cache = new absl::flat_hash_map<const ops::Registry*,
                                                absl::flat_hash_map<PyObject*, std::string>>();
  static auto* owners = new std::vector<python::Object>();
  auto it = cache->find(&registry);
  if (it != cache->end()) return it->second;
  absl::flat_hash_map<PyObject*, std::string>& names = (*cache)[&registry];
  for (const std::string& name : registry.Names()) {
    std::vector<std::string> parts = absl::StrSplit(name, '.');
    if (parts.size() < 2 || parts[0] == "Tensor") continue;
    python::Object obj;
    size_t i = 1;
    // The longest importable module prefix, then attributes.
    for (size_t k = parts.size() - 1; k >= 1 && !obj; --k) {
      std::string module = absl::StrJoin(parts.begin(), parts.begin() + static_cast<long>(k), ".");
      python::Object m = python::Object::Steal(PyImport_ImportModule(module.c_str()));
      if (m) {
        obj = m;
        i = k;
      } else {
        python::ClearError();
      }
    }
    for (; obj && i < parts.size(); ++i) {
      obj = python::Object::Steal(PyObject_GetAttrString(obj.get(), parts[i].c_str()));
      if (!obj) python::ClearError();
    }
    if (obj && !names.contains(obj.get())) {
      names[obj.get()] = name;
      owners->push_back(obj);
    }
  }
  return names;
}

}  // namespace

Translator::Translator(const ops::Registry& registry)
    : registry_(registry), op_names_(OpNames(registry)) {
  python::Object builtins = python::Object::Borrow(PyEval_GetBuiltins());
  for (const char* name : {"len", "isinstance", "range", "enumerate", "zip", "list", "tuple",
                           "int", "float", "bool", "abs", "min", "max", "sum", "getattr",
                           "hasattr", "super", "reversed", "iter", "next", "dict", "str",
                           "any", "all", "print", "callable", "sorted", "type", "divmod",
                           "round", "issubclass", "id", "repr", "hash", "map", "filter", "set",
                           "frozenset", "setattr"}) {
    PyObject* b = PyDict_GetItemString(builtins.get(), name);  // borrowed; builtins live forever
    if (b != nullptr) builtins_[b] = name;
  }
}

absl::Status Translator::Break(ir::GraphBreak::Reason reason, std::string message,
                               std::string hint) {
  BreakInfo b;
  b.reason = reason;
  b.message = std::move(message);
  b.hint = std::move(hint);
  if (!frames_.empty()) {
    const Frame& f = *frames_.back();
    b.file = f.code->filename;
    if (f.ip < f.code->instructions.size()) {
      const Instruction& in = f.code->instructions[f.ip];
      b.line = in.location.line;
      b.opcode = std::string(in.name);
      b.offset = in.offset;
    }
    absl::StatusOr<python::Object> linecache = python::Import("linecache");
    if (linecache.ok() && b.line > 0) {
      absl::StatusOr<python::Object> text = python::CallMethod(
          *linecache, "getline", {python::FromString(b.file), python::FromLong(b.line)});
      absl::StatusOr<std::string> s = text.ok() ? python::AsString(*text) : text.status();
      if (s.ok()) {
        std::string t(absl::StripAsciiWhitespace(*s));
        b.text = t;
      }
    }
    python::ClearError();
  }
  std::string formatted = FormatBreak(b);
  break_ = std::move(b);
  if (!frames_.empty()) {
    break_top_index_ = frames_.front()->ip;
    break_top_stack_ = frames_.front()->stack;
  }
  return absl::UnimplementedError(formatted);
}

ir::SourceLocation Translator::CurrentLocation() const {
  ir::SourceLocation loc;
  // The outermost user frame: people read graphs against their own code.
  for (const Frame* f : frames_) {
    if (InTorchInternals(*f)) break;
    loc.set_file(f->code->filename);
    if (f->ip < f->code->instructions.size()) loc.set_line(f->code->instructions[f->ip].location.line);
  }
  return loc;
}

bool Translator::InTorchInternals(const Frame& f) const {
  return absl::StrContains(f.code->filename, "/torch/");
}

absl::StatusOr<VarPtr> Translator::Pop(Frame& f) {
  if (f.stack.empty()) return absl::InternalError("value stack underflow");
  VarPtr v = std::move(f.stack.back());
  f.stack.pop_back();
  return v;
}

absl::StatusOr<std::vector<VarPtr>> Translator::PopN(Frame& f, size_t n) {
  if (f.stack.size() < n) return absl::InternalError("value stack underflow");
  std::vector<VarPtr> out(f.stack.end() - static_cast<long>(n), f.stack.end());
  f.stack.resize(f.stack.size() - n);
  return out;
}

absl::StatusOr<size_t> Translator::IndexOf(const Frame& f, int offset) {
  const Instruction* in = f.code->At(offset);
  if (in == nullptr) return absl::InternalError(absl::StrCat("no instruction at offset ", offset));
  return static_cast<size_t>(in - f.code->instructions.data());
}

absl::Status Translator::Jump(Frame& f, const Instruction& in) {
  absl::StatusOr<size_t> target = IndexOf(f, in.argument.jump_target);
  if (!target.ok()) return target.status();
  f.ip = *target;
  return absl::OkStatus();
}

absl::StatusOr<bool> Translator::Truthy(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kSymInt:
      return SymTruth(v);
    case VarKind::kScalar:
      return ScalarValueNeeded(v, "a branch");
    case VarKind::kConstant: {
      int r = PyObject_IsTrue(v->object.get());
      if (r < 0) return python::FetchError("truth value");
      return r == 1;
    }
    case VarKind::kTensor:
      return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH,
                   absl::StrCat("branching on the value of a ", ops::ToString(v->meta),
                                " tensor"),
                   "the condition depends on tensor values; use torch.where, or compute the "
                   "condition from shapes, dtypes or Python values");
    case VarKind::kTuple:
    case VarKind::kList:
    case VarKind::kDict:
      guards_.LengthMatch(v->source, static_cast<int64_t>(v->items.size()));
      return !v->items.empty();
    case VarKind::kDictView:
      guards_.LengthMatch(v->self->source, static_cast<int64_t>(v->self->items.size()));
      return !v->self->items.empty();
    case VarKind::kSet:
      return !v->items.empty();
    case VarKind::kRange:
      return (v->step > 0 && v->start < v->stop) || (v->step < 0 && v->start > v->stop);
    case VarKind::kNNModule: {
      // Module containers (ModuleList, Sequential, ModuleDict) are false
      // when empty: nn's own __len__ decides, and the length is guarded.
      if (!python::HasAttr(v->object.get(), "__len__")) return true;
      Py_ssize_t n = PyObject_Length(v->object.get());
      if (n < 0) return python::FetchError("len of a module");
      guards_.LengthMatch(v->source, n);
      return n > 0;
    }
    case VarKind::kUserObject:
    case VarKind::kOpaque:
      if (std::optional<absl::StatusOr<bool>> r = UserTruthy(v)) return *std::move(r);
      return Break(ir::GraphBreak::OTHER,
                   absl::StrCat("truth value of ", Describe(*v), " is not traced"),
                   "compare with None or a constant explicitly");
    default:
      return true;  // functions, classes, modules of code, dtypes, devices
  }
}

absl::StatusOr<VarPtr> Translator::RunFrame(Frame& f) {
  frames_.push_back(&f);
  struct PopFrame {
    std::vector<Frame*>& frames;
    ~PopFrame() { frames.pop_back(); }
  } pop{frames_};
  while (f.ip < f.code->instructions.size()) {
    if (++steps_ > kMaxSteps) {
      return Break(ir::GraphBreak::OTHER,
                   absl::StrCat("the trace ran past ", kMaxSteps, " instructions"),
                   "a loop does not terminate on trace-time values");
    }
    if (frames_.size() == 1) {
      if (stop_at_ >= 0 && f.ip == static_cast<size_t>(stop_at_)) {
        StopState st;
        st.index = f.ip;
        st.stack = f.stack;
        st.locals = f.locals;
        st.kw_names = f.kw_names;
        st.grad_enabled = grad_enabled_;
        stop_ = std::move(st);
        return absl::CancelledError("stopped");
      }
    }
    const Instruction& in = f.code->instructions[f.ip];
    size_t before = f.ip;
    std::optional<VarPtr> result;
    absl::Status s = Step(f, in, result);
    if (IsRaised(s) && frames_.size() == 1) {
      // Raised into the traced function's own frame: its handlers (or the
      // caller) run in Python, from a graph break here.
      absl::StatusOr<python::Object> exc = raised_ ? absl::StatusOr<python::Object>(raised_->object)
                                                   : absl::InternalError("");
      raised_ = nullptr;
      python::Object text = exc.ok() ? python::Object::Steal(PyObject_Repr(exc->get())) : python::Object();
      if (!text) python::ClearError();
      return Break(ir::GraphBreak::OTHER,
                   absl::StrCat("the function raises ", text ? python::AsString(text).value_or("") : "an exception",
                                " on these inputs"),
                   "check the inputs; an assert or raise is reached during tracing");
    }
    if (IsRaised(s)) {
      if (Unwind(f, in)) continue;
      return s;  // to the caller's frame, at its call instruction
    }
    if (!s.ok()) {
      if (s.code() != absl::StatusCode::kUnimplemented && !break_) {
        // An internal inconsistency: report it where it happened.
        return absl::Status(s.code(), absl::StrCat(f.code->filename, ":", in.location.line, ": ",
                                                   in.name, ": ", s.message()));
      }
      return s;
    }
    if (result) return *result;
    if (f.ip == before) ++f.ip;  // no jump taken
  }
  return absl::InternalError("execution fell off the end of the code");
}

absl::StatusOr<std::shared_ptr<const bytecode::DecodedCode>> Translator::Decoded(
    const python::Object& code) {
  auto it = decoded_.find(code.get());
  if (it != decoded_.end()) return it->second;
  absl::StatusOr<bytecode::DecodedCode> d = bytecode::Decode(code, {.nested = false});
  if (!d.ok()) return d.status();
  auto shared = std::make_shared<const bytecode::DecodedCode>(*std::move(d));
  decoded_[code.get()] = shared;  // the DecodedCode holds a reference: the key stays valid
  return shared;
}

absl::Status Translator::PrepareFrame(Frame& frame, const python::Object& code,
                                      const python::Object& globals, bool generator) {
  absl::StatusOr<std::shared_ptr<const bytecode::DecodedCode>> d = Decoded(code);
  if (!d.ok()) return d.status();
  frame.code = *d;
  frame.globals = globals;
  frame.top_globals = globals.get() == top_globals_.get();
  if (!frame.top_globals) {
    PyObject* name = PyDict_GetItemString(globals.get(), "__name__");  // borrowed
    absl::StatusOr<std::string> module =
        name ? python::AsString(python::Object::Borrow(name)) : absl::NotFoundError("");
    if (module.ok() && *module != "torch" && !absl::StartsWith(*module, "torch.")) {
      frame.globals_source = Source::Module(*module);
    }
  }
  frame.locals.assign(frame.code->localsplus.size(), nullptr);
  frame.generator = generator && IsGeneratorExpression(*frame.code);
  if (!frame.generator && (frame.code->flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                 absl::StrCat("calling the generator or coroutine ", frame.code->qualname),
                 "generators and coroutines are not traced; use a list comprehension");
  }
  return absl::OkStatus();
}

absl::Status Translator::BindArguments(Frame& f, const VarPtr& function, std::vector<VarPtr> args,
                                       Kwargs kwargs) {
  auto* co = reinterpret_cast<PyCodeObject*>(f.code->code.get());
  const size_t argcount = static_cast<size_t>(co->co_argcount);
  const size_t posonly = static_cast<size_t>(co->co_posonlyargcount);
  const size_t kwonly = static_cast<size_t>(co->co_kwonlyargcount);
  const bool has_varargs = co->co_flags & kVarArgs;
  const bool has_varkw = co->co_flags & kVarKeywords;
  const std::vector<std::string>& names = f.code->localsplus;
  const std::string qualname = f.code->qualname;
  auto type_error = [&](const std::string& what) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat(qualname, "() ", what),
                 "the call would raise TypeError");
  };

  for (size_t i = 0; i < std::min(args.size(), argcount); ++i) f.locals[i] = args[i];
  size_t next_slot = argcount + kwonly;
  if (has_varargs) {
    std::vector<VarPtr> extra;
    if (args.size() > argcount) extra.assign(args.begin() + static_cast<long>(argcount), args.end());
    f.locals[next_slot++] = Var::Tuple(std::move(extra));
  } else if (args.size() > argcount) {
    return type_error(absl::StrCat("takes ", argcount, " positional arguments but ", args.size(),
                                   " were given"));
  }
  VarPtr varkw = has_varkw ? Var::Dict({}, {}) : nullptr;
  for (auto& [key, value] : kwargs) {
    bool bound = false;
    for (size_t i = posonly; i < argcount + kwonly; ++i) {
      if (names[i] != key) continue;
      if (f.locals[i]) return type_error(absl::StrCat("got multiple values for argument '", key, "'"));
      f.locals[i] = value;
      bound = true;
      break;
    }
    if (bound) continue;
    if (!varkw) return type_error(absl::StrCat("got an unexpected keyword argument '", key, "'"));
    varkw->keys.push_back(Var::Constant(python::FromString(key)));
    varkw->items.push_back(value);
  }
  if (varkw) f.locals[next_slot] = varkw;

  const std::vector<VarPtr> no_defaults;
  const std::vector<VarPtr>& defaults = function->defaults ? function->defaults->items : no_defaults;
  for (size_t i = 0; i < argcount; ++i) {
    if (f.locals[i]) continue;
    size_t first_default = argcount - std::min(argcount, defaults.size());
    if (i >= first_default) {
      f.locals[i] = defaults[i - first_default];
    } else {
      return type_error(absl::StrCat("missing required argument '", names[i], "'"));
    }
  }
  for (size_t i = argcount; i < argcount + kwonly; ++i) {
    if (f.locals[i]) continue;
    bool found = false;
    if (function->kwdefaults) {
      for (size_t k = 0; k < function->kwdefaults->keys.size(); ++k) {
        absl::StatusOr<std::string> key = python::AsString(function->kwdefaults->keys[k]->object);
        if (key.ok() && *key == names[i]) {
          f.locals[i] = function->kwdefaults->items[k];
          found = true;
          break;
        }
      }
    }
    if (!found) return type_error(absl::StrCat("missing keyword-only argument '", names[i], "'"));
  }
  f.closure = function->closure;
  return absl::OkStatus();
}

absl::StatusOr<VarPtr> Translator::MakeFunction(Frame& f) {
  absl::StatusOr<VarPtr> code = Pop(f);
  if (!code.ok()) return code.status();
  VarPtr fn = Var::OfKind(VarKind::kFunction, (*code)->object);
  fn->globals = f.globals;
  return fn;
}

absl::Status Translator::SetFunctionAttribute(const VarPtr& fn, int flag, const VarPtr& value) {
  switch (flag) {
    case 0x08:
      fn->closure = value->items;
      return absl::OkStatus();
    case 0x04:  // annotations: not needed to run the function
      return absl::OkStatus();
    case 0x02:
      fn->kwdefaults = value;
      return absl::OkStatus();
    case 0x01:
      fn->defaults = value;
      // All-constant defaults arrive as one tuple constant: unpack it.
      if (value->is_constant() && PyTuple_Check(value->object.get())) {
        std::vector<VarPtr> items;
        PyObject* t = value->object.get();
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) {
          items.push_back(Var::Constant(python::Object::Borrow(PyTuple_GET_ITEM(t, i))));
        }
        fn->defaults = Var::Tuple(std::move(items));
      }
      return absl::OkStatus();
    default:
      return Break(ir::GraphBreak::UNSUPPORTED_OPCODE, absl::StrCat("function attribute flag ", flag),
                   "report it with the source line");
  }
}

absl::Status Translator::CheckHashable(const VarPtr& key) {
  const bool mutable_set = key->kind == VarKind::kSet && key->name == "set";
  if (key->kind == VarKind::kList || key->kind == VarKind::kDict || key->kind == VarKind::kDictView || mutable_set) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat(Describe(*key), " as a dict key"),
                 "the key is unhashable: the function would raise TypeError");
  }
  PyObject* o = key->object.get();
  if (o == nullptr || key->is_tensor() || key->kind == VarKind::kSet) return absl::OkStatus();
  PyObject* type = key->kind == VarKind::kUserObject && key->user_class
                       ? key->user_class->object.get()
                       : reinterpret_cast<PyObject*>(Py_TYPE(o));
  PyObject* hash = PyType_Check(type) ? _PyType_Lookup(reinterpret_cast<PyTypeObject*>(type),
                                                       python::FromString("__hash__").get())
                                      : nullptr;  // borrowed
  if (hash == Py_None) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat(Describe(*key), " as a dict key"),
                 "its class is unhashable: the function would raise TypeError");
  }
  // A Python __hash__ is user code, except enum.Enum's own (hash of the
  // member's name), looked up only when a Python __hash__ is met.
  auto enum_hash = [&]() -> PyObject* {
    PyObject* enum_class = StdlibObject("enum", "Enum");
    if (enum_class == nullptr || !PyType_Check(enum_class)) return nullptr;
    return _PyType_Lookup(reinterpret_cast<PyTypeObject*>(enum_class), python::FromString("__hash__").get());
  };
  if (hash != nullptr && PyFunction_Check(hash) && hash != enum_hash()) {
    return Break(ir::GraphBreak::UNSUPPORTED_CALL, absl::StrCat("hashing ", Describe(*key), " runs its Python __hash__"),
                 "use keys of builtin types (str, int, tuples of them) or objects hashed by identity");
  }
  if (key->kind != VarKind::kUserObject && PyObject_Hash(o) == -1) {
    absl::Status error = python::FetchError("");
    return Break(ir::GraphBreak::OTHER, absl::StrCat("hashing ", Describe(*key), " raises ", error.message()),
                 "the function would raise here");
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Translator::SameDictKey(const VarPtr& a, const VarPtr& b) {
  if (a == b) return true;
  if (a->is_tensor() || b->is_tensor()) {
    NoteIdentity(a);
    NoteIdentity(b);
    return a->is_tensor() && b->is_tensor() && a->tensor_identity() == b->tensor_identity();
  }
  if (a->is_constant() && b->is_constant()) {
    int equal = PyObject_RichCompareBool(a->object.get(), b->object.get(), Py_EQ);
    if (equal < 0) python::ClearError();
    return equal == 1;
  }
  absl::StatusOr<VarPtr> eq = Compare("==", a, b);
  if (!eq.ok()) return eq.status();
  return (*eq)->object.get() == Py_True;
}

absl::StatusOr<std::optional<size_t>> Translator::FindDictKey(const std::vector<VarPtr>& keys, const VarPtr& key) {
  if (absl::Status hashable = CheckHashable(key); !hashable.ok()) return hashable;
  for (size_t k = 0; k < keys.size(); ++k) {
    absl::StatusOr<bool> same = SameDictKey(keys[k], key);
    if (!same.ok()) return same.status();
    if (*same) return k;
  }
  return std::nullopt;
}

absl::Status Translator::StoreItem(const VarPtr& obj, const VarPtr& index, const VarPtr& value) {
  if (IsDeque(obj) && index->kind == VarKind::kSlice) {
    return RaiseNew(PyExc_TypeError, "sequence index must be integer, not 'slice'");
  }
  if (IsDeque(obj) && obj->source) {
    return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat("item assignment into ", obj->source->ToString()),
                 "a deque the function was given is read by the trace, not changed; copy it first");
  }
  const bool replayed = allow_breaks_ && obj->source && obj->object &&
                        (obj->kind == VarKind::kList || obj->kind == VarKind::kDict);
  if (replayed) MarkMutated(obj);
  if ((obj->kind == VarKind::kList || obj->kind == VarKind::kDict) && (!obj->source || replayed)) {
    if (obj->kind == VarKind::kList && index->kind == VarKind::kSlice) return AssignSlice(obj, index, value);
    if (obj->kind == VarKind::kList) {
      if (!index->is_constant() || !PyIndex_Check(index->object.get())) {
        return Break(ir::GraphBreak::OTHER, absl::StrCat("list index is a ", Describe(*index)),
                     "index lists with Python ints or slices");
      }
      absl::StatusOr<int64_t> i_or = AsInt(index);
      if (!i_or.ok()) return i_or.status();
      int64_t i = *i_or;
      int64_t n = static_cast<int64_t>(obj->items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) {
        return Break(ir::GraphBreak::OTHER, "list assignment index out of range",
                     "the function would raise IndexError");
      }
      obj->items[static_cast<size_t>(i)] = value;
    } else {
      return AddDictEntry(obj->keys, obj->items, index, value);
    }
    return absl::OkStatus();
  }
  if (obj->is_ndarray && (!obj->source || allow_breaks_)) {
    absl::StatusOr<VarPtr> r = NdarrayOperator("setitem", {obj, index, value});
    return r.ok() ? absl::OkStatus() : r.status();
  }
  if (obj->kind == VarKind::kTensor && (!obj->source || allow_breaks_)) {
    absl::StatusOr<VarPtr> r = CallOp("operator.setitem", ir::Node::CALL_FUNCTION, {obj, index, value}, {});
    return r.ok() ? absl::OkStatus() : r.status();
  }
  return Break(ir::GraphBreak::SIDE_EFFECT,
               absl::StrCat("item assignment into ", Describe(*obj), " that outlives the call"),
               "mutating inputs is a side effect a single graph cannot hold; work on a copy");
}

absl::StatusOr<VarPtr> Translator::BinaryOp(int nb_op, const VarPtr& a, const VarPtr& b) {
  std::string name = OperatorName(nb_op);
  if (name.empty()) return absl::InternalError(absl::StrCat("unknown BINARY_OP ", nb_op));
  if (std::optional<absl::StatusOr<VarPtr>> r = SymArithmetic(name, a, b)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = ScalarArithmetic(name, a, b)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = UserObjectOperator(name, a, b)) return *std::move(r);
  if (IsDeque(a) || IsDeque(b)) return DequeOperator(name, a, b);
  if (a->kind == VarKind::kList && (name == "iadd" || name == "imul")) return ListInPlace(name, a, b);
  if (a->is_ndarray || b->is_ndarray) return NdarrayOperator(name, {a, b});
  if (a->is_tensor() || b->is_tensor()) {
    // A Python number has no in-place slot: `n += t` is `n = n + t`
    // (T5's relative_buckets = 0; relative_buckets += ...).
    if (name[0] == 'i' && !a->is_tensor() && a->is_constant() &&
        (PyLong_Check(a->object.get()) || PyFloat_Check(a->object.get()) || PyComplex_Check(a->object.get()))) {
      std::string plain = name == "iand" ? "and_" : name == "ior" ? "or_" : name == "ixor" ? "xor" : name.substr(1);
      return CallOp(absl::StrCat("operator.", plain), ir::Node::CALL_FUNCTION, {a, b}, {});
    }
    if (name[0] == 'i' && name != "iand" && a->is_tensor() && a->source && !allow_breaks_) {
      return Break(ir::GraphBreak::SIDE_EFFECT,
                   absl::StrCat("in-place '", name, "' on the input ", a->source->ToString()),
                   "in-place updates of inputs are side effects a single graph cannot hold; "
                   "write x = x + y instead of x += y");
    }
    return CallOp(absl::StrCat("operator.", name), ir::Node::CALL_FUNCTION, {a, b}, {});
  }
  // Sequences of Python values: Python's own operator decides (list + tuple
  // raises, torch.Size + tuple is a Size).
  if ((a->is_sequence() || b->is_sequence()) && ToPython(a).ok() && ToPython(b).ok()) {
    absl::StatusOr<python::Object> operator_module = python::Import("operator");
    if (!operator_module.ok()) return operator_module.status();
    absl::StatusOr<python::Object> fn = python::GetAttr(*operator_module, name);
    if (!fn.ok()) return fn.status();
    return CallReal(Var::Constant(*fn), {Var::Constant(*ToPython(a)), Var::Constant(*ToPython(b))}, {});
  }
  if (name == "or_" || name == "and_" || name == "sub" || name == "xor") {
    if (std::optional<std::pair<VarPtr, VarPtr>> sets = KeysViewOperands(a, b)) {
      return BinaryOp(nb_op, sets->first, sets->second);
    }
  }
  // A tuple literal (a LOAD_CONST) joins a tuple of trackers item by item.
  auto lift = [](const VarPtr& v) {
    if (!v->is_constant() || !PyTuple_CheckExact(v->object.get())) return v;
    std::vector<VarPtr> items;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v->object.get()); ++i) {
      items.push_back(Var::Constant(python::Object::Borrow(PyTuple_GET_ITEM(v->object.get(), i))));
    }
    return Var::Tuple(std::move(items));
  };
  if ((a->kind == VarKind::kTuple || b->kind == VarKind::kTuple) && (name == "add" || name == "iadd")) {
    VarPtr la = lift(a), lb = lift(b);
    if (la->is_sequence() && lb->is_sequence() && (la != a || lb != b)) return BinaryOp(nb_op, la, lb);
  }
  if (a->is_sequence() && b->is_sequence() && (name == "add" || name == "iadd")) {
    if (a->kind != b->kind) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("'", name, "' between ", Describe(*a), " and ", Describe(*b)),
                   "the operation would raise TypeError");
    }
    std::vector<VarPtr> items = a->items;
    items.insert(items.end(), b->items.begin(), b->items.end());
    VarPtr out = a->kind == VarKind::kList ? Var::List(std::move(items)) : Var::Tuple(std::move(items));
    out->is_size = a->is_size || b->is_size;
    return out;
  }
  if (a->is_sequence() && b->is_constant() && (name == "mul" || name == "imul")) {
    absl::StatusOr<int64_t> n = AsInt(b);
    if (!n.ok()) return n.status();
    std::vector<VarPtr> items;
    for (int64_t k = 0; k < *n; ++k) items.insert(items.end(), a->items.begin(), a->items.end());
    return a->kind == VarKind::kList ? Var::List(std::move(items)) : Var::Tuple(std::move(items));
  }
  absl::StatusOr<python::Object> lhs = ToPython(a);
  absl::StatusOr<python::Object> rhs = lhs.ok() ? ToPython(b) : lhs.status();
  if (!rhs.ok()) {
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat("'", name, "' between ", Describe(*a), " and ", Describe(*b)),
                 "only tensors and Python constants are combined during tracing");
  }
  absl::StatusOr<python::Object> operator_module = python::Import("operator");
  if (!operator_module.ok()) return operator_module.status();
  absl::StatusOr<python::Object> fn = python::GetAttr(*operator_module, name);
  if (!fn.ok()) return fn.status();
  return CallReal(Var::Constant(*fn), {Var::Constant(*lhs), Var::Constant(*rhs)}, {});
}

absl::StatusOr<VarPtr> Translator::ListInPlace(const std::string& name, const VarPtr& list, const VarPtr& other) {
  if (absl::Status s = WillMutate(list, name == "iadd" ? "+=" : "*="); !s.ok()) return s;
  if (name == "iadd") {  // list.extend: any iterable
    absl::StatusOr<std::vector<VarPtr>> items = Materialize(other);
    if (!items.ok()) return items.status();
    list->items.insert(list->items.end(), items->begin(), items->end());
    return list;
  }
  if (!other->is_constant() || !PyIndex_Check(other->object.get())) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("'*=' of a list by ", Describe(*other)),
                 "a list is repeated by an int");
  }
  absl::StatusOr<int64_t> n = AsInt(other);
  if (!n.ok()) return n.status();
  std::vector<VarPtr> once = std::move(list->items);
  list->items.clear();
  for (int64_t k = 0; k < *n; ++k) list->items.insert(list->items.end(), once.begin(), once.end());
  return list;
}

absl::StatusOr<VarPtr> Translator::Compare(const std::string& op, const VarPtr& a, const VarPtr& b) {
  if (a->is_ndarray || b->is_ndarray) return NdarrayOperator(CompareName(op), {a, b});
  if (a->is_tensor() || b->is_tensor()) {
    return CallOp(absl::StrCat("operator.", CompareName(op)), ir::Node::CALL_FUNCTION, {a, b}, {});
  }
  if (std::optional<absl::StatusOr<VarPtr>> r = SymCompare(op, a, b)) return *std::move(r);
  if (a->kind == VarKind::kScalar || b->kind == VarKind::kScalar) {
    return ScalarValueNeeded(a->kind == VarKind::kScalar ? a : b, absl::StrCat("'", op, "'"));
  }
  bool equality = op == "==" || op == "!=";
  if (equality && a->kind == VarKind::kDType && b->kind == VarKind::kDType) {
    return Var::Constant(python::FromBool((a->dtype == b->dtype) == (op == "==")));
  }
  if (equality && a->kind == VarKind::kDevice && b->kind == VarKind::kDevice) {
    return Var::Constant(python::FromBool((a->device == b->device) == (op == "==")));
  }
  if (a->kind == VarKind::kUserObject || b->kind == VarKind::kUserObject) return UserObjectCompare(op, a, b);
  if (IsUserDict(a) || IsUserDict(b)) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("comparing ", Describe(*a), " with ", Describe(*b)),
                 "comparisons of dict subclasses the trace made are not traced");
  }
  if (std::optional<std::pair<VarPtr, VarPtr>> sets = KeysViewOperands(a, b)) {
    return Compare(op, sets->first, sets->second);
  }
  absl::StatusOr<python::Object> lhs = ToPython(a);
  absl::StatusOr<python::Object> rhs = lhs.ok() ? ToPython(b) : lhs.status();
  if (!rhs.ok()) {
    // Objects the trace cannot turn into Python values compare by identity
    // only when their class keeps object's == (a TupleEq whose __eq__ says
    // True to everything must not be answered False); Python values on the
    // other side answer NotImplemented to a foreign type, so identity it is.
    auto identity_equality = [](const VarPtr& v, const absl::StatusOr<python::Object>& as_value) {
      return as_value.ok() || Py_TYPE(v->object.get())->tp_richcompare == PyBaseObject_Type.tp_richcompare;
    };
    if (equality && a->object && b->object && identity_equality(a, lhs) && identity_equality(b, ToPython(b))) {
      // The answer is a fact of the inputs when both were read from the
      // frame (an enum member looked up in a dict read from the frame).
      if (a->source && b->source) guards_.Aliasing({a->source, b->source}, {a->object.get(), b->object.get()});
      return Var::Constant(python::FromBool((a->object.get() == b->object.get()) == (op == "==")));
    }
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat("comparing ", Describe(*a), " with ", Describe(*b)),
                 "compare tensors, shapes, dtypes or Python constants");
  }
  static const std::pair<const char*, int> kOps[] = {{"<", Py_LT}, {"<=", Py_LE}, {"==", Py_EQ},
                                                      {"!=", Py_NE}, {">", Py_GT}, {">=", Py_GE}};
  int code = Py_EQ;
  for (const auto& [symbol, c] : kOps) {
    if (op == symbol) code = c;
  }
  python::Object r = python::Object::Steal(PyObject_RichCompare(lhs->get(), rhs->get(), code));
  if (!r) {
    python::ClearError();
    return Break(ir::GraphBreak::OTHER, absl::StrCat("comparison ", op, " raises"),
                 "the comparison would raise TypeError");
  }
  return Var::Constant(r);
}

namespace {

// A value whose subscript only builds a type alias: a builtin class, a class
// of typing or collections.abc, or one of typing's special forms.
bool IsTypingSubscript(const VarPtr& obj) {
  PyObject* o = obj->object.get();
  if (o == nullptr || (obj->kind != VarKind::kClass && obj->kind != VarKind::kBuiltin &&
                       obj->kind != VarKind::kOpaque)) {
    return false;
  }
  PyTypeObject* type = PyType_Check(o) ? reinterpret_cast<PyTypeObject*>(o) : Py_TYPE(o);
  if (PyType_Check(o) && !(PyType_GetFlags(type) & Py_TPFLAGS_HEAPTYPE)) return true;
  python::Object module = python::Object::Steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__"));
  python::ClearError();
  absl::StatusOr<std::string> name = module ? python::AsString(module) : absl::NotFoundError("");
  if (!name.ok()) return false;
  return *name == "typing" || (PyType_Check(o) && (*name == "collections.abc" || *name == "_collections_abc"));
}

}  // namespace

// An alias's arguments as Python values: constants, classes, typing's
// objects (Any, TypeVars) and lists and tuples of them.
absl::StatusOr<python::Object> Translator::TypingArgument(const VarPtr& v) {
  if (v->kind == VarKind::kTuple || v->kind == VarKind::kList) {
    std::vector<python::Object> items;
    for (const VarPtr& item : v->items) {
      absl::StatusOr<python::Object> o = TypingArgument(item);
      if (!o.ok()) return o.status();
      items.push_back(*std::move(o));
    }
    return v->kind == VarKind::kTuple ? python::MakeTuple(items) : python::MakeList(items);
  }
  if (v->kind == VarKind::kClass || IsTypingSubscript(v)) return v->object;
  if (v->kind == VarKind::kOpaque && v->object) {
    python::Object module =
        python::Object::Steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(v->object.get())), "__module__"));
    python::ClearError();
    if (module && python::AsString(module).value_or("") == "typing") return v->object;  // TypeVar, ParamSpec
  }
  return ToPython(v);
}

absl::StatusOr<VarPtr> Translator::Subscript(const VarPtr& obj, const VarPtr& index) {
  if (std::optional<absl::StatusOr<VarPtr>> r = EnvironItem(obj, index)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = UserDictSpecial(obj, "__getitem__", {index})) return *std::move(r);
  if (obj->is_ndarray) return NdarrayOperator("getitem", {obj, index});
  if (obj->is_tensor()) {
    return CallOp("operator.getitem", ir::Node::CALL_FUNCTION, {obj, index}, {});
  }
  if (IsDeque(obj) && index->kind == VarKind::kSlice) {
    return RaiseNew(PyExc_TypeError, "sequence index must be integer, not 'slice'");
  }
  if (obj->is_sequence()) {
    guards_.LengthMatch(obj->source, static_cast<int64_t>(obj->items.size()));
    const Py_ssize_t n = static_cast<Py_ssize_t>(obj->items.size());
    if (index->kind == VarKind::kSlice) {
      absl::StatusOr<python::Object> slice = ToPython(index);
      if (!slice.ok()) return slice.status();
      Py_ssize_t start = 0, stop = 0, step = 1;
      if (PySlice_Unpack(slice->get(), &start, &stop, &step) < 0) return python::FetchError("slice");
      Py_ssize_t count = PySlice_AdjustIndices(n, &start, &stop, step);
      std::vector<VarPtr> items;
      for (Py_ssize_t k = 0; k < count; ++k) items.push_back(obj->items[static_cast<size_t>(start + k * step)]);
      VarPtr out = obj->kind == VarKind::kList ? Var::List(std::move(items)) : Var::Tuple(std::move(items));
      out->is_size = obj->is_size;
      return out;
    }
    absl::StatusOr<int64_t> i = AsInt(index);
    if (!i.ok()) {
      return Break(ir::GraphBreak::OTHER, absl::StrCat("indexing ", Describe(*obj), " with ", Describe(*index)),
                   "index sequences with Python ints or slices");
    }
    int64_t k = *i < 0 ? *i + n : *i;
    if (k < 0 || k >= n) {
      return Break(ir::GraphBreak::OTHER, "index out of range", "the function would raise IndexError");
    }
    return obj->items[static_cast<size_t>(k)];
  }
  if (obj->kind == VarKind::kDict) {
    absl::StatusOr<std::optional<size_t>> at = FindDictKey(obj->keys, index);
    if (!at.ok()) return at.status();
    if (*at) return obj->items[**at];
    if (IsDefaultDict(obj)) return DefaultDictMissing(obj, index);
    return Break(ir::GraphBreak::OTHER, absl::StrCat("key ", Describe(*index), " is missing"),
                 "the function would raise KeyError");
  }
  if (IsTypingSubscript(obj)) {
    // list[int], dict[str, Any], typing.List[T], Callable[[T], Any] (a
    // nested def's annotations): a builtin class's __class_getitem__ makes
    // a types.GenericAlias of the values, typing's and collections.abc's
    // make (and cache) their aliases, and run nothing else.
    absl::StatusOr<python::Object> key = TypingArgument(index);
    if (!key.ok()) return key.status();
    python::Object alias = python::Object::Steal(PyObject_GetItem(obj->object.get(), key->get()));
    if (!alias) {
      absl::Status error = python::FetchError("");
      return Break(ir::GraphBreak::OTHER, absl::StrCat("subscript of ", Describe(*obj), " raises ", error.message()),
                   "the function would raise here");
    }
    return Wrap(alias, nullptr);
  }
  if (obj->kind == VarKind::kRange) {
    absl::StatusOr<int64_t> i = AsInt(index);
    if (!i.ok()) return i.status();
    return Var::Constant(python::FromLong(obj->start + *i * obj->step));
  }
  if (obj->kind == VarKind::kNNModule) {
    // A module class's own __getitem__ (`return self.layers[idx]`) is
    // traced: run for real, its result would get the container rules' path.
    if (std::optional<absl::StatusOr<VarPtr>> r = CallModuleSpecial(obj, "__getitem__", {index}, false)) {
      return *std::move(r);
    }
  }
  if (obj->kind == VarKind::kNNModule || obj->kind == VarKind::kConstant) {
    absl::StatusOr<python::Object> key = ToPython(index);
    if (!key.ok()) return key.status();
    python::Object item = python::Object::Steal(PyObject_GetItem(obj->object.get(), key->get()));
    if (!item) return python::FetchError("subscript");
    SourcePtr source;
    if (obj->source) {
      absl::StatusOr<int64_t> i = AsInt(index);
      absl::StatusOr<std::string> s = python::AsString(*key);
      if (i.ok() && obj->kind == VarKind::kNNModule && *i >= 0) source = ChildSource(obj, *i);
      else if (i.ok()) source = Source::Item(obj->source, *i);
      else if (s.ok()) source = Source::Item(obj->source, *s);
    }
    if (obj->kind == VarKind::kNNModule && obj->source && index->kind == VarKind::kSlice &&
        Py_TYPE(item.get()) == Py_TYPE(obj->object.get())) {
      // layers[:n]: a new container of the same children, which keep their
      // paths through the original (ChildSource); how many there are
      // depends on the original's length.
      Py_ssize_t n = PyObject_Length(obj->object.get());
      Py_ssize_t start = 0, stop = 0, step = 1;
      if (n < 0 || PySlice_Unpack(key->get(), &start, &stop, &step) < 0) return python::FetchError("slice");
      PySlice_AdjustIndices(n, &start, &stop, step);
      guards_.LengthMatch(obj->source, static_cast<int64_t>(n));
      VarPtr sliced = Var::OfKind(VarKind::kNNModule, item);
      sliced->self = obj;
      sliced->start = start;
      sliced->step = step;
      return sliced;
    }
    return Wrap(item, source);
  }
  if (obj->kind == VarKind::kOpaque && obj->source && PyDict_Check(obj->object.get()) && index->is_constant() &&
      (PyUnicode_CheckExact(index->object.get()) || PyLong_CheckExact(index->object.get()))) {
    // A dict subclass read from the frame that overrides other parts of the
    // container protocol (so it is no dict tracker) but reads items with
    // dict's own __getitem__: the item, guarded through that same read.
    PyTypeObject* type = Py_TYPE(obj->object.get());
    python::Object getitem = python::FromString("__getitem__"), missing = python::FromString("__missing__");
    if (_PyType_Lookup(type, getitem.get()) == _PyType_Lookup(&PyDict_Type, getitem.get()) &&
        _PyType_Lookup(type, missing.get()) == nullptr) {
      PyObject* item = PyDict_GetItemWithError(obj->object.get(), index->object.get());  // borrowed
      if (item == nullptr && PyErr_Occurred()) return python::FetchError("subscript");
      if (item == nullptr) {
        return Break(ir::GraphBreak::OTHER, absl::StrCat("key ", Describe(*index), " is missing"),
                     "the function would raise KeyError");
      }
      SourcePtr source = PyLong_CheckExact(index->object.get())
                             ? Source::Item(obj->source, PyLong_AsLongLong(index->object.get()))
                             : Source::Item(obj->source, *python::AsString(index->object));
      return Wrap(python::Object::Borrow(item), source);
    }
  }
  if (std::optional<absl::StatusOr<VarPtr>> r = CallUserSpecial(obj, "__getitem__", {index})) return *std::move(r);
  return Break(ir::GraphBreak::OTHER, absl::StrCat("subscript of ", Describe(*obj)),
               "index tensors, sequences, dicts or module containers");
}

absl::StatusOr<std::vector<VarPtr>> Translator::Materialize(const VarPtr& v) {
  if (std::optional<absl::StatusOr<VarPtr>> it = UserIter(v)) {
    if (!it->ok()) return it->status();
    return Materialize(**it);
  }
  switch (v->kind) {
    case VarKind::kTuple:
    case VarKind::kList:
      guards_.LengthMatch(v->source, static_cast<int64_t>(v->items.size()));
      return v->items;
    case VarKind::kDict:
      guards_.LengthMatch(v->source, static_cast<int64_t>(v->items.size()));
      return v->keys;
    case VarKind::kDictView: {  // the dict as it is now
      const VarPtr& d = v->self;
      guards_.LengthMatch(d->source, static_cast<int64_t>(d->items.size()));
      std::vector<VarPtr> out;
      for (size_t i = 0; i < d->keys.size(); ++i) {
        out.push_back(v->name == "keys"     ? d->keys[i]
                      : v->name == "values" ? d->items[i]
                                            : Var::Tuple({d->keys[i], d->items[i]}));
      }
      return out;
    }
    case VarKind::kGenerator:
      return DrainGenerator(v);
    case VarKind::kSet:
      return SetMembers(v);
    case VarKind::kIterator: {
      std::vector<VarPtr> rest;
      while (true) {
        absl::StatusOr<std::optional<VarPtr>> next = NextValue(v);
        if (!next.ok()) return next.status();
        if (!*next) return rest;
        rest.push_back(**std::move(next));
      }
    }
    case VarKind::kRange: {
      std::vector<VarPtr> items;
      for (int64_t i = v->start; v->step > 0 ? i < v->stop : i > v->stop; i += v->step) {
        if (items.size() > 100000) {
          return Break(ir::GraphBreak::OTHER, "a range of more than 100,000 steps",
                       "loops are unrolled; use a tensor operation instead");
        }
        items.push_back(Var::Constant(python::FromLong(i)));
      }
      return items;
    }
    case VarKind::kTensor: {
      if (v->meta.sizes.empty()) {
        return Break(ir::GraphBreak::OTHER, "iterating over a 0-d tensor",
                     "the function would raise TypeError");
      }
      SpecializeShape(v);  // one item per row: the loop is unrolled for this many
      std::vector<VarPtr> items;
      for (int64_t i = 0; i < v->meta.sizes[0]; ++i) {
        absl::StatusOr<VarPtr> item =
            v->is_ndarray ? NdarrayOperator("getitem", {v, Var::Constant(python::FromLong(i))})
                          : CallOp("operator.getitem", ir::Node::CALL_FUNCTION, {v, Var::Constant(python::FromLong(i))}, {});
        if (!item.ok()) return item.status();
        items.push_back(*item);
      }
      return items;
    }
    case VarKind::kConstant:
    case VarKind::kNNModule: {
      python::Object it = python::Object::Steal(PyObject_GetIter(v->object.get()));
      if (!it) {
        python::ClearError();
        break;
      }
      std::vector<VarPtr> items;
      int64_t i = 0;
      while (python::Object item = python::Object::Steal(PyIter_Next(it.get()))) {
        absl::StatusOr<VarPtr> w = Wrap(item, v->kind == VarKind::kNNModule ? IteratedSource(v, i, item.get()) : nullptr);
        if (!w.ok()) return w.status();
        items.push_back(*w);
        ++i;
      }
      if (PyErr_Occurred()) return python::FetchError("iterating");
      if (v->kind == VarKind::kNNModule) guards_.LengthMatch(v->source, i);
      return items;
    }
    default:
      break;
  }
  return Break(ir::GraphBreak::OTHER, absl::StrCat("iterating over ", Describe(*v)),
               "iterate over sequences, ranges, dicts, tensors or module containers");
}

absl::StatusOr<std::vector<VarPtr>> Translator::Unpack(const VarPtr& v, size_t expected) {
  absl::StatusOr<std::vector<VarPtr>> items = Materialize(v);
  if (!items.ok()) return items.status();
  if (items->size() != expected) {
    return Break(ir::GraphBreak::OTHER,
                 absl::StrCat("unpacking ", items->size(), " values into ", expected, " names"),
                 "the function would raise ValueError");
  }
  return items;
}

absl::StatusOr<VarPtr> Translator::GetIter(const VarPtr& v) {
  if (v->kind == VarKind::kIterator || v->kind == VarKind::kGenerator) return v;
  if (v->kind == VarKind::kList) {
    // Read live (see Var::self): the length is guarded when it is exhausted.
    VarPtr it = Var::Iterator({});
    it->self = v;
    return it;
  }
  absl::StatusOr<std::vector<VarPtr>> items = Materialize(v);
  if (!items.ok()) return items.status();
  VarPtr it = Var::Iterator(*std::move(items));
  if (v->kind == VarKind::kDict) it->self = v;
  if (v->kind == VarKind::kDictView) it->self = v->self;
  return it;
}

absl::StatusOr<std::optional<VarPtr>> Translator::IteratorNext(const VarPtr& it) {
  if (it->source && it->object && it->position < it->items.size()) {
    // A tuple iterator of the frame's (WrapTupleIterator): the real one is
    // advanced to where the trace leaves it, after the graph.
    if (!allow_breaks_) {
      return Break(ir::GraphBreak::SIDE_EFFECT, absl::StrCat("next() advances ", it->source->ToString()),
                   "advancing an iterator that outlives the call is a side effect");
    }
    if (mutated_.insert(it.get()).second) {
      SideEffect e;
      e.kind = SideEffect::Kind::kIteratorPosition;
      e.target = it;
      side_effects_.push_back(std::move(e));
    }
  }
  const VarPtr& over = it->self;
  if (over && over->kind == VarKind::kList) {
    if (it->position < over->items.size()) return over->items[it->position++];
    // Exhausted for good, as CPython drops the list then: later appends are
    // not seen. The trace ended the loop on this length.
    guards_.LengthMatch(over->source, static_cast<int64_t>(over->items.size()));
    it->self = nullptr;
    it->position = 0;
    return std::nullopt;
  }
  if (over && over->kind == VarKind::kDict && over->keys.size() != it->items.size()) {
    return Break(ir::GraphBreak::OTHER, "a dict changed size while it was iterated",
                 "the function would raise RuntimeError");
  }
  if (it->position < it->items.size()) return it->items[it->position++];
  it->self = nullptr;  // exhausted: CPython lets go of the dict
  return std::nullopt;
}

std::optional<absl::StatusOr<VarPtr>> Translator::CallModuleSpecial(const VarPtr& v, const char* name,
                                                                     std::vector<VarPtr> args, bool torch_nn_too) {
  PyObject* own = _PyType_Lookup(Py_TYPE(v->object.get()), python::FromString(name).get());  // borrowed
  if (own == nullptr || !PyFunction_Check(own)) return std::nullopt;
  if (!torch_nn_too) {
    absl::StatusOr<std::string> module = python::AsString(python::Object::Borrow(PyFunction_GetModule(own)));
    if (!module.ok() || absl::StartsWith(*module, "torch.nn.")) {
      python::ClearError();
      return std::nullopt;
    }
  }
  SourcePtr fn_source = v->source ? Source::Attr(Source::Attr(v->source, "__class__"), name) : nullptr;
  guards_.IdMatch(fn_source, python::Object::Borrow(own));
  args.insert(args.begin(), v);
  return Inline(Var::OfKind(VarKind::kFunction, python::Object::Borrow(own), fn_source), std::move(args), {});
}

absl::StatusOr<bool> Translator::Contains(const VarPtr& container, const VarPtr& item, VarPtr* computed) {
  if (std::optional<absl::StatusOr<bool>> r = EnvironHas(container, item)) return *std::move(r);
  if (std::optional<absl::StatusOr<VarPtr>> r = UserDictSpecial(container, "__contains__", {item})) {
    if (!r->ok()) return r->status();
    return Truthy(**r);
  }
  // Python values on both sides: Python's own `in` (substrings, set
  // membership, a tuple's identity-or-equality), run on the real objects.
  if (container->kind == VarKind::kConstant || container->kind == VarKind::kRange) {
    absl::StatusOr<python::Object> c = container->kind == VarKind::kRange
        ? python::Call(python::Object::Borrow(reinterpret_cast<PyObject*>(&PyRange_Type)),
                       {python::FromLong(container->start), python::FromLong(container->stop),
                        python::FromLong(container->step)})
        : absl::StatusOr<python::Object>(container->object);
    absl::StatusOr<python::Object> i = c.ok() ? ToPython(item) : c.status();
    if (!i.ok()) {
      // An object hashed by identity (a module in nn.Module's `memo = set()`).
      if (std::optional<absl::StatusOr<bool>> r = ContainsInRealSet(container, item)) return *std::move(r);
      return Break(ir::GraphBreak::OTHER, absl::StrCat("'in' of ", Describe(*item), " in ", Describe(*container)),
                   "membership is traced for Python values and containers of trackers");
    }
    int r = PySequence_Contains(c->get(), i->get());
    if (r < 0) {
      absl::Status error = python::FetchError("");
      return Break(ir::GraphBreak::OTHER, absl::StrCat("'in' raises ", error.message()),
                   "the function would raise here");
    }
    return r == 1;
  }
  if (container->kind == VarKind::kSet) return SetContains(container, item);
  if (std::optional<absl::StatusOr<bool>> r = ContainsInRealSet(container, item)) return *std::move(r);
  std::vector<VarPtr> candidates;
  switch (container->kind) {
    case VarKind::kDict: {
      // By hash and ==, as dict does (`[] in d` raises TypeError).
      guards_.LengthMatch(container->source, static_cast<int64_t>(container->keys.size()));
      absl::StatusOr<std::optional<size_t>> at = FindDictKey(container->keys, item);
      if (!at.ok()) return at.status();
      return at->has_value();
    }
    case VarKind::kTuple:
    case VarKind::kList:
    case VarKind::kIterator:
    case VarKind::kDictView: {
      if (container->kind == VarKind::kDictView && container->name == "keys") return Contains(container->self, item);
      absl::StatusOr<std::vector<VarPtr>> items = Materialize(container);
      if (!items.ok()) return items.status();
      candidates = *std::move(items);
      break;
    }
    case VarKind::kNNModule: {
      // nn containers without a __contains__ of their own are searched by
      // iteration, as Python does; a Python __contains__ (ModuleDict's
      // `key in self._modules`) is traced, the very function guarded.
      if (std::optional<absl::StatusOr<VarPtr>> r = CallModuleSpecial(container, "__contains__", {item}, true)) {
        if (!r->ok()) return r->status();
        return Truthy(**r);
      }
      if (_PyType_Lookup(Py_TYPE(container->object.get()), python::FromString("__contains__").get()) != nullptr) {
        return Break(ir::GraphBreak::UNSUPPORTED_CALL,
                     absl::StrCat("'in' runs ", python::TypeName(container->object), ".__contains__"),
                     "a __contains__ that is not a Python function is not traced");
      }
      absl::StatusOr<std::vector<VarPtr>> items = Materialize(container);
      if (!items.ok()) return items.status();
      candidates = *std::move(items);
      break;
    }
    default:
      if (std::optional<absl::StatusOr<VarPtr>> r = CallUserSpecial(container, "__contains__", {item})) {
        if (!r->ok()) return r->status();
        return Truthy(**r);
      }
      return Break(ir::GraphBreak::OTHER, absl::StrCat("'in' over ", Describe(*container)),
                   "membership is traced for Python values and containers of trackers");
  }
  // x in seq: any(x is e or x == e for e in seq).
  for (size_t i = 0; i < candidates.size(); ++i) {
    const VarPtr& candidate = candidates[i];
    if (candidate->is_tensor() && item->is_tensor()) {
      NoteIdentity(candidate);
      NoteIdentity(item);
    }
    if (candidate == item ||
        (candidate->is_tensor() && item->is_tensor() && candidate->tensor_identity() == item->tensor_identity()) ||
        (!candidate->is_tensor() && !item->is_tensor() && candidate->object && item->object &&
         candidate->object.get() == item->object.get())) {
      return true;
    }
    absl::StatusOr<VarPtr> eq = Compare("==", item, candidate);
    if (!eq.ok()) return eq.status();
    if ((*eq)->kind != VarKind::kConstant) {
      if (computed != nullptr && capture_scalars_ && i + 1 == candidates.size() && (*eq)->is_tensor()) {
        // bool(e == x): the answer when nothing before it matched.
        absl::StatusOr<VarPtr> truth = TensorItem(*eq, "__bool__");
        if (!truth.ok()) return truth.status();
        *computed = *truth;
        return false;
      }
      return Break(ir::GraphBreak::DATA_DEPENDENT_BRANCH, "'in' over tensors",
                   "membership of tensors depends on their values");
    }
    absl::StatusOr<bool> truth = Truthy(*eq);
    if (!truth.ok()) return truth.status();
    if (*truth) return true;
  }
  return false;
}

absl::Status Translator::SetGradMode(bool enabled) {
  if (enabled == grad_enabled_) return absl::OkStatus();
  grad_enabled_ = enabled;
  // A switch right after a switch: nothing ran under the first, and the
  // graph is back in the mode before it (a switch is recorded only on a
  // change), so both go.
  if (graph_.DropLastCall("torch._C._set_grad_enabled")) return absl::OkStatus();
  ir::ValueMeta none;
  none.mutable_constant()->mutable_none();
  ir::Argument arg;
  arg.set_bool_value(enabled);
  graph_.AddCall(ir::Node::CALL_FUNCTION, "torch._C._set_grad_enabled", {arg}, {}, none,
                 CurrentLocation());
  return absl::OkStatus();
}

}  // namespace dynamo::trace
