#include "lib/python/error.h"

#include <Python.h>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/python/object.h"

namespace dynamo::python {
namespace {

constexpr absl::string_view kTracebackPayload = "dynamo.python/traceback";
constexpr absl::string_view kTypePayload = "dynamo.python/type";
constexpr absl::string_view kSitePayload = "dynamo.python/site";

// The interrupt set aside by ClearError / FetchError (a strong reference to
// the exception instance, its traceback attached), per thread.
thread_local PyObject* pending_interrupt = nullptr;

bool IsInterrupt(PyObject* type) {
  return PyErr_GivenExceptionMatches(type, PyExc_KeyboardInterrupt) ||
         PyErr_GivenExceptionMatches(type, PyExc_SystemExit);
}

// `value` itself when it is an interrupt, else the interrupt a SystemError
// was raised from ("a result with an exception set": a C function ignored
// the interrupt and returned); borrowed, or null. Other exceptions are the
// program's own, even when raised while it handled an interrupt.
PyObject* InterruptIn(PyObject* value) {
  for (int depth = 0; value != nullptr && depth < 16; ++depth) {
    if (IsInterrupt(reinterpret_cast<PyObject*>(Py_TYPE(value)))) return value;
    if (!PyErr_GivenExceptionMatches(reinterpret_cast<PyObject*>(Py_TYPE(value)), PyExc_SystemError)) {
      return nullptr;
    }
    PyObject* next = PyException_GetCause(value);  // new references
    if (next == nullptr) next = PyException_GetContext(value);
    Py_XDECREF(next);  // the chain keeps it alive while `value` lives
    value = next;
  }
  return nullptr;
}

// Keeps `value` (a new reference) as this thread's interrupt unless one is
// already kept.
void SetAside(PyObject* value) {
  if (pending_interrupt == nullptr) {
    pending_interrupt = value;
  } else {
    Py_XDECREF(value);
  }
}

// The innermost frame of the traceback outside importlib's frozen modules,
// as "file:line"; "" when there is none. Attribute access keeps this
// independent of the traceback struct, which changes between versions.
std::string RaiseSite(const Object& tb) {
  std::string site;
  for (Object t = tb; t && t.get() != Py_None;) {
    Object frame = Object::Steal(PyObject_GetAttrString(t.get(), "tb_frame"));
    Object line = Object::Steal(PyObject_GetAttrString(t.get(), "tb_lineno"));
    Object code = frame ? Object::Steal(PyObject_GetAttrString(frame.get(), "f_code")) : Object();
    Object file = code ? Object::Steal(PyObject_GetAttrString(code.get(), "co_filename")) : Object();
    if (!file || !line) {
      ClearError();
      break;
    }
    absl::StatusOr<std::string> name = AsString(file);
    absl::StatusOr<long long> number = AsLong(line);
    if (name.ok() && number.ok() && !name->starts_with("<frozen")) {
      site = absl::StrCat(*name, ":", *number);
    }
    t = Object::Steal(PyObject_GetAttrString(t.get(), "tb_next"));
  }
  ClearError();
  return site;
}

// Formats with the traceback module; returns "" if even that fails (the
// summary line is still useful on its own).
std::string FormatTraceback(const Object& type, const Object& value, const Object& tb) {
  absl::StatusOr<Object> traceback = Import("traceback");
  if (!traceback.ok()) return "";
  Object fn = Object::Steal(PyObject_GetAttrString(traceback->get(), "format_exception"));
  if (!fn) {
    ClearError();
    return "";
  }
  Object lines = Object::Steal(PyObject_CallFunctionObjArgs(
      fn.get(), type.get(), value ? value.get() : Py_None, tb ? tb.get() : Py_None, nullptr));
  if (!lines) {
    ClearError();
    return "";
  }
  Object empty = FromString("");
  Object joined = Object::Steal(PyUnicode_Join(empty.get(), lines.get()));
  if (!joined) {
    ClearError();
    return "";
  }
  absl::StatusOr<std::string> text = AsString(joined);
  return text.ok() ? *text : "";
}

absl::StatusCode CodeFor(PyObject* type) {
  if (PyErr_GivenExceptionMatches(type, PyExc_SyntaxError)) return absl::StatusCode::kInvalidArgument;
  if (PyErr_GivenExceptionMatches(type, PyExc_ModuleNotFoundError) ||
      PyErr_GivenExceptionMatches(type, PyExc_FileNotFoundError)) {
    return absl::StatusCode::kNotFound;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace

absl::Status FetchError(absl::string_view context) {
  PyObject *raw_type = nullptr, *raw_value = nullptr, *raw_tb = nullptr;
  PyErr_Fetch(&raw_type, &raw_value, &raw_tb);
  if (raw_type == nullptr) {
    return absl::InternalError(absl::StrCat(context, ": failed without a Python exception"));
  }
  PyErr_NormalizeException(&raw_type, &raw_value, &raw_tb);
  Object type = Object::Steal(raw_type);
  Object value = Object::Steal(raw_value);
  Object tb = Object::Steal(raw_tb);
  if (tb && value) PyException_SetTraceback(value.get(), tb.get());
  if (PyObject* interrupt = value ? InterruptIn(value.get()) : nullptr) {
    Py_INCREF(interrupt);
    SetAside(interrupt);
  }

  std::string type_name = reinterpret_cast<PyTypeObject*>(type.get())->tp_name;
  std::string message;
  if (value) {
    Object str = Object::Steal(PyObject_Str(value.get()));
    absl::StatusOr<std::string> s = str ? AsString(str) : absl::UnknownError("");
    if (s.ok()) message = *s;
    ClearError();
  }
  std::string summary = message.empty() ? type_name : absl::StrCat(type_name, ": ", message);
  // One line: a multi-line exception message is folded so callers that print
  // the status keep the "one clear line" promise.
  for (char& c : summary) {
    if (c == '\n') c = ' ';
  }
  absl::Status status(CodeFor(type.get()),
                      context.empty() ? summary : absl::StrCat(context, ": ", summary));
  status.SetPayload(kTracebackPayload, absl::Cord(FormatTraceback(type, value, tb)));
  status.SetPayload(kTypePayload, absl::Cord(type_name));
  if (std::string site = RaiseSite(tb); !site.empty()) {
    status.SetPayload(kSitePayload, absl::Cord(site));
  }
  return status;
}

void ClearError() {
  PyObject* type = PyErr_Occurred();
  if (type == nullptr) return;
  // The common case (an AttributeError from a probe) stays cheap.
  if (!IsInterrupt(type) && !PyErr_GivenExceptionMatches(type, PyExc_SystemError)) {
    PyErr_Clear();
    return;
  }
  PyObject *raw_type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&raw_type, &value, &tb);
  PyErr_NormalizeException(&raw_type, &value, &tb);
  if (tb != nullptr && value != nullptr) PyException_SetTraceback(value, tb);
  if (PyObject* interrupt = value ? InterruptIn(value) : nullptr) {
    Py_INCREF(interrupt);
    SetAside(interrupt);
  }
  Py_XDECREF(raw_type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

bool InterruptPending() { return pending_interrupt != nullptr; }

bool RaisePendingInterrupt() {
  // One still pending (code that failed without clearing) is raised as it is.
  if (PyObject* type = PyErr_Occurred(); type != nullptr && IsInterrupt(type)) return true;
  if (pending_interrupt == nullptr) return false;
  PyObject* value = pending_interrupt;
  pending_interrupt = nullptr;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(value)), value);
  Py_DECREF(value);
  return true;
}

std::optional<std::string> PythonTraceback(const absl::Status& status) {
  auto p = status.GetPayload(kTracebackPayload);
  if (!p) return std::nullopt;
  return std::string(*p);
}

std::optional<std::string> PythonRaiseSite(const absl::Status& status) {
  auto p = status.GetPayload(kSitePayload);
  if (!p) return std::nullopt;
  return std::string(*p);
}

std::optional<std::string> PythonExceptionType(const absl::Status& status) {
  auto p = status.GetPayload(kTypePayload);
  if (!p) return std::nullopt;
  return std::string(*p);
}

}  // namespace dynamo::python
