#include "lib/bytecode/disassemble.h"

#include <Python.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/bytecode/opcodes.h"

namespace dynamo::bytecode {
namespace {

constexpr int kOpnameWidth = 20;  // dis._OPNAME_WIDTH
constexpr int kOpargWidth = 5;    // dis._OPARG_WIDTH

std::string ConstRepr(const DecodedCode& code, int index) {
  python::Object c = code.Constant(index);
  if (PyCode_Check(c.get())) {
    auto* co = reinterpret_cast<PyCodeObject*>(c.get());
    python::Object name = python::Object::Borrow(co->co_name);
    absl::StatusOr<std::string> s = python::AsString(name);
    return absl::StrCat("<code object ", s.ok() ? *s : "?", ", line ", co->co_firstlineno, ">");
  }
  return python::Repr(c);
}

void DisassembleOne(const DecodedCode& code, const DisassembleOptions& options,
                    std::string& out) {
  absl::StrAppend(&out, "Disassembly of ", code.qualname, " (", code.filename, ", line ",
                  code.first_line, "):\n");
  int max_line = 0;
  for (const Instruction& in : code.instructions) max_line = std::max(max_line, in.starts_line);
  const int line_width = max_line >= 1000 ? static_cast<int>(absl::StrCat(max_line).size()) : 3;
  const int max_offset = code.code_units * 2 - 2;
  const int offset_width = max_offset >= 10000 ? static_cast<int>(absl::StrCat(max_offset).size()) : 4;
  for (const Instruction& in : code.instructions) {
    if (in.starts_line != -1 && in.offset > 0) out += "\n";
    std::string line = in.starts_line != -1 ? absl::StrFormat("%*d", line_width, in.starts_line)
                                            : std::string(static_cast<size_t>(line_width), ' ');
    std::string row = absl::StrFormat("%s     %s %*d %-*s", line, in.is_jump_target || in.is_handler ? ">>" : "  ",
                                      offset_width, in.offset, kOpnameWidth, in.name);
    if (in.has_arg) {
      absl::StrAppend(&row, absl::StrFormat(" %*d", kOpargWidth, in.arg));
      std::string repr = ArgRepr(code, in);
      if (!repr.empty()) absl::StrAppend(&row, " (", repr, ")");
    }
    row.erase(row.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, row, "\n");
  }
  if (options.exception_table && !code.exception_table.empty()) {
    out += "ExceptionTable:\n";
    for (const ExceptionTableEntry& e : code.exception_table) {
      absl::StrAppend(&out, "  ", e.start, " to ", e.end - 2, " -> ", e.target, " [", e.depth,
                      "]", e.lasti ? " lasti" : "", "\n");
    }
  }
}

}  // namespace

std::string ArgRepr(const DecodedCode& code, const Instruction& in) {
  const Argument& a = in.argument;
  switch (a.kind) {
    case ArgKind::kNone:
    case ArgKind::kRaw:
      return "";
    case ArgKind::kConst:
      return ConstRepr(code, a.index);
    case ArgKind::kName:
      if (in.opcode == generated::kLoadGlobal && (a.flags & 1)) return absl::StrCat("NULL + ", a.text);
      return std::string(a.text);
    case ArgKind::kLocal:
    case ArgKind::kFree:
    case ArgKind::kCompare:
    case ArgKind::kBinaryOp:
      return std::string(a.text);
    case ArgKind::kJump:
      return absl::StrCat("to ", a.jump_target);
    case ArgKind::kFormatValue: {
      static constexpr const char* kConverters[] = {"", "str", "repr", "ascii"};
      std::string repr = kConverters[in.arg & 3];
      if (in.arg & 4) absl::StrAppend(&repr, repr.empty() ? "" : ", ", "with format");
      return repr;
    }
    case ArgKind::kMakeFunction: {
      static constexpr const char* kFlags[] = {"defaults", "kwdefaults", "annotations", "closure"};
      std::vector<std::string> parts;
      for (int i = 0; i < 4; ++i) {
        if (in.arg & (1 << i)) parts.emplace_back(kFlags[i]);
      }
      return absl::StrJoin(parts, ", ");
    }
  }
  return "";
}

std::string Disassemble(const DecodedCode& code, const DisassembleOptions& options) {
  std::string out;
  DisassembleOne(code, options, out);
  if (options.nested) {
    for (const DecodedCode& inner : code.nested) {
      out += "\n";
      out += Disassemble(inner, options);
    }
  }
  return out;
}

}  // namespace dynamo::bytecode
