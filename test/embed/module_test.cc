// dynamo._C in a C++ host's interpreter: after RegisterModule(), Python code
// that imports dynamo._C gets the host's module (its libdynamo), never a
// second copy loaded from the extension's .so, which sits in the same
// package directory on PYTHONPATH.
#include <Python.h>

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/text_format.h"
#include "lib/embed/live_capture.h"
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

// A capture as text, kept in memory as capture_call keeps it.
Object Live(const std::string& text) {
  ir::Capture capture;
  REQUIRE(google::protobuf::TextFormat::ParseFromString(text, &capture));
  Object live = NewLiveCapture(std::move(capture));
  REQUIRE(live);
  return live;
}

// Runs `source` with `live` bound to the name `live`.
Object RunWith(const Object& live, const std::string& source) {
  Object ns = Object::Steal(PyDict_New());
  PyDict_SetItemString(ns.get(), "__builtins__", PyEval_GetBuiltins());
  PyDict_SetItemString(ns.get(), "live", live.get());
  Object result = Object::Steal(PyRun_String(source.c_str(), Py_file_input, ns.get(), ns.get()));
  if (!result) FAIL(testing::Describe(python::FetchError("running the test's Python code")));
  return ns;
}

// forward_table's hooks, recording what they were asked.
constexpr char kHooks[] = R"(
class L:
    def __init__(self, name, slot):
        self.name, self.slot = name, slot
    def __repr__(self):
        return f"{self.name}@{self.slot}"

asked = []
def resolve(kind, target, inferred, name):
    asked.append((kind, target, inferred, name))
    return f"<{target}>" if kind == 0 else target.partition(".")[2]
def constant(kind, value):
    asked.append((kind, value))
    return f"<{kind} {value}>"
def table():
    try:
        return repr(live.forward_table(L, resolve, constant))
    except ValueError as e:
        return f"ValueError: {e}"
)";

TEST_CASE("A LiveCapture builds the forward's table from the capture in memory") {
  DYNAMO_REQUIRE_OK(RegisterModule());
  Object live = Live(R"pb(
    function_name: "Model.forward"
    inputs { name: "L['x']" tensor {} }
    inputs { name: "L['n']" constant { int_value: 2 } }
    inputs { name: "L['y']" tensor {} }
    guards { kind: SHAPE_ENV }
    graph_breaks { message: "print" }
    attributes { target: "layer.weight" }
    graphs {
      nodes { name: "x" kind: PLACEHOLDER }
      nodes { name: "layer_weight" kind: GET_ATTR target: "layer.weight" }
      nodes { name: "add" kind: CALL_FUNCTION target: "torch.add"
              args { node: "x" } args { node: "layer_weight" }
              kwargs { name: "alpha" value { float_value: 0.5 } } }
      nodes { name: "self" kind: PLACEHOLDER }
      nodes { name: "to" kind: CALL_METHOD target: "Tensor.to" inferred_on_meta: true
              args { node: "add" } args { dtype: DTYPE_FLOAT16 }
              kwargs { name: "device" value { device { type: "cpu" index: -1 } } } }
      nodes { name: "getitem" kind: CALL_FUNCTION target: "operator.getitem"
              args { node: "to" }
              args { list { is_tuple: true
                            items { slice { start: 1 stop_node: "self" } }
                            items { ellipsis {} } items { none {} } } } }
      nodes { name: "output" kind: OUTPUT
              args { list { items { node: "getitem" } items { string_value: "s" } } }
              args { dict { keys: "k" values { bool_value: true } } } }
    }
  )pb");
  Object ns = RunWith(live, std::string(kHooks) + R"(
result = table()
inputs, symbols, breaks, name = live.tensor_inputs, live.has_symbols, live.break_count, live.function_name
import dynamo._C
try:
    dynamo._C.LiveCapture()
except TypeError:
    made = False
else:
    made = True
first = live.serialize()
same = live.serialize() is first
)");
  // Placeholders take the first slots wherever they stand; "self" gets a
  // name of ours (_v<nodes before it>). The output is a tuple of both args.
  CHECK(*python::AsString(Get(ns, "result")) ==
        "(('x', '_v3'), "
        "((2, ('layer', 'weight'), (), {}, 2), "
        "(0, '<torch.add>', (x@0, layer_weight@2), {'alpha': 0.5}, 3), "
        "(1, 'to', (add@3, '<dtype 7>'), {'device': \"<device ('cpu', -1)>\"}, 4), "
        "(0, '<operator.getitem>', (to@4, (slice(1, _v3@1, None), Ellipsis, None)), {}, 5)), "
        "([getitem@5, 's'], {'k': True}), "
        "('layer_weight', 'add', 'to', 'getitem'), "
        "('layer.weight', 'torch.add', 'Tensor.to', 'operator.getitem'), "
        "('layer.weight',))");
  CHECK(python::Repr(Get(ns, "asked")) ==
        "[(0, 'torch.add', False, 'add'), (1, 'Tensor.to', True, 'to'), ('dtype', 7), "
        "('device', ('cpu', -1)), (0, 'operator.getitem', False, 'getitem')]");
  CHECK(python::Repr(Get(ns, "inputs")) == "(\"L['x']\", \"L['y']\")");
  CHECK(Get(ns, "symbols").get() == Py_True);
  CHECK(*python::AsLong(Get(ns, "breaks")) == 1);
  CHECK(*python::AsString(Get(ns, "name")) == "Model.forward");
  CHECK(Get(ns, "made").get() == Py_False);  // only capture_call makes one
  CHECK(Get(ns, "same").get() == Py_True);   // serialized once
  ir::Capture back;
  Object bytes = Get(ns, "first");
  REQUIRE(back.ParseFromArray(PyBytes_AS_STRING(bytes.get()), static_cast<int>(PyBytes_GET_SIZE(bytes.get()))));
  CHECK(back.function_name() == "Model.forward");
  CHECK(back.graphs(0).nodes_size() == 7);
}

TEST_CASE("A LiveCapture's table refuses a graph that does not hold together") {
  DYNAMO_REQUIRE_OK(RegisterModule());
  const std::string output = R"pb(nodes { name: "output" kind: OUTPUT args { node: "x" } })pb";
  const std::string x = R"pb(nodes { name: "x" kind: PLACEHOLDER })pb";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {x + R"pb(nodes { name: "y" kind: CALL_FUNCTION target: "f" args { node: "z" } })pb" + output,
       "node y: an argument is no earlier node"},
      {x + x + output, "node x: a second node of that name"},
      {x + output + R"pb(nodes { name: "y" kind: PLACEHOLDER })pb", "node y: comes after the output node"},
      {x, "the graph has no output node"},
      {x + R"pb(nodes { name: "w" kind: GET_ATTR target: "missing" })pb" + output,
       "node w: reads no attribute of the capture"},
      {x + R"pb(nodes { name: "m" kind: CALL_METHOD target: "Tensor.sum" })pb" + output,
       "node m: a method call without its object"},
      {x + R"pb(nodes { name: "m" kind: CALL_MODULE target: "layer" })pb" + output,
       "node m: is of a kind libdynamo does not write"},
      {R"pb(nodes { name: "not a name" kind: PLACEHOLDER })pb" + output, "node not a name: is not a plain identifier"},
  };
  for (const auto& [graph, message] : cases) {
    INFO(graph);
    Object ns = RunWith(Live("graphs { " + graph + " }"), std::string(kHooks) + "result = table()\n");
    CHECK(*python::AsString(Get(ns, "result")) == "ValueError: " + message);
  }
  // No graph, or one with subgraphs (FX builds those): no table.
  for (const std::string& text : {std::string(""), "graphs { subgraphs { name: \"true_graph_0\" } " + x + output + " }"}) {
    Object ns = RunWith(Live(text), std::string(kHooks) + "result = table()\n");
    CHECK(*python::AsString(Get(ns, "result")) == "None");
  }
}

}  // namespace
}  // namespace dynamo::embed
