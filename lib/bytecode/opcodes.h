// Opcode metadata of the target CPython, generated at build time from that
// interpreter's `opcode` and `dis` modules (see gen_opcode_table.py).
//
//   const OpcodeInfo& info = Opcode(generated::kLoadGlobal);
//   info.name           -> "LOAD_GLOBAL"
//   info.cache_entries  -> 5 (3.11)
//   info.Has(kHasName)  -> true
#pragma once

#include "absl/strings/string_view.h"

namespace dynamo::bytecode {

enum OpcodeFlag : unsigned {
  kHasArg = 1u << 0,
  kHasConst = 1u << 1,
  kHasName = 1u << 2,
  kHasJumpRelative = 1u << 3,
  kHasJumpAbsolute = 1u << 4,
  kHasLocal = 1u << 5,
  kHasFree = 1u << 6,
  kHasCompare = 1u << 7,
  kBackwardJump = 1u << 8,
  kUnconditionalJump = 1u << 9,
  kScopeExit = 1u << 10,
  kLocalPair = 1u << 11,  // 3.13: two 4-bit local indices in one oparg
};

struct OpcodeInfo {
  const char* name;   // nullptr for numbers the target does not use
  unsigned flags;
  int cache_entries;  // inline CACHE code units after the instruction
  int name_shift;     // low oparg bits that are flags for name-index opcodes
  int counterpart;    // the same jump in the other direction, or -1
  // How dis writes the name when the oparg's low flag bit pushes NULL
  // (LOAD_GLOBAL "NULL + g" before 3.13, "g + NULL" from 3.13); nullptr
  // where no flag bit is shown.
  const char* flag_prefix;
  const char* flag_suffix;

  [[nodiscard]] constexpr bool Has(unsigned flag) const { return (flags & flag) != 0; }
  [[nodiscard]] constexpr bool IsJump() const {
    return Has(kHasJumpRelative) || Has(kHasJumpAbsolute);
  }
};

struct BinaryOpInfo {
  const char* name;    // "NB_ADD"
  const char* symbol;  // "+"
};

#include "lib/bytecode/opcode_table.inc"

[[nodiscard]] constexpr const OpcodeInfo& Opcode(int op) {
  return generated::kOpcodes[op & 0xff];
}
[[nodiscard]] constexpr int Deopt(int op) { return generated::kDeopt[op & 0xff]; }
[[nodiscard]] inline absl::string_view OpName(int op) {
  const char* name = Opcode(op).name;
  return name ? absl::string_view(name) : absl::string_view("<unknown>");
}
// CPython's own stack effect for (opcode, oparg); `jump` selects the branch
// taken (for jumps) or not taken. Returns an error value (INT_MIN) for an
// opcode the interpreter does not know.
[[nodiscard]] int StackEffect(int opcode, int oparg, bool jump);

}  // namespace dynamo::bytecode
