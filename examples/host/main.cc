// A C++ host that links the installed libdynamo package and captures a
// function from a Python script through the facade (lib/capture/capture.h).
//
//   dynamo-host SCRIPT.py TARGET [INPUT_SPEC...]
//   dynamo-host examples/mlp.py forward f32[4,16] f32[4,16]
#include <iostream>

#include "lib/capture/capture.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: dynamo-host SCRIPT.py TARGET [INPUT_SPEC...]\n";
    return 2;
  }
  dynamo::capture::CaptureOptions options;
  options.script = argv[1];
  options.function = argv[2];
  for (int i = 3; i < argc; ++i) options.inputs.push_back(argv[i]);
  absl::StatusOr<dynamo::capture::Captured> captured = dynamo::capture::CaptureFunction(options);
  if (!captured.ok()) {
    std::cerr << "dynamo-host: " << captured.status().message() << "\n";
    return 1;
  }
  const dynamo::ir::Capture& c = captured->capture;
  const dynamo::ir::Graph& graph = c.graphs(0);
  std::cout << c.function_name() << ": " << graph.nodes_size() << " nodes, " << c.guards_size()
            << " guards\n";
  for (const dynamo::ir::Node& node : graph.nodes()) {
    std::cout << "  " << node.name() << " = " << dynamo::ir::Node::Kind_Name(node.kind()) << " "
              << node.target() << "\n";
  }
  for (const dynamo::ir::Guard& guard : c.guards()) {
    std::cout << "  guard " << dynamo::ir::Guard::Kind_Name(guard.kind()) << " " << guard.source()
              << "\n";
  }
  return 0;
}
