#include "lib/bytecode/tables.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "lib/bytecode/opcodes.h"

namespace dynamo::bytecode {
namespace {

// Location-table entry codes (CPython's Objects/locations.md).
constexpr int kShortForms = 10;   // 0..9: same line, column group in the code
constexpr int kOneLine0 = 10;     // 10..12: line delta 0..2, one-byte columns
constexpr int kNoColumn = 13;
constexpr int kLongForm = 14;
constexpr int kNone = 15;
constexpr int kMaxRunUnits = 8;   // an entry covers at most 8 code units

class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }
  size_t pos() const { return pos_; }
  absl::StatusOr<uint8_t> Byte() {
    if (done()) return absl::DataLossError("location table ends inside an entry");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  // Little-endian 6-bit groups, 0x40 = more follow.
  absl::StatusOr<unsigned> Varint() {
    unsigned value = 0;
    for (int shift = 0;; shift += 6) {
      absl::StatusOr<uint8_t> b = Byte();
      if (!b.ok()) return b.status();
      value |= static_cast<unsigned>(*b & 0x3f) << shift;
      if ((*b & 0x40) == 0) return value;
      if (shift > 24) return absl::DataLossError("varint too long in location table");
    }
  }
  absl::StatusOr<int> SignedVarint() {
    absl::StatusOr<unsigned> u = Varint();
    if (!u.ok()) return u.status();
    int magnitude = static_cast<int>(*u >> 1);
    return (*u & 1) ? -magnitude : magnitude;
  }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

void PutVarint(std::string& out, unsigned value) {
  while (value >= 64) {
    out.push_back(static_cast<char>(0x40 | (value & 0x3f)));
    value >>= 6;
  }
  out.push_back(static_cast<char>(value));
}

void PutSignedVarint(std::string& out, int value) {
  PutVarint(out, value < 0 ? (static_cast<unsigned>(-value) << 1) | 1u
                           : static_cast<unsigned>(value) << 1);
}

void PutFirstByte(std::string& out, int code, int units) {
  out.push_back(static_cast<char>(0x80 | (code << 3) | (units - 1)));
}

// One entry of at most kMaxRunUnits units, in the shortest form the compiler
// would choose; `line` is the running line number, updated like the decoder's.
void PutEntry(std::string& out, const Location& loc, int units, int& line) {
  if (loc.line < 0) {
    PutFirstByte(out, kNone, units);
    return;
  }
  int delta = loc.line - line;
  if (loc.column < 0 || loc.end_column < 0) {
    if (loc.end_line == loc.line || loc.end_line == -1) {
      PutFirstByte(out, kNoColumn, units);
      PutSignedVarint(out, delta);
      line = loc.line;
      return;
    }
  } else if (loc.end_line == loc.line) {
    if (delta == 0 && loc.column < 80 && loc.end_column - loc.column < 16 &&
        loc.end_column >= loc.column) {
      PutFirstByte(out, loc.column >> 3, units);
      out.push_back(static_cast<char>(((loc.column & 7) << 4) | (loc.end_column - loc.column)));
      return;
    }
    if (delta >= 0 && delta < 3 && loc.column < 128 && loc.end_column < 128) {
      PutFirstByte(out, kOneLine0 + delta, units);
      out.push_back(static_cast<char>(loc.column));
      out.push_back(static_cast<char>(loc.end_column));
      line = loc.line;
      return;
    }
  }
  PutFirstByte(out, kLongForm, units);
  PutSignedVarint(out, delta);
  PutVarint(out, static_cast<unsigned>(loc.end_line - loc.line));
  PutVarint(out, static_cast<unsigned>(loc.column + 1));
  PutVarint(out, static_cast<unsigned>(loc.end_column + 1));
  line = loc.line;
}

}  // namespace

absl::StatusOr<std::vector<Location>> DecodeLocationTable(absl::string_view table, int first_line,
                                                          int code_units) {
  std::vector<Location> out;
  out.reserve(static_cast<size_t>(code_units));
  Reader r(table);
  int line = first_line;
  while (!r.done()) {
    absl::StatusOr<uint8_t> first = r.Byte();
    if (!first.ok()) return first.status();
    if ((*first & 0x80) == 0) {
      return absl::DataLossError(
          absl::StrCat("location table: byte ", r.pos() - 1, " does not start an entry"));
    }
    int code = (*first >> 3) & 15;
    int units = (*first & 7) + 1;
    Location loc;
    if (code == kNone) {
      // No location; the running line is unchanged.
    } else if (code == kLongForm) {
      absl::StatusOr<int> delta = r.SignedVarint();
      absl::StatusOr<unsigned> end_delta = delta.ok() ? r.Varint() : delta.status();
      absl::StatusOr<unsigned> col = end_delta.ok() ? r.Varint() : end_delta.status();
      absl::StatusOr<unsigned> end_col = col.ok() ? r.Varint() : col.status();
      if (!end_col.ok()) return end_col.status();
      line += *delta;
      loc = {line, line + static_cast<int>(*end_delta), static_cast<int>(*col) - 1,
             static_cast<int>(*end_col) - 1};
    } else if (code == kNoColumn) {
      absl::StatusOr<int> delta = r.SignedVarint();
      if (!delta.ok()) return delta.status();
      line += *delta;
      loc = {line, line, -1, -1};
    } else if (code >= kOneLine0) {
      absl::StatusOr<uint8_t> col = r.Byte();
      absl::StatusOr<uint8_t> end_col = col.ok() ? r.Byte() : col.status();
      if (!end_col.ok()) return end_col.status();
      line += code - kOneLine0;
      loc = {line, line, *col, *end_col};
    } else {
      static_assert(kShortForms == kOneLine0);
      absl::StatusOr<uint8_t> second = r.Byte();
      if (!second.ok()) return second.status();
      int col = code * 8 + (*second >> 4);
      loc = {line, line, col, col + (*second & 15)};
    }
    out.insert(out.end(), static_cast<size_t>(units), loc);
  }
  if (static_cast<int>(out.size()) != code_units) {
    return absl::DataLossError(absl::StrCat("location table covers ", out.size(),
                                            " code units, the code has ", code_units));
  }
  return out;
}

std::string EncodeLocationTable(const std::vector<LocationRun>& runs, int first_line) {
  return EncodeLocationTable(runs, first_line, generated::kMergeLocationRuns);
}

std::string EncodeLocationTable(const std::vector<LocationRun>& runs, int first_line,
                                bool merge) {
  std::string out;
  int line = first_line;
  size_t i = 0;
  while (i < runs.size()) {
    Location loc = runs[i].location;
    int units = runs[i++].units;
    for (; merge && i < runs.size() && runs[i].location == loc; ++i) units += runs[i].units;
    // The compiler splits long runs from the front: 8, 8, ..., remainder.
    while (units > kMaxRunUnits) {
      PutEntry(out, loc, kMaxRunUnits, line);
      units -= kMaxRunUnits;
    }
    if (units > 0) PutEntry(out, loc, units, line);
  }
  return out;
}

absl::StatusOr<std::vector<ExceptionTableEntry>> DecodeExceptionTable(absl::string_view table) {
  std::vector<ExceptionTableEntry> out;
  size_t pos = 0;
  // Big-endian 6-bit groups, 0x40 = more follow; 0x80 marks an entry's start.
  auto item = [&](bool first) -> absl::StatusOr<int> {
    if (pos >= table.size()) return absl::DataLossError("exception table ends inside an entry");
    uint8_t b = static_cast<uint8_t>(table[pos++]);
    if (first != ((b & 0x80) != 0)) {
      return absl::DataLossError(
          absl::StrCat("exception table: entry boundary out of place at byte ", pos - 1));
    }
    int value = b & 0x3f;
    while (b & 0x40) {
      if (pos >= table.size()) return absl::DataLossError("exception table ends inside a number");
      // Offsets are code units: doubled to bytes and added below, each stays
      // under 2^28 so that no arithmetic on them overflows.
      if (value >= (1 << 22)) return absl::DataLossError("exception table: a number past 2^28");
      b = static_cast<uint8_t>(table[pos++]);
      value = (value << 6) | (b & 0x3f);
    }
    return value;
  };
  while (pos < table.size()) {
    absl::StatusOr<int> start = item(true);
    absl::StatusOr<int> length = start.ok() ? item(false) : start.status();
    absl::StatusOr<int> target = length.ok() ? item(false) : length.status();
    absl::StatusOr<int> depth_lasti = target.ok() ? item(false) : target.status();
    if (!depth_lasti.ok()) return depth_lasti.status();
    out.push_back({*start * 2, (*start + *length) * 2, *target * 2, *depth_lasti >> 1,
                   (*depth_lasti & 1) != 0});
  }
  return out;
}

std::string EncodeExceptionTable(const std::vector<ExceptionTableEntry>& entries) {
  std::string out;
  auto item = [&out](int value, int start_bit) {
    int shift = 0;
    while ((value >> (shift + 6)) != 0) shift += 6;
    for (; shift > 0; shift -= 6) {
      out.push_back(static_cast<char>(start_bit | 0x40 | ((value >> shift) & 0x3f)));
      start_bit = 0;
    }
    out.push_back(static_cast<char>(start_bit | (value & 0x3f)));
  };
  for (const ExceptionTableEntry& e : entries) {
    item(e.start / 2, 0x80);
    item((e.end - e.start) / 2, 0);
    item(e.target / 2, 0);
    item((e.depth << 1) | (e.lasti ? 1 : 0), 0);
  }
  return out;
}

}  // namespace dynamo::bytecode
