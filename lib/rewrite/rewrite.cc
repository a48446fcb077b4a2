#include "lib/rewrite/rewrite.h"

#include <Python.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/bytecode/assembler.h"
#include "lib/bytecode/opcodes.h"
#include "lib/ops/meta.h"
#include "lib/python/error.h"

namespace dynamo::rewrite {
namespace {

namespace op = bytecode::generated;
using trace::kCallableFirst;
using bytecode::AsmInstruction;
using python::Object;
using trace::SideEffect;
using trace::Source;
using trace::SourcePtr;
using trace::StopState;
using trace::Var;
using trace::VarKind;
using trace::VarPtr;

absl::Status Unrebuildable(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat("cannot rebuild ", what, " in bytecode"));
}

// Instructions whose oparg is a localsplus slot (a plain local, a cell or
// a free variable: from 3.11 all index the same array).
bool IsSlotOp(int opcode) {
  const bytecode::OpcodeInfo& info = bytecode::Opcode(opcode);
  return info.Has(bytecode::kHasLocal) || info.Has(bytecode::kHasFree);
}
// 3.13's superinstructions hold two 4-bit slots in one oparg.
bool IsSlotPairOp(int opcode) {
  const absl::string_view name = bytecode::OpName(opcode);
  return name == "LOAD_FAST_LOAD_FAST" || name == "STORE_FAST_LOAD_FAST" || name == "STORE_FAST_STORE_FAST";
}

// What an instruction Python runs alone takes from the stack and leaves on
// it when it falls through (the instructions trace::CanRunAlone admits, by
// name: their numbers differ between versions).
std::pair<int, int> StackUse(const bytecode::Instruction& in) {
  const absl::string_view name = in.name;
  if (name == "CALL") return {in.arg + 2, 1};
  if (name == "CALL_KW") return {in.arg + 3, 1};  // 3.13: the names tuple on top
  if (name == "CALL_FUNCTION_EX") return {3 + (in.arg & 1), 1};
  if (name == "BINARY_OP" || name == "BINARY_SUBSCR" || name == "COMPARE_OP" || name == "CONTAINS_OP" ||
      name == "FORMAT_WITH_SPEC") {
    return {2, 1};
  }
  if (name == "BINARY_SLICE") return {3, 1};
  if (name == "STORE_SLICE") return {4, 0};
  if (name == "STORE_ATTR" || name == "DELETE_SUBSCR") return {2, 0};
  if (name == "STORE_SUBSCR") return {3, 0};
  if (name == "FORMAT_VALUE") return {1 + ((in.arg & 4) ? 1 : 0), 1};
  if (name == "UNPACK_SEQUENCE") return {1, in.arg};
  if (name == "BUILD_STRING") return {in.arg, 1};
  if (in.argument.kind == bytecode::ArgKind::kJump) return {1, 0};  // the conditional jumps
  return {1, 1};  // LOAD_ATTR, GET_ITER, UNARY_*, TO_BOOL, CONVERT_VALUE, FORMAT_SIMPLE
}

// The local slots an instruction reads or writes, in the order it does.
struct LocalUse {
  size_t slot;
  bool write;
};
std::vector<LocalUse> LocalUses(const bytecode::Instruction& in) {
  const absl::string_view name = in.name;
  // 3.13's pairs: the decoder's first (index) and second (index2) local.
  const size_t arg = static_cast<size_t>(in.arg), hi = static_cast<size_t>(in.argument.index),
               lo = static_cast<size_t>(in.argument.index2);
  // LOAD_FAST_AND_CLEAR (3.12's inlined comprehensions) reads the variable
  // it saves: the value comes back after the comprehension.
  if (name == "LOAD_FAST" || name == "LOAD_FAST_CHECK" || name == "LOAD_FAST_AND_CLEAR") return {{arg, false}};
  if (name == "STORE_FAST" || name == "DELETE_FAST") return {{arg, true}};
  if (name == "LOAD_FAST_LOAD_FAST") return {{hi, false}, {lo, false}};
  if (name == "STORE_FAST_STORE_FAST") return {{hi, true}, {lo, true}};
  if (name == "STORE_FAST_LOAD_FAST") return {{hi, true}, {lo, false}};
  return {};
}

// Which plain locals may be read at instruction `at` before being assigned
// (a backward liveness analysis over the code, exception handlers included):
// only those are handed to a resume function, so dead values neither travel
// nor get guarded.
std::vector<bool> LiveLocals(const bytecode::DecodedCode& code, size_t at) {
  const std::vector<bytecode::Instruction>& ins = code.instructions;
  const size_t n = ins.size(), nl = static_cast<size_t>(code.num_locals);
  auto index_of = [&](int offset) -> int {
    const bytecode::Instruction* t = code.At(offset);
    return t == nullptr ? -1 : static_cast<int>(t - ins.data());
  };
  std::vector<std::vector<int>> succ(n);
  for (size_t i = 0; i < n; ++i) {
    const bytecode::OpcodeInfo& info = bytecode::Opcode(ins[i].opcode);
    if (info.IsJump()) succ[i].push_back(index_of(ins[i].argument.jump_target));
    if (!info.Has(bytecode::kUnconditionalJump) && !info.Has(bytecode::kScopeExit) && i + 1 < n) {
      succ[i].push_back(static_cast<int>(i + 1));
    }
    for (const bytecode::ExceptionTableEntry& e : code.exception_table) {
      if (e.start <= ins[i].offset && ins[i].offset < e.end) succ[i].push_back(index_of(e.target));
    }
  }
  std::vector<std::vector<bool>> live(n + 1, std::vector<bool>(nl, false));
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = n; k-- > 0;) {
      std::vector<bool> out(nl, false);
      for (int j : succ[k]) {
        if (j < 0) continue;
        for (size_t v = 0; v < nl; ++v) out[v] = out[v] || live[static_cast<size_t>(j)][v];
      }
      // Backwards through the instruction's own reads and writes.
      const std::vector<LocalUse> uses = LocalUses(ins[k]);
      for (auto u = uses.rbegin(); u != uses.rend(); ++u) {
        if (u->slot < nl) out[u->slot] = !u->write;
      }
      if (out != live[k]) {
        live[k] = std::move(out);
        changed = true;
      }
    }
  }
  return live[at];
}

// The frame layout of the original code: which slots are plain locals and
// which hold cells (cell variables, arguments captured by closures, free
// variables).
struct Layout {
  std::vector<std::string> names;  // localsplus
  size_t num_locals = 0;           // len(co_varnames)
  std::vector<bool> is_cell;

  static Layout Of(const bytecode::DecodedCode& code) {
    Layout l;
    l.names = code.localsplus;
    l.num_locals = static_cast<size_t>(code.num_locals);
    l.is_cell.assign(l.names.size(), false);
    for (size_t i = l.num_locals; i < l.names.size(); ++i) l.is_cell[i] = true;
    for (const bytecode::Instruction& in : code.instructions) {
      if (in.opcode == op::kMakeCell) l.is_cell[static_cast<size_t>(in.arg)] = true;
    }
    return l;
  }
  int Slot(const std::string& name) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
  std::vector<int> Cells() const {
    std::vector<int> out;
    for (size_t i = 0; i < names.size(); ++i) {
      if (is_cell[i]) out.push_back(static_cast<int>(i));
    }
    return out;
  }
};

// Builds the rewritten code's instructions and its constant and name tables.
// Temporaries are extra co_varnames; instructions naming a cell slot are
// fixed up at the end, when the number of temporaries is known.
class Emitter {
 public:
  Emitter(const bytecode::DecodedCode& code, const Layout& layout, const trace::TraceResult& r,
          bytecode::Location location)
      : code_(code), layout_(layout), result_(r), location_(location) {
    consts_ = python::AsVector(code.consts).value_or(std::vector<Object>{});
    names_ = code.names;
  }

  void Emit(int opcode, int arg = 0, int target = -1) {
    AsmInstruction in;
    in.opcode = opcode;
    in.arg = arg;
    in.target = target;
    in.location = location_;
    ins_.push_back(in);
  }
  // An instruction whose arg is an original localsplus slot.
  void EmitSlot(int opcode, int slot) {
    if (static_cast<size_t>(slot) >= layout_.num_locals) fixups_.push_back(ins_.size());
    Emit(opcode, slot);
  }
  int Const(const Object& o) {
    for (size_t i = 0; i < consts_.size(); ++i) {
      if (consts_[i].get() == o.get()) return static_cast<int>(i);
    }
    consts_.push_back(o);
    return static_cast<int>(consts_.size() - 1);
  }
  void LoadConst(const Object& o) { Emit(op::kLoadConst, Const(o)); }
  int Name(const std::string& n) {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == n) return static_cast<int>(i);
    }
    names_.push_back(n);
    return static_cast<int>(names_.size() - 1);
  }
  int NewTemp() {
    temps_.push_back(absl::StrCat("___tmp", temps_.size()));
    return static_cast<int>(layout_.num_locals + temps_.size() - 1);
  }
  // A call's NULL slot: below the callable up to 3.12 (BeginCall, before
  // the callable is loaded), above it from 3.13 (CalleeLoaded, after).
  void BeginCall() {
    if (!kCallableFirst) Emit(op::kPushNull);
  }
  void CalleeLoaded() {
    if (kCallableFirst) Emit(op::kPushNull);
  }
  void Call(int argc) {
#ifdef DYNAMO_HAS_PRECALL
    Emit(op::kPrecall, argc);
#endif
    Emit(op::kCall, argc);
  }
  // A cell itself (for a closure tuple): LOAD_CLOSURE up to 3.12, which
  // 3.13 folded into LOAD_FAST.
  void LoadCell(int slot) {
#ifdef DYNAMO_HAS_LOAD_CLOSURE
    EmitSlot(op::kLoadClosure, slot);
#else
    EmitSlot(op::kLoadFast, slot);
#endif
  }
  // A call whose last len(names) arguments are by keyword.
  void CallKw(int argc, const Object& names) {
#ifdef DYNAMO_HAS_CALL_KW
    LoadConst(names);
    Emit(op::kCallKw, argc);
#else
    Emit(op::kKwNames, Const(names));
    Call(argc);
#endif
  }
  // An instruction whose argument is a co_names index, shifted past the
  // flag bits the target keeps below it (3.12+ LOAD_ATTR's method bit).
  void EmitName(int opcode, int name, int flags = 0) {
    Emit(opcode, (name << bytecode::Opcode(opcode).name_shift) | flags);
  }
  void LoadGlobalCallable(const std::string& name) { EmitName(op::kLoadGlobal, Name(name), 1); }
  // `import a.b.c` then .b.c: the module object, whatever the globals hold.
  void ImportPath(const std::vector<std::string>& module, const std::vector<std::string>& attrs) {
    LoadConst(python::FromLong(0));
    LoadConst(python::None());
    Emit(op::kImportName, Name(absl::StrJoin(module, ".")));
    for (size_t i = 1; i < module.size(); ++i) EmitName(op::kLoadAttr, Name(module[i]));
    for (const std::string& a : attrs) EmitName(op::kLoadAttr, Name(a));
  }

  absl::Status LoadSource(const SourcePtr& s) {
    switch (s->kind()) {
      case Source::Kind::kLocal: {
        int slot = layout_.Slot(s->name());
        if (slot < 0) return Unrebuildable(s->ToString());
        EmitSlot(layout_.is_cell[static_cast<size_t>(slot)] ? op::kLoadDeref : op::kLoadFast, slot);
        return absl::OkStatus();
      }
      case Source::Kind::kGlobal:
        EmitName(op::kLoadGlobal, Name(s->name()));
        return absl::OkStatus();
      case Source::Kind::kModule:
        ImportPath({"sys"}, {"modules"});
        LoadConst(python::FromString(s->name()));
        Emit(op::kBinarySubscr);
        return absl::OkStatus();
      case Source::Kind::kAttr:
        if (absl::Status st = LoadSource(s->base()); !st.ok()) return st;
        EmitName(op::kLoadAttr, Name(s->name()));
        return absl::OkStatus();
      case Source::Kind::kItem:
        if (absl::Status st = LoadSource(s->base()); !st.ok()) return st;
        LoadConst(s->is_index() ? python::FromLong(s->index()) : python::FromString(s->name()));
        Emit(op::kBinarySubscr);
        return absl::OkStatus();
      case Source::Kind::kDictEntry:
        // list(d.keys())[i] / list(d.values())[i], list from builtins (the
        // frame's globals may shadow it).
        BeginCall();
        ImportPath({"builtins"}, {"list"});
        CalleeLoaded();
        BeginCall();
        if (absl::Status st = LoadSource(s->base()); !st.ok()) return st;
        EmitName(op::kLoadAttr, Name(s->name()));
        CalleeLoaded();
        Call(0);
        Call(1);
        LoadConst(python::FromLong(s->index()));
        Emit(op::kBinarySubscr);
        return absl::OkStatus();
      case Source::Kind::kCall:
        BeginCall();
        if (absl::Status st = LoadSource(s->base()); !st.ok()) return st;
        EmitName(op::kLoadAttr, Name(s->name()));
        CalleeLoaded();
        Call(0);
        return absl::OkStatus();
    }
    return Unrebuildable(s->ToString());
  }

  // Objects no import path names are read from globals named
  // "<prefix>_obj_<k>", collected in `out` (live captures only).
  void AllowLiveObjects(std::string prefix, std::vector<std::pair<std::string, Object>>* out) {
    live_prefix_ = std::move(prefix);
    live_objects_ = out;
  }

  // A real object with no source: through its import path, checked to name
  // the very object (functions, classes, modules, dtypes); else, in a live
  // capture, from a global holding it.
  absl::Status LoadObject(const Object& obj) {
    absl::Status by_path = LoadObjectByPath(obj);
    // Only classes: the code hands out the one object the trace saw on every
    // call, which for a mutable instance would be shared between calls.
    if (by_path.ok() || live_objects_ == nullptr || by_path.code() != absl::StatusCode::kFailedPrecondition ||
        !PyType_Check(obj.get())) {
      return by_path;
    }
    std::string name;
    for (const auto& [n, o] : *live_objects_) {
      if (o.get() == obj.get()) name = n;
    }
    if (name.empty()) {
      name = absl::StrCat(live_prefix_, "_obj_", live_objects_->size());
      live_objects_->emplace_back(name, obj);
    }
    EmitName(op::kLoadGlobal, Name(name));
    return absl::OkStatus();
  }

  absl::Status LoadObjectByPath(const Object& obj) {
    std::string module, qualname;
    if (PyModule_Check(obj.get())) {
      const char* n = PyModule_GetName(obj.get());
      if (n == nullptr) {
        python::ClearError();
        return Unrebuildable("a module without a name");
      }
      module = n;
    } else {
      Object m = Object::Steal(PyObject_GetAttrString(obj.get(), "__module__"));
      Object q = Object::Steal(PyObject_GetAttrString(obj.get(), "__qualname__"));
      python::ClearError();
      absl::StatusOr<std::string> ms = m ? python::AsString(m) : absl::NotFoundError("");
      absl::StatusOr<std::string> qs = q ? python::AsString(q) : absl::NotFoundError("");
      if (ms.ok() && qs.ok()) {
        module = *ms;
        qualname = *qs;
      } else {
        // torch.float32 and friends: str() is their path.
        Object str = Object::Steal(PyObject_Str(obj.get()));
        absl::StatusOr<std::string> path = str ? python::AsString(str) : absl::NotFoundError("");
        python::ClearError();
        if (!path.ok() || path->rfind("torch.", 0) != 0) return Unrebuildable(python::TypeName(obj));
        std::vector<std::string> parts = absl::StrSplit(*path, '.');
        module = parts[0];
        qualname = path->substr(module.size() + 1);
      }
    }
    if (absl::StrContains(qualname, "<")) return Unrebuildable(absl::StrCat(module, ".", qualname));
    // Confirm the path names this object before writing it into code.
    absl::StatusOr<Object> mod = python::Import(module);
    if (!mod.ok()) return Unrebuildable(module);
    Object value = *mod;
    std::vector<std::string> attrs;
    if (!qualname.empty()) attrs = absl::StrSplit(qualname, '.');
    for (const std::string& a : attrs) {
      value = Object::Steal(PyObject_GetAttrString(value.get(), a.c_str()));
      if (!value) {
        python::ClearError();
        return Unrebuildable(absl::StrCat(module, ".", qualname));
      }
    }
    if (value.get() != obj.get()) return Unrebuildable(absl::StrCat(module, ".", qualname));
    ImportPath(absl::StrSplit(module, '.'), attrs);
    return absl::OkStatus();
  }

  // `v` made again by calling `callee` on v->items, the last keys.size() of
  // them by the names in v->keys (a generator the trace has not started, a
  // torch.nn module it constructed); kept, as Load keeps what it builds.
  absl::Status CallAgain(const VarPtr& v, const VarPtr& callee) {
    BeginCall();
    if (absl::Status s = Load(callee); !s.ok()) return s;
    CalleeLoaded();
    for (const VarPtr& item : v->items) {
      if (absl::Status s = Load(item); !s.ok()) return s;
    }
    if (!v->keys.empty()) {
      std::vector<Object> names;
      for (const VarPtr& k : v->keys) names.push_back(k->object);
      CallKw(static_cast<int>(v->items.size()), python::MakeTuple(names));
    } else {
      Call(static_cast<int>(v->items.size()));
    }
    return Remember(v);
  }

  // Pushes the value a tracker stands for. Mutable values made during the
  // trace are built once and kept in a temporary, so every reference to
  // them (stack, locals, containers) is to the same object.
  absl::Status Load(const VarPtr& v) {
    if (auto it = memo_.find(v.get()); it != memo_.end()) {
      Emit(op::kLoadFast, it->second);
      return absl::OkStatus();
    }
    switch (v->kind) {
      case VarKind::kNull:
        Emit(op::kPushNull);
        return absl::OkStatus();
      case VarKind::kConstant:
        if (absl::string_view(Py_TYPE(v->object.get())->tp_name) == "torch.layout") {
          // torch.strided by its name: a code object cannot hold (marshal) it.
          Object text = Object::Steal(PyObject_Str(v->object.get()));
          absl::StatusOr<std::string> name = text ? python::AsString(text) : python::FetchError("str(layout)");
          if (!name.ok()) return name.status();
          ImportPath({"torch"}, {std::string(absl::StripPrefix(*name, "torch."))});
          return absl::OkStatus();
        }
        LoadConst(v->object);
        return absl::OkStatus();
      case VarKind::kScalar:  // a number read from a tensor: the graph returns it
      case VarKind::kSymInt:  // a size int: an input's, read again, or one the graph computed and returns
        if (v->source) return LoadSource(v->source);
        for (size_t i = 0; i < result_.output_nodes.size(); ++i) {
          if (result_.output_nodes[i] != v->node) continue;
          Emit(op::kLoadFast, graph_out_);
          LoadConst(python::FromLong(static_cast<int64_t>(i)));
          Emit(op::kBinarySubscr);
          return absl::OkStatus();
        }
        return Unrebuildable(v->kind == VarKind::kScalar ? Describe(*v) : absl::StrCat("the size ", v->sym.ToString()));
      case VarKind::kTensor: {
        // An array read from the frame is that very object.
        if (v->is_ndarray && v->source) return LoadSource(v->source);
        for (size_t i = 0; i < result_.output_nodes.size(); ++i) {
          if (result_.output_nodes[i] != v->node) continue;
          // An array the graph computed: numpy's view of the output tensor.
          if (v->is_ndarray) {
            BeginCall();
            ImportPath({"dynamo", "numpy_bridge"}, {v->numpy_scalar ? "to_numpy_scalar" : "to_numpy"});
            CalleeLoaded();
          }
          Emit(op::kLoadFast, graph_out_);
          LoadConst(python::FromLong(static_cast<int64_t>(i)));
          Emit(op::kBinarySubscr);
          if (v->is_ndarray) {  // once: every reference is the same array
            Call(1);
            return Remember(v);
          }
          return absl::OkStatus();
        }
        // x.numpy() / torch.from_numpy(a) of an input: the same conversion
        // of the input, once.
        if (v->self && v->self->is_tensor() && v->self->is_ndarray != v->is_ndarray) {
          BeginCall();
          if (v->is_ndarray) {
            ImportPath({"dynamo", "numpy_bridge"}, {"to_numpy"});
          } else {
            ImportPath({"torch"}, {"from_numpy"});  // never moved by torch.set_default_device
          }
          CalleeLoaded();
          if (absl::Status s = Load(v->self); !s.ok()) return s;
          Call(1);
          return Remember(v);
        }
        if (v->source) return LoadSource(v->source);
        return Unrebuildable(absl::StrCat("the tensor ", v->node));
      }
      case VarKind::kTuple: {
        if (v->source && v->object) return LoadSource(v->source);
        if (v->user_class) {  // a named tuple made by calling its class: tuple.__new__(cls, items)
          // tuple is cls.__mro__[-2] (the translator checked the MRO ends
          // tuple, object): no import, so frames with restricted builtins
          // (a named tuple's exec'd __new__) can run it.
          BeginCall();
          if (absl::Status s = LoadMroEntry(v->user_class, -2, "__new__"); !s.ok()) return s;
          CalleeLoaded();
          if (absl::Status s = Load(v->user_class); !s.ok()) return s;
          for (const VarPtr& item : v->items) {
            if (absl::Status s = Load(item); !s.ok()) return s;
          }
          Emit(op::kBuildTuple, static_cast<int>(v->items.size()));
          Call(2);
          return absl::OkStatus();
        }
        if (!v->fields.empty()) return Unrebuildable("a named tuple made during the trace");
        if (v->is_size) {
          BeginCall();
          ImportPath({"torch"}, {"Size"});
          CalleeLoaded();
        }
        for (const VarPtr& item : v->items) {
          if (absl::Status s = Load(item); !s.ok()) return s;
        }
        Emit(op::kBuildTuple, static_cast<int>(v->items.size()));
        if (v->is_size) Call(1);
        return absl::OkStatus();
      }
      case VarKind::kList:
      case VarKind::kDict:
      case VarKind::kIterator: {
        if (v->source && v->object) return LoadSource(v->source);
        if (v->kind == VarKind::kIterator && v->self && v->self->kind == VarKind::kList) {
          // A list's iterator reads the list live: iter(list) again, which
          // is the same iterator only while it has not advanced.
          if (v->position != 0) return Unrebuildable("a list iterator the trace has advanced");
          if (absl::Status s = Load(v->self); !s.ok()) return s;
          Emit(op::kGetIter);
          return Remember(v);
        }
        if (v->kind == VarKind::kDict && v->instance_dict) return LoadUserDict(v);
        if (v->kind == VarKind::kDict) {
          // OrderedDict({...}) / defaultdict(factory, {...}): the same
          // items, in order.
          if (v->container_class) {
            BeginCall();
            if (absl::Status s = LoadObject(v->container_class); !s.ok()) return s;
            CalleeLoaded();
            if (v->default_factory) {
              if (absl::Status s = Load(v->default_factory); !s.ok()) return s;
            }
          }
          for (size_t i = 0; i < v->items.size(); ++i) {
            if (absl::Status s = Load(v->keys[i]); !s.ok()) return s;
            if (absl::Status s = Load(v->items[i]); !s.ok()) return s;
          }
          Emit(op::kBuildMap, static_cast<int>(v->items.size()));
          if (v->container_class) Call(v->default_factory ? 2 : 1);
        } else if (v->kind == VarKind::kList && v->container_class) {  // deque([...], maxlen)
          BeginCall();
          if (absl::Status s = LoadObject(v->container_class); !s.ok()) return s;
          CalleeLoaded();
          for (const VarPtr& item : v->items) {
            if (absl::Status s = Load(item); !s.ok()) return s;
          }
          Emit(op::kBuildList, static_cast<int>(v->items.size()));
          LoadConst(v->maxlen < 0 ? python::None() : python::FromLong(v->maxlen));
          Call(2);
        } else {
          size_t first = v->kind == VarKind::kIterator ? v->position : 0;
          for (size_t i = first; i < v->items.size(); ++i) {
            if (absl::Status s = Load(v->items[i]); !s.ok()) return s;
          }
          int n = static_cast<int>(v->items.size() - first);
          Emit(v->kind == VarKind::kList ? op::kBuildList : op::kBuildTuple, n);
          if (v->kind == VarKind::kIterator) Emit(op::kGetIter);
        }
        return Remember(v);
      }
      case VarKind::kSet: {  // a set of trackers: built again, in Python's own order
        const bool frozen = v->name == "frozenset";
        if (frozen) {
          BeginCall();
          ImportPath({"builtins"}, {"frozenset"});
          CalleeLoaded();
        }
        for (const VarPtr& item : v->items) {
          if (absl::Status s = Load(item); !s.ok()) return s;
        }
        Emit(op::kBuildSet, static_cast<int>(v->items.size()));
        if (frozen) Call(1);
        return Remember(v);
      }
      case VarKind::kUserObject: {
        // An instance the trace made: object.__new__(cls) (its class's own
        // __new__, checked by the translator), then one store per attribute
        // it holds: STORE_ATTR where the class's __setattr__ is object's,
        // object.__setattr__(t, name, value) where it has its own (a frozen
        // dataclass's, which raises). Kept in a temporary first, so
        // attributes may refer back to it.
        absl::StatusOr<int> made = NewInstance(v, -1);  // object.__new__
        if (!made.ok()) return made.status();
        const int t = *made;
        PyObject* cls = v->user_class->object.get();
        Object object_setattr = Object::Steal(
            PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyBaseObject_Type), "__setattr__"));
        Object own_setattr = Object::Steal(PyObject_GetAttrString(cls, "__setattr__"));
        if (!object_setattr || !own_setattr) {
          python::ClearError();
          return Unrebuildable("an instance whose class has no readable __setattr__");
        }
        const bool generic = own_setattr.get() != object_setattr.get();
        for (size_t i = 0; i < v->items.size(); ++i) {
          absl::StatusOr<std::string> name = python::AsString(v->keys[i]->object);
          if (!name.ok()) return Unrebuildable("an attribute with a non-string name");
          if (generic) {
            BeginCall();
            if (absl::Status s = LoadMroEntry(v->user_class, -1, "__setattr__"); !s.ok()) return s;
            CalleeLoaded();
            Emit(op::kLoadFast, t);
            LoadConst(python::FromString(*name));
            if (absl::Status s = Load(v->items[i]); !s.ok()) return s;
            Call(3);
            Emit(op::kPopTop);
            continue;
          }
          if (absl::Status s = Load(v->items[i]); !s.ok()) return s;
          Emit(op::kLoadFast, t);
          Emit(op::kStoreAttr, Name(*name));
        }
        Emit(op::kLoadFast, t);
        return absl::OkStatus();
      }
      case VarKind::kNNModule:
        // A torch.nn module the trace constructed (no weights): made again by
        // calling its class on the same constant arguments.
        if (!v->source && v->user_class) return CallAgain(v, v->user_class);
        if (v->source) return LoadSource(v->source);
        if (v->object) return LoadObject(v->object);
        return Unrebuildable(trace::Describe(*v));
      case VarKind::kGenerator: {
        // A generator expression the trace made but never resumed: calling
        // its function again on the same arguments makes the same generator.
        // One it has resumed holds a frame midway, which bytecode cannot
        // rebuild.
        // itertools' lazy iterators are rebuilt so too, their last
        // `keys.size()` arguments given by keyword.
        if (v->position != 0 || !v->self) return Unrebuildable("a generator the trace has started");
        return CallAgain(v, v->self);
      }
      case VarKind::kPartial: {
        if (v->source) return LoadSource(v->source);
        // functools.partial(func, *args, **keywords).
        BeginCall();
        ImportPath({"functools"}, {"partial"});
        CalleeLoaded();
        if (absl::Status s = Load(v->self); !s.ok()) return s;
        for (const VarPtr& item : v->defaults->items) {
          if (absl::Status s = Load(item); !s.ok()) return s;
        }
        for (const VarPtr& value : v->kwdefaults->items) {
          if (absl::Status s = Load(value); !s.ok()) return s;
        }
        const int argc = static_cast<int>(1 + v->defaults->items.size() + v->kwdefaults->items.size());
        if (v->kwdefaults->keys.empty()) {
          Call(argc);
        } else {
          std::vector<Object> names;
          for (const VarPtr& k : v->kwdefaults->keys) names.push_back(k->object);
          CallKw(argc, python::MakeTuple(names));
        }
        return Remember(v);
      }
      case VarKind::kSlice:
        for (const VarPtr& item : v->items) {
          if (absl::Status s = Load(item); !s.ok()) return s;
        }
        Emit(op::kBuildSlice, static_cast<int>(v->items.size()));
        return absl::OkStatus();
      case VarKind::kRange:
        BeginCall();
        ImportPath({"builtins"}, {"range"});
        CalleeLoaded();
        LoadConst(python::FromLong(v->start));
        LoadConst(python::FromLong(v->stop));
        LoadConst(python::FromLong(v->step));
        Call(3);
        return absl::OkStatus();
      case VarKind::kDevice:
        if (v->source) return LoadSource(v->source);
        BeginCall();
        ImportPath({"torch"}, {"device"});
        CalleeLoaded();
        LoadConst(python::FromString(ops::DeviceName(v->device)));  // "cuda:0", as torch.device takes it
        Call(1);
        return absl::OkStatus();
      case VarKind::kDictView:  // d.keys(), taken again from the rebuilt dict
        BeginCall();
        if (absl::Status s = Load(v->self); !s.ok()) return s;
        EmitName(op::kLoadAttr, Name(v->name));
        CalleeLoaded();
        Call(0);
        return absl::OkStatus();
      case VarKind::kGradMode:
        // torch.set_grad_enabled(mode)'s object restores the mode from before
        // it was made, which no_grad() / enable_grad() would not.
        if (v->grad_restore) return Unrebuildable("a torch.set_grad_enabled object");
        if (v->value) return Unrebuildable("a function decorated with torch.no_grad() or enable_grad() in the trace");
        BeginCall();
        ImportPath({"torch"}, {v->grad_enabled ? "enable_grad" : "no_grad"});
        CalleeLoaded();
        Call(0);
        return absl::OkStatus();
      case VarKind::kAutocast:
        if (v->source) return LoadSource(v->source);
        return NewAutocast(v);
      case VarKind::kMethod:
        if (trace::IsReenteredExit(v)) return Unrebuildable("the exit of a with block away from its stack slot");
        if (absl::Status s = Load(v->self); !s.ok()) return s;
        EmitName(op::kLoadAttr, Name(v->name));
        return absl::OkStatus();
      case VarKind::kFunction:
        if (v->object && PyCode_Check(v->object.get())) return MakeFunction(v);
        if (v->self) {  // a method bound to a tracked object
          Object name = Object::Steal(PyObject_GetAttrString(v->object.get(), "__name__"));
          python::ClearError();
          absl::StatusOr<std::string> n = name ? python::AsString(name) : absl::NotFoundError("");
          if (!n.ok()) return Unrebuildable("a bound method");
          // self.name is this method unless it was reached another way
          // (super().__init__ is not self.__init__): then the very function
          // is bound to self, types.MethodType(function, self).
          bool by_name = true;
          if (v->self->object) {
            Object bound = Object::Steal(PyObject_GetAttrString(v->self->object.get(), n->c_str()));
            by_name = bound && PyMethod_Check(bound.get()) && PyMethod_Function(bound.get()) == v->object.get();
            python::ClearError();
          }
          if (!by_name) {
            BeginCall();
            ImportPath({"types"}, {"MethodType"});
            CalleeLoaded();
            if (absl::Status s = v->source ? LoadSource(v->source) : LoadObject(v->object); !s.ok()) return s;
            if (absl::Status s = Load(v->self); !s.ok()) return s;
            Call(2);
            return absl::OkStatus();
          }
          if (absl::Status s = Load(v->self); !s.ok()) return s;
          EmitName(op::kLoadAttr, Name(*n));
          return absl::OkStatus();
        }
        [[fallthrough]];
      default:
        if (v->source) return LoadSource(v->source);
        if (v->kind == VarKind::kBuiltin) {
          ImportPath({"builtins"}, {v->name});
          return absl::OkStatus();
        }
        if (v->object) return LoadObject(v->object);
        return Unrebuildable(trace::Describe(*v));
    }
  }

  // An instance of a Python dict subclass the trace made: its C base's
  // __new__ (no __init__ runs again), then that base's __setitem__ per item
  // and object.__setattr__ per attribute, bypassing the class's overrides,
  // which already ran in the trace. Kept in a temporary first, so items
  // may refer back to it.
  absl::Status LoadUserDict(const VarPtr& v) {
    PyObject* mro = reinterpret_cast<PyTypeObject*>(v->user_class->object.get())->tp_mro;
    const Py_ssize_t n = PyTuple_GET_SIZE(mro);
    Py_ssize_t i = 0;
    while (i < n && (reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))->tp_flags & Py_TPFLAGS_HEAPTYPE)) ++i;
    const int base = static_cast<int>(i - n);  // -2: dict, -3: OrderedDict
    absl::StatusOr<int> t = NewInstance(v, base);
    if (!t.ok()) return t.status();
    auto store = [&](int mro_index, const char* slot, const VarPtr& key, const VarPtr& value) -> absl::Status {
      BeginCall();
      if (absl::Status s = LoadMroEntry(v->user_class, mro_index, slot); !s.ok()) return s;
      CalleeLoaded();
      Emit(op::kLoadFast, *t);
      if (absl::Status s = Load(key); !s.ok()) return s;
      if (absl::Status s = Load(value); !s.ok()) return s;
      Call(3);
      Emit(op::kPopTop);
      return absl::OkStatus();
    };
    for (size_t k = 0; k < v->items.size(); ++k) {
      if (absl::Status s = store(base, "__setitem__", v->keys[k], v->items[k]); !s.ok()) return s;
    }
    const VarPtr& attrs = v->instance_dict;
    for (size_t k = 0; k < attrs->items.size(); ++k) {
      if (absl::Status s = store(-1, "__setattr__", attrs->keys[k], attrs->items[k]); !s.ok()) return s;
    }
    Emit(op::kLoadFast, *t);
    return absl::OkStatus();
  }

  // cls.__mro__[index].__new__(cls) for the object v, kept in a new
  // temporary (v's from now on, so its state may refer back to it): the
  // instance before that state is restored.
  absl::StatusOr<int> NewInstance(const VarPtr& v, int mro_index) {
    BeginCall();
    if (absl::Status s = LoadMroEntry(v->user_class, mro_index, "__new__"); !s.ok()) return s;
    CalleeLoaded();
    if (absl::Status s = Load(v->user_class); !s.ok()) return s;
    Call(1);
    int t = NewTemp();
    Emit(op::kStoreFast, t);
    memo_[v.get()] = t;
    return t;
  }

  // cls.__mro__[index].attr, for the builtin bases of a class the trace
  // instantiated, read without importing builtins.
  absl::Status LoadMroEntry(const VarPtr& cls, int index, const std::string& attr) {
    if (absl::Status s = Load(cls); !s.ok()) return s;
    EmitName(op::kLoadAttr, Name("__mro__"));
    LoadConst(python::FromLong(index));
    Emit(op::kBinarySubscr);
    EmitName(op::kLoadAttr, Name(attr));
    return absl::OkStatus();
  }

  // Evaluates a value now into a temporary that later Loads reuse: values
  // are read before any side effect is replayed, as the trace read them.
  absl::Status Keep(const VarPtr& v) {
    // A with block's exit is entered at its turn (EnterGradMode), not early.
    if (!v || v->kind == VarKind::kNull || v->kind == VarKind::kConstant || memo_.contains(v.get()) ||
        trace::IsReenteredExit(v)) {
      return absl::OkStatus();
    }
    if (absl::Status s = Load(v); !s.ok()) return s;
    if (memo_.contains(v.get())) {  // Load kept it itself
      Emit(op::kPopTop);
      return absl::OkStatus();
    }
    int t = NewTemp();
    Emit(op::kStoreFast, t);
    memo_[v.get()] = t;
    return absl::OkStatus();
  }

  absl::Status Remember(const VarPtr& v) {
    int t = NewTemp();
    Emit(op::kStoreFast, t);
    Emit(op::kLoadFast, t);
    memo_[v.get()] = t;
    return absl::OkStatus();
  }

  // A cell of a function the trace inlined (gone when the graph runs), which
  // a closure made in the trace holds: a new cell with its contents, one per
  // tracker, so closures sharing it share it still.
  absl::Status LoadInlinedCell(const VarPtr& cell) {
    if (auto it = memo_.find(cell.get()); it != memo_.end()) {
      Emit(op::kLoadFast, it->second);
      return absl::OkStatus();
    }
    if (cell->kind != VarKind::kCell || cell->source) return Unrebuildable("a closure over another function's cells");
    BeginCall();
    ImportPath({"types"}, {"CellType"});
    CalleeLoaded();
    if (cell->value) {
      if (absl::Status s = Load(cell->value); !s.ok()) return s;
    }
    Call(cell->value ? 1 : 0);
    return Remember(cell);
  }

  // A function made during the trace (a lambda, a nested def): MAKE_FUNCTION
  // over its code with its defaults and the cells it closes over.
  absl::Status MakeFunction(const VarPtr& v) {
    if (v->globals && v->globals.get() != top_globals_) return Unrebuildable("a function of another module");
    int flags = 0;
    if (v->defaults) {
      if (absl::Status s = Load(v->defaults); !s.ok()) return s;
      flags |= 0x01;
    }
    if (v->kwdefaults) {
      if (absl::Status s = Load(v->kwdefaults); !s.ok()) return s;
      flags |= 0x02;
    }
    if (!v->closure.empty()) {
      for (const VarPtr& cell : v->closure) {
        int slot = -1;
        for (size_t i = 0; i < stop_locals_->size(); ++i) {
          if ((*stop_locals_)[i] == cell) slot = static_cast<int>(i);
        }
        if (slot >= 0) {
          LoadCell(slot);
        } else if (absl::Status s = LoadInlinedCell(cell); !s.ok()) {
          return s;
        }
      }
      Emit(op::kBuildTuple, static_cast<int>(v->closure.size()));
      flags |= 0x08;
    }
    LoadConst(v->object);
#ifdef DYNAMO_HAS_SET_FUNCTION_ATTRIBUTE
    // 3.13: a bare function, then each attribute from the top of the stack
    // down (closure, annotations, keyword defaults, defaults).
    Emit(op::kMakeFunction);
    for (int flag : {0x08, 0x04, 0x02, 0x01}) {
      if (flags & flag) Emit(op::kSetFunctionAttribute, flag);
    }
#else
    Emit(op::kMakeFunction, flags);
#endif
    if (absl::Status s = Remember(v); !s.ok()) return s;
    // Attributes the trace set on it (functools.wraps: __name__, __doc__,
    // __wrapped__, ...), each fn.name = value, after it is remembered so a
    // value may refer back to it.
    const int t = memo_[v.get()];
    auto store = [&](const VarPtr& key, const VarPtr& value) -> absl::Status {
      absl::StatusOr<std::string> name = python::AsString(key->object);
      if (!name.ok()) return Unrebuildable("a function attribute without a str name");
      if (absl::Status s = Load(value); !s.ok()) return s;
      Emit(op::kLoadFast, t);
      Emit(op::kStoreAttr, Name(*name));
      return absl::OkStatus();
    };
    for (size_t i = 0; i < v->keys.size(); ++i) {
      if (absl::Status s = store(v->keys[i], v->items[i]); !s.ok()) return s;
    }
    if (v->instance_dict) {
      for (size_t i = 0; i < v->instance_dict->keys.size(); ++i) {
        if (absl::Status s = store(v->instance_dict->keys[i], v->instance_dict->items[i]); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  // A `with torch.no_grad():` block the trace stopped inside, entered again
  // for real: the mode its __enter__ replaced is set, then the manager's
  // __enter__ runs (BEFORE_WITH), and its bound __exit__ is kept in a temp
  // for the stack slot the resume function takes.
  int EnterGradMode(const VarPtr& exit) {
    SetGradEnabled(exit->grad_enabled);
    // The block's manager sets exit->self->grad_enabled; entered from the
    // mode it restores, no_grad() / enable_grad() does what it did (also
    // for a set_grad_enabled(mode) block).
    BeginCall();
    ImportPath({"torch"}, {exit->self->grad_enabled ? "enable_grad" : "no_grad"});
    CalleeLoaded();
    Call(0);
    return Entered(exit);
  }
  // The manager on the stack entered (BEFORE_WITH), its bound __exit__ kept
  // in a temp that stands for `exit`'s stack slot.
  int Entered(const VarPtr& exit) {
    Emit(op::kBeforeWith);
    Emit(op::kPopTop);
    int t = NewTemp();
    Emit(op::kStoreFast, t);
    memo_[exit.get()] = t;
    return t;
  }
  // A `with torch.autocast(...):` block the trace stopped inside, entered
  // again for real (the graph left it at its end): a new torch.amp.autocast
  // of the same device, dtype and switches, its __enter__ run, and its bound
  // __exit__ kept in a temp for the stack slot the resume function takes.
  absl::StatusOr<int> EnterAutocast(const VarPtr& exit) {
    if (absl::Status s = NewAutocast(exit->self); !s.ok()) return s;
    return Entered(exit);
  }
  // torch.amp.autocast_mode.autocast(device_type, dtype, enabled, cache_enabled)
  // as `v`'s object has them (the spellings of torch.cpu.amp / torch.cuda.amp
  // made the same object, less their deprecation warnings).
  absl::Status NewAutocast(const VarPtr& v) {
    PyObject* o = v->object.get();
    Object device = Object::Steal(PyObject_GetAttrString(o, "device"));
    Object dtype = Object::Steal(PyObject_GetAttrString(o, "fast_dtype"));
    Object enabled = Object::Steal(PyObject_GetAttrString(o, "_enabled"));
    Object cache = Object::Steal(PyObject_GetAttrString(o, "_cache_enabled"));
    python::ClearError();
    if (!device || !PyUnicode_Check(device.get()) || !dtype || !enabled || !PyBool_Check(enabled.get()) || !cache ||
        !PyBool_Check(cache.get())) {
      return Unrebuildable("a torch.autocast object without its device, dtype or switches");
    }
    BeginCall();
    ImportPath({"torch", "amp", "autocast_mode"}, {"autocast"});
    CalleeLoaded();
    LoadConst(device);
    if (absl::Status s = LoadObject(dtype); !s.ok()) return s;
    LoadConst(enabled);
    LoadConst(cache);
    Call(4);
    return absl::OkStatus();
  }
  void SetGradEnabled(bool enabled) {
    BeginCall();
    ImportPath({"torch", "_C"}, {"_set_grad_enabled"});
    CalleeLoaded();
    LoadConst(python::FromBool(enabled));
    Call(1);
    Emit(op::kPopTop);
  }
  // Instructions [start, end) handled at `handler` (indexes into
  // instructions(), with nothing of theirs on the stack).
  void Protect(int start, int end, int handler) {
    exception_table_.push_back({.start = start, .end = end, .target = handler, .depth = 0, .lasti = false});
  }

  void set_graph_out(int t) { graph_out_ = t; }
  void set_context(const std::vector<VarPtr>* locals, PyObject* globals) {
    stop_locals_ = locals;
    top_globals_ = globals;
  }
  std::vector<AsmInstruction>& instructions() { return ins_; }

  absl::StatusOr<Object> Finish() {
    for (size_t i : fixups_) ins_[i].arg += static_cast<int>(temps_.size());
    bytecode::AsmProgram p;
    p.first_line = code_.first_line;
    p.flags = code_.flags;
    p.instructions = ins_;
    p.exception_table = exception_table_;
    absl::StatusOr<bytecode::AssembledCode> a = bytecode::Assemble(p);
    if (!a.ok()) return a.status();
    std::vector<Object> varnames;
    for (size_t i = 0; i < layout_.num_locals; ++i) varnames.push_back(python::FromString(layout_.names[i]));
    for (const std::string& t : temps_) varnames.push_back(python::FromString(t));
    std::vector<Object> names;
    for (const std::string& n : names_) names.push_back(python::FromString(n));
    return bytecode::MakeCode(code_.code, *a,
                              {{"co_consts", python::MakeTuple(consts_)},
                               {"co_names", python::MakeTuple(names)},
                               {"co_varnames", python::MakeTuple(varnames)},
                               {"co_nlocals", python::FromLong(static_cast<int64_t>(varnames.size()))}});
  }

 private:
  const bytecode::DecodedCode& code_;
  const Layout& layout_;
  const trace::TraceResult& result_;
  bytecode::Location location_;
  std::vector<AsmInstruction> ins_;
  std::vector<size_t> fixups_;
  std::vector<bytecode::AsmExceptionEntry> exception_table_;
  std::string live_prefix_;
  std::vector<std::pair<std::string, Object>>* live_objects_ = nullptr;
  std::vector<Object> consts_;
  std::vector<std::string> names_;
  std::vector<std::string> temps_;
  absl::flat_hash_map<const Var*, int> memo_;
  int graph_out_ = -1;
  const std::vector<VarPtr>* stop_locals_ = nullptr;
  PyObject* top_globals_ = nullptr;
};

// The resume code made here, each with the code it continues (never itself
// one made here: see ResumeBase) and its prologue's length. Held (so the
// code objects stay the keys they are) and bounded: past the bound the
// oldest go, and a resume function of theirs is made from their own code,
// as before this table. Not in the code itself: a constant holding the base
// code would make the marshalled code depend on reference counts, which the
// loader compares byte for byte. Touched with the GIL held.
struct Origin {
  Object resume;
  Object base;
  size_t shift = 0;
};
constexpr size_t kMaxOrigins = 4096;
std::deque<Origin>& Origins() {
  static auto* origins = new std::deque<Origin>();  // leaked on purpose: holds Python objects past main()
  return *origins;
}
void NoteOrigin(const Object& resume, const Object& base, size_t shift) {
  std::deque<Origin>& origins = Origins();
  if (origins.size() >= kMaxOrigins) origins.pop_front();
  origins.push_back({resume, base, shift});
}

// Where a resume function's code comes from: the code it continues (made
// by BuildResume, never itself a resume function's), and how its slots and
// instructions map onto that code's. A resume function's own resume
// functions are made from the base at the same instruction, so two paths
// that join after several breaks reach the same resume code (one cache),
// where resuming the resume code made one per path.
struct ResumeBase {
  bytecode::DecodedCode code;
  Layout layout;
  size_t shift = 0;        // instruction i of the base is i + shift here
  std::vector<int> slot;   // per local slot here: the base's slot of that name, -1 none
};

std::optional<ResumeBase> BaseOf(const bytecode::DecodedCode& code, const Layout& layout) {
  const Origin* origin = nullptr;
  for (const Origin& o : Origins()) {
    if (o.resume.get() == code.code.get()) origin = &o;
  }
  if (origin == nullptr) return std::nullopt;
  absl::StatusOr<bytecode::DecodedCode> base = bytecode::Decode(origin->base, {.nested = false});
  const size_t shift = origin->shift;
  if (!base.ok() || code.instructions.size() != base->instructions.size() + shift) return std::nullopt;
  // Checked, not assumed: past the prologue the instructions are the
  // base's (cell set-up turned into NOPs).
  for (size_t i = 0; i < base->instructions.size(); ++i) {
    const int mine = code.instructions[i + shift].opcode, theirs = base->instructions[i].opcode;
    const bool cell_setup = theirs == op::kMakeCell || theirs == op::kCopyFreeVars;
    if (mine != theirs && !(cell_setup && mine == op::kNop)) return std::nullopt;
  }
  ResumeBase r{*std::move(base), Layout(), shift, {}};
  r.layout = Layout::Of(r.code);
  for (const std::string& name : layout.names) r.slot.push_back(r.layout.Slot(name));
  return r;
}

// The resume function entering `code` at instruction `index` with a stack of
// `null_mask.size()` values (true: a NULL, recreated rather than passed) and
// the plain locals in `passed` bound from its arguments.
absl::StatusOr<Object> BuildResume(const bytecode::DecodedCode& code, const Layout& layout,
                                   size_t index, const std::vector<bool>& null_mask,
                                   const std::vector<int>& passed) {
  absl::StatusOr<bytecode::AsmProgram> program = bytecode::ToProgram(code);
  if (!program.ok()) return program.status();

  std::vector<std::string> varnames;
  std::vector<int> stack_arg;  // per stack position: its varname index, or -1 for NULL
  int next_name = 0;
  for (bool is_null : null_mask) {
    stack_arg.push_back(is_null ? -1 : static_cast<int>(varnames.size()));
    if (is_null) continue;
    // Unique against the code's own names: a resume function's resume
    // function has ___stack locals of its own.
    std::string name;
    do {
      name = absl::StrCat("___stack", next_name++);
    } while (layout.Slot(name) >= 0);
    varnames.push_back(name);
  }
  const size_t argcount = varnames.size() + passed.size();
  std::vector<int> remap(layout.names.size(), -1);
  for (int slot : passed) {
    remap[static_cast<size_t>(slot)] = static_cast<int>(varnames.size());
    varnames.push_back(layout.names[static_cast<size_t>(slot)]);
  }
  for (size_t i = 0; i < layout.num_locals; ++i) {
    if (layout.is_cell[i] || remap[i] >= 0) continue;
    remap[i] = static_cast<int>(varnames.size());
    varnames.push_back(layout.names[i]);
  }
  std::vector<std::string> freevars;
  for (int slot : layout.Cells()) {
    remap[static_cast<size_t>(slot)] = static_cast<int>(varnames.size() + freevars.size());
    freevars.push_back(layout.names[static_cast<size_t>(slot)]);
  }

  for (AsmInstruction& in : program->instructions) {
    if (in.opcode == op::kMakeCell || in.opcode == op::kCopyFreeVars) {
      in.opcode = op::kNop;
      in.arg = 0;
    } else if (IsSlotPairOp(in.opcode)) {
      const int first = remap[static_cast<size_t>(in.arg >> 4)], second = remap[static_cast<size_t>(in.arg & 15)];
      if (first > 15 || second > 15) return Unrebuildable("a two-variable instruction past slot 15");
      in.arg = (first << 4) | second;
    } else if (IsSlotOp(in.opcode)) {
      in.arg = remap[static_cast<size_t>(in.arg)];
    }
  }
  std::vector<AsmInstruction> prologue;
  auto add = [&](int opcode, int arg = 0, int target = -1) {
    AsmInstruction in;
    in.opcode = opcode;
    in.arg = arg;
    in.target = target;
    in.location = program->instructions[index].location;
    prologue.push_back(in);
  };
  if (!freevars.empty()) add(op::kCopyFreeVars, static_cast<int>(freevars.size()));
  add(op::kResume, 0);
  for (int a : stack_arg) {
    if (a < 0) {
      add(op::kPushNull);
    } else {
      add(op::kLoadFast, a);
    }
  }
  const int jump_at = static_cast<int>(prologue.size());
  add(op::kJumpForward, 0, static_cast<int>(index) + jump_at + 1);
  bytecode::InsertInstructions(*program, 0, prologue);

  absl::StatusOr<bytecode::AssembledCode> a = bytecode::Assemble(*program);
  if (!a.ok()) return a.status();
  std::vector<Object> vn, fv;
  for (const std::string& n : varnames) vn.push_back(python::FromString(n));
  for (const std::string& n : freevars) fv.push_back(python::FromString(n));
  int flags = code.flags & ~(CO_VARARGS | CO_VARKEYWORDS);
  if (!freevars.empty()) flags |= CO_NESTED;
  const int offset = code.instructions[index].offset;
  std::string name = absl::StrCat("__resume_at_", offset);
  absl::StatusOr<Object> made = bytecode::MakeCode(
      code.code, *a,
      {{"co_varnames", python::MakeTuple(vn)},
       {"co_nlocals", python::FromLong(static_cast<int64_t>(vn.size()))},
       {"co_cellvars", python::MakeTuple({})},
       {"co_freevars", python::MakeTuple(fv)},
       {"co_argcount", python::FromLong(static_cast<int64_t>(argcount))},
       {"co_posonlyargcount", python::FromLong(0)},
       {"co_kwonlyargcount", python::FromLong(0)},
       {"co_flags", python::FromLong(flags)},
       {"co_name", python::FromString(name)},
       {"co_qualname", python::FromString(absl::StrCat(code.qualname, ".", name))}});
  if (made.ok()) NoteOrigin(*made, code.code, prologue.size());
  return made;
}

}  // namespace

absl::StatusOr<Rewritten> Rewrite(const trace::TraceResult& r, const RewriteOptions& options) {
  if (!r.stop || !r.code) return absl::InvalidArgumentError("the trace did not stop: nothing to rewrite");
  const StopState& st = *r.stop;
  const bytecode::DecodedCode& code = *r.code;
  const Layout layout = Layout::Of(code);
  const bytecode::Instruction& at = code.instructions[std::min(st.index, code.instructions.size() - 1)];
  Emitter e(code, layout, r, at.location);
  e.set_context(&st.locals, r.globals.get());
  Rewritten out;
  if (options.live_objects) e.AllowLiveObjects(absl::StrCat(options.prefix, "_", options.id), &out.objects);

  // The prefix every 3.11 function starts with: free variables, cells.
  for (const bytecode::Instruction& in : code.instructions) {
    if (in.opcode == op::kCopyFreeVars) e.Emit(op::kCopyFreeVars, in.arg);
    if (in.opcode == op::kMakeCell) e.EmitSlot(op::kMakeCell, in.arg);
    if (in.opcode == op::kResume) break;
  }
  e.Emit(op::kResume, 0);

  // 1. The graph, on the arguments as they came in.
  // A graph that would only set the grad mode (a resume function that just
  // leaves a `with torch.no_grad()` block) is no graph: the mode is set here.
  bool has_calls = false, only_grad_mode = true, final_mode = true;
  for (const ir::Node& n : r.graph.nodes()) {
    if (n.kind() != ir::Node::CALL_FUNCTION && n.kind() != ir::Node::CALL_METHOD &&
        n.kind() != ir::Node::CALL_MODULE) {
      continue;
    }
    has_calls = true;
    only_grad_mode = only_grad_mode && n.target() == "torch._C._set_grad_enabled" && n.args_size() == 1 &&
                     n.args(0).has_bool_value();
    if (only_grad_mode) final_mode = n.args(0).bool_value();
  }
  if (has_calls && only_grad_mode) {
    e.SetGradEnabled(final_mode);
  } else if (has_calls) {
    out.graph_name = absl::StrCat(options.prefix, "_graph_", options.id);
    e.LoadGlobalCallable(out.graph_name);
    for (size_t i = 0; i < r.placeholder_sources.size(); ++i) {
      // A numpy.ndarray input: the graph takes the tensor over its memory
      // (torch.from_numpy: torch.as_tensor would copy it to the default
      // device under torch.set_default_device).
      const bool array = std::binary_search(r.array_placeholders.begin(), r.array_placeholders.end(), i);
      if (array) {
        e.BeginCall();
        e.ImportPath({"torch"}, {"from_numpy"});
        e.CalleeLoaded();
      }
      if (absl::Status status = e.LoadSource(r.placeholder_sources[i]); !status.ok()) return status;
      if (array) e.Call(1);
    }
    e.Call(static_cast<int>(r.placeholder_sources.size()));
    int t = e.NewTemp();
    e.Emit(op::kStoreFast, t);
    e.set_graph_out(t);
  }

  const bool run_one = st.kind == StopState::Kind::kInstruction;
  const bytecode::Instruction& stop_in = code.instructions[st.index];
  const std::pair<int, int> stack_use = run_one ? StackUse(stop_in) : std::pair<int, int>{0, 0};
  const int n_in = stack_use.first, n_out = stack_use.second;
  // LOAD_METHOD leaves two values, (NULL, bound attribute) or (function,
  // self), and a NULL cannot travel as an argument: run alone it is
  // LOAD_ATTR (the bound attribute), and the resume function pushes the
  // NULL below it, the shape CALL takes for any callable.
  const bool method_load = run_one && (stop_in.name == "LOAD_METHOD" ||
                                       (stop_in.name == "LOAD_ATTR" && (stop_in.argument.flags & 1)));
  if (static_cast<size_t>(n_in) > st.stack.size()) return absl::InternalError("stack shorter than the operands");
  const size_t deep = st.stack.size() - static_cast<size_t>(n_in);
  // Locals live after the stop (the instruction itself reads none).
  std::vector<bool> live(layout.num_locals, false);
  {
    std::vector<size_t> next;
    if (!run_one) {
      next.push_back(st.index);
    } else {
      if (st.index + 1 < code.instructions.size()) next.push_back(st.index + 1);
      if (stop_in.argument.kind == bytecode::ArgKind::kJump) {
        const bytecode::Instruction* t = code.At(stop_in.argument.jump_target);
        if (t != nullptr) next.push_back(static_cast<size_t>(t - code.instructions.data()));
      }
    }
    for (size_t i : next) {
      std::vector<bool> l = LiveLocals(code, i);
      for (size_t v = 0; v < live.size(); ++v) live[v] = live[v] || l[v];
    }
  }
  // Zero-argument super() reads the frame's first local (self) and the
  // __class__ cell when it runs; no LOAD_FAST shows that use, so a resume
  // function gets self as its first argument whatever the liveness says.
  const bool zero_arg_super = layout.Slot("__class__") >= 0 && layout.num_locals > 0;
  if (zero_arg_super && (layout.is_cell[0] || st.locals.empty() || !st.locals[0])) {
    return absl::FailedPreconditionError("zero-argument super() with its first argument in a cell or unbound");
  }
  std::vector<int> passed;
  for (size_t i = 0; i < layout.num_locals && i < st.locals.size(); ++i) {
    if (st.locals[i] && !layout.is_cell[i] && (live[i] || (zero_arg_super && i == 0))) {
      passed.push_back(static_cast<int>(i));
    }
  }
  // Tracing a resume function: its resume functions come from its base code
  // (ResumeBase), the passed locals in the base's slot order, as a break at
  // the same place of the base would pass them.
  std::optional<ResumeBase> base = BaseOf(code, layout);
  std::vector<int> base_passed;
  if (base) {
    bool maps = st.index >= base->shift;
    for (int slot : passed) {
      const int b = base->slot[static_cast<size_t>(slot)];
      maps = maps && b >= 0 && static_cast<size_t>(b) < base->layout.num_locals && !base->layout.is_cell[static_cast<size_t>(b)];
    }
    // The closure it passes: the base's cells, in the base's order.
    std::vector<int> cells_in_base;
    for (int slot : layout.Cells()) cells_in_base.push_back(base->slot[static_cast<size_t>(slot)]);
    maps = maps && cells_in_base == base->layout.Cells();
    if (!maps) base.reset();
  }
  if (base) {
    std::stable_sort(passed.begin(), passed.end(), [&](int a, int b) {
      return base->slot[static_cast<size_t>(a)] < base->slot[static_cast<size_t>(b)];
    });
    for (int slot : passed) base_passed.push_back(base->slot[static_cast<size_t>(slot)]);
  }
  // 2. Every value needed below, read before anything is replayed.
  {
    std::vector<VarPtr> needed;
    for (const SideEffect& s : r.side_effects) {
      needed.push_back(s.target);
      needed.push_back(s.value);
      if (s.kind == SideEffect::Kind::kListContents || s.kind == SideEffect::Kind::kDictContents) {
        needed.insert(needed.end(), s.target->keys.begin(), s.target->keys.end());
        needed.insert(needed.end(), s.target->items.begin(), s.target->items.end());
      }
    }
    for (size_t slot = 0; slot < st.locals.size(); ++slot) {
      const VarPtr& v = st.locals[slot];
      if (v && v->kind == VarKind::kCell && !v->source) needed.push_back(v->value);
    }
    for (int slot : passed) needed.push_back(st.locals[static_cast<size_t>(slot)]);
    needed.insert(needed.end(), st.stack.begin(), st.stack.end());
    for (const VarPtr& v : needed) {
      if (absl::Status status = e.Keep(v); !status.ok()) return status;
    }
  }

  // 3. Side effects, in program order, then the final contents of mutated
  // containers.
  for (const SideEffect& s : r.side_effects) {
    switch (s.kind) {
      case SideEffect::Kind::kStoreGlobal:
        if (absl::Status status = e.Load(s.value); !status.ok()) return status;
        e.Emit(op::kStoreGlobal, e.Name(s.name));
        break;
      case SideEffect::Kind::kStoreAttr:
        if (absl::Status status = e.Load(s.value); !status.ok()) return status;
        if (absl::Status status = e.Load(s.target); !status.ok()) return status;
        e.Emit(op::kStoreAttr, e.Name(s.name));
        break;
      case SideEffect::Kind::kStoreCell:
        if (absl::Status status = e.Load(s.value); !status.ok()) return status;
        e.EmitSlot(op::kStoreDeref, s.slot);
        break;
      case SideEffect::Kind::kIteratorPosition:
        e.BeginCall();
        if (absl::Status status = e.Load(s.target); !status.ok()) return status;
        e.EmitName(op::kLoadAttr, e.Name("__setstate__"));
        e.CalleeLoaded();
        e.LoadConst(python::FromLong(s.target->start + static_cast<int64_t>(s.target->position)));
        e.Call(1);
        e.Emit(op::kPopTop);
        break;
      case SideEffect::Kind::kListContents:
      case SideEffect::Kind::kDictContents:
        break;
    }
  }
  for (const SideEffect& s : r.side_effects) {
    if (s.kind == SideEffect::Kind::kListContents) {
      for (const VarPtr& item : s.target->items) {
        if (absl::Status status = e.Load(item); !status.ok()) return status;
      }
      e.Emit(op::kBuildList, static_cast<int>(s.target->items.size()));
      if (absl::Status status = e.Load(s.target); !status.ok()) return status;
      e.LoadConst(python::None());
      e.LoadConst(python::None());
      e.Emit(op::kBuildSlice, 2);
      e.Emit(op::kStoreSubscr);
    } else if (s.kind == SideEffect::Kind::kDictContents) {
      // The new contents first: they may read the old ones.
      e.BeginCall();
      if (absl::Status status = e.Load(s.target); !status.ok()) return status;
      e.EmitName(op::kLoadAttr, e.Name("update"));
      e.CalleeLoaded();
      for (size_t i = 0; i < s.target->items.size(); ++i) {
        if (absl::Status status = e.Load(s.target->keys[i]); !status.ok()) return status;
        if (absl::Status status = e.Load(s.target->items[i]); !status.ok()) return status;
      }
      e.Emit(op::kBuildMap, static_cast<int>(s.target->items.size()));
      e.BeginCall();
      if (absl::Status status = e.Load(s.target); !status.ok()) return status;
      e.EmitName(op::kLoadAttr, e.Name("clear"));
      e.CalleeLoaded();
      e.Call(0);
      e.Emit(op::kPopTop);
      e.Call(1);
      e.Emit(op::kPopTop);
    }
  }

  // 4. The contents of the function's own cells (closures made during the
  // trace, variables captured by them).
  for (size_t slot = 0; slot < st.locals.size(); ++slot) {
    const VarPtr& cell = st.locals[slot];
    if (!cell || cell->kind != VarKind::kCell || cell->source || !cell->value) continue;
    if (absl::Status status = e.Load(cell->value); !status.ok()) return status;
    e.EmitSlot(op::kStoreDeref, static_cast<int>(slot));
  }

  if (st.kind == StopState::Kind::kReturn) {
    if (st.stack.empty()) return absl::InternalError("return without a value");
    if (absl::Status status = e.Load(st.stack.back()); !status.ok()) return status;
    e.Emit(op::kReturnValue);
    absl::StatusOr<Object> c = e.Finish();
    if (!c.ok()) return c.status();
    out.code = *c;
    return out;
  }

  // 5. The values the stopping instruction takes, the instruction itself,
  // and a call to a resume function after it (one per way it can go).
  // Values the resume functions get, loaded (and kept) before the stopping
  // instruction runs: a mutable value it changes is the same object after.
  std::vector<int> deep_temps(deep, -1), local_temps;
  for (size_t i = 0; i < deep; ++i) {
    if (st.stack[i]->kind == VarKind::kNull || trace::IsReenteredExit(st.stack[i])) continue;
    if (absl::Status status = e.Load(st.stack[i]); !status.ok()) return status;
    deep_temps[i] = e.NewTemp();
    e.Emit(op::kStoreFast, deep_temps[i]);
  }
  // The `with torch.no_grad()` and `with torch.autocast()` blocks it stopped
  // inside, outermost first, entered again; then the grad mode the trace had
  // there. Should the stopping instruction raise, a handler exits them
  // (innermost first) and re-raises, as the blocks' own handlers would; the
  // resume function has those.
  std::vector<int> exits;
  bool grad_blocks = false;
  for (size_t i = 0; i < deep; ++i) {
    if (trace::IsGradModeExit(st.stack[i])) {
      deep_temps[i] = e.EnterGradMode(st.stack[i]);
      grad_blocks = true;
    } else if (trace::IsAutocastExit(st.stack[i])) {
      absl::StatusOr<int> t = e.EnterAutocast(st.stack[i]);
      if (!t.ok()) return t.status();
      deep_temps[i] = *t;
    } else {
      continue;
    }
    exits.push_back(deep_temps[i]);
  }
  if (grad_blocks) e.SetGradEnabled(st.grad_enabled);
  const int protect_start = static_cast<int>(e.instructions().size());
  for (int slot : passed) {
    if (absl::Status status = e.Load(st.locals[static_cast<size_t>(slot)]); !status.ok()) return status;
    local_temps.push_back(e.NewTemp());
    e.Emit(op::kStoreFast, local_temps.back());
  }
  size_t jump_index = 0;
  if (run_one) {
    for (size_t i = deep; i < st.stack.size(); ++i) {
      if (absl::Status status = e.Load(st.stack[i]); !status.ok()) return status;
    }
#ifdef DYNAMO_HAS_TO_BOOL
    // 3.13's conditional jumps and `not` take a bool: a tensor comparison
    // the translator kept in the graph (see OpCompareOp) is made one here.
    if (stop_in.name == "POP_JUMP_IF_TRUE" || stop_in.name == "POP_JUMP_IF_FALSE" || stop_in.name == "UNARY_NOT") {
      e.Emit(op::kToBool);
    }
#endif
    jump_index = e.instructions().size();
    if (stop_in.opcode == op::kCall) {
      // 3.11 and 3.12's KW_NAMES (3.13's CALL_KW has its names on the stack).
      if (st.kw_names) e.CallKw(stop_in.arg, st.kw_names->object);
      if (!st.kw_names) e.Call(stop_in.arg);
      jump_index = e.instructions().size() - 1;
    } else if (stop_in.argument.kind == bytecode::ArgKind::kName) {
      // A method load runs as the plain attribute load.
      e.EmitName(method_load ? op::kLoadAttr : stop_in.opcode, e.Name(std::string(stop_in.argument.text)),
                 method_load ? 0 : stop_in.argument.flags);
    } else if (stop_in.argument.kind == bytecode::ArgKind::kConst) {
      e.Emit(stop_in.opcode, e.Const(code.Constant(stop_in.argument.index)));
    } else {
      e.Emit(stop_in.opcode, stop_in.arg);
    }
  }

  const std::vector<int> cells = layout.Cells();
  auto resume_call = [&](size_t target, int results) -> absl::Status {
    std::vector<bool> mask;
    for (size_t i = 0; i < deep; ++i) mask.push_back(st.stack[i]->kind == VarKind::kNull);
    if (method_load && !kCallableFirst) mask.push_back(true);
    for (int i = 0; i < results; ++i) mask.push_back(false);
    if (method_load && kCallableFirst) mask.push_back(true);
    if (zero_arg_super && std::find(mask.begin(), mask.end(), false) != mask.end()) {
      // Stack values come first among a resume function's arguments.
      return absl::FailedPreconditionError("zero-argument super() in a resume function that takes stack values");
    }
    ResumeFunction rf;
    rf.global_name = absl::StrCat(options.prefix, "_resume_", options.id, "_", out.resumes.size());
    const bool rebased = base && target >= base->shift;
    const bytecode::DecodedCode& from = rebased ? base->code : code;
    const size_t base_at = rebased ? target - base->shift : target;
    rf.offset = from.instructions[base_at].offset;
    rf.capture = run_one;
    rf.takes_closure = !cells.empty();
    absl::StatusOr<Object> rc =
        rebased ? BuildResume(base->code, base->layout, base_at, mask, base_passed) : BuildResume(code, layout, target, mask, passed);
    if (!rc.ok()) return rc.status();
    rf.code = *rc;
    for (size_t i = 0; i < deep; ++i) {
      if (st.stack[i]->kind != VarKind::kNull) rf.arguments.push_back(st.stack[i]);
    }
    for (int i = 0; i < results; ++i) {
      // JUMP_IF_*_OR_POP's kept operand is known; other results are not.
      const bool kept_operand = run_one && n_out == 0 && results == 1;
      rf.arguments.push_back(kept_operand ? st.stack.back() : nullptr);
    }
    for (int slot : passed) rf.arguments.push_back(st.locals[static_cast<size_t>(slot)]);
    if (run_one) {
      rf.after_opcode = std::string(stop_in.name);
      if (stop_in.name == "CALL" || stop_in.name == "CALL_KW") rf.called = st.stack[st.stack.size() - static_cast<size_t>(n_in)];
      if (rf.called && rf.called->kind == VarKind::kNull) rf.called = st.stack[st.stack.size() - static_cast<size_t>(n_in) + 1];
    }
    std::vector<int> result_temps(static_cast<size_t>(results));
    for (int i = results - 1; i >= 0; --i) {
      result_temps[static_cast<size_t>(i)] = e.NewTemp();
      e.Emit(op::kStoreFast, result_temps[static_cast<size_t>(i)]);
    }
    e.LoadGlobalCallable(rf.global_name);
    int argc = 0;
    if (rf.takes_closure) {
      for (int slot : cells) e.LoadCell(slot);
      e.Emit(op::kBuildTuple, static_cast<int>(cells.size()));
      ++argc;
    }
    for (int t : deep_temps) {
      if (t < 0) continue;
      e.Emit(op::kLoadFast, t);
      ++argc;
    }
    for (int t : result_temps) {
      e.Emit(op::kLoadFast, t);
      ++argc;
    }
    for (int t : local_temps) {
      e.Emit(op::kLoadFast, t);
      ++argc;
    }
    e.Call(argc);
    e.Emit(op::kReturnValue);
    out.resumes.push_back(std::move(rf));
    return absl::OkStatus();
  };

  const int protect_end = static_cast<int>(jump_index) + 1;
  if (!run_one) {
    if (absl::Status s = resume_call(st.index, 0); !s.ok()) return s;
  } else {
    size_t next = st.index + 1;
    int results = n_out;
    // A result the code drops at once (a call made for its effect, as
    // `x.tolist()` or `print(x)` on a line of its own) is dropped here: the
    // resume function starts after the POP_TOP, so it neither takes the
    // value nor guards it (a changing number would recapture every call).
    if (results == 1 && stop_in.argument.kind != bytecode::ArgKind::kJump && next < code.instructions.size() &&
        code.instructions[next].opcode == op::kPopTop) {
      e.Emit(op::kPopTop);
      ++next;
      results = 0;
    }
    if (absl::Status s = resume_call(next, results); !s.ok()) return s;
    if (stop_in.argument.kind == bytecode::ArgKind::kJump) {
      const bytecode::Instruction* target = code.At(stop_in.argument.jump_target);
      if (target == nullptr) return absl::InternalError("jump target outside the code");
      e.instructions()[jump_index].target = static_cast<int>(e.instructions().size());
      // JUMP_IF_*_OR_POP keeps its operand on the jump path.
      const int kept = stop_in.name == "JUMP_IF_TRUE_OR_POP" || stop_in.name == "JUMP_IF_FALSE_OR_POP";
      if (absl::Status s = resume_call(static_cast<size_t>(target - code.instructions.data()), kept); !s.ok()) {
        return s;
      }
    }
  }
  if (run_one && !exits.empty()) {
    e.Protect(protect_start, protect_end, static_cast<int>(e.instructions().size()));
    for (auto it = exits.rbegin(); it != exits.rend(); ++it) {  // the exception is on the stack
      e.BeginCall();
      e.Emit(op::kLoadFast, *it);
      e.CalleeLoaded();
      for (int k = 0; k < 3; ++k) e.LoadConst(python::None());
      e.Call(3);
      e.Emit(op::kPopTop);
    }
    e.Emit(op::kReraise, 0);
  }
  absl::StatusOr<Object> c = e.Finish();
  if (!c.ok()) return c.status();
  out.code = *c;
  return out;
}

}  // namespace dynamo::rewrite
