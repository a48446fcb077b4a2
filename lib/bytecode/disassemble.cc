#include "lib/bytecode/disassemble.h"

#include <Python.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

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

// 3.13's layout (dis.Formatter): no offsets; a label column ("L3:") for
// every jump target and exception-table boundary, which the arguments and
// the exception table name instead of offsets; "--" for a run without line.
void DisassembleLabeled(const DecodedCode& code, const DisassembleOptions& options,
                        std::string& out) {
  std::set<int> targets;
  for (const Instruction& in : code.instructions) {
    if (in.is_jump_target) targets.insert(in.offset);
  }
  for (const ExceptionTableEntry& e : code.exception_table) {
    targets.insert({e.start, e.end, e.target});
  }
  std::map<int, int> labels;
  for (int offset : targets) labels.emplace(offset, static_cast<int>(labels.size()) + 1);
  auto label_of = [&labels](int offset) {
    auto it = labels.find(offset);
    return it == labels.end() ? -1 : it->second;
  };
  const int label_width = 4 + static_cast<int>(absl::StrCat(labels.size()).size());
  int max_line = -1;
  bool no_line_start = false;
  for (const Instruction& in : code.instructions) {
    if (in.starts_line > 0) max_line = std::max(max_line, in.starts_line);
    no_line_start |= in.starts_no_line;
  }
  constexpr absl::string_view kNoLine = "  --";  // dis._NO_LINENO
  int line_width = 0;  // no line column at all when no line is known
  if (max_line != -1) {
    line_width = std::max(3, static_cast<int>(absl::StrCat(max_line).size()));
    if (line_width < static_cast<int>(kNoLine.size()) && no_line_start) line_width = kNoLine.size();
  }
  for (const Instruction& in : code.instructions) {
    const bool starts = in.starts_line != -1 || in.starts_no_line;
    if (line_width > 0 && starts && in.offset > 0) out += "\n";
    std::vector<std::string> fields;
    if (line_width > 0) {
      if (in.starts_line != -1) {
        fields.push_back(absl::StrFormat("%*d", line_width, in.starts_line));
      } else if (in.starts_no_line) {
        fields.push_back(absl::StrFormat("%*s", line_width, kNoLine));
      } else {
        fields.emplace_back(static_cast<size_t>(line_width), ' ');
      }
    }
    const int label = label_of(in.offset);
    fields.push_back(label != -1 ? absl::StrFormat("%*s", label_width, absl::StrCat("L", label, ":"))
                                 : std::string(static_cast<size_t>(label_width), ' '));
    fields.emplace_back("   ");
    fields.push_back(absl::StrFormat("%-*s", kOpnameWidth, in.name));
    if (in.has_arg) {
      // dis lets a long opcode name eat into the oparg's column.
      const int excess = std::max(0, static_cast<int>(in.name.size()) - kOpnameWidth);
      fields.push_back(absl::StrFormat("%*d", kOpargWidth - excess, in.arg));
      std::string repr = ArgRepr(code, in, label_of);
      if (!repr.empty()) fields.push_back(absl::StrCat("(", repr, ")"));
    }
    std::string row = absl::StrJoin(fields, " ");
    row.erase(row.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, row, "\n");
  }
  if (options.exception_table && !code.exception_table.empty()) {
    out += "ExceptionTable:\n";
    for (const ExceptionTableEntry& e : code.exception_table) {
      absl::StrAppend(&out, "  L", label_of(e.start), " to L", label_of(e.end), " -> L",
                      label_of(e.target), " [", e.depth, "]", e.lasti ? " lasti" : "", "\n");
    }
  }
}

void DisassembleOne(const DecodedCode& code, const DisassembleOptions& options,
                    std::string& out) {
  absl::StrAppend(&out, "Disassembly of ", code.qualname, " (", code.filename, ", line ",
                  code.first_line, "):\n");
  if (generated::kJumpLabels) return DisassembleLabeled(code, options, out);
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
  return ArgRepr(code, in, [&code](int offset) {
    const Instruction* target = code.At(offset);
    return target ? target->label : -1;
  });
}

std::string ArgRepr(const DecodedCode& code, const Instruction& in,
                    const std::function<int(int)>& label_of) {
  const Argument& a = in.argument;
  switch (a.kind) {
    case ArgKind::kNone:
    case ArgKind::kRaw:
      return "";
    case ArgKind::kConst:
      return ConstRepr(code, a.index);
    case ArgKind::kName: {
      const OpcodeInfo& info = Opcode(in.opcode);
      if ((a.flags & 1) && info.flag_prefix != nullptr) {
        return absl::StrCat(info.flag_prefix, a.text, info.flag_suffix);
      }
      return std::string(a.text);
    }
    case ArgKind::kLocal:
      if (a.index2 >= 0) return absl::StrCat(a.text, ", ", a.text2);
      return std::string(a.text);
    case ArgKind::kCompare:
      if (in.arg & generated::kCompareBoolBit) return absl::StrCat("bool(", a.text, ")");
      return std::string(a.text);
    case ArgKind::kFree:
    case ArgKind::kBinaryOp:
    case ArgKind::kIntrinsic:
      return std::string(a.text);
    case ArgKind::kJump:
      if (generated::kJumpLabels) return absl::StrCat("to L", label_of(a.jump_target));
      return absl::StrCat("to ", a.jump_target);
    case ArgKind::kFormatValue: {
      std::string repr = generated::kConverters[in.arg & 3];
      if (in.arg & 4) absl::StrAppend(&repr, repr.empty() ? "" : ", ", "with format");
      return repr;
    }
    case ArgKind::kMakeFunction: {
      std::vector<std::string> parts;
      for (size_t i = 0; i < std::size(generated::kFunctionFlags); ++i) {
        if (in.arg & (1 << i)) parts.emplace_back(generated::kFunctionFlags[i]);
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
