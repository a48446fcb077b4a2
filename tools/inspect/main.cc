// dynamo-inspect: what libdynamo reads from a Python function, and what it
// captured: bytecode, graphs, guards and graph breaks.
//
//   dynamo-inspect model.py --fn model.forward                       # bytecode
//   dynamo-inspect model.py --fn model.forward --input x=f32[1,16]   # full report
//   dynamo-inspect model.pb [--json]                                 # a saved capture
//   dynamo-inspect model.py --fn f --input f32[3] --max-breaks 0     # CI gate
//   dynamo-inspect model.pb --dot model.dot --svg model.svg          # pictures
//   dynamo-inspect --diff old.pb new.pb [--json]                     # what changed: exit 0 equal, 1 not, 2 trouble
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "lib/python/error.h"
#include "tools/common/cli.h"
#include "tools/common/output_file.h"
#include "tools/inspect/inspect.h"

namespace {

// The last line of defence: no exception may end the tool with a C++ abort.
int InternalError(const std::exception& e) {
  std::cerr << "dynamo-inspect: internal error: " << e.what() << "\n";
  return 70;
}

// --diff: the report on stdout; the exit code tells a CI job what happened
// as diff(1)'s does: 0 equal, 1 different, 2 trouble (a file that is not a
// readable capture), so "the graph changed" is never mistaken for "no file".
int Diff(const dynamo::tools::DiffOptions& options) {
  absl::StatusOr<dynamo::tools::DiffReport> report = dynamo::tools::RunDiff(options);
  if (!report.ok()) {
    std::cerr << "dynamo-inspect: error: " << report.status().message() << "\n";
    return 2;
  }
  std::cout << report->text;
  std::cout.flush();
  return std::cout.good() && report->equal ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  dynamo::tools::InspectOptions options;
  bool traceback = false;
  int max_breaks = -1;  // -1: no gate (only the default; the option takes N >= 0)
  CLI::App app{"Show what libdynamo reads and captures from a Python function."};
  // Required unless --diff names the captures instead (checked after parsing).
  app.add_option("script", options.script, "Python script to import, or a saved capture (.pb)");
  app.add_option("--fn", options.function,
                 "function to inspect: name, Class.method or object.method");
  app.add_option("--input,-i", options.inputs, "an input spec, as dynamo-export takes it");
  app.add_option("--example-inputs", options.example_inputs,
                 "a function in the script returning example inputs");
  app.add_flag("--as-main", options.as_main, "import the script as __main__");
  app.add_flag("!--no-nested", options.nested, "leave out nested code objects");
  app.add_flag("--json", options.json, "print the capture (or the --diff) as JSON");
  app.add_option("--max-breaks", max_breaks, "exit non-zero when the capture has more breaks")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", options.timeout_seconds,
                 "stop and fail when importing and capturing take longer than SECONDS")
      ->check(dynamo::tools::Seconds());
  app.add_flag("--traceback", traceback, "on a Python error, also print its traceback");
  std::string dot_path, svg_path;
  app.add_option("--dot", dot_path, "also write the capture's graphs and breaks as Graphviz DOT to FILE");
  app.add_option("--svg", svg_path, "also draw them to FILE as SVG (needs Graphviz's dot on PATH)");
  std::vector<std::string> diff;
  CLI::Option* diff_option =
      app.add_option("--diff", diff, "compare two saved captures: exit 0 when equal, 1 when they differ, 2 on trouble")
          ->expected(2)
          ->type_name("A.pb B.pb");
  // What is inspected and how: meaningless for two saved captures.
  for (const char* other : {"script", "--fn", "--input", "--example-inputs", "--as-main", "--no-nested",
                            "--max-breaks", "--timeout", "--dot", "--svg"}) {
    diff_option->excludes(other);
  }
  std::string python;
  app.add_option("--python", python,
                 "the Python interpreter to embed (default: $DYNAMO_PYTHON, the venv this program is installed in, the active venv, or the "
                 "one libdynamo was built for)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return dynamo::tools::ParseError(app, e, "dynamo-inspect");
  }
  if (!python.empty()) setenv("DYNAMO_PYTHON", python.c_str(), 1);  // read by python::Interpreter
  if (!diff.empty()) {
    try {
      return Diff({.a = diff[0], .b = diff[1], .json = options.json});
    } catch (const std::exception& e) {
      return InternalError(e);
    }
  }
  if (options.script.empty()) {
    std::cerr << "dynamo-inspect: error: give a script or a saved capture, or --diff A.pb B.pb\n";
    return 2;
  }
  if (!dynamo::tools::IsCaptureFile(options.script) && options.function.empty()) {
    std::cerr << "dynamo-inspect: error: --fn is required for a script\n";
    return 2;
  }
  options.picture = !dot_path.empty() || !svg_path.empty();
  if (options.picture && !dynamo::tools::IsCaptureFile(options.script) && options.inputs.empty() &&
      options.example_inputs.empty()) {
    std::cerr << "dynamo-inspect: error: --dot and --svg draw a capture: give --input (or --example-inputs) "
                 "or a saved capture\n";
    return 2;
  }
  for (const std::string& path : {dot_path, svg_path}) {
    if (path.empty()) continue;
    absl::Status s = dynamo::tools::CheckWritableDirectory(path);
    if (s.ok()) s = dynamo::tools::CheckOutputPath(path);
    if (!s.ok()) {
      std::cerr << "dynamo-inspect: error: " << s.message() << "\n";
      return 1;
    }
  }
  try {
    absl::StatusOr<dynamo::tools::InspectReport> report = dynamo::tools::RunInspect(options);
    if (!report.ok()) {
      std::cerr << "dynamo-inspect: error: " << report.status().message() << "\n";
      if (auto tb = dynamo::python::PythonTraceback(report.status()); traceback && tb) std::cerr << *tb;
      return 1;
    }
    absl::Status drawn = absl::OkStatus();
    if (!dot_path.empty()) drawn = dynamo::tools::WriteAtomically(dot_path, report->dot);
    if (drawn.ok() && !svg_path.empty()) {
      absl::StatusOr<std::string> svg = dynamo::tools::RenderSvg(report->dot);
      drawn = svg.ok() ? dynamo::tools::WriteAtomically(svg_path, *svg) : svg.status();
    }
    if (!drawn.ok()) {
      std::cerr << "dynamo-inspect: error: " << drawn.message() << "\n";
      return 1;
    }
    std::cout << report->text;
    std::cout.flush();
    if (max_breaks >= 0 && report->breaks > max_breaks) {
      std::cerr << "dynamo-inspect: error: " << report->breaks << " graph break"
                << (report->breaks == 1 ? "" : "s") << ", more than --max-breaks " << max_breaks << "\n";
      return 1;
    }
    return std::cout.good() ? 0 : 1;
  } catch (const std::exception& e) {
    return InternalError(e);
  }
}
