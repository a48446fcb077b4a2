// Human-readable listings of decoded code, in the layout of the target
// version's `dis` (3.11, 3.12: line, jump-target marker, offset, opcode,
// oparg, resolved argument; 3.13: line, label, opcode, oparg, argument with
// jumps and the exception table naming labels), with EXTENDED_ARG folded
// into the instruction it extends and headers that carry no memory
// addresses, so listings can be diffed. test/bytecode/corpus_test.cc
// compares them with dis.disassemble line for line.
//
//   std::string text = Disassemble(*Decode(code));
#pragma once

#include <functional>
#include <string>

#include "lib/bytecode/decoder.h"

namespace dynamo::bytecode {

struct DisassembleOptions {
  bool nested = true;           // also list nested code objects, after their parent
  bool exception_table = true;  // print the ExceptionTable section
};

// The text dis puts in parentheses after the oparg ("NULL + torch", "to 24",
// "+"), except that code-object constants print as "<code object f, line 3>"
// (dis includes an address) and KW_NAMES shows its names (3.11's dis leaves
// them unresolved).
[[nodiscard]] std::string ArgRepr(const DecodedCode& code, const Instruction& in);
// The same, with 3.13's jump labels numbered by `label_of(offset)` (dis's
// text numbers exception-table offsets too, get_instructions only jump
// targets, which the overload above uses).
[[nodiscard]] std::string ArgRepr(const DecodedCode& code, const Instruction& in,
                                  const std::function<int(int)>& label_of);

[[nodiscard]] std::string Disassemble(const DecodedCode& code,
                                      const DisassembleOptions& options = {});

}  // namespace dynamo::bytecode
