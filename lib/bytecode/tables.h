// Codecs for the two tables a 3.11+ code object carries beside co_code:
// the location table (co_linetable, PEP 657) and the exception table
// (co_exceptiontable). Decoding is lenient only where CPython is; encoding
// makes the same choices as CPython's compiler, so a decode/encode round
// trip is byte-identical.
//
//   std::vector<Location> per_unit = *DecodeLocationTable(linetable, first_line, n_units);
//   std::string again = EncodeLocationTable(RunsOf(per_unit), first_line);
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "lib/bytecode/instruction.h"

namespace dynamo::bytecode {

// The location of every code unit (2-byte word) of co_code.
[[nodiscard]] absl::StatusOr<std::vector<Location>> DecodeLocationTable(
    absl::string_view table, int first_line, int code_units);

// `units` consecutive code units that share `location`.
struct LocationRun {
  Location location;
  int units = 0;
};

// Encodes runs (one per instruction) in code order. With `merge`, adjacent
// runs with equal locations share entries, as the 3.12+ compiler does; 3.11
// writes each instruction separately. The default is the target's behaviour.
[[nodiscard]] std::string EncodeLocationTable(const std::vector<LocationRun>& runs,
                                              int first_line, bool merge);
[[nodiscard]] std::string EncodeLocationTable(const std::vector<LocationRun>& runs,
                                              int first_line);

[[nodiscard]] absl::StatusOr<std::vector<ExceptionTableEntry>> DecodeExceptionTable(
    absl::string_view table);
[[nodiscard]] std::string EncodeExceptionTable(const std::vector<ExceptionTableEntry>& entries);

}  // namespace dynamo::bytecode
