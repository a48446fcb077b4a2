// Decodes a CPython code object into Instructions, resolved against its own
// tables, with its exception table, locations and nested code objects.
//
//   absl::StatusOr<DecodedCode> d = Decode(code_object);
//   for (const Instruction& in : d->instructions) ...
//   for (const DecodedCode& inner : d->nested) ...  // lambdas, comprehensions, defs
//
// The result agrees with the target version's `dis.get_instructions` and
// `dis._parse_exception_table` on every code object of its standard library,
// torch and torchvision, on 3.11, 3.12 and 3.13 (test/bytecode/corpus_test.cc).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/bytecode/instruction.h"
#include "lib/python/object.h"

namespace dynamo::bytecode {

struct DecodeOptions {
  bool nested = true;  // also decode code objects found in co_consts, recursively
};

// Move-only: instructions hold views into the tables below.
struct DecodedCode {
  python::Object code;  // the code object itself
  std::string name;
  std::string qualname;
  std::string filename;
  int first_line = 0;
  int stack_size = 0;
  int flags = 0;
  int code_units = 0;   // len(co_code) / 2

  python::Object consts;                // co_consts (a tuple)
  std::vector<std::string> names;       // co_names
  std::vector<std::string> localsplus;  // the frame's variable slots, in order
  int num_locals = 0;                   // len(co_varnames)

  std::vector<Instruction> instructions;
  std::vector<ExceptionTableEntry> exception_table;
  std::vector<DecodedCode> nested;  // code objects in co_consts, in order

  DecodedCode() = default;
  DecodedCode(DecodedCode&&) = default;
  DecodedCode& operator=(DecodedCode&&) = default;
  DecodedCode(const DecodedCode&) = delete;
  DecodedCode& operator=(const DecodedCode&) = delete;

  // co_consts[index], borrowed into a new handle.
  [[nodiscard]] python::Object Constant(int index) const;
  // The instruction starting at byte `offset` (prefixes included), or null.
  [[nodiscard]] const Instruction* At(int offset) const;
};

[[nodiscard]] absl::StatusOr<DecodedCode> Decode(const python::Object& code,
                                                 const DecodeOptions& options = {});

}  // namespace dynamo::bytecode
