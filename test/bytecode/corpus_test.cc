// The decoder and the assembler against CPython itself, over every code
// object of the standard library, torch, torchvision, numpy and scipy
// (test/python/bytecode_corpus.py says how the corpus is gathered).
//
//  - decode == dis.get_instructions + dis._parse_exception_table
//  - decode -> assemble == the original co_code, co_exceptiontable,
//    co_linetable and co_stacksize, byte for byte
#include <Python.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/bytecode/assembler.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/disassemble.h"
#include "lib/bytecode/opcodes.h"
#include "test/test_support.h"

namespace dynamo::bytecode {
namespace {

using python::Object;

struct Corpus {
  Object helper;                                   // the bytecode_corpus module
  std::vector<std::pair<std::string, Object>> modules;  // (module name, module code)
  size_t skipped = 0;
};

// Leaked on purpose: it holds Python objects, which must not be released
// after main() has finalized the interpreter.
const Corpus& GetCorpus() {
  static const Corpus& corpus = *[] {
    auto* owned = new Corpus;
    Corpus& c = *owned;
    c.helper = testing::ImportTestModule("bytecode_corpus");
    absl::StatusOr<Object> loaded = python::CallMethod(c.helper, "load");
    if (!loaded.ok()) throw std::runtime_error(testing::Describe(loaded.status()));
    std::vector<Object> parts = *python::AsVector(*loaded);
    std::vector<Object> entries = *python::AsVector(parts[0]);
    for (const Object& entry : entries) {
      std::vector<Object> pair = *python::AsVector(entry);
      c.modules.emplace_back(*python::AsString(pair[0]), pair[1]);
    }
    std::vector<Object> skipped = *python::AsVector(parts[1]);
    c.skipped = skipped.size();
    std::cout << "corpus: " << c.modules.size() << " source files loaded, " << c.skipped
              << " skipped (could not be compiled)\n";
    for (const Object& s : skipped) std::cout << "  skipped: " << python::Repr(s) << "\n";
    return owned;
  }();
  return corpus;
}

bool CorpusIsLimited() {
  const char* roots = std::getenv("DYNAMO_BYTECODE_CORPUS");
  const char* limit = std::getenv("DYNAMO_BYTECODE_CORPUS_LIMIT");
  return (roots && *roots) || (limit && *limit);
}

int IntOrNone(PyObject* o) { return o == Py_None ? -1 : static_cast<int>(PyLong_AsLong(o)); }

std::string Str(PyObject* o) {
  absl::StatusOr<std::string> s = python::AsString(Object::Borrow(o));
  return s.ok() ? *s : python::Repr(Object::Borrow(o));
}

// Counts differences and keeps a few examples of each kind (the text up to
// its first quote or digit, e.g. "offset N LOAD_ATTR: argrepr"), so one
// common difference does not hide the others.
class Mismatches {
 public:
  void Add(const DecodedCode& code, const std::string& what) {
    ++count_;
    std::string kind = what.substr(0, what.find_first_of("'0123456789(", what.find(' ') + 1));
    if (examples_shown_ < 60 && per_kind_[kind]++ < 3) {
      ++examples_shown_;
      examples_ += absl::StrCat("  ", code.filename, ":", code.first_line, " ", code.qualname,
                                ": ", what, "\n");
    }
  }
  size_t count() const { return count_; }
  const std::string& examples() const { return examples_; }

 private:
  size_t count_ = 0;
  size_t examples_shown_ = 0;
  std::map<std::string, int> per_kind_;
  std::string examples_;
};

// Compares one code object (not its children) with dis's view of it.
size_t CompareWithDis(const DecodedCode& d, const Object& helper, Mismatches& bad) {
  Object records = *python::CallMethod(helper, "dis_records", {d.code});
  Py_ssize_t n = PyList_Size(records.get());
  if (static_cast<size_t>(n) != d.instructions.size()) {
    bad.Add(d, absl::StrCat("dis has ", n, " instructions, we have ", d.instructions.size()));
    return 0;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* r = PyList_GetItem(records.get(), i);
    const Instruction& in = d.instructions[static_cast<size_t>(i)];
    auto field = [r](int k) { return PyTuple_GetItem(r, k); };
    std::string at = absl::StrCat("offset ", in.offset, " ", in.name, ": ");
    if (IntOrNone(field(0)) != in.offset || IntOrNone(field(1)) != in.opcode_offset) {
      bad.Add(d, absl::StrCat(at, "offset differs from dis (", IntOrNone(field(0)), ")"));
      continue;
    }
    if (Str(field(2)) != in.name) bad.Add(d, absl::StrCat(at, "dis says ", Str(field(2))));
    if (IntOrNone(field(3)) != (in.has_arg ? in.arg : -1)) {
      bad.Add(d, absl::StrCat(at, "arg ", in.arg, " vs dis ", IntOrNone(field(3))));
    }
    PyObject* argval = field(4);
    const Argument& a = in.argument;
    bool argval_ok = true;
    // 3.11's dis resolves only LOAD_CONST among the hasconst opcodes: it
    // leaves KW_NAMES as its "<unknown>" sentinel, which we do resolve
    // (3.12's dis resolves it too).
#ifdef DYNAMO_HAS_KW_NAMES
    const bool dis_leaves_unresolved = in.opcode == generated::kKwNames &&
                                       python::Repr(Object::Borrow(argval)) == "<unknown>";
#else
    const bool dis_leaves_unresolved = false;
#endif
    switch (a.kind) {
      case ArgKind::kConst:
        argval_ok = dis_leaves_unresolved
                        ? python::Repr(Object::Borrow(argval)) == "<unknown>"
                        : argval == PyTuple_GetItem(d.consts.get(), a.index);
        break;
      case ArgKind::kLocal:
        if (a.index2 >= 0) {  // 3.13's pair: dis gives (first, second)
          argval_ok = PyTuple_Check(argval) && PyTuple_Size(argval) == 2 &&
                      Str(PyTuple_GetItem(argval, 0)) == a.text &&
                      Str(PyTuple_GetItem(argval, 1)) == a.text2;
        } else {
          argval_ok = Str(argval) == a.text;
        }
        break;
      case ArgKind::kName:
      case ArgKind::kFree:
      case ArgKind::kCompare:
        argval_ok = Str(argval) == a.text;
        break;
      case ArgKind::kJump:
        argval_ok = IntOrNone(argval) == a.jump_target;
        break;
      case ArgKind::kRaw:
      case ArgKind::kBinaryOp:
      case ArgKind::kMakeFunction:
      case ArgKind::kIntrinsic:
        argval_ok = IntOrNone(argval) == in.arg;
        break;
      case ArgKind::kFormatValue:  // a (converter, bool) tuple or a builtin; argrepr covers it
        break;
      case ArgKind::kNone:
        argval_ok = argval == Py_None;
        break;
    }
    if (!argval_ok) bad.Add(d, absl::StrCat(at, "argval differs: dis ", Str(argval)));
    bool code_const = a.kind == ArgKind::kConst &&
                      PyCode_Check(PyTuple_GetItem(d.consts.get(), a.index));
    if (!code_const && !dis_leaves_unresolved && Str(field(5)) != ArgRepr(d, in)) {
      bad.Add(d, absl::StrCat(at, "argrepr '", ArgRepr(d, in), "' vs dis '", Str(field(5)), "'"));
    }
    if (IntOrNone(field(6)) != in.starts_line) {
      bad.Add(d, absl::StrCat(at, "starts_line ", in.starts_line, " vs dis ", IntOrNone(field(6))));
    }
    if ((field(7) == Py_True) != in.is_jump_target) bad.Add(d, absl::StrCat(at, "is_jump_target"));
    Location dis_loc{IntOrNone(field(8)), IntOrNone(field(9)), IntOrNone(field(10)),
                     IntOrNone(field(11))};
    if (!(dis_loc == in.location)) {
      bad.Add(d, absl::StrCat(at, "position ", in.location.line, ":", in.location.column,
                              " vs dis ", dis_loc.line, ":", dis_loc.column));
    }
  }
  Object entries = *python::CallMethod(helper, "exception_entries", {d.code});
  std::vector<Object> dis_entries = *python::AsVector(entries);
  if (dis_entries.size() != d.exception_table.size()) {
    bad.Add(d, absl::StrCat("exception table: dis has ", dis_entries.size(), " entries, we have ",
                            d.exception_table.size()));
  } else {
    for (size_t i = 0; i < dis_entries.size(); ++i) {
      PyObject* e = dis_entries[i].get();
      ExceptionTableEntry theirs{IntOrNone(PyTuple_GetItem(e, 0)), IntOrNone(PyTuple_GetItem(e, 1)),
                                 IntOrNone(PyTuple_GetItem(e, 2)), IntOrNone(PyTuple_GetItem(e, 3)),
                                 PyTuple_GetItem(e, 4) == Py_True};
      if (!(theirs == d.exception_table[i])) bad.Add(d, absl::StrCat("exception entry ", i));
    }
  }
  return static_cast<size_t>(n);
}

std::string Bytes(const Object& code, const char* attr) {
  Object b = Object::Steal(PyObject_GetAttrString(code.get(), attr));
  return std::string(PyBytes_AsString(b.get()), static_cast<size_t>(PyBytes_Size(b.get())));
}

std::string FirstDifference(const std::string& ours, const std::string& theirs) {
  size_t i = 0;
  while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
  return absl::StrCat("first difference at byte ", i, " (sizes ", ours.size(), " vs ",
                      theirs.size(), ")");
}

void RoundTrip(const DecodedCode& d, Mismatches& bad) {
  absl::StatusOr<AsmProgram> program = ToProgram(d);
  if (!program.ok()) return bad.Add(d, absl::StrCat("ToProgram: ", program.status().message()));
  absl::StatusOr<AssembledCode> a = Assemble(*program);
  if (!a.ok()) return bad.Add(d, absl::StrCat("Assemble: ", a.status().message()));
  std::string code = Bytes(d.code, "co_code");
  std::string exceptions = Bytes(d.code, "co_exceptiontable");
  std::string lines = Bytes(d.code, "co_linetable");
  if (a->code != code) bad.Add(d, "co_code: " + FirstDifference(a->code, code));
  if (a->exception_table != exceptions) {
    bad.Add(d, "co_exceptiontable: " + FirstDifference(a->exception_table, exceptions));
  }
  if (a->line_table != lines) bad.Add(d, "co_linetable: " + FirstDifference(a->line_table, lines));
  if (a->stack_size != d.stack_size) {
    bad.Add(d, absl::StrCat("co_stacksize ", a->stack_size, " vs ", d.stack_size));
  }
}

template <typename Fn>
void Walk(const DecodedCode& d, Fn&& fn) {
  fn(d);
  for (const DecodedCode& inner : d.nested) Walk(inner, fn);
}

TEST_CASE("decoder agrees with dis on every code object of the corpus", "[bytecode][corpus]") {
  const Corpus& corpus = GetCorpus();
  Mismatches bad;
  size_t code_objects = 0, instructions = 0, python_count = 0;
  for (const auto& [name, code] : corpus.modules) {
    absl::StatusOr<DecodedCode> d = Decode(code);
    if (!d.ok()) {
      bad.Add(DecodedCode{}, absl::StrCat(name, ": ", d.status().message()));
      continue;
    }
    Walk(*d, [&](const DecodedCode& one) {
      ++code_objects;
      instructions += CompareWithDis(one, corpus.helper, bad);
    });
    Object walked = *python::CallMethod(corpus.helper, "walk", {code});
    python_count += python::AsVector(walked)->size();
  }
  std::cout << "decoder vs dis: compared " << code_objects << " code objects, " << instructions
            << " instructions; " << bad.count() << " mismatches\n"
            << bad.examples();
  INFO(bad.examples());
  CHECK(code_objects == python_count);  // the same nested code objects were reached
  CHECK(bad.count() == 0);
  if (!CorpusIsLimited()) {
    // stdlib + torch + torchvision alone hold well over 40,000 code objects.
    CHECK(code_objects > 40000);
  }
  CHECK(instructions > 0);
}

TEST_CASE("assembler round-trips every code object byte for byte", "[bytecode][corpus]") {
  const Corpus& corpus = GetCorpus();
  Mismatches bad;
  size_t code_objects = 0, extended = 0;
  for (const auto& [name, code] : corpus.modules) {
    absl::StatusOr<DecodedCode> d = Decode(code);
    REQUIRE(d.ok());
    Walk(*d, [&](const DecodedCode& one) {
      ++code_objects;
      for (const Instruction& in : one.instructions) extended += in.opcode_offset != in.offset;
      RoundTrip(one, bad);
    });
  }
  std::cout << "assembler round trip: " << code_objects << " code objects ("
            << extended << " instructions with EXTENDED_ARG); " << bad.count()
            << " differences\n" << bad.examples();
  INFO(bad.examples());
  CHECK(bad.count() == 0);
  CHECK(code_objects > 0);
  if (!CorpusIsLimited()) CHECK(extended > 0);  // relaxation was really exercised
}

// dis folds nothing: it lists EXTENDED_ARG prefixes as instructions of
// their own, where libdynamo's listing folds them into the instruction they
// extend. Listings are compared for code objects without prefixes.
bool HasPrefixes(const DecodedCode& d) {
  for (const Instruction& in : d.instructions) {
    if (in.opcode_offset != in.offset) return true;
  }
  return false;
}

TEST_CASE("the listing matches dis's text", "[bytecode][corpus]") {
  const Corpus& corpus = GetCorpus();
  Mismatches bad;
  size_t compared = 0, lines = 0, with_prefixes = 0;
  for (const auto& [name, code] : corpus.modules) {
    absl::StatusOr<DecodedCode> d = Decode(code);
    REQUIRE(d.ok());
    Walk(*d, [&](const DecodedCode& one) {
      if (HasPrefixes(one)) {
        ++with_prefixes;
        return;
      }
      ++compared;
      std::string ours = Disassemble(one, {.nested = false});
      ours.erase(0, ours.find('\n') + 1);  // our header; dis.disassemble prints none
      std::string theirs = Str(python::CallMethod(corpus.helper, "dis_text", {one.code})->get());
      std::vector<std::string> a = absl::StrSplit(ours, '\n'), b = absl::StrSplit(theirs, '\n');
      if (a.size() != b.size()) {
        bad.Add(one, absl::StrCat("listing has ", a.size(), " lines, dis ", b.size()));
        return;
      }
      for (size_t i = 0; i < a.size(); ++i) {
        ++lines;
        if (a[i] == b[i]) continue;
        // 3.11's dis leaves KW_NAMES's names out; ours adds them.
        if (absl::StrContains(b[i], "KW_NAMES") && absl::StartsWith(a[i], b[i])) continue;
        bad.Add(one, absl::StrCat("line ", i, " '", a[i], "' vs dis '", b[i], "'"));
      }
    });
  }
  std::cout << "listing vs dis: " << compared << " code objects (" << with_prefixes
            << " with EXTENDED_ARG left out), " << lines << " lines; " << bad.count()
            << " differences\n" << bad.examples();
  INFO(bad.examples());
  CHECK(bad.count() == 0);
  CHECK(compared > 0);
}

}  // namespace
}  // namespace dynamo::bytecode
