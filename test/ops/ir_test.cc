// The graph IR: a Capture built in C++ survives binary, text and JSON
// serialisation unchanged, and the checker rejects hand-broken ones with a
// message that names what is broken.
#include <catch2/catch.hpp>
#include <string>

#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "lib/graph/checker.h"
#include "lib/ops/proto_conversion.h"
#include "lib/ops/registry.h"
#include "proto/dynamo_ir.pb.h"
#include "test/test_support.h"

namespace dynamo {
namespace {

using ir::Node;

ir::Argument NodeRef(const std::string& name) {
  ir::Argument a;
  a.set_node(name);
  return a;
}

Node* AddNode(ir::Graph& g, const std::string& name, Node::Kind kind, const std::string& target,
              const ops::TensorMeta& meta) {
  Node* n = g.add_nodes();
  n->set_name(name);
  n->set_kind(kind);
  n->set_target(target);
  *n->mutable_meta()->mutable_tensor() = ops::ToProto(meta);
  return n;
}

// def f(x, y): return torch.sin(x) + y.sum(dim=-1, keepdim=True)[..., :2] * 2
ir::Capture MakeCapture() {
  ir::Capture c;
  c.set_ir_version(ir::IR_VERSION_CURRENT);
  c.set_python_version("3.11.2");
  c.set_torch_version("1.13.0");
  c.set_source_file("example.py");
  c.set_function_name("f");
  c.set_first_line(3);
  const ops::TensorMeta x = ops::TensorMeta::Contiguous(ops::DType::kFloat32, {4, 3});
  ir::InputSpec* in = c.add_inputs();
  in->set_name("x");
  *in->mutable_tensor() = ops::ToProto(x);
  ir::InputSpec* k = c.add_inputs();
  k->set_name("k");
  k->mutable_constant()->set_int_value(2);

  ir::Graph* g = c.add_graphs();
  g->set_name("graph_0");
  g->add_inputs("x");
  AddNode(*g, "x", Node::PLACEHOLDER, "x", x);
  Node* sin = AddNode(*g, "sin", Node::CALL_FUNCTION, "torch.sin", x);
  *sin->add_args() = NodeRef("x");
  sin->mutable_location()->set_file("example.py");
  sin->mutable_location()->set_line(4);
  sin->mutable_location()->set_text("return torch.sin(x) + ...");
  Node* sum = AddNode(*g, "sum_1", Node::CALL_METHOD, "Tensor.sum",
                      ops::TensorMeta::Contiguous(ops::DType::kFloat32, {4, 1}));
  *sum->add_args() = NodeRef("x");
  ir::KeywordArgument* kw = sum->add_kwargs();
  kw->set_name("dim");
  kw->mutable_value()->set_int_value(-1);
  kw = sum->add_kwargs();
  kw->set_name("keepdim");
  kw->mutable_value()->set_bool_value(true);
  Node* item = AddNode(*g, "getitem", Node::CALL_FUNCTION, "operator.getitem",
                       ops::TensorMeta::Contiguous(ops::DType::kFloat32, {4, 1}));
  *item->add_args() = NodeRef("sum_1");
  ir::ArgumentList* index = item->add_args()->mutable_list();
  index->set_is_tuple(true);
  index->add_items()->mutable_ellipsis();
  index->add_items()->mutable_slice()->set_stop(2);
  Node* mul = AddNode(*g, "mul", Node::CALL_FUNCTION, "operator.mul",
                      ops::TensorMeta::Contiguous(ops::DType::kFloat32, {4, 1}));
  *mul->add_args() = NodeRef("getitem");
  mul->add_args()->set_float_value(2.0);
  Node* add = AddNode(*g, "add", Node::CALL_FUNCTION, "operator.add", x);
  *add->add_args() = NodeRef("sin");
  *add->add_args() = NodeRef("mul");
  Node* to = AddNode(*g, "to", Node::CALL_METHOD, "Tensor.to",
                     ops::TensorMeta::Contiguous(ops::DType::kFloat64, {4, 3}));
  *to->add_args() = NodeRef("add");
  to->add_args()->set_dtype(ir::DTYPE_FLOAT64);
  kw = to->add_kwargs();
  kw->set_name("memory_format");
  kw->mutable_value()->set_memory_format(ir::MEMORY_FORMAT_CONTIGUOUS);
  Node* out = g->add_nodes();
  out->set_name("output");
  out->set_kind(Node::OUTPUT);
  out->set_target("output");
  *out->add_args() = NodeRef("to");
  *g->add_outputs() = NodeRef("to");

  ir::Guard* guard = c.add_guards();
  guard->set_kind(ir::Guard::TENSOR_MATCH);
  guard->set_source("L['x']");
  *guard->mutable_tensor() = ops::ToProto(x);
  guard->set_reason("x is a graph input");
  ir::Guard* k_guard = c.add_guards();
  k_guard->set_kind(ir::Guard::EQUALS_MATCH);
  k_guard->set_source("L['k']");
  k_guard->mutable_value()->set_int_value(2);
  k_guard->set_reason("k was specialised as a constant");
  ir::GraphBreak* br = c.add_graph_breaks();
  br->set_reason(ir::GraphBreak::UNSUPPORTED_CALL);
  br->set_message("call to builtin print");
  br->mutable_location()->set_file("example.py");
  br->mutable_location()->set_line(5);
  br->mutable_location()->set_text("print('between graphs')");
  br->set_opcode("CALL");
  br->set_offset(42);
  br->set_hint("move the print out of the compiled function");
  ir::BytecodeInstruction* ins = c.mutable_original_bytecode()->add_instructions();
  ins->set_offset(0);
  ins->set_opname("RESUME");
  ins->set_line(3);
  return c;
}

bool Equal(const ir::Capture& a, const ir::Capture& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

TEST_CASE("a capture round-trips through binary, text and JSON", "[ir]") {
  const ir::Capture c = MakeCapture();
  DYNAMO_REQUIRE_OK(graph::CheckCapture(c));

  std::string binary;
  REQUIRE(c.SerializeToString(&binary));
  ir::Capture from_binary;
  REQUIRE(from_binary.ParseFromString(binary));
  CHECK(Equal(c, from_binary));

  std::string text;
  REQUIRE(google::protobuf::TextFormat::PrintToString(c, &text));
  ir::Capture from_text;
  REQUIRE(google::protobuf::TextFormat::ParseFromString(text, &from_text));
  CHECK(Equal(c, from_text));

  std::string json;
  REQUIRE(google::protobuf::util::MessageToJsonString(c, &json).ok());
  ir::Capture from_json;
  REQUIRE(google::protobuf::util::JsonStringToMessage(json, &from_json).ok());
  CHECK(Equal(c, from_json));

  // Deterministic output: the same capture serialises to the same bytes.
  std::string again;
  google::protobuf::io::StringOutputStream stream(&again);
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    REQUIRE(from_json.SerializeToCodedStream(&coded));
  }
  CHECK(again == binary);
}

TEST_CASE("tensor metadata converts to the IR and back", "[ir]") {
  ops::TensorMeta m = ops::TensorMeta::Contiguous(ops::DType::kInt32, {2, 0, 5});
  m.requires_grad = false;
  m.device = ops::Device{"cuda", 1};
  absl::StatusOr<ops::TensorMeta> back = ops::FromProto(ops::ToProto(m));
  DYNAMO_REQUIRE_OK(back);
  CHECK(*back == m);
}

TEST_CASE("registry results become node metadata the checker accepts", "[ir]") {
  const ops::Value x(ops::TensorMeta::Contiguous(ops::DType::kFloat32, {4, 6}));
  absl::StatusOr<ops::Value> parts =
      ops::DefaultRegistry().Infer("Tensor.split", {x, ops::Value(4)}, {{"dim", ops::Value(1)}});
  DYNAMO_REQUIRE_OK(parts);
  ir::Graph g;
  g.set_name("graph_0");
  g.add_inputs("x");
  AddNode(g, "x", Node::PLACEHOLDER, "x", x.as_tensor());
  Node* split = g.add_nodes();
  split->set_name("split");
  split->set_kind(Node::CALL_METHOD);
  split->set_target("Tensor.split");
  *split->add_args() = NodeRef("x");
  split->add_args()->set_int_value(4);
  absl::StatusOr<ir::ValueMeta> meta = ops::ToValueMeta(*parts);
  DYNAMO_REQUIRE_OK(meta);
  *split->mutable_meta() = *meta;
  CHECK(split->meta().tuple().items_size() == 2);
  CHECK(split->meta().tuple().items(1).tensor().sizes(1).size() == 2);
  absl::StatusOr<ops::Value> dim = ops::DefaultRegistry().Infer("Tensor.dim", {x});
  DYNAMO_REQUIRE_OK(dim);
  Node* d = g.add_nodes();
  d->set_name("dim");
  d->set_kind(Node::CALL_METHOD);
  d->set_target("Tensor.dim");
  *d->add_args() = NodeRef("x");
  absl::StatusOr<ir::ValueMeta> dim_meta = ops::ToValueMeta(*dim);
  DYNAMO_REQUIRE_OK(dim_meta);
  *d->mutable_meta() = *dim_meta;
  CHECK(d->meta().constant().int_value() == 2);
  Node* out = g.add_nodes();
  out->set_name("output");
  out->set_kind(Node::OUTPUT);
  out->set_target("output");
  *out->add_args() = NodeRef("split");
  DYNAMO_REQUIRE_OK(graph::CheckGraph(g));
}

// Each case breaks one thing and names what the message must mention.
TEST_CASE("a graph's subgraphs are checked and read by GET_ATTR nodes", "[ir]") {
  // torch.cond's branches: a subgraph and the GET_ATTR node that reads it.
  ir::Capture c = MakeCapture();
  ir::Graph branch = c.graphs(0);
  branch.set_name("cond_true");
  *c.mutable_graphs(0)->add_subgraphs() = branch;
  ir::Graph* g = c.mutable_graphs(0);
  g->mutable_nodes()->Add();
  for (int i = g->nodes_size() - 1; i > 1; --i) g->mutable_nodes()->SwapElements(i, i - 1);  // after the placeholder
  Node& read = *g->mutable_nodes(1);
  read.set_name("cond_true");
  read.set_kind(Node::GET_ATTR);
  read.set_target("cond_true");
  read.mutable_meta()->set_graph("cond_true");
  DYNAMO_REQUIRE_OK(graph::CheckCapture(c));
  read.mutable_meta()->set_graph("cond_false");  // metadata and target disagree
  CHECK_FALSE(graph::CheckCapture(c).ok());
}

TEST_CASE("the checker rejects broken captures with a message naming the culprit", "[ir]") {
  struct Broken {
    const char* what;
    void (*breaker)(ir::Capture&);
    const char* message;
  };
  const Broken cases[] = {
      {"dangling node reference",
       [](ir::Capture& c) {
         c.mutable_graphs(0)->mutable_nodes(4)->mutable_args(0)->set_node("nope");
       },
       "node 'mul', argument 0: refers to unknown node 'nope'"},
      {"forward reference",
       [](ir::Capture& c) {
         c.mutable_graphs(0)->mutable_nodes(1)->mutable_args(0)->set_node("add");
       },
       "node 'sin', argument 0: refers to unknown node 'add'"},
      {"reference nested in a list",
       [](ir::Capture& c) {
         c.mutable_graphs(0)
             ->mutable_nodes(3)
             ->mutable_args(1)
             ->mutable_list()
             ->mutable_items(0)
             ->set_node("ghost");
       },
       "node 'getitem', argument 1[0]: refers to unknown node 'ghost'"},
      {"missing metadata",
       [](ir::Capture& c) { c.mutable_graphs(0)->mutable_nodes(2)->clear_meta(); },
       "node 'sum_1': missing metadata"},
      {"metadata without dtype",
       [](ir::Capture& c) {
         c.mutable_graphs(0)->mutable_nodes(1)->mutable_meta()->mutable_tensor()->clear_dtype();
       },
       "node 'sin': tensor metadata has no valid dtype"},
      {"unknown kind",
       [](ir::Capture& c) {
         c.mutable_graphs(0)->mutable_nodes(5)->set_kind(static_cast<Node::Kind>(42));
       },
       "node 'add': unknown kind 42"},
      {"unset kind",
       [](ir::Capture& c) {
         c.mutable_graphs(0)->mutable_nodes(5)->set_kind(Node::KIND_UNSPECIFIED);
       },
       "node 'add': unknown kind 0"},
      {"duplicate node name",
       [](ir::Capture& c) { c.mutable_graphs(0)->mutable_nodes(2)->set_name("sin"); },
       "node 'sin': name is not unique"},
      {"no output node", [](ir::Capture& c) { c.mutable_graphs(0)->mutable_nodes()->RemoveLast(); },
       "graph 'graph_0': has 0 OUTPUT nodes"},
      {"dangling graph output",
       [](ir::Capture& c) { c.mutable_graphs(0)->mutable_outputs(0)->set_node("gone"); },
       "graph 'graph_0', output 0: refers to unknown node 'gone'"},
      {"input that is not a placeholder",
       [](ir::Capture& c) { c.mutable_graphs(0)->set_inputs(0, "sin"); },
       "input 'sin' is not a placeholder node"},
      {"no IR version", [](ir::Capture& c) { c.clear_ir_version(); }, "ir_version is not set"},
      {"future IR version",
       [](ir::Capture& c) { c.set_ir_version(static_cast<ir::IrVersion>(99)); },
       "is newer than this reader"},
      {"guard without kind", [](ir::Capture& c) { c.mutable_guards(0)->clear_kind(); },
       "guard 0 ('L['x']'): unknown kind 0"},
      {"break without reason", [](ir::Capture& c) { c.mutable_graph_breaks(0)->clear_reason(); },
       "graph break 0: unknown reason"},
      {"strides that do not match sizes",
       [](ir::Capture& c) {
         c.mutable_graphs(0)
             ->mutable_nodes(1)
             ->mutable_meta()
             ->mutable_tensor()
             ->mutable_strides()
             ->RemoveLast();
       },
       "node 'sin': tensor metadata has 2 sizes but 1 strides"},
      {"scalar metadata without a type",
       [](ir::Capture& c) { c.mutable_graphs(0)->mutable_nodes(1)->mutable_meta()->mutable_scalar(); },
       "node 'sin': scalar metadata has no type"},
      {"subgraph metadata on a call",
       [](ir::Capture& c) { c.mutable_graphs(0)->mutable_nodes(1)->mutable_meta()->set_graph("sin"); },
       "node 'sin': subgraph metadata on a node that is not the GET_ATTR of one of the graph's subgraphs"},
      {"a GET_ATTR of a subgraph the graph lacks",
       [](ir::Capture& c) {
         Node* n = c.mutable_graphs(0)->mutable_nodes(1);
         n->set_kind(Node::GET_ATTR);
         n->set_target("sin");
         n->clear_args();
         n->mutable_meta()->set_graph("sin");
       },
       "node 'sin': subgraph metadata on a node that is not the GET_ATTR of one of the graph's subgraphs"},
      {"two subgraphs of one name",
       [](ir::Capture& c) {
         ir::Graph sub = c.graphs(0);
         sub.set_name("branch");
         *c.mutable_graphs(0)->add_subgraphs() = sub;
         *c.mutable_graphs(0)->add_subgraphs() = sub;
       },
       "graph 'graph_0', subgraph 'branch': name is not unique"},
      {"a broken subgraph",
       [](ir::Capture& c) {
         ir::Graph sub = c.graphs(0);
         sub.set_name("branch");
         sub.mutable_nodes(4)->mutable_args(0)->set_node("nope");
         *c.mutable_graphs(0)->add_subgraphs() = sub;
       },
       "graph 'branch', node 'mul', argument 0: refers to unknown node 'nope'"},
      {"subgraphs nested past the bound",
       [](ir::Capture& c) {
         ir::Graph leaf = c.graphs(0);
         for (int depth = 0; depth < 40; ++depth) {
           ir::Graph parent = c.graphs(0);
           parent.set_name(absl::StrCat("level_", depth));
           leaf.set_name(absl::StrCat("inner_", depth));
           *parent.add_subgraphs() = std::move(leaf);
           leaf = std::move(parent);
         }
         *c.mutable_graphs(0)->add_subgraphs() = std::move(leaf);
       },
       "subgraphs nest deeper than 32"},
  };
  for (const Broken& b : cases) {
    INFO(b.what);
    ir::Capture c = MakeCapture();
    b.breaker(c);
    absl::Status s = graph::CheckCapture(c);
    INFO(s.message());
    REQUIRE_FALSE(s.ok());
    CHECK(std::string(s.message()).find(b.message) != std::string::npos);
  }
}

}  // namespace
}  // namespace dynamo
