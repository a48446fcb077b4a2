// dynamo._C in a C++ host's interpreter: after RegisterModule(), Python code
// that imports dynamo._C gets the host's module (its libdynamo), never a
// second copy loaded from the extension's .so, which sits in the same
// package directory on PYTHONPATH.
#include <Python.h>

#include <catch2/catch.hpp>
#include <string>

#include "lib/embed/module.h"
#include "lib/python/error.h"
#include "proto/dynamo_ir.pb.h"
#include "test/test_support.h"

namespace dynamo::embed {
namespace {

using python::Object;

// Runs `source` as a module body in a fresh namespace and returns it.
Object Run(const std::string& source) {
  Object ns = Object::Steal(PyDict_New());
  PyDict_SetItemString(ns.get(), "__builtins__", PyEval_GetBuiltins());
  Object result = Object::Steal(PyRun_String(source.c_str(), Py_file_input, ns.get(), ns.get()));
  if (!result) FAIL(testing::Describe(python::FetchError("running the test's Python code")));
  return ns;
}

Object Get(const Object& ns, const char* name) {
  Object value = Object::Borrow(PyDict_GetItemString(ns.get(), name));
  INFO(name);
  REQUIRE(value);
  return value;
}

TEST_CASE("Python code imports the module the host registered") {
  DYNAMO_REQUIRE_OK(RegisterModule());
  DYNAMO_REQUIRE_OK(RegisterModule());  // again: a no-op
  Object ns = Run(R"(
import sys
import dynamo._C

version = dynamo._C.ir_version()
registered = sys.modules["dynamo._C"] is dynamo._C
from_extension = hasattr(dynamo._C, "__file__")

def f(x, n):
    return x * n + 1

listing = dynamo._C.disassemble(f, nested=False)
try:
    dynamo._C.capture("/nonexistent/model.py", "f", ["f32[2]"])
except dynamo._C.CaptureError as e:
    error = str(e)
)");
  CHECK(*python::AsLong(Get(ns, "version")) == ir::IR_VERSION_CURRENT);
  CHECK(Get(ns, "registered").get() == Py_True);
  CHECK(Get(ns, "from_extension").get() == Py_False);
  std::string listing = *python::AsString(Get(ns, "listing"));
  CHECK_THAT(listing, Catch::StartsWith("Disassembly of f (<string>, line ") &&
                          Catch::Contains("(*)") &&
                          Catch::Contains("RETURN_VALUE"));
  CHECK_THAT(*python::AsString(Get(ns, "error")),
             Catch::Contains("'/nonexistent/model.py' does not exist"));
}

TEST_CASE("RegisterModule refuses when another dynamo._C was imported first") {
  DYNAMO_REQUIRE_OK(RegisterModule());
  Run(R"(
import sys, types
ours = sys.modules["dynamo._C"]
sys.modules["dynamo._C"] = types.ModuleType("dynamo._C")
)");
  absl::Status status = RegisterModule();
  Run("import sys\nsys.modules['dynamo._C'] = sys.modules['dynamo']._C\n");
  CHECK(status.code() == absl::StatusCode::kAlreadyExists);
  CHECK_THAT(std::string(status.message()), Catch::Contains("must register its own"));
  DYNAMO_REQUIRE_OK(RegisterModule());
}


TEST_CASE("The live shim runs in the host's interpreter") {
  DYNAMO_REQUIRE_OK(RegisterModule());
  Object ns = Run(R"(
import contextlib, io
import torch
import dynamo._C
from dynamo.runtime import Runtime

def f(x, y):
    z = x * 2
    print("between graphs")
    return z + y

rt = Runtime()  # the PEP 523 frame evaluator
x, y = torch.randn(3), torch.randn(3)
with contextlib.redirect_stdout(io.StringIO()) as out:
    first = rt.call(f, (x, y), {})
    second = rt.call(f, (x, y), {})
printed = out.getvalue()
equal = torch.equal(first, f(x, y)) and torch.equal(second, first)
graphs = len(rt.graphs)
breaks = len(rt.break_records)
hits = dynamo._C.cache_stats()["hits"]
)");
  CHECK(Get(ns, "equal").get() == Py_True);
  CHECK(*python::AsString(Get(ns, "printed")) == "between graphs\nbetween graphs\n");
  CHECK(*python::AsLong(Get(ns, "graphs")) == 2);  // x * 2 | print | z + y
  CHECK(*python::AsLong(Get(ns, "breaks")) == 1);
  CHECK(*python::AsLong(Get(ns, "hits")) >= 2);      // the second call: both frames cached
}

}  // namespace
}  // namespace dynamo::embed
