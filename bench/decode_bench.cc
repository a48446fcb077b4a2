// Decode throughput: libdynamo's decoder against Python's own
// dis.get_instructions, on the same code objects, in the same run.
//
//   build/bench/decode_bench                     # stdlib + torch + torchvision
//   DYNAMO_BYTECODE_CORPUS=stdlib build/bench/decode_bench
//
// Both sides decode every code object separately (no recursion through
// co_consts on our side, since the flattened list already holds the nested
// ones). Reports code objects/s and instructions/s, then the ratio.
#include <Python.h>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>
#include <map>

#include "lib/bytecode/decoder.h"
#include "lib/python/error.h"
#include "lib/python/interpreter.h"

namespace {

using dynamo::python::Object;

Object g_helper;
Object g_codes;  // list of code objects
std::vector<Object> g_code_vector;
std::map<std::string, double> g_rates;  // benchmark name -> instructions/s

void BM_LibdynamoDecode(benchmark::State& state) {
  size_t instructions = 0, codes = 0;
  for (auto _ : state) {
    for (const Object& code : g_code_vector) {
      absl::StatusOr<dynamo::bytecode::DecodedCode> d =
          dynamo::bytecode::Decode(code, {.nested = false});
      if (!d.ok()) {
        state.SkipWithError(std::string(d.status().message()).c_str());
        return;
      }
      instructions += d->instructions.size();
      ++codes;
      benchmark::DoNotOptimize(d->instructions.data());
    }
  }
  state.counters["code_objects/s"] = benchmark::Counter(static_cast<double>(codes), benchmark::Counter::kIsRate);
  state.counters["instructions/s"] = benchmark::Counter(static_cast<double>(instructions), benchmark::Counter::kIsRate);
}

void BM_DisGetInstructions(benchmark::State& state) {
  size_t instructions = 0, codes = 0;
  for (auto _ : state) {
    absl::StatusOr<Object> n = dynamo::python::CallMethod(g_helper, "dis_everything", {g_codes});
    if (!n.ok()) {
      state.SkipWithError(std::string(n.status().message()).c_str());
      return;
    }
    instructions += static_cast<size_t>(PyLong_AsLongLong(n->get()));
    codes += g_code_vector.size();
  }
  state.counters["code_objects/s"] = benchmark::Counter(static_cast<double>(codes), benchmark::Counter::kIsRate);
  state.counters["instructions/s"] = benchmark::Counter(static_cast<double>(instructions), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_LibdynamoDecode)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_DisGetInstructions)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// Remembers each benchmark's instruction rate so the ratio can be printed.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      auto it = run.counters.find("instructions/s");
      if (it != run.counters.end()) g_rates[run.run_name.function_name] = it->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto py = dynamo::python::Interpreter::Start();
  if (!py.ok()) {
    std::cerr << py.status() << "\n";
    return 1;
  }
  PyObject* sys_path = PySys_GetObject("path");
  const char* src = std::getenv("DYNAMO_SOURCE_DIR");
  Object dir = dynamo::python::FromString(std::string(src ? src : DYNAMO_SOURCE_DIR) + "/test/python");
  PyList_Insert(sys_path, 0, dir.get());
  absl::StatusOr<Object> helper = dynamo::python::Import("bytecode_corpus");
  if (!helper.ok()) {
    std::cerr << helper.status() << "\n";
    return 1;
  }
  g_helper = *helper;
  const char* roots = std::getenv("DYNAMO_BYTECODE_CORPUS");
  Object roots_arg = dynamo::python::FromString(roots && *roots ? roots : "stdlib,torch,torchvision");
  absl::StatusOr<Object> codes = dynamo::python::CallMethod(g_helper, "all_code_objects", {roots_arg});
  if (!codes.ok()) {
    std::cerr << codes.status() << "\n";
    return 1;
  }
  g_codes = *codes;
  g_code_vector = *dynamo::python::AsVector(g_codes);
  std::cout << "corpus: " << g_code_vector.size() << " code objects\n";

  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  double ours = g_rates["BM_LibdynamoDecode"], theirs = g_rates["BM_DisGetInstructions"];
  if (ours > 0 && theirs > 0) {
    std::cout << "decode throughput ratio (libdynamo / dis.get_instructions): " << ours / theirs
              << "x\n";
  }
  g_code_vector.clear();
  g_codes = Object();
  g_helper = Object();
  return 0;
}
