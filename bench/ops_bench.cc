// Shape inference throughput: libdynamo's op registry against torch's own
// meta device (the FakeTensor approach), on the same mix of calls, in the
// same run.
//
//   build/bench/ops_bench
//
// Both sides compute output metadata only; no kernel runs. The mix holds 15
// calls typical of captured graphs (broadcast add, scalar mul, conv2d,
// batch_norm, relu, max_pool2d, view, sum, linear, batched matmul, softmax,
// basic indexing, cat, transpose, layer_norm). The torch side calls each op
// on meta tensors from a Python loop (what a tracer in Python pays); ours
// calls Registry::Infer with the same arguments. Reports inference calls/s
// for both, then the ratio. BM_RegistryInferSymbolic runs the same mix with
// the batch size a symbol (dynamic shapes: every tensor's first dim of 8
// and the 8 a view asks for are s0): Registry::Infer on the example sizes,
// then the symbolic rule (lib/ops/sym_shapes.h) for the output expressions.
#include <Python.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/ops/registry.h"
#include "lib/ops/sym.h"
#include "lib/ops/sym_shapes.h"
#include "lib/python/error.h"
#include "lib/python/interpreter.h"
#include "lib/python/object.h"

namespace {

using dynamo::ops::DType;
using dynamo::ops::Kwarg;
using dynamo::ops::Slice;
using dynamo::ops::TensorMeta;
using dynamo::ops::Value;
using dynamo::python::Object;

struct OpCall {
  std::string op;
  std::vector<Value> args;
  std::vector<Kwarg> kwargs;
};

Value T(std::vector<int64_t> sizes) {
  return Value(TensorMeta::Contiguous(DType::kFloat32, std::move(sizes)));
}

// Keep in step with kTorchMix below.
std::vector<OpCall> Mix() {
  const Value x = T({8, 3, 32, 32}), c = T({8, 16, 32, 32}), p16 = T({16}), h = T({8, 64});
  return {
      {"torch.add", {x, T({3, 1, 1})}, {}},
      {"operator.mul", {x, Value(2.5)}, {}},
      {"torch.nn.functional.conv2d", {x, T({16, 3, 3, 3}), p16, Value(1), Value(1)}, {}},
      {"torch.nn.functional.batch_norm", {c, p16, p16, p16, p16, Value(false)}, {}},
      {"torch.nn.functional.relu", {c}, {}},
      {"torch.nn.functional.max_pool2d", {c, Value(2)}, {}},
      {"Tensor.view", {c, Value(8), Value(-1)}, {}},
      {"Tensor.sum", {x}, {{"dim", Value(1)}, {"keepdim", Value(true)}}},
      {"torch.nn.functional.linear", {h, T({10, 64}), T({10})}, {}},
      {"torch.matmul", {T({2, 4, 16, 8}), T({2, 4, 8, 16})}, {}},
      {"torch.softmax", {T({2, 4, 16, 16}), Value(-1)}, {}},
      {"operator.getitem", {x, Value::Tuple({Value(Slice{}), Value(0), Value()})}, {}},
      {"torch.cat", {Value::List({x, x}), Value(1)}, {}},
      {"Tensor.transpose", {x, Value(1), Value(2)}, {}},
      {"torch.nn.functional.layer_norm", {h, Value::Tuple({Value(64)})}, {}},
  };
}

constexpr const char* kTorchMix = R"PY(
import operator, time
import torch
import torch.nn.functional as F

def m(*s):
    return torch.empty(*s, device="meta")

x, c, p16, h = m(8, 3, 32, 32), m(8, 16, 32, 32), m(16), m(8, 64)
MIX = [
    (torch.add, (x, m(3, 1, 1)), {}),
    (operator.mul, (x, 2.5), {}),
    (F.conv2d, (x, m(16, 3, 3, 3), p16, 1, 1), {}),
    (F.batch_norm, (c, p16, p16, p16, p16, False), {}),
    (F.relu, (c,), {}),
    (F.max_pool2d, (c, 2), {}),
    (torch.Tensor.view, (c, 8, -1), {}),
    (torch.Tensor.sum, (x,), {"dim": 1, "keepdim": True}),
    (F.linear, (h, m(10, 64), m(10)), {}),
    (torch.matmul, (m(2, 4, 16, 8), m(2, 4, 8, 16)), {}),
    (torch.softmax, (m(2, 4, 16, 16), -1), {}),
    (operator.getitem, (x, (slice(None), 0, None)), {}),
    (torch.cat, ([x, x], 1), {}),
    (torch.Tensor.transpose, (x, 1, 2), {}),
    (F.layer_norm, (h, (64,)), {}),
]

def run_mix(rounds):
    for _ in range(rounds):
        for f, a, k in MIX:
            f(*a, **k)
    return rounds * len(MIX)
)PY";

Object g_run_mix;
std::vector<OpCall> g_mix;
std::map<std::string, double> g_rates;

void BM_RegistryInfer(benchmark::State& state) {
  const dynamo::ops::Registry& registry = dynamo::ops::DefaultRegistry();
  size_t calls = 0;
  for (auto _ : state) {
    for (const OpCall& call : g_mix) {
      absl::StatusOr<Value> out = registry.Infer(call.op, call.args, call.kwargs);
      if (!out.ok()) {
        state.SkipWithError(std::string(out.status().message()).c_str());
        return;
      }
      benchmark::DoNotOptimize(out);
      ++calls;
    }
  }
  state.counters["calls/s"] =
      benchmark::Counter(static_cast<double>(calls), benchmark::Counter::kIsRate);
}

void BM_TorchMetaDevice(benchmark::State& state) {
  constexpr long kRounds = 20;
  Object rounds = dynamo::python::FromLong(kRounds);
  size_t calls = 0;
  for (auto _ : state) {
    absl::StatusOr<Object> n = dynamo::python::Call(g_run_mix, {rounds});
    if (!n.ok()) {
      state.SkipWithError(std::string(n.status().message()).c_str());
      return;
    }
    calls += static_cast<size_t>(PyLong_AsLongLong(n->get()));
  }
  state.counters["calls/s"] =
      benchmark::Counter(static_cast<double>(calls), benchmark::Counter::kIsRate);
}

// The symbolic side of a mix argument: a first dim of 8 (and an int 8) is s0.
dynamo::ops::SymValue BatchSymbolic(const Value& v, const dynamo::ops::SymExpr& s0) {
  using dynamo::ops::SymExpr;
  using dynamo::ops::SymValue;
  if (v.is_tensor() && !v.as_tensor().sizes.empty() && v.as_tensor().sizes[0] == 8) {
    std::vector<SymExpr> sizes(v.as_tensor().sizes.begin(), v.as_tensor().sizes.end());
    sizes[0] = s0;
    return SymValue::Tensor(std::move(sizes));
  }
  if (v.is_int() && v.as_int() == 8) return SymValue::Int(s0);
  if (v.is_list()) {
    std::vector<SymValue> items;
    bool symbolic = false;
    for (const Value& item : v.items()) {
      items.push_back(BatchSymbolic(item, s0));
      symbolic |= !items.back().is_static();
    }
    return symbolic ? SymValue::List(std::move(items)) : SymValue();
  }
  return SymValue();
}

void BM_RegistryInferSymbolic(benchmark::State& state) {
  const dynamo::ops::Registry& registry = dynamo::ops::DefaultRegistry();
  dynamo::ops::ShapeEnv env;
  const dynamo::ops::SymExpr s0 = env.NewSymbol(8).expr();
  struct SymCall {
    const dynamo::ops::OpEntry* op;
    std::vector<dynamo::ops::SymValue> args, kwargs;
  };
  std::vector<SymCall> sym;
  for (const OpCall& call : g_mix) {
    SymCall c{registry.Find(call.op), {}, {}};
    for (const Value& a : call.args) c.args.push_back(BatchSymbolic(a, s0));
    for (const Kwarg& k : call.kwargs) c.kwargs.push_back(BatchSymbolic(k.value, s0));
    sym.push_back(std::move(c));
  }
  size_t calls = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < g_mix.size(); ++i) {
      const OpCall& call = g_mix[i];
      absl::StatusOr<Value> out = sym[i].op->Infer(call.args, call.kwargs);
      if (!out.ok()) {
        state.SkipWithError(std::string(out.status().message()).c_str());
        return;
      }
      absl::StatusOr<dynamo::ops::SymValue> s =
          dynamo::ops::InferSymbolic(*sym[i].op, call.args, sym[i].args, call.kwargs, sym[i].kwargs, *out, env);
      if (!s.ok()) {
        state.SkipWithError(absl::StrCat(call.op, ": ", s.status().message()).c_str());
        return;
      }
      benchmark::DoNotOptimize(s);
      ++calls;
    }
  }
  state.counters["calls/s"] =
      benchmark::Counter(static_cast<double>(calls), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_RegistryInfer)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_RegistryInferSymbolic)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_TorchMetaDevice)->Unit(benchmark::kMillisecond)->MinTime(2.0);

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      auto it = run.counters.find("calls/s");
      if (it != run.counters.end()) g_rates[run.run_name.function_name] = it->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

absl::Status Setup() {
  absl::StatusOr<Object> builtins = dynamo::python::Import("builtins");
  if (!builtins.ok()) return builtins.status();
  Object globals = Object::Steal(PyDict_New());
  absl::StatusOr<Object> exec_fn = dynamo::python::GetAttr(*builtins, "exec");
  if (!exec_fn.ok()) return exec_fn.status();
  absl::StatusOr<Object> done =
      dynamo::python::Call(*exec_fn, {dynamo::python::FromString(kTorchMix), globals});
  if (!done.ok()) return done.status();
  g_run_mix = Object::Borrow(PyDict_GetItemString(globals.get(), "run_mix"));
  if (!g_run_mix) return absl::InternalError("run_mix not defined");
  g_mix = Mix();
  return dynamo::ops::DefaultRegistry().status();
}

}  // namespace

int main(int argc, char** argv) {
  auto py = dynamo::python::Interpreter::Start();
  if (!py.ok()) {
    std::cerr << "cannot start Python: " << py.status() << "\n";
    return 2;
  }
  if (absl::Status s = Setup(); !s.ok()) {
    std::cerr << "setup failed: " << s << "\n";
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double ours = g_rates["BM_RegistryInfer"], theirs = g_rates["BM_TorchMetaDevice"];
  const double symbolic = g_rates["BM_RegistryInferSymbolic"];
  if (ours > 0 && theirs > 0) {
    std::cout << "\nregistry: " << ours << " inference calls/s; torch meta device: " << theirs
              << " calls/s; ratio " << ours / theirs << "x\n";
  }
  if (ours > 0 && symbolic > 0) {
    std::cout << "registry with a symbolic batch size: " << symbolic << " calls/s (" << symbolic / ours
              << "x of static sizes; " << symbolic / std::max(theirs, 1.0) << "x torch's meta device)\n";
  }
  return 0;
}
