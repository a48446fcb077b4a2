// main() for every Catch2 test binary: starts the embedded interpreter once
// for the whole binary (CPython cannot be re-initialised reliably after
// torch is imported), then runs the tests.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>

#include "lib/python/interpreter.h"

int main(int argc, char** argv) {
  auto py = dynamo::python::Interpreter::Start();
  if (!py.ok()) {
    std::cerr << "cannot start Python: " << py.status() << "\n";
    return 2;
  }
  return Catch::Session().run(argc, argv);
}
