// dynamo-export: capture a Python function offline into a protobuf Capture.
//
//   dynamo-export model.py --fn model.forward --input x=f32[8,3,224,224] -o model.pb
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>

#include "CLI/CLI.hpp"
#include "lib/python/error.h"
#include "tools/common/cli.h"
#include "tools/export/export.h"

int main(int argc, char** argv) {
  dynamo::tools::ExportOptions options;
  std::string weights = "none";
  bool traceback = false;
  CLI::App app{"Capture a Python function's tensor graph and guards, without running it."};
  app.add_option("script", options.capture.script, "Python script to import")->required();
  app.add_option("--fn", options.capture.function,
                 "function to capture: name, Class.method or object.method")->required();
  app.add_option("--input,-i", options.capture.inputs,
                 "an input, positional or name=spec: f32[8,3], i64[1,128]@cuda:0, int:3, "
                 "[f32[3],f32[3]], None");
  app.add_option("--dim", options.capture.dims,
                 "a symbolic size's constraints: B=1..64, T=%8, T=8..512,%8,ex=64 (sizes named in --input: "
                 "f32[B,T]; see the README)");
  app.add_option("--example-inputs", options.capture.example_inputs,
                 "a function in the script returning example inputs (their metadata is used)");
  app.add_option("-o,--output", options.output, "where to write the capture")->required();
  app.add_option("--format", options.format, "pb (default), pbtxt or json");
  app.add_option("--weights", weights, "none (default), embed, or external (a .weights file beside the output)")
      ->check(CLI::IsMember({"none", "embed", "external"}));
  app.add_flag("--as-main", options.capture.as_main, "import the script as __main__");
  app.add_flag("--allow-breaks", options.capture.allow_breaks,
               "continue past graph breaks: write every graph, the rewritten code and the "
               "resume functions (without it a break is an error)");
  app.add_option("--timeout", options.timeout_seconds,
                 "stop and fail when importing and capturing take longer than SECONDS")
      ->check(dynamo::tools::Seconds());
  app.add_flag("--traceback", traceback, "on a Python error, also print its traceback");
  std::string python;
  app.add_option("--python", python,
                 "the Python interpreter to embed (default: $DYNAMO_PYTHON, the venv this program is installed in, the active venv, or the "
                 "one libdynamo was built for)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return dynamo::tools::ParseError(app, e, "dynamo-export");
  }
  if (!python.empty()) setenv("DYNAMO_PYTHON", python.c_str(), 1);  // read by python::Interpreter
  static const std::map<std::string, dynamo::capture::Weights> kWeights = {
      {"none", dynamo::capture::Weights::kNone},
      {"embed", dynamo::capture::Weights::kEmbed},
      {"external", dynamo::capture::Weights::kExternal}};
  options.capture.weights = kWeights.at(weights);
  try {
    absl::Status status = dynamo::tools::RunExport(options);
    if (!status.ok()) {
      std::cerr << "dynamo-export: error: " << status.message() << "\n";
      if (auto tb = dynamo::python::PythonTraceback(status); traceback && tb) std::cerr << *tb;
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dynamo-export: internal error: " << e.what() << "\n";
    return 70;
  }
}
