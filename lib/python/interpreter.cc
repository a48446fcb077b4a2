#include "lib/python/interpreter.h"

#include <Python.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#ifndef DYNAMO_PYTHON_EXECUTABLE
#error "DYNAMO_PYTHON_EXECUTABLE must be set by the build (see lib/python/CMakeLists.txt)"
#endif

namespace dynamo::python {
namespace {

std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// The "version" a venv's pyvenv.cfg records ("3.11.7"), or "" for an
// interpreter that is not a venv's.
std::string VenvVersion(const std::filesystem::path& program) {
  for (const std::filesystem::path& dir : {program.parent_path(), program.parent_path().parent_path()}) {
    std::ifstream cfg(dir / "pyvenv.cfg");
    if (!cfg) continue;
    std::string line;
    while (std::getline(cfg, line)) {
      absl::string_view l = line;
      if (absl::ConsumePrefix(&l, "version_info") || absl::ConsumePrefix(&l, "version")) {
        l = absl::StripLeadingAsciiWhitespace(l);
        if (absl::ConsumePrefix(&l, "=")) return std::string(absl::StripAsciiWhitespace(l));
      }
    }
  }
  return "";
}

// The venv's python when this executable was installed into a venv's bin/
// (pip install . puts the CLIs there), so it embeds the interpreter of the
// environment it belongs to however it is called; "" otherwise.
std::string VenvPythonBesideExecutable() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path python = exe.parent_path() / "python";
  if (!std::filesystem::exists(exe.parent_path().parent_path() / "pyvenv.cfg", ec) ||
      !std::filesystem::exists(python, ec)) {
    return "";
  }
  return python.string();
}

}  // namespace

const char* Interpreter::BuildPython() { return DYNAMO_PYTHON_EXECUTABLE; }

std::string Interpreter::ChooseProgram(const InterpreterOptions& options) {
  if (!options.program.empty()) return options.program;
  if (std::string p = EnvOr("DYNAMO_PYTHON"); !p.empty()) return p;
  if (std::string p = VenvPythonBesideExecutable(); !p.empty()) return p;
  if (std::string venv = EnvOr("VIRTUAL_ENV"); !venv.empty()) return venv + "/bin/python";
  return BuildPython();
}

absl::StatusOr<std::unique_ptr<Interpreter>> Interpreter::Start(
    const InterpreterOptions& options) {
  if (Py_IsInitialized()) return std::unique_ptr<Interpreter>(new Interpreter(false));

  // The program name decides the prefix search (a venv's pyvenv.cfg, its
  // site-packages), so the embedded interpreter sees what `python` would.
  const std::string program = ChooseProgram(options);
  std::error_code ec;
  if (!std::filesystem::exists(program, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no Python interpreter at ", program, " (libdynamo was built for ", BuildPython(),
        "; give another with --python or DYNAMO_PYTHON, or run scripts/setup.sh)"));
  }
  // libpython is linked in: a venv of another CPython version would load a
  // standard library this build cannot run.
  const std::string version = VenvVersion(program);
  const std::string built = absl::StrCat(PY_MAJOR_VERSION, ".", PY_MINOR_VERSION);
  if (!version.empty() && !absl::StartsWith(version, built + ".") && version != built) {
    return absl::FailedPreconditionError(absl::StrCat("the Python at ", program, " is ", version,
                                                      "; this libdynamo is built for Python ", built));
  }

  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = options.install_signal_handlers ? 1 : 0;
  config.parse_argv = 0;
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
