#include "lib/bytecode/assembler.h"

#include <Python.h>

#include <algorithm>
#include <climits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/bytecode/opcodes.h"
#include "lib/bytecode/tables.h"
#include "lib/python/error.h"

namespace dynamo::bytecode {
namespace {

int PrefixesFor(unsigned arg) {
  return (arg > 0xffffffu) + (arg > 0xffffu) + (arg > 0xffu);
}

std::string Where(const AsmProgram& p, size_t i) {
  return absl::StrCat("instruction ", i, " (", OpName(p.instructions[i].opcode), ")");
}

absl::Status Validate(const AsmProgram& p) {
  const int n = static_cast<int>(p.instructions.size());
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const AsmInstruction& in = p.instructions[i];
    const OpcodeInfo& info = Opcode(in.opcode);
    if (in.opcode < 0 || in.opcode > 255 || info.name == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("instruction ", i, ": unknown opcode ", in.opcode));
    }
    if (in.opcode == generated::kExtendedArg || in.opcode == generated::kCache) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(p, i), ": EXTENDED_ARG and CACHE are emitted by the assembler, not given to it"));
    }
    if (info.IsJump() && (in.target < 0 || in.target >= n)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(p, i), ": jump target ", in.target, " is not an instruction"));
    }
    if (!info.IsJump() && in.arg < 0) {
      return absl::InvalidArgumentError(absl::StrCat(Where(p, i), ": negative oparg"));
    }
    if (!info.Has(kHasArg) && in.arg != 0) {
      return absl::InvalidArgumentError(absl::StrCat(Where(p, i), ": takes no argument"));
    }
  }
  for (const AsmExceptionEntry& e : p.exception_table) {
    if (e.start < 0 || e.end < e.start || e.end > n || e.target < 0 || e.target >= n ||
        e.depth < 0) {
      return absl::InvalidArgumentError(absl::StrCat("exception entry [", e.start, ", ", e.end,
                                                     ") -> ", e.target, " is out of range"));
    }
  }
  return absl::OkStatus();
}

int JumpArg(const AsmProgram& p, const std::vector<int>& offsets, const std::vector<int>& sizes,
            size_t i, int& opcode) {
  const AsmInstruction& in = p.instructions[i];
  const OpcodeInfo& info = Opcode(opcode);
  int target = offsets[static_cast<size_t>(in.target)];
  if (info.Has(kHasJumpAbsolute)) return target / 2;
  int next = offsets[i] + sizes[i] * 2;
  bool backward = target < next;
  if (backward != info.Has(kBackwardJump) && info.counterpart >= 0) opcode = info.counterpart;
  return (backward ? next - target : target - next) / 2;
}

}  // namespace

absl::StatusOr<AsmProgram> ToProgram(const DecodedCode& d) {
  AsmProgram p;
  p.first_line = d.first_line;
  p.flags = d.flags;
  p.instructions.reserve(d.instructions.size());
  auto index_of = [&d](int offset) -> int {
    auto it = std::lower_bound(d.instructions.begin(), d.instructions.end(), offset,
                               [](const Instruction& in, int off) { return in.offset < off; });
    if (it == d.instructions.end()) return offset == d.code_units * 2 ? static_cast<int>(d.instructions.size()) : -1;
    return it->offset == offset ? static_cast<int>(it - d.instructions.begin()) : -1;
  };
  for (const Instruction& in : d.instructions) {
    AsmInstruction a{in.opcode, in.arg, -1, in.location, (in.opcode_offset - in.offset) / 2};
    if (in.argument.kind == ArgKind::kJump) {
      a.arg = 0;
      a.target = index_of(in.argument.jump_target);
      if (a.target < 0 || a.target >= static_cast<int>(d.instructions.size())) {
        return absl::DataLossError(absl::StrCat(in.name, " at offset ", in.offset,
                                                " jumps to ", in.argument.jump_target,
                                                ", which starts no instruction"));
      }
    }
    p.instructions.push_back(a);
  }
  for (const ExceptionTableEntry& e : d.exception_table) {
    AsmExceptionEntry a{index_of(e.start), index_of(e.end), index_of(e.target), e.depth, e.lasti};
    if (a.start < 0 || a.end < 0 || a.target < 0) {
      return absl::DataLossError(absl::StrCat("exception entry ", e.start, "-", e.end, " -> ",
                                              e.target, " does not fall on instruction boundaries"));
    }
    p.exception_table.push_back(a);
  }
  return p;
}

void InsertInstructions(AsmProgram& p, int at, const std::vector<AsmInstruction>& block) {
  const int n = static_cast<int>(block.size());
  auto shift = [at, n](int& index) {
    if (index >= at) index += n;
  };
  for (AsmInstruction& in : p.instructions) {
    if (in.target >= 0) shift(in.target);
  }
  for (AsmExceptionEntry& e : p.exception_table) {
    shift(e.start);
    if (e.end > at) e.end += n;
    shift(e.target);
  }
  p.instructions.insert(p.instructions.begin() + at, block.begin(), block.end());
}

namespace {

// The flow analysis behind StackDepth: depths[i] is the stack depth on entry
// to instruction i (-1 until reached); Flow propagates from `work` and raises
// `max_depth` to every depth seen.
class Flow {
 public:
  // Deeper than any code CPython compiles; keeps every sum of depths and
  // effects far from int overflow.
  static constexpr int64_t kMaxDepth = int64_t{1} << 24;

  explicit Flow(const AsmProgram& p) : p_(&p), depth_(p.instructions.size(), -1) {}

  absl::Status Reach(size_t i, int d) {
    // A jump or handler past the last instruction (malformed code only).
    if (i >= depth_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("a jump or handler to instruction ", i, " of ", depth_.size()));
    }
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("stack underflow entering ", Where(*p_, i)));
    max_depth_ = std::max(max_depth_, d);
    if (depth_[i] == -1) {
      depth_[i] = d;
      work_.push_back(i);
    } else if (depth_[i] != d) {
      return absl::InvalidArgumentError(absl::StrCat(Where(*p_, i), " is reached with stack depths ",
                                                     depth_[i], " and ", d));
    }
    return absl::OkStatus();
  }

  absl::Status Propagate() {
    const size_t n = p_->instructions.size();
    while (!work_.empty()) {
      size_t i = work_.back();
      work_.pop_back();
      for (int d = depth_[i];; ++i) {
        const AsmInstruction& in = p_->instructions[i];
        const OpcodeInfo& info = Opcode(in.opcode);
        int effect = StackEffect(in.opcode, in.arg, false);
        if (effect == INT_MIN) {
          return absl::InvalidArgumentError(absl::StrCat(Where(*p_, i), ": no known stack effect"));
        }
        if (info.IsJump()) {
          const int64_t jump_depth = int64_t{d} + StackEffect(in.opcode, in.arg, true);
          if (jump_depth > kMaxDepth) {
            return absl::InvalidArgumentError(absl::StrCat("stack deeper than 2^24 at ", Where(*p_, i)));
          }
          if (absl::Status s = Reach(static_cast<size_t>(in.target), static_cast<int>(jump_depth)); !s.ok()) return s;
        }
        // Effects scale with opargs (BUILD_TUPLE n): malformed code may push
        // or pop billions, past what an int depth can count.
        if (int64_t{d} + effect > kMaxDepth) {
          return absl::InvalidArgumentError(absl::StrCat("stack deeper than 2^24 at ", Where(*p_, i)));
        }
        d += effect;
        if (d < 0) return absl::InvalidArgumentError(absl::StrCat("stack underflow at ", Where(*p_, i)));
        max_depth_ = std::max(max_depth_, d);
        if (info.Has(kUnconditionalJump) || info.Has(kScopeExit)) break;
        if (i + 1 >= n) {
          return absl::InvalidArgumentError(absl::StrCat("execution falls off the end after ", Where(*p_, i)));
        }
        if (depth_[i + 1] != -1) {
          if (absl::Status s = Reach(i + 1, d); !s.ok()) return s;
          break;
        }
        depth_[i + 1] = d;
      }
    }
    return absl::OkStatus();
  }

  // The entry depth of the unreached straight-line code at `i`, from the
  // first reached instruction it flows into (by a jump or falling through):
  // that depth less the code's net effect on the way. Nothing when it flows
  // nowhere known.
  std::optional<int> InferEntry(size_t i) const {
    const size_t n = p_->instructions.size();
    for (int64_t rel = 0; i < n; ++i) {
      if (rel > kMaxDepth || rel < -kMaxDepth) return std::nullopt;  // malformed: see Propagate
      if (depth_[i] != -1) return static_cast<int>(depth_[i] - rel);
      const AsmInstruction& in = p_->instructions[i];
      const OpcodeInfo& info = Opcode(in.opcode);
      int effect = StackEffect(in.opcode, in.arg, false);
      if (effect == INT_MIN) return std::nullopt;
      if (info.IsJump() && in.target >= 0 && static_cast<size_t>(in.target) < n &&
          depth_[static_cast<size_t>(in.target)] != -1) {
        return static_cast<int>(depth_[static_cast<size_t>(in.target)] - rel - StackEffect(in.opcode, in.arg, true));
      }
      rel += effect;
      if (info.Has(kUnconditionalJump) || info.Has(kScopeExit)) return std::nullopt;
    }
    return std::nullopt;
  }

  const std::vector<int>& depths() const { return depth_; }
  int max_depth() const { return max_depth_; }

 private:
  const AsmProgram* p_;
  std::vector<int> depth_;
  std::vector<size_t> work_;
  int max_depth_ = 0;
};

}  // namespace

absl::StatusOr<int> StackDepth(const AsmProgram& p) {
  const size_t n = p.instructions.size();
  if (n == 0) return generated::kMinStackSize;
  Flow flow(p);
  // As in the compiler: after RETURN_GENERATOR a generator's frame holds
  // one value, which the next POP_TOP pops. Up to 3.12 RETURN_GENERATOR's
  // own stack effect is 0, so the frame is entered with that value counted;
  // from 3.13 RETURN_GENERATOR pushes it.
  const bool generator = p.flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR);
  const int start = generator ? 1 - StackEffect(generated::kReturnGenerator, 0, false) : 0;
  if (absl::Status s = flow.Reach(0, start); !s.ok()) return s;
  for (const AsmExceptionEntry& e : p.exception_table) {
    if (e.start == e.end) continue;
    if (absl::Status s = flow.Reach(static_cast<size_t>(e.target), e.depth + 1 + (e.lasti ? 1 : 0));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = flow.Propagate(); !s.ok()) return s;
  // Code no jump, fall-through or exception entry reaches: the compiler
  // still counts it. CPython computes depths on its control-flow graph
  // before the exception table exists, where a handler is reached from the
  // SETUP_* pseudo-instruction of its try block even when that block holds
  // no instruction (`except* E: pass`: the handler that cleans up after the
  // empty body keeps its code but gets no table entry). Such a block ends by
  // flowing into reached code, which fixes its entry depth. Best effort: a
  // block that flows nowhere known, or disagrees with the depths found so
  // far, adds nothing, as before.
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < n; ++i) {
      if (flow.depths()[i] != -1) continue;
      if (i > 0 && flow.depths()[i - 1] == -1) {  // not where a block starts
        const OpcodeInfo& before = Opcode(p.instructions[i - 1].opcode);
        if (!before.Has(kUnconditionalJump) && !before.Has(kScopeExit)) continue;
      }
      std::optional<int> entry = flow.InferEntry(i);
      // A handler the table never names (3.12's empty `try` body before
      // `except*`) whose flow leaves by a jump into unreached code: its
      // PUSH_EXC_INFO swaps the raised exception for the saved one, so the
      // cleanup entry that protects it from there on keeps exactly the
      // handler's entry depth.
      if (!entry && p.instructions[i].opcode == generated::kPushExcInfo) {
        for (const AsmExceptionEntry& e : p.exception_table) {
          if (e.start == static_cast<int>(i) && e.end > e.start) entry = e.depth;
        }
      }
      if (!entry || *entry < 0) continue;
      Flow attempt = flow;
      if (!attempt.Reach(i, *entry).ok() || !attempt.Propagate().ok()) continue;
      flow = std::move(attempt);
      progress = true;
    }
  }
  return std::max(flow.max_depth(), generated::kMinStackSize);
}

absl::StatusOr<AssembledCode> Assemble(const AsmProgram& p) {
  if (absl::Status s = Validate(p); !s.ok()) return s;
  const size_t n = p.instructions.size();
  std::vector<int> opcodes(n), args(n), sizes(n), offsets(n + 1);
  for (size_t i = 0; i < n; ++i) {
    const AsmInstruction& in = p.instructions[i];
    opcodes[i] = in.opcode;
    args[i] = Opcode(in.opcode).IsJump() ? 0 : in.arg;
    sizes[i] = 1 + PrefixesFor(static_cast<unsigned>(args[i])) + Opcode(in.opcode).cache_entries;
    // A jump may still flip to its counterpart, which can carry fewer inline
    // caches (3.13: JUMP_BACKWARD one, JUMP_FORWARD none): start from the
    // smaller size, since relaxation only grows sizes.
    if (const int other = Opcode(in.opcode).counterpart; other >= 0) {
      sizes[i] = std::min(sizes[i], 1 + Opcode(other).cache_entries);
    }
    // ...but never below the prefixes it was decoded with (see
    // AsmInstruction::prefixes). After edits that shorten a jump this may
    // keep an EXTENDED_ARG 0, which CPython runs as it would without it.
    if (Opcode(in.opcode).IsJump() && in.prefixes > 0) {
      sizes[i] = std::max(sizes[i], 1 + in.prefixes + Opcode(in.opcode).cache_entries);
    }
  }
  // Relaxation: jump distances only grow as prefixes are added, so growing
  // sizes until nothing changes reaches the least fixed point above the
  // starting sizes; from the decoded sizes that is the compiler's layout.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + sizes[i] * 2;
    for (size_t i = 0; i < n; ++i) {
      if (!Opcode(opcodes[i]).IsJump()) continue;
      opcodes[i] = p.instructions[i].opcode;
      args[i] = JumpArg(p, offsets, sizes, i, opcodes[i]);
      const OpcodeInfo& info = Opcode(opcodes[i]);
      int needed = 1 + PrefixesFor(static_cast<unsigned>(args[i])) + info.cache_entries;
      if (needed > sizes[i]) {
        sizes[i] = needed;
        changed = true;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const OpcodeInfo& info = Opcode(opcodes[i]);
    if (info.IsJump() && info.Has(kHasJumpRelative) &&
        ((offsets[static_cast<size_t>(p.instructions[i].target)] < offsets[i] + sizes[i] * 2) !=
         info.Has(kBackwardJump))) {
      // 3.12+ has no backward conditional jumps (nor a forward
      // JUMP_BACKWARD_NO_INTERRUPT): such a program needs a different shape,
      // e.g. a forward conditional jump to an unconditional JUMP_BACKWARD.
      return absl::InvalidArgumentError(absl::StrCat(
          Where(p, i), info.Has(kBackwardJump) ? " can only jump backward" : " can only jump forward",
          " (its target is instruction ", p.instructions[i].target,
          ") and this Python has no counterpart for the other direction"));
    }
  }

  AssembledCode out;
  out.code.reserve(static_cast<size_t>(offsets[n]));
  std::vector<LocationRun> runs;
  runs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const OpcodeInfo& info = Opcode(opcodes[i]);
    unsigned arg = static_cast<unsigned>(args[i]);
    int prefixes = sizes[i] - 1 - info.cache_entries;
    for (int k = prefixes; k > 0; --k) {
      out.code.push_back(static_cast<char>(generated::kExtendedArg));
      out.code.push_back(static_cast<char>((arg >> (8 * k)) & 0xff));
    }
    out.code.push_back(static_cast<char>(opcodes[i]));
    out.code.push_back(static_cast<char>(arg & 0xff));
    out.code.append(static_cast<size_t>(info.cache_entries) * 2, '\0');
    runs.push_back({p.instructions[i].location, sizes[i]});
  }
  out.line_table = EncodeLocationTable(runs, p.first_line);

  std::vector<ExceptionTableEntry> entries;
  for (const AsmExceptionEntry& e : p.exception_table) {
    if (e.start == e.end) continue;  // an edit emptied the range
    entries.push_back({offsets[static_cast<size_t>(e.start)], offsets[static_cast<size_t>(e.end)],
                       offsets[static_cast<size_t>(e.target)], e.depth, e.lasti});
  }
  out.exception_table = EncodeExceptionTable(entries);

  // Depths are computed on the final opcodes (jump direction may have flipped).
  AsmProgram final_program = p;
  for (size_t i = 0; i < n; ++i) {
    final_program.instructions[i].opcode = opcodes[i];
    final_program.instructions[i].arg = args[i];
  }
  absl::StatusOr<int> depth = StackDepth(final_program);
  if (!depth.ok()) return depth.status();
  out.stack_size = *depth;
  out.offsets.assign(offsets.begin(), offsets.end() - 1);
  return out;
}

absl::StatusOr<python::Object> MakeCode(
    const python::Object& like, const AssembledCode& a,
    const std::vector<std::pair<std::string, python::Object>>& extra) {
  using python::Object;
  Object kwargs = Object::Steal(PyDict_New());
  auto bytes = [](const std::string& s) {
    return Object::Steal(PyBytes_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())));
  };
  std::vector<std::pair<std::string, Object>> items = {
      {"co_code", bytes(a.code)},
      {"co_exceptiontable", bytes(a.exception_table)},
      {"co_linetable", bytes(a.line_table)},
      {"co_stacksize", python::FromLong(a.stack_size)},
  };
  items.insert(items.end(), extra.begin(), extra.end());
  for (const auto& [key, value] : items) {
    if (!value || PyDict_SetItemString(kwargs.get(), key.c_str(), value.get()) != 0) {
      return python::FetchError(absl::StrCat("preparing code.replace(", key, "=...)"));
    }
  }
  Object replace = Object::Steal(PyObject_GetAttrString(like.get(), "replace"));
  if (!replace) return python::FetchError("code.replace");
  Object no_args = Object::Steal(PyTuple_New(0));
  Object code = Object::Steal(PyObject_Call(replace.get(), no_args.get(), kwargs.get()));
  if (!code) return python::FetchError("building the code object");
  return code;
}

}  // namespace dynamo::bytecode
