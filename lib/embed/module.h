// libdynamo as the Python module `dynamo._C`. One module definition serves
// both kinds of process:
//
//   python3.11 -c 'import dynamo._C'    # a plain interpreter loads the extension
//                                        # (extension.cc, target dynamo_C)
//
//   // A C++ host that links libdynamo and runs Python itself registers the
//   // module instead, before Python code imports it:
//   if (absl::Status s = dynamo::embed::RegisterModule(); !s.ok()) return s;
//   PyRun_SimpleString("import dynamo._C; print(dynamo._C.ir_version())");
//
// A host must not let Python load the extension: the .so holds a second copy
// of libdynamo (its own op registry, statics and exception types).
#pragma once

#include <Python.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/python/object.h"

namespace dynamo::embed {

// The module's name in sys.modules.
inline constexpr char kModuleName[] = "dynamo._C";

// A new dynamo._C module object: its functions and exception types. Needs the
// GIL. Python must already be running; nothing here starts it.
[[nodiscard]] absl::StatusOr<python::Object> CreateModule();

// Installs dynamo._C into sys.modules of the running interpreter and, when the
// package `dynamo` is importable, imports it and binds the module as its `_C`
// (the import system only sets that attribute for submodules it loads itself,
// and `import dynamo._C; dynamo._C.f()` needs it). Takes the GIL. Calling it
// again is a no-op; it fails if Python is not running or if another dynamo._C
// (the extension) was imported first.
[[nodiscard]] absl::Status RegisterModule();

// Raises a failed `status` as a Python exception and returns nullptr, for a
// function of the module to return: a graph break as dynamo._C.GraphBreak
// (with reason, filename, lineno, text and hint attributes), anything else as
// `type`. The message is the status message (one line); a Python traceback
// the status carries is kept as the exception's `python_traceback`.
PyObject* RaiseStatus(const absl::Status& status, PyObject* type = PyExc_RuntimeError);

}  // namespace dynamo::embed
