// Exceptions raised and caught inside the trace, as CPython's zero-cost
// exception handling runs them (3.11+): a raise unwinds to the handler the
// frame's exception table names for the raising instruction, with the
// value stack cut to the entry's depth and the exception pushed; a frame
// without one passes it to its caller, at the call instruction.
//
//   def __getitem__(self, i):           def __iter__(self):      # inlined
//       if i >= len(self):                  try:
//           raise IndexError(i)                 while True: yield self[i]; i += 1
//       ...                                 except IndexError:
//                                               return
//
// The exception is a real instance (its class's construction is C code, its
// arguments constants), so `except E as e` reads real attributes. Only
// inlined frames handle exceptions: one that reaches the traced function's
// own frame is a graph break there (RunFrame), so its try blocks and the
// rest of the function run in Python. A handler using what the trace does
// not model (a `with` block's __exit__, except*) is a graph break.
#include <Python.h>

#include "absl/strings/str_cat.h"
#include "lib/python/error.h"
#include "lib/trace/translator_internal.h"

namespace dynamo::trace {
namespace {

using bytecode::Instruction;
using python::Object;

constexpr const char kRaised[] = "an exception is raised in the trace";

// Whether calling exception class `cls` runs only C code: its __new__ and
// __init__ come from builtin classes.
bool ConstructedInC(PyObject* cls) {
  for (const char* name : {"__new__", "__init__"}) {
    PyObject* mro = reinterpret_cast<PyTypeObject*>(cls)->tp_mro;
    for (Py_ssize_t i = 0; mro != nullptr && i < PyTuple_GET_SIZE(mro); ++i) {
      PyTypeObject* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
      // (a builtin type's tp_dict is no field to read from 3.12 on)
      if (python::TypeDictItem(t, name) == nullptr) continue;
      if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) return false;
      break;
    }
  }
  return Py_TYPE(cls) == &PyType_Type;  // no metaclass __call__
}

}  // namespace

absl::Status Translator::Raise(VarPtr exc) {
  raised_ = std::move(exc);
  return absl::AbortedError(kRaised);
}

bool Translator::IsRaised(const absl::Status& s) {
  return s.code() == absl::StatusCode::kAborted && s.message() == kRaised;
}

absl::Status Translator::RaiseNew(PyObject* type, const std::string& message) {
  Object exc = Object::Steal(PyObject_CallFunction(type, "s", message.c_str()));
  if (!exc) return python::FetchError("making an exception");
  return Raise(Var::OfKind(VarKind::kOpaque, exc));
}

bool Translator::CatchRaised(const absl::Status& s, PyObject* type) {
  if (!IsRaised(s) || !raised_ || !raised_->object || !PyErr_GivenExceptionMatches(raised_->object.get(), type)) {
    return false;
  }
  raised_ = nullptr;
  return true;
}

bool Translator::Unwind(Frame& f, const Instruction& in) {
  if (!raised_) return false;
  for (const bytecode::ExceptionTableEntry& e : f.code->exception_table) {
    if (in.offset < e.start || in.offset >= e.end) continue;
    const Instruction* target = f.code->At(e.target);
    if (target == nullptr || static_cast<size_t>(e.depth) > f.stack.size()) return false;
    f.stack.resize(static_cast<size_t>(e.depth));
    // The raising instruction's offset, which only RERAISE's traceback
    // line would read.
    if (e.lasti) f.stack.push_back(Var::Constant(python::FromLong(in.offset)));
    f.stack.push_back(std::move(raised_));
    raised_ = nullptr;
    f.kw_names = nullptr;
    f.ip = static_cast<size_t>(target - f.code->instructions.data());
    return true;
  }
  return false;
}

std::optional<VarPtr> Translator::MakeException(PyObject* cls, const std::vector<VarPtr>& args,
                                                const Kwargs& kwargs) {
  if (!kwargs.empty() || !ConstructedInC(cls)) return std::nullopt;
  std::vector<Object> values;
  for (const VarPtr& a : args) {
    absl::StatusOr<Object> v = ToPython(a);
    if (!v.ok()) return std::nullopt;
    values.push_back(*v);
  }
  absl::StatusOr<Object> exc = python::Call(Object::Borrow(cls), values);
  if (!exc.ok()) return std::nullopt;
  return Var::OfKind(VarKind::kOpaque, *exc);
}

absl::StatusOr<VarPtr> Translator::ExceptionInstance(const VarPtr& v) {
  PyObject* o = v->object.get();
  if (o != nullptr && PyExceptionInstance_Check(o)) return v;
  if (o != nullptr && PyExceptionClass_Check(o)) {
    if (std::optional<VarPtr> exc = MakeException(o, {}, {})) return *exc;
  }
  return Break(ir::GraphBreak::OTHER,
               absl::StrCat("the function raises ", Describe(*v), " on these inputs"),
               "check the inputs; an assert or raise is reached during tracing");
}

absl::Status Translator::OpRaiseVarargs(Frame& f, const Instruction& in, std::optional<VarPtr>&) {
  if (in.arg == 0) {  // bare raise: the exception being handled
    if (!handled_) {
      return Break(ir::GraphBreak::OTHER, "raise with no active exception", "the function would raise RuntimeError");
    }
    return Raise(handled_);
  }
  VarPtr cause;
  if (in.arg == 2) {
    POP_OR_RETURN(c);
    cause = std::move(c);
  }
  POP_OR_RETURN(value);
  ASSIGN_OR_RETURN(exc, ExceptionInstance(value));
  if (cause) {  // raise exc from cause: None, or an exception (a class is called)
    Object c = python::None();
    if (!cause->is_none()) {
      ASSIGN_OR_RETURN(cause_exc, ExceptionInstance(cause));
      c = cause_exc->object;
    }
    if (PyObject_SetAttrString(exc->object.get(), "__cause__", c.get()) < 0) return python::FetchError("__cause__");
  }
  return Raise(exc);
}

// The handler's prologue: the exception becomes the one being handled; the
// previous one (None: none) is kept below it for POP_EXCEPT.
absl::Status Translator::OpPushExcInfo(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(exc);
  f.stack.push_back(handled_ ? handled_ : Var::Constant(python::None()));
  handled_ = exc;
  f.stack.push_back(std::move(exc));
  return absl::OkStatus();
}

absl::Status Translator::OpPopExcept(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(previous);
  handled_ = previous->is_none() ? nullptr : previous;
  return absl::OkStatus();
}

// `except E:`: whether the exception below matches E (a class or a tuple of
// classes), by Python's own rule on the real objects.
absl::Status Translator::OpCheckExcMatch(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(match);
  if (f.stack.empty()) return absl::InternalError("CHECK_EXC_MATCH on an empty stack");
  const VarPtr& exc = f.stack.back();
  absl::StatusOr<Object> type = ToPython(match);
  if (!type.ok() || !exc->object || !PyExceptionInstance_Check(exc->object.get())) {
    return Break(ir::GraphBreak::OTHER, absl::StrCat("except clause naming ", Describe(*match)),
                 "except clauses are traced with exception classes or tuples of them");
  }
  const bool classes = PyExceptionClass_Check(type->get()) ||
                       (PyTuple_Check(type->get()) && [&] {
                         for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(type->get()); ++i) {
                           if (!PyExceptionClass_Check(PyTuple_GET_ITEM(type->get(), i))) return false;
                         }
                         return true;
                       }());
  if (!classes) {
    return Break(ir::GraphBreak::OTHER, "an except clause naming something other than exception classes",
                 "the function would raise TypeError");
  }
  const bool matches = PyErr_GivenExceptionMatches(exc->object.get(), type->get()) != 0;
  f.stack.push_back(Var::Constant(python::FromBool(matches)));
  return absl::OkStatus();
}

absl::Status Translator::OpReraise(Frame& f, const Instruction&, std::optional<VarPtr>&) {
  POP_OR_RETURN(exc);  // the oparg's lasti below it is only a traceback line
  return Raise(std::move(exc));
}

}  // namespace dynamo::trace
