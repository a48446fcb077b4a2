// Guard checking time: libdynamo's compiled evaluator (lib/guards) against
// the offline Python checker (python/dynamo/guards.py check_guards) on the
// same guards and the same calls, in the same run: a two-tensor function and
// torchvision's resnet18 forward (guards from lib/trace's translator), each
// traced with static sizes and with every size symbolic (dynamic=True: the
// TENSOR_MATCH guards bind symbols, a SHAPE_ENV guard checks the relations).
//
//   build/bench/guard_bench [--benchmark_filter=resnet18]
#include <Python.h>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>

#include "lib/guards/evaluator.h"
#include "lib/ops/meta.h"
#include "lib/ops/registry.h"
#include "lib/python/error.h"
#include "lib/python/interpreter.h"
#include "lib/python/script.h"
#include "lib/trace/translator.h"

namespace {

using dynamo::python::Object;
namespace py = dynamo::python;

constexpr const char* kTwo = R"PY(
import torch

def two(x, y):
    return torch.relu(x) + y
)PY";

// One function's guards, the frame of a matching call, and the same call as
// the Python checker sees it.
struct Case {
  std::optional<dynamo::guards::GuardEvaluator> evaluator;
  std::optional<dynamo::guards::OwnedFrame> frame;
  Object capture;  // dynamo_ir_pb2.Capture holding the guards
  Object fn;       // what check_guards calls
  Object args;     // its positional arguments
};

std::map<std::string, Case> g_cases;
std::map<std::string, double> g_ns;  // "checker/case" -> ns per check
Object g_check_guards;

absl::Status Prepare(const std::string& name, const Object& function, const Object& self,
                     const Object& callable, std::vector<dynamo::ops::TensorMeta> metas,
                     const Object& pb2, bool dynamic = false) {
  dynamo::trace::TraceRequest request;
  request.function = function;
  request.self = self;
  request.dynamic.all = dynamic;
  std::vector<Object> tensors;
  Object torch = *py::Import("torch");
  for (const dynamo::ops::TensorMeta& m : metas) {
    request.args.push_back(dynamo::trace::TraceInput::Tensor(m));
    std::vector<Object> sizes;
    for (int64_t s : m.sizes) sizes.push_back(py::FromLong(s));
    absl::StatusOr<Object> t = py::Call(*py::GetAttr(torch, "randn"), sizes);
    if (!t.ok()) return t.status();
    tensors.push_back(*t);
  }
  absl::StatusOr<dynamo::trace::TraceResult> traced = dynamo::trace::Trace(request, dynamo::ops::DefaultRegistry());
  if (!traced.ok()) return traced.status();

  // The frame: self (for a method) and the tensors, by the code's own names.
  Object code = Object::Borrow(PyFunction_GetCode(function.get()));
  Object names = *py::GetAttr(code, "co_varnames");
  Object locals = Object::Steal(PyDict_New());
  Py_ssize_t slot = 0;
  if (self) PyDict_SetItem(locals.get(), PyTuple_GetItem(names.get(), slot++), self.get());
  for (const Object& t : tensors) PyDict_SetItem(locals.get(), PyTuple_GetItem(names.get(), slot++), t.get());
  absl::StatusOr<dynamo::guards::OwnedFrame> frame = dynamo::guards::OwnedFrame::ForCode(
      code, locals, Object::Borrow(PyFunction_GetGlobals(function.get())));
  if (!frame.ok()) return frame.status();
  absl::StatusOr<dynamo::guards::GuardEvaluator> ev =
      dynamo::guards::GuardEvaluator::Compile(traced->guards, frame->view());
  if (!ev.ok()) return ev.status();

  dynamo::ir::Capture capture;
  for (const dynamo::ir::Guard& g : traced->guards) *capture.add_guards() = g;
  std::string bytes = capture.SerializeAsString();
  absl::StatusOr<Object> py_capture = py::CallMethod(
      *py::GetAttr(pb2, "Capture"), "FromString",
      {Object::Steal(PyBytes_FromStringAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size())))});
  if (!py_capture.ok()) return py_capture.status();

  Case& c = g_cases[name];
  c.evaluator = *std::move(ev);
  c.frame = *std::move(frame);
  c.capture = *py_capture;
  c.fn = callable;
  c.args = py::MakeTuple(tensors);
  std::cout << name << ": " << c.evaluator->size() << " guards, " << c.evaluator->accessor_count()
            << " accessors\n";
  return absl::OkStatus();
}

void Libdynamo(benchmark::State& state, const std::string& name) {
  const Case& c = g_cases.at(name);
  dynamo::guards::FrameView view = c.frame->view();
  for (auto _ : state) {
    if (!c.evaluator->Check(view)) {
      state.SkipWithError("guards failed");
      return;
    }
  }
}

void PythonChecker(benchmark::State& state, const std::string& name) {
  const Case& c = g_cases.at(name);
  for (auto _ : state) {
    absl::StatusOr<Object> r = py::Call(g_check_guards, {c.capture, c.fn, c.args});
    if (!r.ok() || r->get() != Py_None) {
      state.SkipWithError(r.ok() ? py::Repr(*r).c_str() : std::string(r.status().message()).c_str());
      return;
    }
  }
}

class Reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      // With --benchmark_repetitions the median (reported after the runs) wins.
      if (r.error_occurred || (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median")) continue;
      g_ns[r.run_name.function_name] = r.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto interpreter = py::Interpreter::Start();
  if (!interpreter.ok()) return 1;
  const char* src = std::getenv("DYNAMO_SOURCE_DIR");
  std::string dir = std::string(src ? src : DYNAMO_SOURCE_DIR) + "/test/python";
  PyList_Insert(PySys_GetObject("path"), 0, py::FromString(dir).get());
  PyList_Insert(PySys_GetObject("path"), 0, py::FromString(DYNAMO_PYTHONPATH).get());
  absl::StatusOr<Object> models = py::ImportScript(dir + "/models.py");
  absl::StatusOr<Object> checker = py::Import("dynamo.guards");
  absl::StatusOr<Object> pb2 = py::Import("dynamo.dynamo_ir_pb2");
  if (!models.ok() || !checker.ok() || !pb2.ok()) {
    std::cerr << "cannot import the models, dynamo.guards or its IR module\n";
    return 1;
  }
  g_check_guards = *py::GetAttr(*checker, "check_guards");

  Object code = Object::Steal(Py_CompileString(kTwo, "guard_bench_two.py", Py_file_input));
  Object two_module = code ? Object::Steal(PyImport_ExecCodeModule("guard_bench_two", code.get())) : Object();
  if (!two_module) {
    std::cerr << py::FetchError("defining two()").message() << "\n";
    return 1;
  }
  using dynamo::ops::DType;
  using dynamo::ops::TensorMeta;
  Object two = *py::GetAttr(two_module, "two");
  Object resnet = *py::GetAttr(*models, "resnet18");
  Object resnet_forward = *py::GetAttr(Object::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(resnet.get()))), "forward");
  for (absl::Status s :
       {Prepare("two_tensors", two, Object(), two,
                {TensorMeta::Contiguous(DType::kFloat32, {8, 16}), TensorMeta::Contiguous(DType::kFloat32, {8, 16})},
                *pb2),
        Prepare("resnet18", resnet_forward, resnet, *py::GetAttr(resnet, "forward"),
                {TensorMeta::Contiguous(DType::kFloat32, {1, 3, 224, 224})}, *pb2),
        Prepare("two_tensors_dynamic", two, Object(), two,
                {TensorMeta::Contiguous(DType::kFloat32, {8, 16}), TensorMeta::Contiguous(DType::kFloat32, {8, 16})},
                *pb2, /*dynamic=*/true),
        Prepare("resnet18_dynamic", resnet_forward, resnet, *py::GetAttr(resnet, "forward"),
                {TensorMeta::Contiguous(DType::kFloat32, {1, 3, 224, 224})}, *pb2, /*dynamic=*/true)}) {
    if (!s.ok()) {
      std::cerr << s.message() << "\n";
      return 1;
    }
  }
  const char* const kCases[] = {"two_tensors", "resnet18", "two_tensors_dynamic", "resnet18_dynamic"};
  for (const char* name : kCases) {
    benchmark::RegisterBenchmark((std::string("libdynamo/") + name).c_str(), Libdynamo, std::string(name))
        ->Unit(benchmark::kNanosecond);
    benchmark::RegisterBenchmark((std::string("python_check_guards/") + name).c_str(), PythonChecker,
                                 std::string(name))
        ->Unit(benchmark::kNanosecond);
  }
  benchmark::Initialize(&argc, argv);
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::cout << "\nns per check, and python_check_guards time / libdynamo time (same run):\n";
  for (const char* name : kCases) {
    auto ours = g_ns.find(std::string("libdynamo/") + name);
    auto peer = g_ns.find(std::string("python_check_guards/") + name);
    if (ours == g_ns.end()) continue;
    std::cout << "  " << name << ": libdynamo " << ours->second << " ns";
    if (peer != g_ns.end()) std::cout << "; python_check_guards " << peer->second << " ns, x" << peer->second / ours->second;
    std::cout << "\n";
  }
  g_cases.clear();
  g_check_guards = Object();
  return 0;
}
