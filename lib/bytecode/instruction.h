// The decoded form of CPython bytecode: one Instruction per opcode with its
// EXTENDED_ARG prefixes folded in and its inline cache entries skipped, and
// the tables that travel with a code object.
//
//   for (const Instruction& in : decoded.instructions)
//     if (in.opcode == generated::kLoadGlobal)
//       Use(decoded.Name(in.argument.index), in.argument.flag /* push NULL */);
#pragma once

#include "absl/strings/string_view.h"

namespace dynamo::bytecode {

// A source span as in co_positions(); -1 means "absent" (None in Python).
struct Location {
  int line = -1;
  int end_line = -1;
  int column = -1;
  int end_column = -1;
  bool operator==(const Location&) const = default;
};

// What an oparg means, resolved against the code object.
enum class ArgKind {
  kNone,          // the opcode takes no argument
  kRaw,           // a count or flag set used as-is (CALL 2, BUILD_TUPLE 3, ...)
  kConst,         // index into co_consts
  kName,          // index into co_names (after name_shift)
  kLocal,         // index into the fast locals (co_varnames part of localsplus);
                  // 3.13's LOAD_FAST_LOAD_FAST & co. name two (index, index2)
  kFree,          // index into localsplus naming a cell or free variable
  kJump,          // jump_target holds the destination byte offset
  kCompare,       // index into the comparison operators
  kBinaryOp,      // BINARY_OP's NB_ operator index
  kFormatValue,   // FORMAT_VALUE's conversion and has-spec bits; 3.13's CONVERT_VALUE
  kMakeFunction,  // MAKE_FUNCTION's (3.13: SET_FUNCTION_ATTRIBUTE's) flag bits
  kIntrinsic,     // CALL_INTRINSIC_1/2's function index (3.12+)
};

struct Argument {
  ArgKind kind = ArgKind::kNone;
  int index = -1;        // table index for kConst/kName/kLocal/kFree/kCompare/kBinaryOp
  int index2 = -1;       // kLocal of a kLocalPair opcode: the second local (low 4 bits)
  int jump_target = -1;  // byte offset, for kJump
  // kName: the flag bits below name_shift (LOAD_GLOBAL: push NULL;
  // LOAD_ATTR 3.12+: method load).
  int flags = 0;
  // Resolved text: name, variable, comparison or operator symbol. Views into
  // the owning DecodedCode or static tables.
  absl::string_view text;
  absl::string_view text2;  // the second local's name, with index2
};

struct Instruction {
  int offset = 0;         // byte offset of the first code unit, prefixes included
  int opcode_offset = 0;  // byte offset of the opcode itself (after EXTENDED_ARGs)
  int size = 0;           // bytes: EXTENDED_ARG prefixes + opcode + inline caches
  int opcode = 0;
  absl::string_view name;  // opcode name, from the generated table
  bool has_arg = false;
  int arg = 0;            // the full oparg, EXTENDED_ARG folded in
  Argument argument;
  Location location;      // of the opcode's code unit
  int starts_line = -1;   // line number if a new source line starts here (dis's rule)
  // 3.13's dis also starts a "line" where a run without line number begins
  // (printed "--"); starts_line stays -1 there.
  bool starts_no_line = false;
  bool is_jump_target = false;  // a jump lands here (dis.get_instructions's meaning)
  bool is_handler = false;      // an exception-table entry's handler starts here
  // Jump targets numbered 1, 2, ... in code order: the "L2" in 3.13's
  // dis.get_instructions argrepr ("to L2"); -1 where no jump lands.
  int label = -1;

  [[nodiscard]] int end_offset() const { return offset + size; }
};

// One row of co_exceptiontable, in byte offsets: [start, end) is protected,
// `target` is the handler, which starts with `depth` stack items kept (plus
// the offset of the raising instruction when `lasti`) and the exception.
struct ExceptionTableEntry {
  int start = 0;
  int end = 0;
  int target = 0;
  int depth = 0;
  bool lasti = false;
  bool operator==(const ExceptionTableEntry&) const = default;
};

}  // namespace dynamo::bytecode
