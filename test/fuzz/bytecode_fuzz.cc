// Fuzzes the bytecode decoder and assembler (lib/bytecode) on mutated code
// objects: one of a few real functions' code objects with its co_code, its
// exception table and the sizes of co_consts / co_names replaced by the
// fuzzer's bytes (Python does not validate bytecode, so such code objects
// are easy to make and reach libdynamo through any frame).
//
// Input: [seed function] [consts variant] [names variant] [u16 code length]
// [co_code] [co_exceptiontable].
//
// Properties: decoding never crashes; what it accepts CPython's own dis
// reads the same way (same instructions at the same offsets with the same
// arguments, when dis can read it at all); a program that assembles decodes
// again to the same instructions.
#include <Python.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/bytecode/assembler.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/disassemble.h"
#include "lib/bytecode/opcodes.h"
#include "lib/python/object.h"
#include "test/fuzz/fuzz_support.h"

namespace {

using dynamo::python::Object;

// Shapes of code the decoder must handle: loops, handlers, with blocks,
// closures, generators, comprehensions, big constants (EXTENDED_ARG).
constexpr const char* kSeeds = R"PY(
import dis

def loops(xs, n):
    total = 0
    for i, x in enumerate(xs):
        if x > n:
            continue
        while total < 100:
            total += x * i
    return total

def handlers(path):
    try:
        f = open(path)
    except (OSError, ValueError) as e:
        return str(e)
    else:
        with f:
            return f.read()
    finally:
        print('done')

def closures(a, *args, b=2, **kw):
    c = a + b
    def inner(d):
        nonlocal c
        c += d
        return [c * k for k in range(d) if k % 2] + list(kw)
    return inner(len(args))

def generator(n):
    yield from range(n)
    x = yield n
    return {k: v for k, v in zip('ab', (x, n))}

def constants():
    return (1.5, 'str', b'bytes', None, ...) + tuple(range(300))

SEEDS = [f.__code__ for f in (loops, handlers, closures, generator, constants)]
NOP = dis.opmap['NOP']

def dis_records(code):
    out = []
    prefix = None
    for ins in dis.get_instructions(code):
        if ins.opname == 'EXTENDED_ARG':
            if prefix is None:
                prefix = ins.offset
            continue
        out.append((ins.offset if prefix is None else prefix, ins.offset, ins.opname,
                    -1 if ins.arg is None else ins.arg))
        prefix = None
    return out
)PY";

struct Seeds {
  Object namespace_;
  std::vector<Object> codes;
  Object dis_records;
  char nop = 0;  // this version's NOP opcode
};

const Seeds& GetSeeds() {
  static const Seeds* seeds = [] {
    auto* s = new Seeds;
    s->namespace_ = Object::Steal(PyDict_New());
    PyDict_SetItemString(s->namespace_.get(), "__builtins__", PyEval_GetBuiltins());
    Object ran = Object::Steal(PyRun_String(kSeeds, Py_file_input, s->namespace_.get(), s->namespace_.get()));
    if (!ran) {
      PyErr_Print();
      dynamo::fuzz::Fail("the seed functions do not compile", 0);
    }
    PyObject* list = PyDict_GetItemString(s->namespace_.get(), "SEEDS");
    for (Py_ssize_t i = 0; i < PyList_Size(list); ++i) s->codes.push_back(Object::Borrow(PyList_GetItem(list, i)));
    s->dis_records = Object::Borrow(PyDict_GetItemString(s->namespace_.get(), "dis_records"));
    s->nop = static_cast<char>(PyLong_AsLong(PyDict_GetItemString(s->namespace_.get(), "NOP")));
    return s;
  }();
  return *seeds;
}

// co_consts / co_names resized: kept, emptied, cut to one, or padded.
Object Resized(PyObject* tuple, uint8_t variant) {
  const Py_ssize_t n = PyTuple_Size(tuple);
  switch (variant % 4) {
    case 1:
      return Object::Steal(PyTuple_New(0));
    case 2:
      return Object::Steal(PyTuple_GetSlice(tuple, 0, n > 0 ? 1 : 0));
    case 3: {
      Object out = Object::Steal(PyTuple_New(n + 3));
      for (Py_ssize_t i = 0; i < n + 3; ++i) {
        PyObject* item = i < n ? PyTuple_GetItem(tuple, i) : Py_None;
        Py_INCREF(item);
        PyTuple_SetItem(out.get(), i, item);
      }
      return out;
    }
    default:
      return Object::Borrow(tuple);
  }
}

Object MutatedCode(dynamo::fuzz::Bytes& bytes) {
  const Seeds& seeds = GetSeeds();
  const Object& seed = seeds.codes[bytes.TakeByte() % seeds.codes.size()];
  const uint8_t consts_variant = bytes.TakeByte();
  const uint8_t names_variant = bytes.TakeByte();
  std::string code(bytes.Take(bytes.TakeU16() & ~1u));
  // CPython's quickening and co_code getter write the last instruction's
  // inline cache entries without a bounds check (its compiler never ends
  // code inside one): 16 trailing NOPs, more than any opcode's cache
  // entries, keep the mutated code inside what CPython itself can hold.
  for (int i = 0; i < 16; ++i) code += {seeds.nop, '\0'};
  const std::string table(bytes.Rest());
  Object consts = Object::Steal(PyObject_GetAttrString(seed.get(), "co_consts"));
  Object names = Object::Steal(PyObject_GetAttrString(seed.get(), "co_names"));
  Object kwargs = Object::Steal(PyDict_New());
  Object code_bytes = Object::Steal(PyBytes_FromStringAndSize(code.data(), static_cast<Py_ssize_t>(code.size())));
  Object table_bytes = Object::Steal(PyBytes_FromStringAndSize(table.data(), static_cast<Py_ssize_t>(table.size())));
  PyDict_SetItemString(kwargs.get(), "co_code", code_bytes.get());
  PyDict_SetItemString(kwargs.get(), "co_exceptiontable", table_bytes.get());
  PyDict_SetItemString(kwargs.get(), "co_consts", Resized(consts.get(), consts_variant).get());
  PyDict_SetItemString(kwargs.get(), "co_names", Resized(names.get(), names_variant).get());
  Object replace = Object::Steal(PyObject_GetAttrString(seed.get(), "replace"));
  Object empty = Object::Steal(PyTuple_New(0));
  Object mutated = Object::Steal(PyObject_Call(replace.get(), empty.get(), kwargs.get()));
  if (!mutated) PyErr_Clear();
  return mutated;
}

// Our instructions against dis's, when dis can read the code.
void CompareWithDis(const dynamo::bytecode::DecodedCode& decoded, size_t size) {
  Object records = Object::Steal(PyObject_CallOneArg(GetSeeds().dis_records.get(), decoded.code.get()));
  if (!records) {
    PyErr_Clear();  // dis itself gave up (an index past co_consts, say)
    return;
  }
  const Py_ssize_t n = PyList_Size(records.get());
  FUZZ_CHECK(static_cast<size_t>(n) == decoded.instructions.size(),
             absl::StrCat("dis reads ", n, " instructions, the decoder ", decoded.instructions.size()), size);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* r = PyList_GetItem(records.get(), i);
    const auto& in = decoded.instructions[static_cast<size_t>(i)];
    const long offset = PyLong_AsLong(PyTuple_GetItem(r, 0));
    const long opcode_offset = PyLong_AsLong(PyTuple_GetItem(r, 1));
    const char* name = PyUnicode_AsUTF8(PyTuple_GetItem(r, 2));
    const long arg = PyLong_AsLong(PyTuple_GetItem(r, 3));
    FUZZ_CHECK(offset == in.offset && opcode_offset == in.opcode_offset && name != nullptr &&
                   in.name == name && arg == (in.has_arg ? in.arg : -1),
               absl::StrCat("instruction ", i, ": dis reads ", name ? name : "?", " ", arg, " at ", offset,
                            "/", opcode_offset, ", the decoder ", in.name, " ", in.arg, " at ", in.offset,
                            "/", in.opcode_offset),
               size);
  }
}

// A jump's opcode without its direction: the assembler picks 3.11's
// JUMP_FORWARD or JUMP_BACKWARD (and the POP_JUMP_* pairs) from where the
// target ends up, so a jump to the next instruction may change direction.
int Undirected(int opcode) {
  std::string name = dynamo::bytecode::Opcode(opcode).name ? dynamo::bytecode::Opcode(opcode).name : "";
  for (const std::string d : {"_FORWARD", "_BACKWARD"}) {
    if (size_t at = name.find(d); at != std::string::npos) name.erase(at, d.size());
  }
  return static_cast<int>(std::hash<std::string>{}(name) & 0x7fffffff);
}

// Opcode, argument and jump target of each instruction: what a round trip
// through the assembler keeps (EXTENDED_ARG prefixes may be relaxed).
std::vector<std::vector<int>> Shape(const dynamo::bytecode::AsmProgram& p) {
  std::vector<std::vector<int>> out;
  for (const auto& in : p.instructions) {
    out.push_back({in.target >= 0 ? Undirected(in.opcode) : in.opcode, in.target >= 0 ? -1 : in.arg, in.target});
  }
  // An empty range protects nothing: the assembler drops it.
  for (const auto& e : p.exception_table) {
    if (e.start < e.end) out.push_back({e.start, e.end, e.target, e.depth, e.lasti ? 1 : 0});
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dynamo::fuzz::EnsurePython();
  PyGILState_STATE gil = PyGILState_Ensure();
  {
    dynamo::fuzz::Bytes bytes(data, size);
    Object code = MutatedCode(bytes);
    if (code) {
      namespace bc = dynamo::bytecode;
      absl::StatusOr<bc::DecodedCode> decoded = bc::Decode(code, {.nested = false});
      if (decoded.ok()) {
        (void)bc::Disassemble(*decoded, {});
        CompareWithDis(*decoded, size);
        absl::StatusOr<bc::AsmProgram> program = bc::ToProgram(*decoded);
        if (program.ok()) {
          (void)bc::StackDepth(*program);
          absl::StatusOr<bc::AssembledCode> assembled = bc::Assemble(*program);
          if (assembled.ok()) {
            absl::StatusOr<Object> again = bc::MakeCode(decoded->code, *assembled);
            FUZZ_CHECK(again.ok(), "assembled code is not a code object", size);
            absl::StatusOr<bc::DecodedCode> redecoded = bc::Decode(*again, {.nested = false});
            FUZZ_CHECK(redecoded.ok(), "assembled code does not decode", size);
            absl::StatusOr<bc::AsmProgram> reprogram = bc::ToProgram(*redecoded);
            FUZZ_CHECK(reprogram.ok(), "assembled code does not convert back to a program", size);
            const auto before = Shape(*program), after = Shape(*reprogram);
            if (before != after) {
              size_t i = 0;
              while (i < before.size() && i < after.size() && before[i] == after[i]) ++i;
              auto row = [](const std::vector<std::vector<int>>& rows, size_t k) {
                return k < rows.size() ? absl::StrJoin(rows[k], ",") : std::string("(none)");
              };
              dynamo::fuzz::Fail(absl::StrCat("assembling changed row ", i, " of ", before.size(), " (instructions, then "
                                              "exception entries): [", row(before, i), "] became [", row(after, i), "]"),
                                 size);
            }
          }
        }
      }
    }
    PyErr_Clear();
  }
  PyGILState_Release(gil);
  return 0;
}
