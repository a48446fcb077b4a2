// Offline capture end to end: every function and module of the corpus
// (test/python/capture_cases.py) is exported through the facade, written as
// a .pb, loaded back as a torch.fx.GraphModule (python/dynamo/loader.py), run
// on random inputs and compared with eager execution, with every node's
// recorded metadata checked against what torch produces
// (test/python/capture_check.py). The shared seed corpus is exported too:
// the cases that need a graph break must fail with a located message.
#include <Python.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/capture/capture.h"
#include "lib/embed/module.h"
#include "lib/python/script.h"
#include "test/test_support.h"

namespace dynamo::capture {
namespace {

using python::Object;
namespace fs = std::filesystem;

// A serialized capture on disk for the Python checker, removed when it goes
// out of scope: the corpus embeds real weights (1.6 GB in all), and a test
// that leaves them behind fills the disk of the machine that runs it three
// times (once per CPython).
class ScratchPb {
 public:
  ScratchPb(const ir::Capture& c, const std::string& name) {
    static const Directory dir;
    absl::StatusOr<std::string> bytes = Serialize(c, "pb");
    REQUIRE(bytes.ok());
    path_ = (dir.path / (name + ".pb")).string();
    std::ofstream(path_, std::ios::binary) << *bytes;
  }
  ~ScratchPb() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  ScratchPb(const ScratchPb&) = delete;
  ScratchPb& operator=(const ScratchPb&) = delete;
  const std::string& path() const { return path_; }

 private:
  struct Directory {
    fs::path path;
    Directory() {
      char tmpl[] = "/tmp/dynamo_capture_test_XXXXXX";
      path = mkdtemp(tmpl);
    }
    ~Directory() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  };
  std::string path_;
};

// Options for capturing `target` of `script`; `inputs` is a Python list of
// --input specs, a str naming an --example-inputs function, or one spec str
// when `single_spec`.
CaptureOptions OptionsFor(const std::string& script, const std::string& target,
                          const Object& inputs, Weights weights = Weights::kEmbed,
                          bool single_spec = false) {
  CaptureOptions options;
  options.script = script;
  options.function = target;
  options.weights = weights;
  if (PyUnicode_Check(inputs.get())) {
    std::string text = *python::AsString(inputs);
    if (single_spec) {
      options.inputs = {text};
    } else {
      options.example_inputs = text;
    }
  } else {
    std::vector<Object> specs = *python::AsVector(inputs);
    for (const Object& spec : specs) options.inputs.push_back(*python::AsString(spec));
  }
  return options;
}

// Runs the loaded capture against eager; returns the node count checked.
// The Python checker (test/python/capture_check.py). Its loader uses
// dynamo._C, so this host registers its own libdynamo as that module first,
// as any host that runs Python itself must (lib/embed/module.h).
Object CaptureCheck() {
  static const absl::Status registered = embed::RegisterModule();
  REQUIRE(registered.ok());
  return testing::ImportTestModule("capture_check");
}

long RunAgainstEager(const std::string& pb, const Object& fn, const Object& make) {
  Object checker = CaptureCheck();
  absl::StatusOr<Object> result =
      python::CallMethod(checker, "run_case", {python::FromString(pb), fn, make});
  DYNAMO_REQUIRE_OK(result);
  std::vector<Object> parts = *python::AsVector(*result);
  std::vector<Object> problems = *python::AsVector(parts[0]);
  for (const Object& p : problems) FAIL_CHECK(python::Repr(p));
  return static_cast<long>(*python::AsLong(parts[1]));
}

TEST_CASE("every corpus function exports as one graph that runs like eager", "[capture]") {
  CaptureCheck();  // puts test/python on sys.path
  const std::string script = testing::SourceDir() + "/test/python/capture_cases.py";
  absl::StatusOr<Object> module = python::ImportScript(script);
  DYNAMO_REQUIRE_OK(module);
  std::vector<Object> cases = *python::AsVector(*python::GetAttr(*module, "CASES"));
  REQUIRE(cases.size() >= 60);
  // What torch._dynamo (the venv's torch, in this process) captures for
  // each case: the same operations must be in our graph.
  Object checker = CaptureCheck();
  absl::StatusOr<Object> record = python::CallMethod(checker, "reference_record");
  DYNAMO_REQUIRE_OK(record);
  std::vector<Object> record_parts = *python::AsVector(*record);
  const std::string reference_torch = *python::AsString(record_parts[0]);
  std::vector<Object> reference = *python::AsVector(record_parts[1]);
  REQUIRE(reference.size() == cases.size());
  long nodes_checked = 0;
  int same_as_reference = 0;
  int index = 0;
  for (const Object& c : cases) {
    std::vector<Object> fields = *python::AsVector(c);
    std::string target = *python::AsString(fields[0]);
    INFO("case " << index << ": " << target);
    absl::StatusOr<Captured> captured = CaptureFunction(OptionsFor(script, target, fields[1]));
    if (!captured.ok()) {
      FAIL_CHECK(captured.status().message());
      ++index;
      continue;
    }
    CHECK(captured->capture.graphs_size() == 1);
    CHECK(captured->capture.graph_breaks_size() == 0);
    ScratchPb scratch(captured->capture, absl::StrCat("case_", index));
    const std::string& pb = scratch.path();
    absl::StatusOr<python::Target> fn = python::ResolveTarget(*module, target);
    DYNAMO_REQUIRE_OK(fn);
    nodes_checked += RunAgainstEager(pb, fn->callable, fields[2]);
    absl::StatusOr<Object> vs_reference = python::CallMethod(
        checker, "compare_with_reference",
        {python::FromString(pb), reference[static_cast<size_t>(index)], fields[0]});
    DYNAMO_REQUIRE_OK(vs_reference);
    std::vector<Object> differences = *python::AsVector(*vs_reference);
    for (const Object& d : differences) FAIL_CHECK("vs torch._dynamo: " << python::Repr(d));
    same_as_reference += differences.empty();
    ++index;
  }
  std::cout << "capture corpus: " << cases.size() << " cases exported, loaded and run like "
            << "eager; " << nodes_checked << " node results checked against their metadata; "
            << same_as_reference << " with the same operations as torch._dynamo " << reference_torch << "\n";
  // Every case computes at least one tensor: the metadata check never ran empty.
  CHECK(nodes_checked >= static_cast<long>(cases.size()));
}

TEST_CASE("guards pass for matching calls and fail on the expected guard", "[capture][guards]") {
  const std::string script = testing::SourceDir() + "/test/python/capture_cases.py";
  absl::StatusOr<Object> module = python::ImportScript(script);
  DYNAMO_REQUIRE_OK(module);
  Object checker = CaptureCheck();
  std::vector<Object> scenarios = *python::AsVector(*python::GetAttr(*module, "GUARD_SCENARIOS"));
  int checked = 0;
  for (const Object& s : scenarios) {
    std::vector<Object> f = *python::AsVector(s);
    std::string target = *python::AsString(f[0]);
    INFO(target);
    absl::StatusOr<Captured> captured = CaptureFunction(OptionsFor(script, target, f[1], Weights::kNone));
    DYNAMO_REQUIRE_OK(captured);
    absl::StatusOr<python::Target> fn = python::ResolveTarget(*module, target);
    DYNAMO_REQUIRE_OK(fn);
    ScratchPb scratch(captured->capture, "guards_" + target);
    const std::string& pb = scratch.path();
    absl::StatusOr<Object> problems = python::CallMethod(
        checker, "check_guard_scenarios", {python::FromString(pb), fn->callable, f[2]});
    DYNAMO_REQUIRE_OK(problems);
    std::vector<Object> found = *python::AsVector(*problems);
    for (const Object& p : found) FAIL_CHECK(python::Repr(p));
    checked += static_cast<int>(python::AsVector(f[2])->size());
  }
  std::cout << "guards: " << checked << " calls checked against their captures' guards\n";
  CHECK(checked >= 15);
}

TEST_CASE("resnet18, mobilenet_v2 and a transformer block export as one graph each", "[capture][models]") {
  const std::string script = testing::SourceDir() + "/test/python/models.py";
  absl::StatusOr<Object> module = python::ImportScript(script);
  DYNAMO_REQUIRE_OK(module);
  std::vector<Object> models = *python::AsVector(*python::GetAttr(*module, "MODELS"));
  for (const Object& m : models) {
    std::vector<Object> f = *python::AsVector(m);
    std::string target = *python::AsString(f[0]);
    INFO(target);
    absl::StatusOr<Captured> captured = CaptureFunction(OptionsFor(script, target, f[1]));
    if (!captured.ok()) {
      FAIL_CHECK(captured.status().message());
      continue;
    }
    REQUIRE(captured->capture.graphs_size() == 1);
    absl::StatusOr<python::Target> fn = python::ResolveTarget(*module, target);
    DYNAMO_REQUIRE_OK(fn);
    long checked = RunAgainstEager(ScratchPb(captured->capture, target).path(), fn->callable, f[2]);
    std::cout << target << ": " << captured->capture.graphs(0).nodes_size() << " nodes, "
              << captured->capture.guards_size() << " guards, " << checked
              << " node results checked\n";
  }
}

TEST_CASE("torchvision classifiers: one graph equal to eager, or a located break",
          "[capture][models][sweep]") {
  const std::string script = testing::SourceDir() + "/test/python/models.py";
  absl::StatusOr<Object> module = python::ImportScript(script);
  DYNAMO_REQUIRE_OK(module);
  std::vector<Object> entries = *python::AsVector(*python::CallMethod(*module, "sweep_entries"));
  int graphs = 0;
  std::string refused;
  for (const Object& e : entries) {
    std::vector<Object> f = *python::AsVector(e);
    std::string target = *python::AsString(f[0]);
    INFO(target);
    absl::StatusOr<Captured> captured =
        CaptureFunction(OptionsFor(script, target, f[1], Weights::kEmbed, /*single_spec=*/true));
    if (!captured.ok()) {
      std::string message(captured.status().message());
      INFO(message);
      CHECK(captured.status().code() == absl::StatusCode::kUnimplemented);
      CHECK(absl::StrContains(message, ": graph break: "));
      refused += absl::StrCat("  ", target, ": ", message.substr(0, 160), "\n");
      continue;
    }
    absl::StatusOr<python::Target> fn = python::ResolveTarget(*module, target);
    DYNAMO_REQUIRE_OK(fn);
    RunAgainstEager(ScratchPb(captured->capture, target).path(), fn->callable, f[2]);
    ++graphs;
  }
  std::cout << "torchvision sweep: " << graphs << " of " << entries.size()
            << " captured as one graph equal to eager; refused with a located break:\n" << refused;
  // Every one of them today: a new refusal is a regression to look at.
  CHECK(graphs == static_cast<int>(entries.size()));
}

TEST_CASE("the same capture twice is byte-identical", "[capture]") {
  CaptureOptions options;
  options.script = testing::SourceDir() + "/test/python/capture_cases.py";
  options.function = "stack.forward";
  options.inputs = {"f32[5,8]"};
  options.weights = Weights::kEmbed;
  absl::StatusOr<Captured> a = CaptureFunction(options);
  absl::StatusOr<Captured> b = CaptureFunction(options);
  DYNAMO_REQUIRE_OK(a);
  DYNAMO_REQUIRE_OK(b);
  for (const char* format : {"pb", "pbtxt", "json"}) {
    INFO(format);
    CHECK(*Serialize(a->capture, format) == *Serialize(b->capture, format));
  }
}

TEST_CASE("the seed corpus: one graph, or a located graph break where one is needed",
          "[capture][seeds]") {
  const std::string script = testing::SourceDir() + "/test/python/seed_capture.py";
  absl::StatusOr<Object> module = python::ImportScript(script);
  if (!module.ok() && absl::StrContains(module.status().message(), "seed_cases")) {
    WARN("../shared/corpus is not beside this checkout: " << module.status().message());
    return;
  }
  DYNAMO_REQUIRE_OK(module);
  std::vector<Object> entries = *python::AsVector(*python::GetAttr(*module, "ENTRIES"));
  Object must_break = *python::GetAttr(*module, "MUST_BREAK");
  Object may_break = *python::GetAttr(*module, "MAY_BREAK");
  REQUIRE(entries.size() >= 13);
  int graphs = 0, breaks = 0, index = 0;
  for (const Object& e : entries) {
    std::vector<Object> f = *python::AsVector(e);
    std::string target = *python::AsString(f[0]);
    INFO(target << " with " << *python::AsString(f[1]));
    absl::StatusOr<Captured> captured = CaptureFunction(OptionsFor(script, target, f[1]));
    bool must = PySequence_Contains(must_break.get(), f[2].get()) == 1;
    bool may = PySequence_Contains(may_break.get(), f[2].get()) == 1;
    if (!captured.ok()) {
      std::string message(captured.status().message());
      INFO(message);
      CHECK((must || may));
      CHECK(captured.status().code() == absl::StatusCode::kUnimplemented);
      CHECK(absl::StrContains(message, "seed_cases.py:"));
      CHECK(absl::StrContains(message, ": graph break: "));
      CHECK(absl::StrContains(message, "hint: "));
      ++breaks;
      continue;
    }
    CHECK_FALSE(must);
    ++graphs;
    absl::StatusOr<python::Target> fn = python::ResolveTarget(*module, target);
    DYNAMO_REQUIRE_OK(fn);
    RunAgainstEager(ScratchPb(captured->capture, absl::StrCat("seed_", index++)).path(), fn->callable, f[3]);
  }
  std::cout << "seed corpus: " << graphs << " captured as one graph and run like eager, "
            << breaks << " refused with a located graph break\n";
  CHECK(breaks >= 4);
}

}  // namespace
}  // namespace dynamo::capture
