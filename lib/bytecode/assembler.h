// Assembles an editable instruction list back into a code object's bytes:
// co_code (with EXTENDED_ARG relaxation and inline caches), the exception
// table, the location table and co_stacksize.
//
//   AsmProgram p = *ToProgram(decoded);                 // offsets -> indexes
//   p.instructions.insert(p.instructions.begin() + 5, {generated::kNop});
//   AssembledCode a = *Assemble(p);                     // jumps re-resolved
//   python::Object code = *MakeCode(decoded.code, a);   // code.replace(...)
//
// Jumps and exception ranges refer to instructions by index, so inserting or
// removing instructions never needs offset bookkeeping by the caller. A jump
// whose target ends up on the other side is switched to its counterpart
// (3.11's POP_JUMP_FORWARD_IF_TRUE <-> POP_JUMP_BACKWARD_IF_TRUE).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/instruction.h"
#include "lib/python/object.h"

namespace dynamo::bytecode {

struct AsmInstruction {
  int opcode = 0;
  int arg = 0;      // ignored for jumps: computed from `target`
  int target = -1;  // jumps: index of the destination instruction
  Location location;
  // EXTENDED_ARG prefixes the instruction carried when decoded (ToProgram
  // fills it; new instructions leave 0). Jump sizes are relaxed from here,
  // as CPython relaxes from its previous layout: a backward jump whose own
  // prefix makes its distance need one is stable with or without it, and
  // the compiler's choice comes back only when relaxation starts from it.
  int prefixes = 0;
};

// Instructions [start, end) are protected by the handler at index `target`.
struct AsmExceptionEntry {
  int start = 0;
  int end = 0;
  int target = 0;
  int depth = 0;
  bool lasti = false;
};

struct AsmProgram {
  int first_line = 0;
  int flags = 0;  // co_flags: generators and coroutines start with one stack item
  std::vector<AsmInstruction> instructions;
  std::vector<AsmExceptionEntry> exception_table;
};

struct AssembledCode {
  std::string code;             // co_code
  std::string exception_table;  // co_exceptiontable
  std::string line_table;       // co_linetable
  int stack_size = 0;           // co_stacksize
  std::vector<int> offsets;     // byte offset of each instruction (prefixes included)
};

// The decoded instructions as a program: jump targets and exception ranges
// become instruction indexes.
[[nodiscard]] absl::StatusOr<AsmProgram> ToProgram(const DecodedCode& decoded);

// Inserts `block` before instruction `at` (at == size appends). Indexes at or
// after `at` shift: jumps to the old instruction `at` keep landing on it, past
// the block; an exception range that strictly contains `at` grows to protect
// the block, one starting at `at` stays after it. Jump targets inside `block`
// are indexes in the program after insertion.
void InsertInstructions(AsmProgram& program, int at, const std::vector<AsmInstruction>& block);

[[nodiscard]] absl::StatusOr<AssembledCode> Assemble(const AsmProgram& program);

// The maximum stack depth, by the compiler's flow analysis with CPython's own
// stack effects; exception handlers start at depth + 1 + lasti.
[[nodiscard]] absl::StatusOr<int> StackDepth(const AsmProgram& program);

// `like.replace(co_code=..., co_exceptiontable=..., co_linetable=...,
// co_stacksize=..., **extra)`: a new code object with the assembled bytes.
[[nodiscard]] absl::StatusOr<python::Object> MakeCode(
    const python::Object& like, const AssembledCode& assembled,
    const std::vector<std::pair<std::string, python::Object>>& extra = {});

}  // namespace dynamo::bytecode
