// Offline capture time: libdynamo's facade (script already imported; specs
// parsed, bytecode translated, shapes inferred, guards built, capture
// checked) against torch.fx.symbolic_trace (with and without ShapeProp, which
// runs the model for shapes) and torch.jit.trace, on the same models, in the
// same run.
//
//   build/bench/capture_bench [--benchmark_filter=resnet18]
#include <Python.h>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <map>

#include "lib/capture/capture.h"
#include "lib/python/error.h"
#include "lib/python/interpreter.h"
#include "lib/python/script.h"

namespace {

using dynamo::python::Object;

struct Model {
  const char* name;
  const char* target;
  const char* spec;
};
constexpr Model kModels[] = {
    {"resnet18", "resnet18.forward", "f32[1,3,224,224]"},
    {"mobilenet_v2", "mobilenet_v2.forward", "f32[1,3,224,224]"},
    {"transformer", "transformer.forward", "i64[1,128]"},
};

std::string g_script;
Object g_models, g_peers, g_torch;
std::map<std::string, double> g_ms;  // "peer/model" -> ms per capture

Object Example(const Model& m) {
  std::string spec = m.spec;
  if (spec[0] == 'i') {
    absl::StatusOr<Object> t = dynamo::python::CallMethod(
        g_torch, "randint", {dynamo::python::FromLong(0), dynamo::python::FromLong(100),
                             dynamo::python::MakeTuple({dynamo::python::FromLong(1), dynamo::python::FromLong(128)})});
    return *t;
  }
  std::vector<Object> sizes;
  for (long s : {1L, 3L, 224L, 224L}) sizes.push_back(dynamo::python::FromLong(s));
  return *dynamo::python::Call(*dynamo::python::GetAttr(g_torch, "randn"), sizes);
}

void Libdynamo(benchmark::State& state, const Model& m) {
  dynamo::capture::CaptureOptions options;
  options.script = g_script;
  options.function = m.target;
  options.inputs = {m.spec};
  for (auto _ : state) {
    absl::StatusOr<dynamo::capture::Captured> c = dynamo::capture::CaptureFunction(options);
    if (!c.ok()) {
      state.SkipWithError(std::string(c.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(c->capture.graphs(0).nodes_size());
  }
}

void Peer(benchmark::State& state, const Model& m, const char* peer) {
  Object model = *dynamo::python::GetAttr(g_models, std::string(m.target).substr(0, std::string(m.target).find('.')));
  Object example = Example(m);
  Object fn = *dynamo::python::GetAttr(g_peers, peer);
  for (auto _ : state) {
    absl::StatusOr<Object> r = dynamo::python::Call(fn, {model, example});
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
  }
}

class Reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (!r.error_occurred) g_ms[r.run_name.function_name] = r.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto py = dynamo::python::Interpreter::Start();
  if (!py.ok()) return 1;
  const char* src = std::getenv("DYNAMO_SOURCE_DIR");
  std::string dir = std::string(src ? src : DYNAMO_SOURCE_DIR) + "/test/python";
  PyList_Insert(PySys_GetObject("path"), 0, dynamo::python::FromString(dir).get());
  g_script = dir + "/models.py";
  absl::StatusOr<Object> models = dynamo::python::ImportScript(g_script);
  absl::StatusOr<Object> peers = dynamo::python::Import("bench_peers");
  absl::StatusOr<Object> torch = dynamo::python::Import("torch");
  if (!models.ok() || !peers.ok() || !torch.ok()) {
    std::cerr << "cannot import the benchmark's models or peers\n";
    return 1;
  }
  g_models = *models;
  g_peers = *peers;
  g_torch = *torch;
  for (const Model& m : kModels) {
    benchmark::RegisterBenchmark((std::string("libdynamo/") + m.name).c_str(), Libdynamo, m)
        ->Unit(benchmark::kMillisecond);
    for (const char* peer : {"fx_symbolic_trace", "fx_trace_with_shapes", "jit_trace"}) {
      benchmark::RegisterBenchmark((std::string(peer) + "/" + m.name).c_str(), Peer, m, peer)
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::cout << "\nratios (peer time / libdynamo time, same run):\n";
  for (const Model& m : kModels) {
    auto ours = g_ms.find(std::string("libdynamo/") + m.name);
    if (ours == g_ms.end()) continue;
    std::cout << "  " << m.name << ": libdynamo " << ours->second << " ms";
    for (const char* peer : {"fx_symbolic_trace", "fx_trace_with_shapes", "jit_trace"}) {
      auto it = g_ms.find(std::string(peer) + "/" + m.name);
      if (it != g_ms.end()) std::cout << "; " << peer << " x" << it->second / ours->second;
    }
    std::cout << "\n";
  }
  g_models = g_peers = g_torch = Object();
  return 0;
}
