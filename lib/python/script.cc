#include "lib/python/script.h"

#include <Python.h>

#include <cctype>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/python/error.h"

namespace dynamo::python {
namespace {

namespace fs = std::filesystem;

absl::Status ImportFailure(absl::string_view path, const absl::Status& status) {
  std::string message(status.message());
  // FetchError put our context first; keep only the Python part.
  if (size_t colon = message.find(": "); colon != std::string::npos) {
    message = message.substr(colon + 2);
  }
  // A SyntaxError's message already names the file and line.
  std::optional<std::string> where = PythonRaiseSite(status);
  std::string site = PythonExceptionType(status) != "SyntaxError" && where
                         ? absl::StrCat(" (raised at ", *where, ")")
                         : "";
  absl::Status out(status.code(),
                   absl::StrCat("importing script '", path, "' failed: ", message, site));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

// The module names a script may get, in the order they are handed out: the
// file's stem, then stem__dynamo_script, stem__dynamo_script2, ... (a script
// called torch.py must not evict torch). The list ends one past the first
// name sys.modules does not hold.
std::vector<std::string> CandidateNames(const fs::path& file, bool as_main) {
  if (as_main) return {"__main__"};
  std::string stem = file.stem().string();
  for (char& c : stem) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  }
  if (stem.empty() || std::isdigit(static_cast<unsigned char>(stem[0]))) stem = "_" + stem;
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  std::vector<std::string> names = {stem};
  for (int i = 1; PyDict_GetItemString(modules, names.back().c_str()) != nullptr; ++i) {
    names.push_back(absl::StrCat(stem, "__dynamo_script", i == 1 ? "" : absl::StrCat(i)));
  }
  return names;
}

// A module name for the script that does not replace a module the
// interpreter already has: the first free candidate.
std::string ModuleNameFor(const fs::path& file, bool as_main) {
  return CandidateNames(file, as_main).back();
}

}  // namespace

absl::StatusOr<Object> ImportScript(absl::string_view path, const ImportOptions& options) {
  std::error_code ec;
  fs::path file{std::string(path)};
  if (!fs::exists(file, ec)) {
    return absl::NotFoundError(absl::StrCat("script '", path, "' does not exist"));
  }
  if (!fs::is_regular_file(file, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("script '", path, "' is not a regular file"));
  }
  fs::path absolute = fs::absolute(file, ec).lexically_normal();
  std::string dir = absolute.parent_path().string();

  // Imported before from the same file: that module, as `import` would give.
  // Its objects keep their identity across captures in one process. Only the
  // names ModuleNameFor would have given this file are looked at (a capture
  // must not scan all of sys.modules).
  if (!options.reload) {
    PyObject* modules = PyImport_GetModuleDict();  // borrowed
    for (const std::string& candidate : CandidateNames(absolute, options.as_main)) {
      PyObject* existing = PyDict_GetItemString(modules, candidate.c_str());  // borrowed
      if (existing == nullptr) break;  // names are handed out in order: no later one exists
      Object file_attr = Object::Steal(PyObject_GetAttrString(existing, "__file__"));
      if (!file_attr) {
        ClearError();
        continue;
      }
      absl::StatusOr<std::string> path_str = AsString(file_attr);
      if (path_str.ok() && *path_str == absolute.string()) return Object::Borrow(existing);
    }
  }
  std::string name = ModuleNameFor(absolute, options.as_main);

  // sys.path[0] = the script's directory, as `python3 script.py` would do.
  PyObject* sys_path = PySys_GetObject("path");  // borrowed
  if (sys_path == nullptr || !PyList_Check(sys_path)) {
    return absl::InternalError("sys.path is missing or not a list");
  }
  Object dir_obj = FromString(dir);
  int present = PySequence_Contains(sys_path, dir_obj.get());
  if (present < 0) return FetchError("reading sys.path");
  if (present == 0 && PyList_Insert(sys_path, 0, dir_obj.get()) != 0) {
    return FetchError("extending sys.path");
  }

  absl::StatusOr<Object> util = Import("importlib.util");
  if (!util.ok()) return util.status();
  absl::StatusOr<Object> spec = CallMethod(
      *util, "spec_from_file_location", {FromString(name), FromString(absolute.string())});
  if (!spec.ok()) return ImportFailure(path, spec.status());
  if (spec->get() == Py_None) {
    return absl::InvalidArgumentError(
        absl::StrCat("script '", path, "' is not a Python source file"));
  }
  absl::StatusOr<Object> module = CallMethod(*util, "module_from_spec", {*spec});
  if (!module.ok()) return ImportFailure(path, module.status());

  // Registered before running, like a normal import, so the script's own
  // classes pickle and dataclasses resolve their module.
  PyObject* modules = PyImport_GetModuleDict();
  Object previous = Object::Borrow(PyDict_GetItemString(modules, name.c_str()));
  if (PyDict_SetItemString(modules, name.c_str(), module->get()) != 0) {
    return FetchError("registering the script module");
  }
  absl::StatusOr<Object> loader = GetAttr(*spec, "loader");
  absl::StatusOr<Object> ran =
      loader.ok() ? CallMethod(*loader, "exec_module", {*module}) : loader.status();
  if (!ran.ok()) {
    if (previous) {
      PyDict_SetItemString(modules, name.c_str(), previous.get());
    } else {
      PyDict_DelItemString(modules, name.c_str());
    }
    ClearError();
    return ImportFailure(path, ran.status());
  }
  return *module;
}

absl::StatusOr<Target> ResolveTarget(const Object& module, absl::string_view dotted) {
  if (dotted.empty()) return absl::InvalidArgumentError("the target name is empty");
  std::vector<absl::string_view> parts = absl::StrSplit(dotted, '.');
  for (absl::string_view part : parts) {
    if (part.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("'", dotted, "' is not a valid dotted name"));
    }
  }
  Object current = module;
  std::string walked;
  for (absl::string_view part : parts) {
    std::string where = walked.empty() ? "the script" : absl::StrCat("'", walked, "'");
    Object key = FromString(part);
    Object next = Object::Steal(PyObject_GetAttr(current.get(), key.get()));
    if (!next) {
      absl::Status error = FetchError("");
      if (PythonExceptionType(error) != "AttributeError") {
        return absl::Status(error.code(), absl::StrCat("reading '", part, "' of ", where,
                                                       " raised ", error.message()));
      }
      return absl::NotFoundError(absl::StrCat(where, " has no attribute '", part, "'"));
    }
    walked = walked.empty() ? std::string(part) : absl::StrCat(walked, ".", part);
    current = next;
  }

  Target target;
  target.callable = current;
  target.path = std::string(dotted);
  PyObject* obj = current.get();
  if (PyMethod_Check(obj)) {
    target.function = Object::Borrow(PyMethod_Function(obj));
    target.self = Object::Borrow(PyMethod_Self(obj));
  } else {
    target.function = current;
  }
  if (PyFunction_Check(target.function.get())) {
    target.code = Object::Borrow(PyFunction_GetCode(target.function.get()));
    return target;
  }

  std::string what = TypeName(target.function);
  std::string prefix = absl::StrCat("target '", dotted, "' ");
  if (PyCFunction_Check(obj) || Py_IS_TYPE(obj, &PyMethodDescr_Type) ||
      Py_IS_TYPE(obj, &PyWrapperDescr_Type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "is a built-in (", what, ") and has no Python bytecode"));
  }
  if (PyType_Check(obj)) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "is a class; name one of its methods, e.g. '", dotted, ".forward'"));
  }
  if (PyModule_Check(obj)) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "is a module, not a function"));
  }
  if (HasAttr(obj, "forward")) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, "is a ", what, " object, not a function; did you mean '", dotted, ".forward'?"));
  }
  const char* article = absl::string_view("aeiou").find(what.empty() ? 'x' : what[0]) !=
                                absl::string_view::npos ? "an " : "a ";
  return absl::InvalidArgumentError(
      absl::StrCat(prefix, "is ", article, what, ", not a Python function or method"));
}

}  // namespace dynamo::python
