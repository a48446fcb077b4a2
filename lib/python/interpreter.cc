#include "lib/python/interpreter.h"

#include <Python.h>

#include "absl/strings/str_cat.h"

#ifndef DYNAMO_PYTHON_EXECUTABLE
#error "DYNAMO_PYTHON_EXECUTABLE must be set by the build (see lib/python/CMakeLists.txt)"
#endif

namespace dynamo::python {

const char* Interpreter::BuildPython() { return DYNAMO_PYTHON_EXECUTABLE; }

absl::StatusOr<std::unique_ptr<Interpreter>> Interpreter::Start(
    const InterpreterOptions& options) {
  if (Py_IsInitialized()) return std::unique_ptr<Interpreter>(new Interpreter(false));

  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = options.install_signal_handlers ? 1 : 0;
  config.parse_argv = 0;
  // The program name decides the prefix search; an absolute path keeps
  // pyenv's python3 on PATH from being used as the prefix by mistake.
  std::string program = options.program.empty() ? BuildPython() : options.program;
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, program.c_str());
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot start the embedded Python (", program,
        "): ", status.err_msg ? status.err_msg : "unknown error"));
  }
  return std::unique_ptr<Interpreter>(new Interpreter(true));
}

Interpreter::~Interpreter() {
  if (owns_ && Py_IsInitialized()) Py_FinalizeEx();
}

}  // namespace dynamo::python
