// The assembler really rewrites: instruction lists edited so that jump
// targets move across EXTENDED_ARG boundaries (inserted instructions, a long
// block inside every loop, inside every try body, and one so long that jumps
// need two prefix bytes) assemble into code objects that CPython reads and
// runs with the same results and argument mutations as the originals
// (test/python/bytecode_rewrite_cases.py).
#include <Python.h>

#include <catch2/catch.hpp>
#include <functional>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "lib/bytecode/assembler.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/opcodes.h"
#include "test/test_support.h"

namespace dynamo::bytecode {
namespace {

using python::Object;

struct EditStats {
  int insertions = 0;  // blocks inserted
};

// Instructions the 3.11 interpreter expects to be adjacent: specialised forms
// of the first skip over the second (PRECALL -> CALL, FOR_ITER -> STORE_FAST,
// KW_NAMES -> PRECALL), so nothing may be inserted between them.
bool CanInsertBefore(const AsmProgram& p, int at) {
  if (at <= 0 || at >= static_cast<int>(p.instructions.size())) return false;
  int prev = p.instructions[static_cast<size_t>(at - 1)].opcode;
  int next = p.instructions[static_cast<size_t>(at)].opcode;
  const char* prev_name = Opcode(prev).name;
  for (const char* glued : {"PRECALL", "KW_NAMES", "FOR_ITER", "SEND", "LOAD_METHOD",
                            "RETURN_GENERATOR", "YIELD_VALUE", "LOAD_CLOSURE", "PUSH_NULL"}) {
    if (absl::string_view(prev_name) == glued) return false;
  }
  return absl::string_view(Opcode(next).name) != "CALL" &&
         absl::string_view(Opcode(next).name) != "RESUME";
}

// A stack-neutral block: pairs of LOAD_CONST sentinel / POP_TOP.
std::vector<AsmInstruction> Block(int pairs, int sentinel, const Location& at) {
  std::vector<AsmInstruction> block;
  for (int i = 0; i < pairs; ++i) {
    block.push_back({generated::kLoadConst, sentinel, -1, at});
    block.push_back({generated::kPopTop, 0, -1, at});
  }
  return block;
}

using Edit = std::function<void(AsmProgram&, const DecodedCode&, int sentinel, EditStats&)>;

// Rewrites `code` and, recursively, every code object in its co_consts.
absl::StatusOr<Object> Rewrite(const Object& code, const Edit& edit, EditStats& stats) {
  absl::StatusOr<DecodedCode> d = Decode(code, {.nested = false});
  if (!d.ok()) return d.status();
  absl::StatusOr<AsmProgram> program = ToProgram(*d);
  if (!program.ok()) return program.status();

  std::vector<Object> consts = *python::AsVector(d->consts);
  for (Object& c : consts) {
    if (!PyCode_Check(c.get())) continue;
    absl::StatusOr<Object> inner = Rewrite(c, edit, stats);
    if (!inner.ok()) return inner.status();
    c = *inner;
  }
  const int sentinel = static_cast<int>(consts.size());
  consts.push_back(python::None());

  edit(*program, *d, sentinel, stats);
  absl::StatusOr<AssembledCode> assembled = Assemble(*program);
  if (!assembled.ok()) return assembled.status();
  return MakeCode(code, *assembled, {{"co_consts", python::MakeTuple(consts)}});
}

int CountExtendedArgs(const Object& code) {
  Object raw = Object::Steal(PyObject_GetAttrString(code.get(), "co_code"));
  const char* bytes = PyBytes_AsString(raw.get());
  int count = 0;
  for (Py_ssize_t i = 0; i < PyBytes_Size(raw.get()); i += 2) {
    count += static_cast<unsigned char>(bytes[i]) == generated::kExtendedArg;
  }
  Object consts = Object::Steal(PyObject_GetAttrString(code.get(), "co_consts"));
  std::vector<Object> items = *python::AsVector(consts);
  for (const Object& c : items) {
    if (PyCode_Check(c.get())) count += CountExtendedArgs(c);
  }
  return count;
}

void RunEdit(const std::string& label, const Edit& edit, int min_extended_arg) {
  Object cases_module = testing::ImportTestModule("bytecode_rewrite_cases");
  Object cases = *python::GetAttr(cases_module, "CASES");
  EditStats stats;
  int extended = 0;
  std::vector<Object> all_cases = *python::AsVector(cases);
  for (const Object& item : all_cases) {
    std::vector<Object> pair = *python::AsVector(item);
    Object fn = pair[0];
    Object code = *python::GetAttr(fn, "__code__");
    std::string name = *python::AsString(*python::GetAttr(fn, "__name__"));
    INFO(label << ": " << name);
    absl::StatusOr<Object> rewritten = Rewrite(code, edit, stats);
    DYNAMO_REQUIRE_OK(rewritten);
    extended += CountExtendedArgs(*rewritten);
    absl::StatusOr<Object> problems =
        python::CallMethod(cases_module, "check", {fn, *rewritten, pair[1]});
    DYNAMO_REQUIRE_OK(problems);
    std::vector<Object> found = *python::AsVector(*problems);
    for (const Object& p : found) FAIL_CHECK(python::Repr(p));
  }
  std::cout << "rewrite '" << label << "': " << stats.insertions << " blocks inserted, "
            << extended << " EXTENDED_ARG prefixes in the rewritten code\n";
  CHECK(stats.insertions > 0);
  CHECK(extended >= min_extended_arg);
}

TEST_CASE("NOPs in the middle move every jump that crosses them", "[bytecode][rewrite]") {
  RunEdit("300 NOPs at the first safe point past the middle",
          [](AsmProgram& p, const DecodedCode&, int, EditStats& s) {
            for (int i = static_cast<int>(p.instructions.size()) / 2;
                 i < static_cast<int>(p.instructions.size()); ++i) {
              if (!CanInsertBefore(p, i)) continue;
              Location loc = p.instructions[static_cast<size_t>(i)].location;
              InsertInstructions(p, i, std::vector<AsmInstruction>(300, {generated::kNop, 0, -1, loc}));
              ++s.insertions;
              return;
            }
          },
          15);
}

TEST_CASE("a long block inside every loop", "[bytecode][rewrite]") {
  RunEdit("200 LOAD_CONST/POP_TOP pairs before every backward jump",
          [](AsmProgram& p, const DecodedCode&, int sentinel, EditStats& s) {
            for (int i = static_cast<int>(p.instructions.size()) - 1; i > 0; --i) {
              const AsmInstruction& in = p.instructions[static_cast<size_t>(i)];
              if (!Opcode(in.opcode).Has(kBackwardJump) || !CanInsertBefore(p, i)) continue;
              InsertInstructions(p, i, Block(200, sentinel, in.location));
              ++s.insertions;
            }
          },
          10);
}

TEST_CASE("a long block inside every try body", "[bytecode][rewrite]") {
  RunEdit("150 pairs inside every protected range",
          [](AsmProgram& p, const DecodedCode& d, int sentinel, EditStats& s) {
            // Insert at a statement start strictly inside each range, from
            // the back so earlier indexes stay valid.
            std::vector<int> points;
            for (const AsmExceptionEntry& e : p.exception_table) {
              for (int i = e.start + 1; i < e.end; ++i) {
                if (d.instructions[static_cast<size_t>(i)].starts_line != -1 &&
                    CanInsertBefore(p, i)) {
                  points.push_back(i);
                  break;
                }
              }
            }
            std::sort(points.rbegin(), points.rend());
            points.erase(std::unique(points.begin(), points.end()), points.end());
            for (int i : points) {
              InsertInstructions(p, i, Block(150, sentinel, p.instructions[static_cast<size_t>(i)].location));
              ++s.insertions;
            }
          },
          5);
}

TEST_CASE("jumps across 64K code units need two prefixes", "[bytecode][rewrite]") {
  RunEdit("70,000 NOPs inside the first loop",
          [](AsmProgram& p, const DecodedCode&, int, EditStats& s) {
            for (int i = 1; i < static_cast<int>(p.instructions.size()); ++i) {
              const AsmInstruction& in = p.instructions[static_cast<size_t>(i)];
              if (!Opcode(in.opcode).Has(kBackwardJump) || !CanInsertBefore(p, i)) continue;
              InsertInstructions(p, i, std::vector<AsmInstruction>(70000, {generated::kNop, 0, -1, in.location}));
              ++s.insertions;
              return;
            }
          },
          2);
}

}  // namespace
}  // namespace dynamo::bytecode
