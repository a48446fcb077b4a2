// Unit tests of lib/bytecode's pieces: the table codecs' every form and
// boundary, and the assembler's relaxation, jump flipping and refusals. The
// corpus-wide proofs against CPython are in test/bytecode/.
#include <Python.h>

#include <catch2/catch.hpp>

#include "lib/bytecode/assembler.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/disassemble.h"
#include "lib/bytecode/opcodes.h"
#include "lib/bytecode/tables.h"
#include "absl/strings/str_cat.h"
#include "test/test_support.h"

namespace dynamo::bytecode {
namespace {

using generated::kJumpForward;
using generated::kLoadConst;
using generated::kNop;
using generated::kPopTop;
using generated::kReturnValue;

// A conditional jump every version has: 3.11 names the direction, 3.12+ has
// one forward-only opcode.
#ifdef DYNAMO_HAS_POP_JUMP_IF_TRUE
constexpr int kPopJumpIfTrue = generated::kPopJumpIfTrue;
#else
constexpr int kPopJumpIfTrue = generated::kPopJumpForwardIfTrue;
#endif

std::string Hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += absl::StrCat(absl::Hex(c, absl::kZeroPad2), " ");
  return out;
}

TEST_CASE("location table: every entry form decodes to what was encoded", "[bytecode][tables]") {
  const int first = 10;
  std::vector<LocationRun> runs = {
      {{10, 10, 4, 9}, 1},      // short form (same line, col < 80, width < 16)
      {{11, 11, 100, 120}, 2},  // one-line form, delta 1
      {{11, 11, 2, 40}, 1},     // one-line form, delta 0 (too wide for short)
      {{13, 15, 0, 7}, 3},      // long form: spans lines
      {{14, -1, -1, -1}, 1},    // no-column form (end_line -1 means "same line")
      {{-1, -1, -1, -1}, 2},    // no location
      {{7, 7, 200, 210}, 1},    // negative line delta: long form
      {{7, 7, 1, 2}, 12},       // more than 8 units: split 8 + 4
  };
  for (bool merge : {false, true}) {
    std::string table = EncodeLocationTable(runs, first, merge);
    int units = 0;
    for (const LocationRun& r : runs) units += r.units;
    absl::StatusOr<std::vector<Location>> decoded = DecodeLocationTable(table, first, units);
    DYNAMO_REQUIRE_OK(decoded);
    size_t u = 0;
    for (const LocationRun& r : runs) {
      Location want = r.location;
      if (want.line >= 0 && want.end_line == -1) want.end_line = want.line;
      for (int k = 0; k < r.units; ++k, ++u) {
        INFO("unit " << u << " merge " << merge << " table " << Hex(table));
        CHECK((*decoded)[u] == want);
      }
    }
  }
  // Byte-exact forms: short form code 0 (col 4 is in group 0), one unit.
  CHECK(Hex(EncodeLocationTable({{{10, 10, 4, 9}, 1}}, 10, false)) == "80 45 ");
  // One-line form, delta 1, two units: code 11.
  CHECK(Hex(EncodeLocationTable({{{11, 11, 100, 120}, 2}}, 10, false)) == "d9 64 78 ");
  // No location, 3 units: code 15.
  CHECK(Hex(EncodeLocationTable({{{-1, -1, -1, -1}, 3}}, 10, false)) == "fa ");
}

TEST_CASE("location table: 3.11 writes each instruction, 3.12 merges equal runs", "[bytecode][tables]") {
  std::vector<LocationRun> same = {{{5, 5, 0, 3}, 1}, {{5, 5, 0, 3}, 1}};
  CHECK(EncodeLocationTable(same, 5, false).size() == 4);
  CHECK(EncodeLocationTable(same, 5, true).size() == 2);
}

TEST_CASE("location table: malformed input is refused with a reason", "[bytecode][tables]") {
  std::string table = EncodeLocationTable({{{3, 3, 0, 1}, 2}}, 3, false);
  CHECK(DecodeLocationTable(table, 3, 3).status().code() == absl::StatusCode::kDataLoss);
  CHECK_FALSE(DecodeLocationTable(table.substr(0, 1), 3, 2).ok());  // truncated entry
  CHECK_FALSE(DecodeLocationTable(std::string("\x05", 1), 3, 1).ok());  // no start bit
}

TEST_CASE("exception table: multi-byte numbers round-trip", "[bytecode][tables]") {
  std::vector<ExceptionTableEntry> entries = {
      {0, 2, 4, 0, false},
      {128, 8192 + 64, 300000, 63, true},          // 2- and 3-group numbers
      {2 * (1 << 20), 2 * (1 << 20) + 2, 2 * (1 << 25), 1 << 20, false},  // 5 groups
  };
  std::string table = EncodeExceptionTable(entries);
  CHECK((static_cast<unsigned char>(table[0]) & 0x80) != 0);
  absl::StatusOr<std::vector<ExceptionTableEntry>> decoded = DecodeExceptionTable(table);
  DYNAMO_REQUIRE_OK(decoded);
  CHECK(*decoded == entries);
  CHECK_FALSE(DecodeExceptionTable(table.substr(0, table.size() - 1)).ok());
  CHECK_FALSE(DecodeExceptionTable(table.substr(1)).ok());  // starts mid-entry
}

AsmProgram Straight(int nops_between) {
  // 0: JUMP_FORWARD -> last;  NOP * n;  LOAD_CONST 0;  RETURN_VALUE
  AsmProgram p;
  p.first_line = 1;
  Location loc{1, 1, 0, 1};
  p.instructions.push_back({kJumpForward, 0, nops_between + 1, loc});
  for (int i = 0; i < nops_between; ++i) p.instructions.push_back({kNop, 0, -1, loc});
  p.instructions.push_back({kLoadConst, 0, -1, loc});
  p.instructions.push_back({kReturnValue, 0, -1, loc});
  return p;
}

TEST_CASE("assembler: EXTENDED_ARG exactly when a jump passes 255 units", "[bytecode][assembler]") {
  absl::StatusOr<AssembledCode> fits = Assemble(Straight(255));
  DYNAMO_REQUIRE_OK(fits);
  CHECK(static_cast<unsigned char>(fits->code[0]) == kJumpForward);
  CHECK(static_cast<unsigned char>(fits->code[1]) == 255);

  absl::StatusOr<AssembledCode> grows = Assemble(Straight(256));
  DYNAMO_REQUIRE_OK(grows);
  CHECK(static_cast<unsigned char>(grows->code[0]) == generated::kExtendedArg);
  CHECK(static_cast<unsigned char>(grows->code[1]) == 1);
  CHECK(static_cast<unsigned char>(grows->code[2]) == kJumpForward);
  CHECK(static_cast<unsigned char>(grows->code[3]) == 0);
  CHECK(grows->offsets[1] == 4);  // everything after the jump moved by the prefix
  CHECK(grows->stack_size == 1);
}

TEST_CASE("assembler: a jump that ends up backward switches opcode", "[bytecode][assembler]") {
  AsmProgram p;
  Location loc{1, 1, 0, 1};
  // 0: NOP  1: JUMP_FORWARD -> 0 (backward!)  -- an infinite loop, assembled only.
  p.instructions = {{kNop, 0, -1, loc}, {kJumpForward, 0, 0, loc}};
  absl::StatusOr<AssembledCode> a = Assemble(p);
  DYNAMO_REQUIRE_OK(a);
  CHECK(static_cast<unsigned char>(a->code[2]) == generated::kJumpBackward);
  // Back over the NOP, itself and its inline caches (3.13 gives JUMP_BACKWARD one).
  CHECK(static_cast<unsigned char>(a->code[3]) == 2 + Opcode(generated::kJumpBackward).cache_entries);
}

TEST_CASE("assembler: a conditional jump backward flips where the version can", "[bytecode][assembler]") {
  Location loc{1, 1, 0, 1};
  // 0: NOP  1: LOAD_CONST  2: POP_JUMP_IF_TRUE -> 0  3: LOAD_CONST  4: RETURN_VALUE
  AsmProgram p;
  p.instructions = {{kNop, 0, -1, loc}, {kLoadConst, 0, -1, loc}, {kPopJumpIfTrue, 0, 0, loc},
                    {kLoadConst, 0, -1, loc}, {kReturnValue, 0, -1, loc}};
  absl::StatusOr<AssembledCode> a = Assemble(p);
  const int backward = Opcode(kPopJumpIfTrue).counterpart;
  if (backward >= 0) {  // 3.11: POP_JUMP_BACKWARD_IF_TRUE
    DYNAMO_REQUIRE_OK(a);
    CHECK(static_cast<unsigned char>(a->code[a->offsets[2]]) == backward);
  } else {  // 3.12+: no backward conditional jump exists; never a wrong encoding
    REQUIRE_FALSE(a.ok());
    INFO(a.status().message());
    CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(a.status().message()).find("can only jump forward") != std::string::npos);
  }
}

TEST_CASE("assembler: refuses programs CPython could not run", "[bytecode][assembler]") {
  Location loc{1, 1, 0, 1};
  auto fails = [](const AsmProgram& p, const std::string& fragment) {
    absl::StatusOr<AssembledCode> a = Assemble(p);
    REQUIRE_FALSE(a.ok());
    INFO(a.status().message());
    CHECK(std::string(a.status().message()).find(fragment) != std::string::npos);
  };
  AsmProgram p;
  p.instructions = {{kLoadConst, 0, -1, loc}, {kReturnValue, 0, -1, loc}};
  REQUIRE(Assemble(p).ok());

  AsmProgram underflow = p;
  underflow.instructions.insert(underflow.instructions.begin(), {kPopTop, 0, -1, loc});
  fails(underflow, "stack underflow");

  AsmProgram falls_off = p;
  falls_off.instructions.pop_back();
  fails(falls_off, "falls off the end");

  AsmProgram no_target = p;
  no_target.instructions.insert(no_target.instructions.begin(), {kJumpForward, 0, 9, loc});
  fails(no_target, "jump target 9");

  AsmProgram explicit_prefix = p;
  explicit_prefix.instructions.insert(explicit_prefix.instructions.begin(),
                                      {generated::kExtendedArg, 1, -1, loc});
  fails(explicit_prefix, "emitted by the assembler");

  AsmProgram no_arg = p;
  no_arg.instructions[1].arg = 3;
  fails(no_arg, "takes no argument");

  // Reached with depth 0 by the jump and depth 1 by falling through.
  AsmProgram conflict;
  conflict.instructions = {
      {generated::kLoadConst, 0, -1, loc},            // depth 1
      {kPopJumpIfTrue, 0, 3, loc},                    // pops: target at depth 0
      {generated::kLoadConst, 0, -1, loc},            // depth 1 falls into 3
      {generated::kReturnValue, 0, -1, loc},
  };
  fails(conflict, "stack depths");
}

// The decoder's reading of version-specific arguments, on code compiled by
// the target itself; the corpus test proves the same against dis at scale.
TEST_CASE("decoder: arguments carry what dis shows", "[bytecode][decoder]") {
  python::Object module = testing::ModuleFromSource("decoder_args", R"(
def f(o, a, b):
    o.m(g, a + b)
    return a < b
)");
  absl::StatusOr<python::Object> fn = python::GetAttr(module, "f");
  DYNAMO_REQUIRE_OK(fn);
  absl::StatusOr<python::Object> code = python::GetAttr(*fn, "__code__");
  DYNAMO_REQUIRE_OK(code);
  absl::StatusOr<DecodedCode> d = Decode(*code);
  DYNAMO_REQUIRE_OK(d);
  bool saw_global = false, saw_compare = false;
  for (const Instruction& in : d->instructions) {
    INFO(in.name << " " << in.arg << " (" << ArgRepr(*d, in) << ")");
    if (in.opcode == generated::kLoadGlobal) {
      saw_global = true;
      CHECK(in.argument.text == "g");
      // "NULL + g" up to 3.12, "g + NULL" in 3.13: the flag is shown either way.
      const bool shows_null = ArgRepr(*d, in) != "g";
      CHECK(shows_null == ((in.argument.flags & 1) != 0));
    }
    if (in.opcode == generated::kCompareOp) {
      saw_compare = true;
      CHECK(in.argument.text == "<");
    }
    if (Opcode(in.opcode).Has(kLocalPair)) {  // 3.13: LOAD_FAST_LOAD_FAST a, b
      CHECK(in.argument.index == 1);
      CHECK(in.argument.index2 == 2);
      CHECK(ArgRepr(*d, in) == "a, b");
    }
  }
  CHECK(saw_global);
  CHECK(saw_compare);
}

TEST_CASE("InsertInstructions keeps jumps and protected ranges consistent", "[bytecode][assembler]") {
  Location loc{1, 1, 0, 1};
  AsmProgram p;
  p.instructions = {{kNop, 0, -1, loc}, {kNop, 0, -1, loc}, {kJumpForward, 0, 3, loc},
                    {kLoadConst, 0, -1, loc}, {kReturnValue, 0, -1, loc}};
  p.exception_table = {{1, 3, 4, 0, false}, {3, 4, 4, 0, false}};
  InsertInstructions(p, 3, {{kNop, 0, -1, loc}, {kNop, 0, -1, loc}});
  CHECK(p.instructions.size() == 7);
  CHECK(p.instructions[2].target == 5);  // still lands on LOAD_CONST, past the block
  CHECK(p.exception_table[0].start == 1);
  CHECK(p.exception_table[0].end == 3);  // ended right before the block: unchanged
  CHECK(p.exception_table[1].start == 5);  // started at the insertion point: after it
  CHECK(p.exception_table[1].end == 6);
  CHECK(p.exception_table[0].target == 6);
  InsertInstructions(p, 2, {{kNop, 0, -1, loc}});
  CHECK(p.exception_table[0].end == 4);  // strictly inside: the range grows
}

}  // namespace
}  // namespace dynamo::bytecode
