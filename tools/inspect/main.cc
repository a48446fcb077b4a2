// dynamo-inspect: print what libdynamo sees in a Python function.
//
//   dynamo-inspect examples/add.py --fn forward
#include <cstdio>
#include <exception>
#include <iostream>

#include "CLI/CLI.hpp"
#include "lib/python/error.h"
#include "tools/inspect/inspect.h"

int main(int argc, char** argv) {
  dynamo::tools::InspectOptions options;
  bool traceback = false;
  CLI::App app{"Show the bytecode libdynamo reads from a Python function."};
  app.add_option("script", options.script, "Python script to import")->required();
  app.add_option("--fn", options.function,
                 "function to inspect: name, Class.method or object.method")->required();
  app.add_flag("--as-main", options.as_main, "import the script as __main__");
  app.add_flag("!--no-nested", options.nested, "leave out nested code objects");
  app.add_flag("--traceback", traceback, "on a Python error, also print its traceback");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    std::string report;
    absl::Status status = dynamo::tools::RunInspect(options, report);
    if (!status.ok()) {
      std::cerr << "dynamo-inspect: error: " << status.message() << "\n";
      if (auto tb = dynamo::python::PythonTraceback(status); traceback && tb) std::cerr << *tb;
      return 1;
    }
    std::cout << report;
    std::cout.flush();
    return std::cout.good() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "dynamo-inspect: internal error: " << e.what() << "\n";
    return 70;
  }
}
