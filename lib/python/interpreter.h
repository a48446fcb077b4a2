// The embedded CPython interpreter as an RAII scope.
//
//   absl::StatusOr<std::unique_ptr<Interpreter>> py = Interpreter::Start();
//   if (!py.ok()) return py.status();
//   ... use lib/python and everything above it ...
//   // the interpreter is finalized when *py goes out of scope
//
// When libdynamo is loaded into a process whose interpreter is already
// running (the `dynamo` extension module, or a host that started Python
// itself), Start() attaches to it and the scope does not finalize it.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace dynamo::python {

struct InterpreterOptions {
  // The interpreter whose prefix (stdlib, site-packages) the embedded one
  // uses. Empty: $DYNAMO_PYTHON, else the venv's whose bin/ holds this
  // executable (a CLI pip installed), else the active venv's ($VIRTUAL_ENV), else
  // the one libdynamo was built against (the project's venv) — never
  // whichever python3 happens to be first on PATH.
  std::string program;
  // Libraries should not take SIGINT away from their host.
  bool install_signal_handlers = false;
};

class Interpreter {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Interpreter>> Start(
      const InterpreterOptions& options = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // True when this scope initialized Python and will finalize it.
  [[nodiscard]] bool owns() const { return owns_; }
  // The target interpreter's path, fixed at build time.
  static const char* BuildPython();
  // The interpreter Start() embeds for these options (see InterpreterOptions).
  static std::string ChooseProgram(const InterpreterOptions& options);

 private:
  explicit Interpreter(bool owns) : owns_(owns) {}
  bool owns_;
};

}  // namespace dynamo::python
