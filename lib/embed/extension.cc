// The extension module's entry point: `import dynamo._C` in a running python3
// loads _C.<EXT_SUFFIX> (target dynamo_C: this file over dynamo_embed) and
// calls PyInit__C. Python is already running, so nothing here starts it; the
// libraries attach to it (python::Interpreter::Start does not initialise a
// running interpreter again).
#include <Python.h>

#include "lib/embed/module.h"

PyMODINIT_FUNC PyInit__C() {
  absl::StatusOr<dynamo::python::Object> module = dynamo::embed::CreateModule();
  if (!module.ok()) return dynamo::embed::RaiseStatus(module.status(), PyExc_ImportError);
  return module->release();
}
