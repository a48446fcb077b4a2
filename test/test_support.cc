#include "test/test_support.h"

#include <Python.h>

#include <cstdlib>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "lib/python/error.h"

namespace dynamo::testing {

std::string SourceDir() {
  const char* env = std::getenv("DYNAMO_SOURCE_DIR");
  return env ? env : DYNAMO_SOURCE_DIR;
}

python::Object ImportTestModule(absl::string_view name) {
  static bool path_added = false;
  if (!path_added) {
    // The test helpers, and the build's `dynamo` package (loader, guards).
    PyObject* sys_path = PySys_GetObject("path");
    python::Object package = python::FromString(DYNAMO_PYTHONPATH);
    PyList_Insert(sys_path, 0, package.get());
    python::Object dir = python::FromString(SourceDir() + "/test/python");
    PyList_Insert(sys_path, 0, dir.get());
    path_added = true;
  }
  absl::StatusOr<python::Object> m = python::Import(name);
  if (!m.ok()) throw std::runtime_error(Describe(m.status()));
  return *m;
}

python::Object ModuleFromSource(absl::string_view name, absl::string_view source) {
  std::string src(source);
  std::string mod_name(name);
  python::Object code = python::Object::Steal(
      Py_CompileString(src.c_str(), (mod_name + ".py").c_str(), Py_file_input));
  if (!code) throw std::runtime_error(Describe(python::FetchError("compiling test source")));
  python::Object module = python::Object::Steal(
      PyImport_ExecCodeModule(mod_name.c_str(), code.get()));
  if (!module) throw std::runtime_error(Describe(python::FetchError("running test source")));
  return module;
}

std::string Describe(const absl::Status& status) {
  std::string text(status.ToString(absl::StatusToStringMode::kWithNoExtraData));
  if (auto tb = python::PythonTraceback(status)) absl::StrAppend(&text, "\n", *tb);
  return text;
}

}  // namespace dynamo::testing
