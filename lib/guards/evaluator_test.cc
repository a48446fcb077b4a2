// The guard evaluator against guards the translator really makes (small
// functions, an nn.Module, torchvision's resnet18) and guards written by
// hand: matching frames pass, each kind fails on the change it exists for,
// Explain() names the guard with both values in python/dynamo/guards.py's
// words (checked against that checker on the same calls), and Check() runs
// no Python code on the nn.Module paths.
#include "lib/guards/evaluator.h"
#include "lib/guards/versions.h"

#include <Python.h>
#include <frameobject.h>

#include <catch2/catch.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "lib/ops/meta.h"
#include "lib/ops/proto_conversion.h"
#include "lib/ops/registry.h"
#include "lib/ops/sym.h"
#include "lib/python/error.h"
#include "lib/trace/translator.h"
#include "test/test_support.h"

namespace dynamo::guards {
namespace {

using python::Object;

constexpr const char* kCases = R"PY(
import torch
import torch.nn as nn

def helper(a):
    return a * 2

def two(x, y):
    return torch.relu(x) + y

def scaled(x, n, alpha, mode, flag):
    if flag:
        x = x + 1
    if mode == "double":
        x = x * 2
    return x * n * alpha

def calls_helper(x):
    return helper(x) + 1

def many(xs):
    out = xs[0]
    for t in xs[1:]:
        out = out + t
    return out

def maybe(x, y=None):
    if y is not None:
        return x + y
    return x

def make_inner(k):
    def inner(x):
        return x * k
    return inner

inner = make_inner(3)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)
        self.drop = nn.Dropout(0.5)
        self.blocks = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(3, 2), nn.Linear(3, 2)])
        self.table = nn.ModuleDict({"out": nn.Linear(2, 2)})

    def forward(self, x):
        h = self.blocks(self.drop(self.bn(self.fc(x))))
        return self.table["out"](self.heads[0](h) + self.heads[-1](h))

net = Net().eval()

# A guard that reads h.scale runs this __getattr__: armed, it makes the
# module's buffer the very tensor passed as x, in the middle of a check.
class Sneaky:
    armed = None
    def __getattr__(self, name):
        if Sneaky.armed is not None:
            Sneaky.armed, module = None, Sneaky.armed
            module.bn.running_mean = Sneaky.x
        return 2.0

def net_and_sneaky(self, x, h):
    return self(x) * h.scale
)PY";

Object Cases() {
  static Object* module = new Object(testing::ModuleFromSource("guards_cases", kCases));  // leaked
  return *module;
}

// Evaluates a Python expression in the cases module.
Object Eval(const std::string& expr) {
  Object globals = Object::Borrow(PyModule_GetDict(Cases().get()));
  Object r = Object::Steal(PyRun_String(expr.c_str(), Py_eval_input, globals.get(), globals.get()));
  if (!r) FAIL(testing::Describe(python::FetchError(expr)));
  return r;
}

void Exec(const std::string& stmt) {
  Object globals = Object::Borrow(PyModule_GetDict(Cases().get()));
  Object r = Object::Steal(PyRun_String(stmt.c_str(), Py_file_input, globals.get(), globals.get()));
  if (!r) FAIL(testing::Describe(python::FetchError(stmt)));
}

// A frame of `fn` (an expression naming a function) with `locals` (a dict expression).
OwnedFrame Frame(const std::string& fn, const std::string& locals) {
  absl::StatusOr<OwnedFrame> f =
      OwnedFrame::ForCode(Eval(fn + ".__code__"), Eval(locals), Eval(fn + ".__globals__"));
  DYNAMO_REQUIRE_OK(f);
  return *std::move(f);
}

trace::TraceInput T(std::vector<int64_t> sizes) {
  return trace::TraceInput::Tensor(ops::TensorMeta::Contiguous(ops::DType::kFloat32, std::move(sizes)));
}
trace::TraceInput V(const std::string& expr) { return trace::TraceInput::Object(Eval(expr)); }

std::vector<ir::Guard> TraceGuards(const std::string& fn, std::vector<trace::TraceInput> args,
                                   const std::string& self = "") {
  trace::TraceRequest request;
  request.function = Eval(fn);
  if (!self.empty()) request.self = Eval(self);
  request.args = std::move(args);
  trace::BreakInfo why;
  absl::StatusOr<trace::TraceResult> r = trace::Trace(request, ops::DefaultRegistry(), &why);
  INFO(why.message);
  DYNAMO_REQUIRE_OK(r);
  return std::vector<ir::Guard>(r->guards.begin(), r->guards.end());
}

GuardEvaluator CompileOk(const std::vector<ir::Guard>& guards, const OwnedFrame& frame) {
  absl::StatusOr<GuardEvaluator> ev = GuardEvaluator::Compile(guards, frame.view());
  DYNAMO_REQUIRE_OK(ev);
  return *std::move(ev);
}

GuardEvaluator CompileOk(const google::protobuf::RepeatedPtrField<ir::Guard>& guards, const OwnedFrame& frame) {
  return CompileOk(std::vector<ir::Guard>(guards.begin(), guards.end()), frame);
}

template <typename Guards>  // a vector, or a trace's repeated field
bool HasGuard(const Guards& guards, ir::Guard::Kind kind, const std::string& source) {
  for (const ir::Guard& g : guards) {
    if (g.kind() == kind && g.source() == source) return true;
  }
  return false;
}

// Check() and Explain() must agree; returns Explain's answer ("" when all hold).
std::string Verdict(const GuardEvaluator& ev, const OwnedFrame& frame) {
  bool ok = ev.Check(frame.view());
  REQUIRE(PyErr_Occurred() == nullptr);
  std::optional<std::string> why = ev.Explain(frame.view());
  REQUIRE(PyErr_Occurred() == nullptr);
  CHECK(ok == !why.has_value());
  CHECK((ev.FirstFailing(frame.view()) < 0) == ok);
  return why.value_or("");
}

ir::Guard Hand(ir::Guard::Kind kind, const std::string& source) {
  ir::Guard g;
  g.set_kind(kind);
  g.set_source(source);
  return g;
}

// Python function calls (not C ones) made while `body` runs.
int g_python_calls = 0;
int CountCalls(PyObject*, PyFrameObject*, int what, PyObject*) {
  if (what == PyTrace_CALL) ++g_python_calls;
  return 0;
}
template <typename F>
int PythonCallsDuring(F&& body) {
  g_python_calls = 0;
  PyEval_SetProfile(CountCalls, nullptr);
  body();
  PyEval_SetProfile(nullptr, nullptr);
  return g_python_calls;
}

TEST_CASE("a two-tensor function: metadata changes fail on the right field", "[guards]") {
  std::vector<ir::Guard> guards = TraceGuards("two", {T({2, 3}), T({2, 3})});
  REQUIRE(HasGuard(guards, ir::Guard::TENSOR_MATCH, "L['x']"));
  REQUIRE(HasGuard(guards, ir::Guard::TENSOR_MATCH, "L['y']"));
  GuardEvaluator ev = CompileOk(guards, Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(2, 3))"));
  CHECK(ev.size() == guards.size());

  // Fresh tensors with the same metadata pass.
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.ones(2, 3), y=torch.zeros(2, 3))")) == "");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3, dtype=torch.float64), y=torch.randn(2, 3))")) ==
        "L['x']: dtype: expected torch.float32, got torch.float64");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(3, 2))")) ==
        "L['y']: sizes: expected [2, 3], got [3, 2]");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(2))")) ==
        "L['y']: sizes: expected [2, 3], got [2]");
  // Same sizes, transposed layout.
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(3, 2).t(), y=torch.randn(2, 3))")) ==
        "L['x']: strides: expected [3, 1], got [1, 2]");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(2, 3, requires_grad=True))")) ==
        "L['y']: requires_grad: expected False, got True");
  CHECK(Verdict(ev, Frame("two", "dict(x=3, y=torch.randn(2, 3))")) == "L['x']: expected a tensor, got int");
  CHECK(Verdict(ev, Frame("two", "dict(x=None, y=torch.randn(2, 3))")) == "L['x']: expected a tensor, got NoneType");
  CHECK(Verdict(ev, Frame("two", "dict(x=nn.Parameter(torch.randn(2, 3), requires_grad=False), y=torch.randn(2, 3))")) ==
        "L['x']: type: expected torch.Tensor, got torch.nn.parameter.Parameter");
  CHECK(Verdict(ev, Frame("two", "dict(y=torch.randn(2, 3))")) == "L['x']: cannot be read (KeyError('x'))");

  // torch.relu is read through G['torch']: a replaced global fails by identity.
  REQUIRE(HasGuard(guards, ir::Guard::ID_MATCH, "G['torch'].relu"));
  Exec("_saved_relu = torch.relu\ntorch.relu = lambda t: t");
  std::string relu_replaced = Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(2, 3))"));
  Exec("torch.relu = _saved_relu");
  CHECK(relu_replaced == "G['torch'].relu: expected torch._VariableFunctionsClass.relu, got guards_cases.<lambda>");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(2, 3))")) == "");
}

TEST_CASE("grad mode is checked as global state", "[guards]") {
  std::vector<ir::Guard> guards = TraceGuards("two", {T({2, 3}), T({2, 3})});
  REQUIRE(HasGuard(guards, ir::Guard::GLOBAL_STATE, "grad_mode"));
  OwnedFrame frame = Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(2, 3))");
  GuardEvaluator ev = CompileOk(guards, frame);
  Exec("torch.set_grad_enabled(False)");
  std::string disabled = Verdict(ev, frame);
  Exec("torch.set_grad_enabled(True)");
  CHECK(disabled == "grad_mode: expected True, got False");
  CHECK(Verdict(ev, frame) == "");
}

TEST_CASE("torch's own tensor and global-state checks are only ever a shortcut", "[guards]") {
  std::vector<ir::Guard> guards = TraceGuards("two", {T({2, 3}), T({2, 3})});
  OwnedFrame frame = Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(2, 3))");
  GuardEvaluator ev = CompileOk(guards, frame);
  CHECK(Verdict(ev, frame) == "");  // the first check that holds makes the shortcuts
  uint64_t tensors = GuardEvaluator::torch_tensor_checks(), globals = GuardEvaluator::global_snapshot_hits();
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.ones(2, 3), y=torch.zeros(2, 3))")) == "");
  CHECK(GuardEvaluator::torch_tensor_checks() >= tensors + 2);  // both tensors, answered by torch
  CHECK(GuardEvaluator::global_snapshot_hits() > globals);
  // Where torch's check says no but every field holds (it also compares
  // dispatch keys), the fields decide: the guards hold.
  CHECK(Verdict(ev, Frame("two", "dict(x=torch._neg_view(torch.randn(2, 3)), y=torch.randn(2, 3))")) == "");
  Exec("with torch.inference_mode():\n    _inference = torch.randn(2, 3)");
  CHECK(Verdict(ev, Frame("two", "dict(x=_inference, y=torch.randn(2, 3))")) == "");
  // Where it says no, the fields name what changed, as without it.
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3, dtype=torch.float64), y=torch.randn(2, 3))")) ==
        "L['x']: dtype: expected torch.float32, got torch.float64");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(3, 2).t(), y=torch.randn(2, 3))")) ==
        "L['x']: strides: expected [3, 1], got [1, 2]");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3), y=torch.randn(2, 3, requires_grad=True))")) ==
        "L['y']: requires_grad: expected False, got True");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3, device='meta'), y=torch.randn(2, 3))")) ==
        "L['x']: device: expected cpu, got meta");
  Exec("class _Sub(torch.Tensor):\n    pass");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(2, 3).as_subclass(_Sub), y=torch.randn(2, 3))")) ==
        "L['x']: type: expected torch.Tensor, got guards_cases._Sub");
  // A state the snapshot compares but no guard reads (the thread count):
  // the guards still hold, and the next check snapshots the new state.
  Exec("_threads = torch.get_num_threads()\ntorch.set_num_threads(_threads + 1)");
  std::string other_threads = Verdict(ev, frame);
  globals = GuardEvaluator::global_snapshot_hits();
  std::string again = Verdict(ev, frame);
  uint64_t hits_after = GuardEvaluator::global_snapshot_hits();
  Exec("torch.set_num_threads(_threads)");
  CHECK(other_threads == "");
  CHECK(again == "");
  CHECK(hits_after > globals);
  // A state both compare fails by its guard's message.
  for (const auto& [set, reset, expected] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"torch.set_grad_enabled(False)", "torch.set_grad_enabled(True)", "grad_mode: expected True, got False"},
           {"torch.set_default_dtype(torch.float64)", "torch.set_default_dtype(torch.float32)",
            "default_dtype: expected torch.float32, got torch.float64"},
           {"torch.use_deterministic_algorithms(True)", "torch.use_deterministic_algorithms(False)",
            "deterministic_algorithms: expected False, got True"}}) {
    INFO(set);
    Exec(set);
    std::string changed = Verdict(ev, frame);
    Exec(reset);
    CHECK(changed == expected);
    CHECK(Verdict(ev, frame) == "");
  }
}

TEST_CASE("constants: exact type first, then value", "[guards]") {
  std::vector<ir::Guard> guards =
      TraceGuards("scaled", {T({3}), V("2"), V("0.5"), V("'double'"), V("True")});
  for (const char* s : {"L['n']", "L['alpha']", "L['mode']", "L['flag']"}) {
    INFO(s);
    CHECK(HasGuard(guards, ir::Guard::EQUALS_MATCH, s));
  }
  const std::string fn = "scaled";
  auto frame = [&](const std::string& n, const std::string& alpha, const std::string& mode,
                   const std::string& flag) {
    return Frame(fn, "dict(x=torch.randn(3), n=" + n + ", alpha=" + alpha + ", mode=" + mode +
                         ", flag=" + flag + ")");
  };
  GuardEvaluator ev = CompileOk(guards, frame("2", "0.5", "'double'", "True"));
  CHECK(Verdict(ev, frame("2", "0.5", "'double'", "True")) == "");
  // Equal values in new objects still pass.
  CHECK(Verdict(ev, frame("int('2')", "float('0.5')", "'dou' + 'ble'", "bool(1)")) == "");
  CHECK(Verdict(ev, frame("3", "0.5", "'double'", "True")) == "L['n']: expected 2, got 3");
  CHECK(Verdict(ev, frame("2.0", "0.5", "'double'", "True")) == "L['n']: expected 2, got 2.0");
  CHECK(Verdict(ev, frame("2", "0.25", "'double'", "True")) == "L['alpha']: expected 0.5, got 0.25");
  CHECK(Verdict(ev, frame("2", "0.5", "'single'", "True")) == "L['mode']: expected 'double', got 'single'");
  // True == 1 in Python, but not for a guard.
  CHECK(Verdict(ev, frame("2", "0.5", "'double'", "1")) == "L['flag']: expected True, got 1");
  CHECK(Verdict(ev, frame("True", "0.5", "'double'", "True")) == "L['n']: expected 2, got True");
}

TEST_CASE("None, containers and their types", "[guards]") {
  SECTION("None vs a tensor") {
    std::vector<ir::Guard> guards = TraceGuards("maybe", {T({3}), V("None")});
    REQUIRE(HasGuard(guards, ir::Guard::IS_NONE, "L['y']"));
    GuardEvaluator ev = CompileOk(guards, Frame("maybe", "dict(x=torch.randn(3), y=None)"));
    CHECK(Verdict(ev, Frame("maybe", "dict(x=torch.randn(3), y=None)")) == "");
    CHECK(Verdict(ev, Frame("maybe", "dict(x=torch.randn(3), y=torch.randn(3))")) ==
          "L['y']: expected None, got Tensor");
  }
  SECTION("a list of tensors: length, type and items") {
    std::vector<ir::Guard> guards =
        TraceGuards("many", {trace::TraceInput::List({T({3}), T({3}), T({3})})});
    REQUIRE(HasGuard(guards, ir::Guard::LENGTH_MATCH, "L['xs']"));
    REQUIRE(HasGuard(guards, ir::Guard::TYPE_MATCH, "L['xs']"));
    REQUIRE(HasGuard(guards, ir::Guard::TENSOR_MATCH, "L['xs'][2]"));
    GuardEvaluator ev = CompileOk(guards, Frame("many", "dict(xs=[torch.randn(3) for _ in range(3)])"));
    CHECK(Verdict(ev, Frame("many", "dict(xs=[torch.randn(3) for _ in range(3)])")) == "");
    std::string longer = Verdict(ev, Frame("many", "dict(xs=[torch.randn(3) for _ in range(4)])"));
    CHECK(longer == "L['xs']: expected length 3, got 4");
    std::string shorter = Verdict(ev, Frame("many", "dict(xs=[torch.randn(3) for _ in range(2)])"));
    CHECK((shorter == "L['xs']: expected length 3, got 2" ||
           shorter == "L['xs'][2]: cannot be read (IndexError('list index out of range'))"));
    std::string tuple = Verdict(ev, Frame("many", "dict(xs=tuple(torch.randn(3) for _ in range(3)))"));
    CHECK(tuple == "L['xs']: expected type builtins.list, got builtins.tuple");
    CHECK(Verdict(ev, Frame("many", "dict(xs=[torch.randn(3), torch.randn(3), torch.randn(4)])")) ==
          "L['xs'][2]: sizes: expected [3], got [4]");
  }
  SECTION("constant containers, written by hand") {
    OwnedFrame seen = Frame("maybe", "dict(x=(1, 2), y=[1, [2.5, 'a']])");
    std::vector<ir::Guard> guards = {Hand(ir::Guard::EQUALS_MATCH, "L['x']"),
                                     Hand(ir::Guard::EQUALS_MATCH, "L['y']")};
    ir::ArgumentList* x = guards[0].mutable_value()->mutable_list();
    x->set_is_tuple(true);
    x->add_items()->set_int_value(1);
    x->add_items()->set_int_value(2);
    ir::ArgumentList* y = guards[1].mutable_value()->mutable_list();
    y->add_items()->set_int_value(1);
    ir::ArgumentList* inner = y->add_items()->mutable_list();
    inner->add_items()->set_float_value(2.5);
    inner->add_items()->set_string_value("a");
    GuardEvaluator ev = CompileOk(guards, seen);
    CHECK(Verdict(ev, Frame("maybe", "dict(x=(1, 2), y=[1, [2.5, 'a']])")) == "");
    CHECK(Verdict(ev, Frame("maybe", "dict(x=[1, 2], y=[1, [2.5, 'a']])")) == "L['x']: expected (1, 2), got [1, 2]");
    CHECK(Verdict(ev, Frame("maybe", "dict(x=(1, True), y=[1, [2.5, 'a']])")) ==
          "L['x']: expected (1, 2), got (1, True)");
    CHECK(Verdict(ev, Frame("maybe", "dict(x=(1, 2), y=[1, (2.5, 'a')])")) ==
          "L['y']: expected [1, [2.5, 'a']], got [1, (2.5, 'a')]");
    // The list the frame held is not what the guard compares with: changing
    // it in place is seen.
    std::vector<PyObject*> raw(seen.view().locals, seen.view().locals + 2);
    REQUIRE(PyList_Append(raw[1], Py_None) == 0);
    CHECK(Verdict(ev, seen) == "L['y']: expected [1, [2.5, 'a']], got [1, [2.5, 'a'], None]");
  }
}

TEST_CASE("globals: a replaced function fails by identity, not by name", "[guards]") {
  std::vector<ir::Guard> guards = TraceGuards("calls_helper", {T({3})});
  REQUIRE(HasGuard(guards, ir::Guard::ID_MATCH, "G['helper']"));
  OwnedFrame frame = Frame("calls_helper", "dict(x=torch.randn(3))");
  GuardEvaluator ev = CompileOk(guards, frame);
  CHECK(Verdict(ev, frame) == "");
  // Same module, same qualified name: the offline checker's names agree,
  // the object does not.
  Exec("_saved_helper = helper\ndef helper(a):\n    return a * 3\n");
  std::string replaced = Verdict(ev, frame);
  Exec("helper = _saved_helper");
  CHECK(replaced == "G['helper']: expected guards_cases.helper, got another object named guards_cases.helper");
  Exec("del helper");
  std::string missing = Verdict(ev, frame);
  Exec("helper = _saved_helper");
  CHECK(missing == "G['helper']: cannot be read (KeyError('helper'))");
  CHECK(Verdict(ev, frame) == "");
}

TEST_CASE("identity pins: watched, never kept; the evaluator dies with them", "[guards]") {
  Exec("class Pinned:\n    def meth(self):\n        pass\n_pinned = Pinned()\n_owner = Pinned()\n_listed = [1]\n");
  OwnedFrame frame = Frame("maybe", "dict(x=_pinned, y=_listed)");
  ir::Guard same = Hand(ir::Guard::ID_MATCH, "L['x']");
  same.mutable_value()->set_string_value("instance of guards_cases.Pinned");
  ir::Guard cls = Hand(ir::Guard::TYPE_MATCH, "L['x']");
  cls.mutable_value()->set_string_value("guards_cases.Pinned");
  ir::Guard list = Hand(ir::Guard::ID_MATCH, "L['y']");
  list.mutable_value()->set_string_value("instance of builtins.list");
  GuardEvaluator ev = CompileOk({same, cls, list}, frame);
  // The instance and its class are watched; a list cannot be weakly
  // referenced, so it is held (its address cannot be reused either).
  CHECK(ev.watched_count() == 2);
  int told = 0;
  ev.OnDeath([&] { ++told; });
  CHECK(Verdict(ev, frame) == "");
  REQUIRE(frame.Set("x", Eval("None")));
  Exec("del _pinned");  // nothing else holds it: the evaluator did not keep it
  CHECK(told == 1);
  CHECK_FALSE(ev.alive());
  REQUIRE(frame.Set("x", Eval("Pinned()")));  // a new object, perhaps at the dead one's address
  CHECK_FALSE(ev.Check(frame.view()));
  CHECK(ev.Explain(frame.view()) == "an object the guards identify by address has been freed");

  // A bound method is made afresh on every read: its function and object
  // are watched, and a fresh bound method of the same pair matches.
  OwnedFrame bound = Frame("maybe", "dict(x=_owner.meth, y=None)");
  ir::Guard meth = Hand(ir::Guard::ID_MATCH, "L['x']");
  meth.mutable_value()->set_string_value("guards_cases.Pinned.meth");
  GuardEvaluator on_method = CompileOk({meth}, bound);
  CHECK(on_method.watched_count() == 2);
  REQUIRE(bound.Set("x", Eval("_owner.meth")));
  CHECK(Verdict(on_method, bound) == "");
  REQUIRE(bound.Set("x", Eval("None")));
  Exec("del _owner");
  CHECK_FALSE(on_method.alive());
}

TEST_CASE("closures: a free variable's cell is read through", "[guards]") {
  std::vector<ir::Guard> guards = TraceGuards("inner", {T({3})});
  REQUIRE(HasGuard(guards, ir::Guard::EQUALS_MATCH, "L['k']"));
  // Before COPY_FREE_VARS the slot holds the value, after it the cell.
  OwnedFrame frame = Frame("inner", "dict(x=torch.randn(3), k=3)");
  GuardEvaluator ev = CompileOk(guards, frame);
  CHECK(Verdict(ev, frame) == "");
  CHECK(Verdict(ev, Frame("inner", "dict(x=torch.randn(3), k=inner.__closure__[0])")) == "");
  CHECK(Verdict(ev, Frame("inner", "dict(x=torch.randn(3), k=make_inner(4).__closure__[0])")) ==
        "L['k']: expected 3, got 4");
  CHECK(Verdict(ev, Frame("inner", "dict(x=torch.randn(3), k=__import__('types').CellType())")) ==
        "L['k']: cannot be read (KeyError('k'))");
  // In a slot that is not a cell variable, a cell object is just a value.
  OwnedFrame plain = Frame("maybe", "dict(x=torch.randn(3), y=None)");
  GuardEvaluator none = CompileOk({Hand(ir::Guard::IS_NONE, "L['y']")}, plain);
  REQUIRE(plain.Set("y", Eval("__import__('types').CellType(None)")));
  CHECK(Verdict(none, plain) == "L['y']: expected None, got cell");
}

TEST_CASE("an nn.Module: flags, submodules, containers, missing attributes", "[guards]") {
  Exec("net = Net().eval()");
  std::vector<ir::Guard> guards = TraceGuards("Net.forward", {T({2, 4})}, "net");
  for (const char* s : {"L['self'].drop.training", "L['self'].bn.training"}) {
    INFO(s);
    CHECK(HasGuard(guards, ir::Guard::EQUALS_MATCH, s));
  }
  REQUIRE(HasGuard(guards, ir::Guard::ID_MATCH, "L['self'].blocks[1]"));
  REQUIRE(HasGuard(guards, ir::Guard::LENGTH_MATCH, "L['self'].blocks"));
  const std::string locals = "dict(self=net, x=torch.randn(2, 4))";
  GuardEvaluator ev = CompileOk(guards, Frame("Net.forward", locals));
  // Shared prefixes are read once: fewer accessors than guards.
  CHECK(ev.accessor_count() < ev.size());
  CHECK(Verdict(ev, Frame("Net.forward", locals)) == "");
  // Submodules, parameters, Sequential/ModuleList/ModuleDict items and lengths
  // are read without running nn.Module's Python methods.
  OwnedFrame frame = Frame("Net.forward", locals);
  CHECK(PythonCallsDuring([&] { CHECK(ev.Check(frame.view())); }) == 0);

  auto after = [&](const std::string& change, const std::string& undo) {
    Exec(change);
    std::string verdict = Verdict(ev, Frame("Net.forward", locals));
    Exec(undo);
    CHECK(Verdict(ev, Frame("Net.forward", locals)) == "");
    return verdict;
  };
  CHECK(after("net.drop.train()", "net.drop.eval()") == "L['self'].drop.training: expected False, got True");
  CHECK(after("net.drop.p = 0.25", "net.drop.p = 0.5") == "L['self'].drop.p: expected 0.5, got 0.25");
  CHECK(after("_fc = net.fc\nnet.fc = nn.Linear(4, 3)", "net.fc = _fc") ==
        "L['self'].fc: expected instance of torch.nn.modules.linear.Linear, got another object named "
        "instance of torch.nn.modules.linear.Linear");
  CHECK(after("_b1 = net.blocks[1]\nnet.blocks[1] = nn.Tanh()", "net.blocks[1] = _b1") ==
        "L['self'].blocks[1]: expected instance of torch.nn.modules.activation.ReLU, got instance of "
        "torch.nn.modules.activation.Tanh");
  CHECK(after("net.blocks.append(nn.ReLU())", "del net.blocks[2]") == "L['self'].blocks: expected length 2, got 3");
  CHECK(after("_p = net.drop.p\ndel net.drop.p", "net.drop.p = _p") ==
        "L['self'].drop.p: cannot be read (AttributeError(\"'Dropout' object has no attribute 'p'\"))");
  // A bound method is a new object on every read: the same function bound to
  // the same module is the same method.
  ir::Guard method = Hand(ir::Guard::ID_MATCH, "L['self'].forward");
  method.mutable_value()->set_string_value("guards_cases.Net.forward");
  GuardEvaluator bound = CompileOk({method}, Frame("Net.forward", locals));
  CHECK(Verdict(bound, Frame("Net.forward", locals)) == "");
  Exec("net.forward = Net().forward");
  std::string rebound = Verdict(bound, Frame("Net.forward", locals));
  Exec("del net.forward");
  CHECK(rebound == "L['self'].forward: expected guards_cases.Net.forward, got another object named guards_cases.Net.forward");
  // Another module in the frame.
  CHECK(Verdict(ev, Frame("Net.forward", "dict(self=Net().eval(), x=torch.randn(2, 4))")) ==
        "L['self']: expected instance of guards_cases.Net, got another object named instance of guards_cases.Net");
}

TEST_CASE("aliasing checks trust a stamp's recorded objects only while no dict has changed", "[guards]") {
  if (!VersionTagsReliable()) return;  // no stamps here (3.13)
  Exec("anet = Net().eval()\nSneaky.x = torch.randn(2, 4)");
  std::vector<ir::Guard> guards = TraceGuards("Net.forward", {T({2, 4})}, "anet");
  ir::Guard alias = Hand(ir::Guard::OBJECT_ALIASING, "");
  for (const char* s : {"L['x']", "L['self'].bn.running_mean"}) alias.add_sources(s);
  alias.add_groups(0);
  alias.add_groups(1);
  guards.push_back(alias);
  const std::string locals = "dict(self=anet, x=Sneaky.x, h=Sneaky())";
  {
    // Held, then held with the stamps matched: the recorded buffer is
    // taken as it is, no dict having changed since they matched.
    GuardEvaluator ev = CompileOk(guards, Frame("net_and_sneaky", locals));
    REQUIRE(ev.stamped_count() > 0);
    CHECK(Verdict(ev, Frame("net_and_sneaky", locals)) == "");
    uint64_t quiet = GuardEvaluator::quiet_aliases();
    OwnedFrame frame = Frame("net_and_sneaky", locals);
    CHECK(ev.Check(frame.view()));
    CHECK(GuardEvaluator::quiet_aliases() > quiet);
  }
  // A guard after them runs h's __getattr__, which, armed, makes the buffer
  // x itself once the stamps have matched: the aliasing check must see the
  // new buffer (the recorded one is gone), and fail.
  ir::Guard scale = Hand(ir::Guard::EQUALS_MATCH, "L['h'].scale");
  scale.mutable_value()->set_float_value(2.0);
  guards.insert(guards.end() - 1, scale);
  GuardEvaluator ev = CompileOk(guards, Frame("net_and_sneaky", locals));
  OwnedFrame frame = Frame("net_and_sneaky", locals);
  CHECK(Verdict(ev, frame) == "");
  CHECK(ev.Check(frame.view()));
  Exec("Sneaky.armed = anet");
  CHECK_FALSE(ev.Check(frame.view()));
  CHECK(*python::AsLong(Eval("int(anet.bn.running_mean is Sneaky.x)")) == 1);
  CHECK(Verdict(ev, frame) != "");
  Exec("anet.bn.running_mean = torch.zeros(3)");
  CHECK(Verdict(ev, frame) == "");
}

TEST_CASE("hand-written sources: dict keys, sys.modules, devices, bad input", "[guards]") {
  SECTION("dict keys and sys.modules") {
    OwnedFrame frame = Frame("maybe", "dict(x={'key': 2, \"it's\": None}, y=None)");
    std::vector<ir::Guard> guards = {Hand(ir::Guard::EQUALS_MATCH, "L['x']['key']"),
                                     Hand(ir::Guard::IS_NONE, "L['x']['it\\'s']"),
                                     Hand(ir::Guard::ID_MATCH, "sys.modules['torch.nn.functional'].relu"),
                                     Hand(ir::Guard::LENGTH_MATCH, "L['x']")};
    guards[0].mutable_value()->set_int_value(2);
    guards[2].mutable_value()->set_string_value("torch.nn.functional.relu");
    guards[3].mutable_value()->set_int_value(2);
    GuardEvaluator ev = CompileOk(guards, frame);
    CHECK(ev.accessor_count() == 5);  // L['x'], ['key'], ['it\'s'], sys.modules[...], .relu
    CHECK(Verdict(ev, frame) == "");
    CHECK(Verdict(ev, Frame("maybe", "dict(x={'key': 3, \"it's\": None}, y=None)")) ==
          "L['x']['key']: expected 2, got 3");
    CHECK(Verdict(ev, Frame("maybe", "dict(x={\"it's\": None}, y=None)")) ==
          "L['x']['key']: cannot be read (KeyError('key'))");
    Exec("import torch.nn.functional as F\n_relu = F.relu\nF.relu = torch.sigmoid");
    std::string replaced = Verdict(ev, frame);
    Exec("F.relu = _relu");
    CHECK(replaced == "sys.modules['torch.nn.functional'].relu: expected torch.nn.functional.relu, got torch._VariableFunctionsClass.sigmoid");
  }
  SECTION("sources share their prefixes' nodes, whatever their keys hold") {
    // A guard's source is found as a known node plus the step after its
    // last '.' or '[': keys holding those characters, a dict's i-th key
    // (`.keys()[i]`, one step) and a HASATTR of a source already read must
    // still find their own steps, and share a node only with the same text.
    Exec("class Bag:\n    pass\nbag = Bag()\nbag.d = {'a.b': 1, 'c[0]': 2, 'e': {'f': 3}}\nbag.n = 4\n");
    OwnedFrame frame = Frame("maybe", "dict(x=bag, y=None)");
    std::vector<ir::Guard> guards = {Hand(ir::Guard::EQUALS_MATCH, "L['x'].d['a.b']"),
                                     Hand(ir::Guard::EQUALS_MATCH, "L['x'].d['c[0]']"),
                                     Hand(ir::Guard::EQUALS_MATCH, "L['x'].d['e']['f']"),
                                     Hand(ir::Guard::EQUALS_MATCH, "L['x'].d.keys()[1]"),
                                     Hand(ir::Guard::EQUALS_MATCH, "L['x'].n"),
                                     Hand(ir::Guard::HASATTR, "L['x'].n"),
                                     Hand(ir::Guard::HASATTR, "L['x'].d['e']['f']"),
                                     Hand(ir::Guard::LENGTH_MATCH, "L['x'].d")};
    const int64_t ints[] = {1, 2, 3, 0, 4};
    for (size_t i = 0; i < 5; ++i) guards[i].mutable_value()->set_int_value(ints[i]);
    guards[3].mutable_value()->set_string_value("c[0]");
    guards[5].mutable_value()->set_bool_value(true);
    guards[6].mutable_value()->set_bool_value(true);
    guards[7].mutable_value()->set_int_value(3);
    GuardEvaluator ev = CompileOk(guards, frame);
    // L['x'], .d, ['a.b'], ['c[0]'], ['e'], ['f'], .keys()[1], .n
    CHECK(ev.accessor_count() == 8);
    CHECK(Verdict(ev, frame) == "");
    Exec("bag.d['e']['f'] = 5");
    CHECK(Verdict(ev, frame) == "L['x'].d['e']['f']: expected 3, got 5");
    Exec("bag.d['e'] = {}");
    CHECK(absl::StrContains(Verdict(ev, frame), "L['x'].d['e']['f']"));
    Exec("bag.d = {'c[0]': 2, 'a.b': 1, 'e': {'f': 3}}");
    CHECK(Verdict(ev, frame) == "L['x'].d.keys()[1]: expected 'c[0]', got 'a.b'");
    Exec("bag.d = {'a.b': 1, 'c[0]': 2, 'e': {'f': 3}}\ndel bag.n");
    CHECK(absl::StrContains(Verdict(ev, frame), "L['x'].n"));
  }
  SECTION("a class with a Python __getattr__ takes the general path") {
    Exec("class Lazy:\n    def __getattr__(self, name):\n        return len(name)\n");
    OwnedFrame frame = Frame("maybe", "dict(x=Lazy(), y=None)");
    ir::Guard g = Hand(ir::Guard::EQUALS_MATCH, "L['x'].four");
    g.mutable_value()->set_int_value(4);
    GuardEvaluator ev = CompileOk({g}, frame);
    // The control for the "no Python runs" checks: this one must call __getattr__.
    CHECK(PythonCallsDuring([&] { CHECK(ev.Check(frame.view())); }) == 1);
  }
  SECTION("call sources: only the pure queries, each on its own type") {
    Exec("class Base:\n    pass\nclass Sub(Base):\n    pass\n");
    OwnedFrame frame = Frame("maybe", "dict(x=Base, y=torch.zeros(10))");
    ir::Guard subs = Hand(ir::Guard::LENGTH_MATCH, "L['x'].__subclasses__()");
    subs.mutable_value()->set_int_value(1);
    ir::Guard bytes = Hand(ir::Guard::EQUALS_MATCH, "L['y'].untyped_storage().nbytes()");
    bytes.mutable_value()->set_int_value(40);
    GuardEvaluator ev = CompileOk({subs, bytes}, frame);
    CHECK(Verdict(ev, frame) == "");
    CHECK(Verdict(ev, Frame("maybe", "dict(x=Base, y=torch.zeros(20, 2)[0:10, 0])")) ==
          "L['y'].untyped_storage().nbytes(): expected 40, got 160");
    Exec("class Sub2(Base):\n    pass\n");
    CHECK(Verdict(ev, frame) == "L['x'].__subclasses__(): expected length 1, got 2");
    // Any other call, or a query on another type, is refused: guards are data.
    for (const char* source : {"L['y'].numpy()", "L['y'].__subclasses__()", "sys.modules['os'].getpid()"}) {
      ir::Guard other = Hand(ir::Guard::IS_NONE, source);
      absl::StatusOr<GuardEvaluator> refused = GuardEvaluator::Compile({other}, frame.view());
      REQUIRE(!refused.ok());
      CHECK(absl::StrContains(refused.status().message(), "a guard source may call only"));
    }
  }
  SECTION("device") {
    ops::TensorMeta meta = ops::TensorMeta::Contiguous(ops::DType::kFloat32, {2});
    meta.device = ops::Device{"meta", -1};
    ir::Guard g = Hand(ir::Guard::TENSOR_MATCH, "L['x']");
    *g.mutable_tensor() = ops::ToProto(meta);
    GuardEvaluator ev = CompileOk({g}, Frame("maybe", "dict(x=torch.empty(2, device='meta'))"));
    CHECK(Verdict(ev, Frame("maybe", "dict(x=torch.empty(2, device='meta'))")) == "");
    CHECK(Verdict(ev, Frame("maybe", "dict(x=torch.empty(2))")) == "L['x']: device: expected meta, got cpu");
    // And the other way round (a CPU expectation is read through is_cpu).
    ir::Guard cpu = Hand(ir::Guard::TENSOR_MATCH, "L['x']");
    *cpu.mutable_tensor() = ops::ToProto(ops::TensorMeta::Contiguous(ops::DType::kFloat32, {2}));
    GuardEvaluator on_cpu = CompileOk({cpu}, Frame("maybe", "dict(x=torch.empty(2))"));
    CHECK(Verdict(on_cpu, Frame("maybe", "dict(x=torch.empty(2, device='cpu:0'))")) == "");
    CHECK(Verdict(on_cpu, Frame("maybe", "dict(x=torch.empty(2, device='meta'))")) ==
          "L['x']: device: expected cpu, got meta");
  }
  SECTION("compile errors") {
    OwnedFrame frame = Frame("maybe", "dict(x=torch.randn(2), y=None)");
    auto error = [&](const ir::Guard& g) {
      absl::StatusOr<GuardEvaluator> ev = GuardEvaluator::Compile({g}, frame.view());
      REQUIRE(!ev.ok());
      return std::string(ev.status().message());
    };
    CHECK(absl::StrContains(error(Hand(ir::Guard::IS_NONE, "L['y'")), "cannot parse source"));
    CHECK(absl::StrContains(error(Hand(ir::Guard::IS_NONE, ".y")), "no root"));
    CHECK(absl::StrContains(error(Hand(ir::Guard::IS_NONE, "L['z']")), "the frame has no local 'z'"));
    CHECK(absl::StrContains(error(Hand(ir::Guard::IS_NONE, "L['x'].nope")),
                            "L['x'].nope cannot be read in the frame it is compiled against"));
    CHECK(absl::StrContains(error(Hand(ir::Guard::IS_NONE, "L['x']")),
                            "guard does not hold on the frame it is compiled against: L['x']: expected None, got Tensor"));
    ir::Guard id = Hand(ir::Guard::ID_MATCH, "G['torch']");
    id.mutable_value()->set_string_value("module numpy");
    CHECK(absl::StrContains(error(id), "expected module numpy, the frame holds module torch"));
    ir::Guard sym = Hand(ir::Guard::TENSOR_MATCH, "L['x']");
    *sym.mutable_tensor() = ops::ToProto(ops::TensorMeta::Contiguous(ops::DType::kFloat32, {2}));
    sym.mutable_tensor()->mutable_sizes(0)->set_symbol("2s");
    CHECK(absl::StrContains(error(sym), "size symbol '2s' is no name"));
    sym.mutable_tensor()->mutable_sizes(0)->set_expr("s0 +* 1");
    CHECK(absl::StrContains(error(sym), "size:"));
    ir::Guard env = Hand(ir::Guard::SHAPE_ENV, "shape_env");
    env.mutable_shape_env()->add_relations("s0 <== 3");
    CHECK(!error(env).empty());
    ir::Guard state = Hand(ir::Guard::GLOBAL_STATE, "no_such_state");
    CHECK(absl::StrContains(error(state), "unknown global state"));
  }
}

TEST_CASE("dynamic shapes: symbols bind, expressions and relations are checked", "[guards]") {
  Exec("def two(x, y):\n  return x\n");
  // x: float32[s0, s1] with strides [s1, 1]; y: float32[s1]; s0 <= 8.
  ir::Guard x = Hand(ir::Guard::TENSOR_MATCH, "L['x']");
  *x.mutable_tensor() = ops::ToProto(ops::TensorMeta::Contiguous(ops::DType::kFloat32, {4, 3}));
  ops::SetSymDims({ops::SymExpr::Symbol("s0"), ops::SymExpr::Symbol("s1")}, x.mutable_tensor()->mutable_sizes());
  ops::SetSymDims({ops::SymExpr::Symbol("s1"), ops::SymExpr(1)}, x.mutable_tensor()->mutable_strides());
  ir::Guard y = Hand(ir::Guard::TENSOR_MATCH, "L['y']");
  *y.mutable_tensor() = ops::ToProto(ops::TensorMeta::Contiguous(ops::DType::kFloat32, {3}));
  ops::SetSymDims({ops::SymExpr::Symbol("s1")}, y.mutable_tensor()->mutable_sizes());
  ir::Guard env = Hand(ir::Guard::SHAPE_ENV, "shape_env");
  for (const auto& [name, dim] : {std::pair<const char*, int>{"s0", 0}, {"s1", 1}}) {
    ir::SizeSymbol* s = env.mutable_shape_env()->add_symbols();
    s->set_name(name);
    s->set_source("L['x']");
    s->set_dim(dim);
    s->set_min(2);
  }
  env.mutable_shape_env()->add_relations("s0 <= 8");
  GuardEvaluator ev = CompileOk({x, y, env}, Frame("two", "dict(x=torch.randn(4, 3), y=torch.randn(3))"));
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(4, 3), y=torch.randn(3))")) == "");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(8, 7), y=torch.randn(7))")) == "");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(9, 3), y=torch.randn(3))")) == "sizes: s0 <= 8 failed: s0 = 9");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(4, 3), y=torch.randn(5))")) ==
        "L['y']: sizes: expected [s1], got [5] (s1 is 3 elsewhere)");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(1, 3), y=torch.randn(3))")) ==
        "sizes: L['x'].size(0) = 1: s0 must be in [2, inf]");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(3, 4).t(), y=torch.randn(3))")) ==
        "L['x']: strides: expected [s1, 1], got [1, 4]");
  CHECK(Verdict(ev, Frame("two", "dict(x=torch.randn(4, 3, 1), y=torch.randn(3))")) ==
        "L['x']: sizes: expected [s0, s1], got [4, 3, 1]");

  // Traced offline with a named size: the graph's guards accept every B in
  // the declared range, and name the relation the trace relied on.
  Exec("def rows(x):\n  return x.view(x.shape[0] // 2, -1) * 2\n");
  trace::TraceRequest request;
  request.function = Eval("rows");
  trace::TraceInput in = T({8, 3});
  in.dim_symbols = {"B", ""};
  request.args = {in};
  request.dynamic.constraints.push_back({"B", 2, 64, 2});
  trace::BreakInfo why;
  absl::StatusOr<trace::TraceResult> r = trace::Trace(request, ops::DefaultRegistry(), &why);
  INFO(why.message);
  DYNAMO_REQUIRE_OK(r);
  REQUIRE(HasGuard(r->guards, ir::Guard::SHAPE_ENV, "shape_env"));
  GuardEvaluator rows = CompileOk(r->guards, Frame("rows", "dict(x=torch.randn(8, 3))"));
  CHECK(Verdict(rows, Frame("rows", "dict(x=torch.randn(20, 3))")) == "");
  CHECK(Verdict(rows, Frame("rows", "dict(x=torch.randn(66, 3))")) == "sizes: L['x'].size(0) = 66: B must be in [2, 64]");
  CHECK(Verdict(rows, Frame("rows", "dict(x=torch.randn(7, 3))")) == "sizes: B % 2 == 0 failed: B = 7");
  CHECK(Verdict(rows, Frame("rows", "dict(x=torch.randn(8, 4))")) == "L['x']: sizes: expected [B, 3], got [8, 4]");
}

TEST_CASE("the same verdicts as python/dynamo/guards.py on the same calls", "[guards]") {
  Object checker = testing::ImportTestModule("dynamo.guards");
  Object pb2 = testing::ImportTestModule("dynamo.dynamo_ir_pb2");
  Exec("net = Net().eval()");
  struct Scenario {
    std::string fn;                        // traced function
    std::vector<trace::TraceInput> inputs;  // what the trace saw
    std::string self;
    std::string callable;                  // what check_guards calls
    std::vector<std::string> calls;        // argument tuples
  };
  std::vector<Scenario> scenarios = {
      {"two", {T({2, 3}), T({2, 3})}, "", "two",
       {"(torch.randn(2, 3), torch.randn(2, 3))", "(torch.randn(2, 3).double(), torch.randn(2, 3))",
        "(torch.randn(2, 3), torch.randn(3, 2))", "(torch.randn(3, 2).t(), torch.randn(2, 3))",
        "(torch.randn(2, 3), torch.randn(2, 3, requires_grad=True))", "(1, torch.randn(2, 3))"}},
      {"scaled", {T({3}), V("2"), V("0.5"), V("'double'"), V("True")}, "", "scaled",
       {"(torch.randn(3), 2, 0.5, 'double', True)", "(torch.randn(3), 3, 0.5, 'double', True)",
        "(torch.randn(3), 2, 0.75, 'double', True)", "(torch.randn(3), 2, 0.5, 'x', True)",
        "(torch.randn(3), 2, 0.5, 'double', 1)"}},
      {"maybe", {T({3}), V("None")}, "", "maybe", {"(torch.randn(3),)", "(torch.randn(3), torch.randn(3))"}},
      {"many", {trace::TraceInput::List({T({3}), T({3})})}, "", "many",
       {"([torch.randn(3), torch.randn(3)],)", "([torch.randn(3)] * 3,)", "((torch.randn(3), torch.randn(3)),)"}},
      {"inner", {T({3})}, "", "inner", {"(torch.randn(3),)"}},
      {"Net.forward", {T({2, 4})}, "net", "net.forward", {"(torch.randn(2, 4),)", "(torch.randn(2, 5),)"}},
  };
  int compared = 0, failing = 0;
  for (Scenario& s : scenarios) {
    INFO(s.fn);
    std::vector<ir::Guard> guards = TraceGuards(s.fn, std::move(s.inputs), s.self);
    ir::Capture capture;
    for (const ir::Guard& g : guards) *capture.add_guards() = g;
    std::string bytes = capture.SerializeAsString();
    Object py_capture = *python::CallMethod(
        *python::GetAttr(pb2, "Capture"), "FromString",
        {Object::Steal(PyBytes_FromStringAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size())))});
    Object fn = Eval(s.callable);
    std::optional<GuardEvaluator> ev;
    for (const std::string& call : s.calls) {
      INFO(call);
      Object args = Eval(call);
      absl::StatusOr<Object> locals = python::CallMethod(checker, "frame_for_call", {fn, args});
      DYNAMO_REQUIRE_OK(locals);
      absl::StatusOr<OwnedFrame> frame = OwnedFrame::ForCode(Eval(s.fn + ".__code__"), *locals,
                                                             Eval(s.fn + ".__globals__"));
      DYNAMO_REQUIRE_OK(frame);
      if (!ev) ev = CompileOk(guards, *frame);  // the first call is the one traced
      absl::StatusOr<Object> py = python::CallMethod(checker, "check_guards", {py_capture, fn, args});
      DYNAMO_REQUIRE_OK(py);
      std::string expected = py->get() == Py_None ? "" : *python::AsString(Object::Borrow(PyTuple_GetItem(py->get(), 1)));
      CHECK(Verdict(*ev, *frame) == expected);
      ++compared;
      failing += !expected.empty();
    }
  }
  CHECK(compared == 19);
  CHECK(failing == 13);
}

TEST_CASE("resnet18: every guard holds, no Python runs, a flipped flag is named", "[guards][models]") {
  Object models = testing::ImportTestModule("models");
  Object model = *python::GetAttr(models, "resnet18");
  Object cls = Object::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(model.get())));
  trace::TraceRequest request;
  request.function = *python::GetAttr(cls, "forward");
  request.self = model;
  request.args = {T({1, 3, 64, 64})};
  absl::StatusOr<trace::TraceResult> traced = trace::Trace(request, ops::DefaultRegistry());
  DYNAMO_REQUIRE_OK(traced);
  Object globals = Object::Borrow(PyFunction_GetGlobals(request.function.get()));
  Object code = Object::Borrow(PyFunction_GetCode(request.function.get()));
  Object locals = Object::Steal(PyDict_New());
  PyDict_SetItemString(locals.get(), "self", model.get());
  PyDict_SetItemString(locals.get(), "x", Eval("torch.randn(1, 3, 64, 64)").get());
  absl::StatusOr<OwnedFrame> frame = OwnedFrame::ForCode(code, locals, globals);
  DYNAMO_REQUIRE_OK(frame);
  GuardEvaluator ev = CompileOk(traced->guards, *frame);
  CHECK(ev.size() > 400);
  CHECK(ev.accessor_count() < ev.size());
  CHECK(PythonCallsDuring([&] { CHECK(ev.Check(frame->view())); }) == 0);
  // Nothing is kept or leaked per check, passing or failing.
  absl::StatusOr<OwnedFrame> wrong = OwnedFrame::ForCode(  // fails on L['x'], after all of L['self']
      code, Eval("dict(self=__import__('models').resnet18, x=torch.randn(2, 3, 64, 64))"), globals);
  DYNAMO_REQUIRE_OK(wrong);
  CHECK(*ev.Explain(wrong->view()) == "L['x']: sizes: expected [1, 3, 64, 64], got [2, 3, 64, 64]");
  auto allocated = [] { return *python::AsLong(Eval("__import__('sys').getallocatedblocks()")); };
  Py_ssize_t model_refs = Py_REFCNT(model.get());
  long long blocks = allocated();
  for (int i = 0; i < 2000; ++i) {
    REQUIRE(ev.Check(frame->view()));
    REQUIRE(!ev.Check(wrong->view()));
  }
  CHECK(Py_REFCNT(model.get()) == model_refs);
  CHECK(allocated() - blocks < 100);
  Object block = Eval("__import__('models').resnet18.layer3[1].bn2");
  REQUIRE(PyObject_SetAttrString(block.get(), "training", Py_True) == 0);
  std::string flipped = Verdict(ev, *frame);
  REQUIRE(PyObject_SetAttrString(block.get(), "training", Py_False) == 0);
  CHECK(flipped == "L['self'].layer3[1].bn2.training: expected False, got True");
  CHECK(Verdict(ev, *frame) == "");
}

}  // namespace
}  // namespace dynamo::guards
