#include "lib/bytecode/decoder.h"

#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/bytecode/opcodes.h"
#include "lib/bytecode/tables.h"
#include "lib/python/error.h"

namespace dynamo::bytecode {
namespace {

using python::Object;

absl::StatusOr<absl::string_view> BytesAttr(const Object& code, const char* name, Object& keep) {
  keep = Object::Steal(PyObject_GetAttrString(code.get(), name));
  if (!keep) return python::FetchError(absl::StrCat("reading ", name));
  if (!PyBytes_Check(keep.get())) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not bytes"));
  }
  return absl::string_view(PyBytes_AS_STRING(keep.get()),
                          static_cast<size_t>(PyBytes_GET_SIZE(keep.get())));
}

absl::StatusOr<std::vector<std::string>> Strings(PyObject* tuple, const char* what) {
  if (tuple == nullptr || !PyTuple_Check(tuple)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a tuple"));
  }
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(PyTuple_GET_SIZE(tuple)));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    Py_ssize_t size = 0;
    const char* s = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(tuple, i), &size);
    if (s == nullptr) return python::FetchError(what);
    out.emplace_back(s, static_cast<size_t>(size));
  }
  return out;
}

std::string Utf8(PyObject* str) {
  Py_ssize_t size = 0;
  const char* s = str ? PyUnicode_AsUTF8AndSize(str, &size) : nullptr;
  if (s == nullptr) {
    python::ClearError();
    return "";
  }
  return std::string(s, static_cast<size_t>(size));
}

// Fills `argument` from the oparg and the code object's tables.
absl::Status Resolve(const DecodedCode& d, Instruction& in, int next_offset) {
  const OpcodeInfo& info = Opcode(in.opcode);
  Argument& a = in.argument;
  if (!in.has_arg) return absl::OkStatus();
  a.kind = ArgKind::kRaw;
  auto out_of_range = [&](const char* table, size_t size) {
    return absl::DataLossError(absl::StrCat(in.name, " at offset ", in.offset, ": index ", a.index,
                                            " outside ", table, " (size ", size, ")"));
  };
  if (info.Has(kHasConst)) {
    a.kind = ArgKind::kConst;
    a.index = in.arg;
    if (a.index >= PyTuple_GET_SIZE(d.consts.get())) {
      return out_of_range("co_consts", static_cast<size_t>(PyTuple_GET_SIZE(d.consts.get())));
    }
  } else if (info.Has(kHasName)) {
    a.kind = ArgKind::kName;
    a.index = in.arg >> info.name_shift;
    a.flags = in.arg & ((1 << info.name_shift) - 1);
    if (static_cast<size_t>(a.index) >= d.names.size()) return out_of_range("co_names", d.names.size());
    a.text = d.names[static_cast<size_t>(a.index)];
  } else if (info.Has(kHasJumpRelative) || info.Has(kHasJumpAbsolute)) {
    a.kind = ArgKind::kJump;
    // Relative to the end of the instruction, inline caches included; in
    // 64 bits, since a malformed oparg may lead anywhere.
    const int64_t units = info.Has(kHasJumpAbsolute) ? 0 : next_offset / 2;
    const int64_t target =
        (units + (info.Has(kBackwardJump) ? -int64_t{in.arg} : int64_t{in.arg})) * 2;
    if (target < 0 || target >= int64_t{d.code_units} * 2) {
      return absl::DataLossError(absl::StrCat(in.name, " at offset ", in.opcode_offset, " of ", d.qualname,
                                              " jumps outside the code (to byte ", target, ")"));
    }
    a.jump_target = static_cast<int>(target);
  } else if (info.Has(kLocalPair)) {
    a.kind = ArgKind::kLocal;
    a.index = in.arg >> 4;
    a.index2 = in.arg & 15;
    if (static_cast<size_t>(std::max(a.index, a.index2)) >= d.localsplus.size()) {
      return out_of_range("the frame's variables", d.localsplus.size());
    }
    a.text = d.localsplus[static_cast<size_t>(a.index)];
    a.text2 = d.localsplus[static_cast<size_t>(a.index2)];
  } else if (info.Has(kHasLocal) || info.Has(kHasFree)) {
    a.kind = info.Has(kHasLocal) ? ArgKind::kLocal : ArgKind::kFree;
    a.index = in.arg;
    if (static_cast<size_t>(a.index) >= d.localsplus.size()) {
      return out_of_range("the frame's variables", d.localsplus.size());
    }
    a.text = d.localsplus[static_cast<size_t>(a.index)];
  } else if (info.Has(kHasCompare)) {
    a.kind = ArgKind::kCompare;
    a.index = in.arg >> generated::kCompareShift;
    constexpr size_t n = std::size(generated::kCompareOps);
    if (static_cast<size_t>(a.index) >= n) return out_of_range("cmp_op", n);
    a.text = generated::kCompareOps[a.index];
  } else if (in.opcode == generated::kBinaryOp) {
    a.kind = ArgKind::kBinaryOp;
    a.index = in.arg;
    constexpr size_t n = std::size(generated::kBinaryOps);
    if (static_cast<size_t>(a.index) >= n) return out_of_range("BINARY_OP's operators", n);
    a.text = generated::kBinaryOps[a.index].symbol;
#ifdef DYNAMO_HAS_FORMAT_VALUE
  } else if (in.opcode == generated::kFormatValue) {
    a.kind = ArgKind::kFormatValue;
#endif
#ifdef DYNAMO_HAS_CONVERT_VALUE
  } else if (in.opcode == generated::kConvertValue) {
    a.kind = ArgKind::kFormatValue;
    a.index = in.arg;
    constexpr size_t n = std::size(generated::kConverters);
    if (static_cast<size_t>(a.index) >= n) return out_of_range("the conversions", n);
#endif
#ifdef DYNAMO_HAS_SET_FUNCTION_ATTRIBUTE
  } else if (in.opcode == generated::kSetFunctionAttribute) {
    a.kind = ArgKind::kMakeFunction;
#endif
#ifdef DYNAMO_HAS_CALL_INTRINSIC_1
  } else if (in.opcode == generated::kCallIntrinsic1 || in.opcode == generated::kCallIntrinsic2) {
    a.kind = ArgKind::kIntrinsic;
    a.index = in.arg;
    const bool one = in.opcode == generated::kCallIntrinsic1;
    const size_t n = one ? std::size(generated::kIntrinsic1) : std::size(generated::kIntrinsic2);
    if (static_cast<size_t>(a.index) >= n) return out_of_range("the intrinsic functions", n);
    a.text = one ? generated::kIntrinsic1[a.index] : generated::kIntrinsic2[a.index];
#endif
  } else if (in.opcode == generated::kMakeFunction) {
    a.kind = ArgKind::kMakeFunction;
  }
  return absl::OkStatus();
}

absl::Status DecodeInto(const Object& code, const DecodeOptions& options, DecodedCode& d) {
  if (!PyCode_Check(code.get())) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a code object, got ", python::TypeName(code)));
  }
  auto* co = reinterpret_cast<PyCodeObject*>(code.get());
  d.code = code;
  d.name = Utf8(co->co_name);
  d.qualname = Utf8(co->co_qualname);
  d.filename = Utf8(co->co_filename);
  d.first_line = co->co_firstlineno;
  d.stack_size = co->co_stacksize;
  d.flags = co->co_flags;
  d.num_locals = co->co_nlocals;
  d.consts = Object::Borrow(co->co_consts);

  absl::StatusOr<std::vector<std::string>> names = Strings(co->co_names, "co_names");
  if (!names.ok()) return names.status();
  d.names = *std::move(names);
  absl::StatusOr<std::vector<std::string>> localsplus =
      Strings(co->co_localsplusnames, "co_localsplusnames");
  if (!localsplus.ok()) return localsplus.status();
  d.localsplus = *std::move(localsplus);

  // co_code (not the adaptive, specialised copy): what dis and the assembler see.
  Object code_bytes, line_bytes, exc_bytes;
  absl::StatusOr<absl::string_view> raw = BytesAttr(code, "co_code", code_bytes);
  if (!raw.ok()) return raw.status();
  absl::StatusOr<absl::string_view> linetable = BytesAttr(code, "co_linetable", line_bytes);
  if (!linetable.ok()) return linetable.status();
  absl::StatusOr<absl::string_view> exctable = BytesAttr(code, "co_exceptiontable", exc_bytes);
  if (!exctable.ok()) return exctable.status();
  if (raw->size() % 2 != 0) return absl::DataLossError("co_code has an odd length");
  d.code_units = static_cast<int>(raw->size() / 2);

  absl::StatusOr<std::vector<Location>> locations =
      DecodeLocationTable(*linetable, d.first_line, d.code_units);
  if (!locations.ok()) return locations.status();
  absl::StatusOr<std::vector<ExceptionTableEntry>> exceptions = DecodeExceptionTable(*exctable);
  if (!exceptions.ok()) return exceptions.status();
  d.exception_table = *std::move(exceptions);

  // dis's rule for line starts: the first unit whose line differs from the
  // last line seen (up to 3.12 units without a line are skipped, not reset;
  // 3.13 counts "no line" as a line of its own, see kLineStartOnNoLine).
  // kNoLineStart marks a unit where 3.13 starts a run without a line.
  constexpr int kNotStart = -1, kNoLineStart = -2;
  std::vector<int> line_start(static_cast<size_t>(d.code_units), kNotStart);
  for (int u = 0, last = -1; u < d.code_units; ++u) {
    int line = (*locations)[static_cast<size_t>(u)].line;
    if (generated::kLineStartOnNoLine) {
      if (u == 0 || line != last) line_start[static_cast<size_t>(u)] = line == -1 ? kNoLineStart : line;
      last = line;
    } else if (line != -1 && line != last) {
      line_start[static_cast<size_t>(u)] = line;
      last = line;
    }
  }

  const auto* bytes = reinterpret_cast<const unsigned char*>(raw->data());
  d.instructions.reserve(static_cast<size_t>(d.code_units));
  int unit = 0;
  while (unit < d.code_units) {
    Instruction in;
    in.offset = unit * 2;
    int64_t extended = 0;
    int starts_line = kNotStart;
    int op = Deopt(bytes[unit * 2]);
    // Fold EXTENDED_ARG prefixes into the instruction they extend. CPython's
    // oparg is a C int: a chain that makes it larger (more than three
    // prefixes, or a top byte of 0x80 or more) is not code CPython makes.
    while (op == generated::kExtendedArg) {
      if (starts_line == kNotStart) starts_line = line_start[static_cast<size_t>(unit)];
      extended = (extended | bytes[unit * 2 + 1]) << 8;
      if (extended > std::numeric_limits<int>::max()) {
        return absl::DataLossError(absl::StrCat("EXTENDED_ARG prefixes at offset ", in.offset, " of ", d.qualname,
                                                " make an argument past 2^31"));
      }
      ++unit;
      if (unit >= d.code_units) {
        return absl::DataLossError(absl::StrCat("EXTENDED_ARG at the end of ", d.qualname));
      }
      op = Deopt(bytes[unit * 2]);
    }
    if (starts_line == kNotStart) starts_line = line_start[static_cast<size_t>(unit)];
    const OpcodeInfo& info = Opcode(op);
    if (info.name == nullptr) {
      return absl::DataLossError(
          absl::StrCat("unknown opcode ", op, " at offset ", unit * 2, " of ", d.qualname));
    }
    // What is left of sys.monitoring's opcodes after Deopt keeps the real
    // instruction outside co_code; only the instrumented bytes would show it.
    if (absl::StartsWith(info.name, "INSTRUMENTED_")) {
      return absl::DataLossError(absl::StrCat(info.name, " at offset ", unit * 2, " of ", d.qualname,
                                              ": instrumented code cannot be decoded"));
    }
    in.opcode = op;
    in.opcode_offset = unit * 2;
    in.name = info.name;
    in.has_arg = info.Has(kHasArg);
    in.arg = in.has_arg ? static_cast<int>(extended | bytes[unit * 2 + 1]) : 0;
    in.location = (*locations)[static_cast<size_t>(unit)];
    in.starts_line = starts_line == kNoLineStart ? -1 : starts_line;
    in.starts_no_line = starts_line == kNoLineStart;
    unit += 1 + info.cache_entries;
    if (unit > d.code_units) {
      return absl::DataLossError(absl::StrCat(in.name, " at offset ", in.opcode_offset,
                                              ": inline caches run past the end of the code"));
    }
    in.size = unit * 2 - in.offset;
    if (absl::Status s = Resolve(d, in, unit * 2); !s.ok()) return s;
    d.instructions.push_back(in);
  }

  auto find = [&d](int offset) -> Instruction* {
    auto it = std::lower_bound(d.instructions.begin(), d.instructions.end(), offset,
                               [](const Instruction& in, int off) { return in.offset < off; });
    return it != d.instructions.end() && it->offset == offset ? &*it : nullptr;
  };
  for (const Instruction& in : d.instructions) {
    if (in.argument.kind != ArgKind::kJump) continue;
    if (Instruction* target = find(in.argument.jump_target)) target->is_jump_target = true;
  }
  int labels = 0;
  for (Instruction& in : d.instructions) {
    if (in.is_jump_target) in.label = ++labels;
  }
  for (const ExceptionTableEntry& e : d.exception_table) {
    if (Instruction* target = find(e.target)) target->is_handler = true;
  }

  if (options.nested) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(d.consts.get()); ++i) {
      PyObject* c = PyTuple_GET_ITEM(d.consts.get(), i);
      if (!PyCode_Check(c)) continue;
      DecodedCode inner;
      if (absl::Status s = DecodeInto(Object::Borrow(c), options, inner); !s.ok()) return s;
      d.nested.push_back(std::move(inner));
    }
  }
  return absl::OkStatus();
}

}  // namespace

python::Object DecodedCode::Constant(int index) const {
  return Object::Borrow(PyTuple_GET_ITEM(consts.get(), index));
}

const Instruction* DecodedCode::At(int offset) const {
  auto it = std::lower_bound(instructions.begin(), instructions.end(), offset,
                             [](const Instruction& in, int off) { return in.offset < off; });
  return it != instructions.end() && it->offset == offset ? &*it : nullptr;
}

absl::StatusOr<DecodedCode> Decode(const python::Object& code, const DecodeOptions& options) {
  DecodedCode d;
  if (absl::Status s = DecodeInto(code, options, d); !s.ok()) return s;
  return d;
}

}  // namespace dynamo::bytecode
