// Importing a user's script as a module and finding the function to capture.
//
//   absl::StatusOr<Object> mod = ImportScript("examples/resnet.py");
//   absl::StatusOr<Target> t = ResolveTarget(*mod, "model.forward");
//   // t->code is the code object, t->self the bound module object.
//
// The script really runs (its imports, module-level objects and parameters are
// real), so errors at import are the user's and are reported as such: one line
// naming the script, the exception and where it was raised.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "lib/python/object.h"

namespace dynamo::python {

struct ImportOptions {
  // Run the script as `__main__` (its `if __name__ == "__main__":` block
  // executes). Off by default: the module is named after the file.
  bool as_main = false;
  // Run the file again even if a module was already imported from it (by
  // default the existing module is returned, as `import` would).
  bool reload = false;
};

// Imports the file at `path` with its directory first on sys.path.
[[nodiscard]] absl::StatusOr<Object> ImportScript(absl::string_view path,
                                                  const ImportOptions& options = {});

struct Target {
  Object callable;  // what the dotted path named (function or bound method)
  Object function;  // the Python function object behind it
  Object code;      // its code object
  Object self;      // the bound instance for `obj.method`, else empty
  std::string path; // the dotted path as given
};

// Resolves a dotted attribute path inside `module`: "forward", "Model.forward"
// (the plain function) or "model.forward" (a method bound to a module-level
// object). Anything that has no Python bytecode is an error that says what it
// is instead.
[[nodiscard]] absl::StatusOr<Target> ResolveTarget(const Object& module, absl::string_view dotted);

}  // namespace dynamo::python
