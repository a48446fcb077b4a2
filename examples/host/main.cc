// A host program embedding libdynamo: starts the interpreter, imports a
// script, finds a function in it and prints what libdynamo decodes.
//
//   dynamo-host SCRIPT.py TARGET      e.g.  dynamo-host examples/mlp.py model.forward
#include <iostream>

#include "lib/bytecode/decoder.h"
#include "lib/bytecode/disassemble.h"
#include "lib/python/interpreter.h"
#include "lib/python/script.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: dynamo-host SCRIPT.py TARGET\n";
    return 2;
  }
  auto py = dynamo::python::Interpreter::Start();
  if (!py.ok()) {
    std::cerr << "dynamo-host: " << py.status().message() << "\n";
    return 1;
  }
  auto module = dynamo::python::ImportScript(argv[1]);
  if (!module.ok()) {
    std::cerr << "dynamo-host: " << module.status().message() << "\n";
    return 1;
  }
  auto target = dynamo::python::ResolveTarget(*module, argv[2]);
  if (!target.ok()) {
    std::cerr << "dynamo-host: " << target.status().message() << "\n";
    return 1;
  }
  auto decoded = dynamo::bytecode::Decode(target->code);
  if (!decoded.ok()) {
    std::cerr << "dynamo-host: " << decoded.status().message() << "\n";
    return 1;
  }
  std::cout << decoded->TotalCodeObjects() << " code objects, "
            << decoded->TotalInstructions() << " instructions\n"
            << dynamo::bytecode::Disassemble(*decoded);
  return 0;
}
