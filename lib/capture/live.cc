#include "lib/capture/live.h"

#include <Python.h>

#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/bytecode/disassemble.h"
#include "lib/bytecode/opcodes.h"
#include "lib/graph/checker.h"
#include "lib/ops/registry.h"
#include "lib/python/error.h"

namespace dynamo::capture {

ir::GraphBreak ToProto(const trace::BreakInfo& why) {
  ir::GraphBreak b;
  b.set_reason(why.reason);
  b.set_message(why.message);
  b.mutable_location()->set_file(why.file);
  b.mutable_location()->set_line(why.line);
  b.mutable_location()->set_text(why.text);
  b.set_opcode(why.opcode);
  b.set_offset(why.offset);
  b.set_hint(why.hint);
  return b;
}

void ListBytecode(const python::Object& code, ir::BytecodeListing* out) {
  absl::StatusOr<bytecode::DecodedCode> d = bytecode::Decode(code, {.nested = false});
  if (!d.ok()) return;
  for (const bytecode::Instruction& in : d->instructions) {
    ir::BytecodeInstruction* b = out->add_instructions();
    b->set_offset(in.offset);
    b->set_opname(std::string(in.name));
    b->set_arg(in.arg);
    b->set_argrepr(bytecode::ArgRepr(*d, in));
    b->set_line(in.starts_line > 0 ? in.starts_line : 0);
  }
}

namespace {

// Whether the rewritten code is just "return graph(args...)[k]" (or a tuple
// of outputs): then the call needs no bytecode at all.
void FindDirectCall(const trace::TraceResult& r, LiveCapture& out) {
  const trace::StopState& st = *r.stop;
  if (st.kind != trace::StopState::Kind::kReturn || !r.side_effects.empty() || out.graph_name.empty() ||
      !out.resumes.empty() || st.stack.empty()) {
    return;
  }
  auto output_of = [&](const trace::VarPtr& v) -> int {
    if (!v || !v->is_tensor() || v->is_ndarray) return -1;  // arrays are converted by code
    for (size_t i = 0; i < r.output_nodes.size(); ++i) {
      if (r.output_nodes[i] == v->node) return static_cast<int>(i);
    }
    return -1;
  };
  const trace::VarPtr& value = st.stack.back();
  std::vector<int> outputs;
  bool tuple = false;
  if (int i = output_of(value); i >= 0) {
    outputs.push_back(i);
  } else if (value->kind == trace::VarKind::kTuple && value->fields.empty() && !value->is_size &&
             !value->items.empty()) {
    tuple = true;
    for (const trace::VarPtr& item : value->items) {
      int k = output_of(item);
      if (k < 0) return;
      outputs.push_back(k);
    }
  } else {
    return;
  }
  // Inputs must be plain arguments read straight from the frame.
  const bytecode::DecodedCode& code = *r.code;
  std::vector<bool> cell(code.localsplus.size(), false);
  for (const bytecode::Instruction& in : code.instructions) {
    if (in.opcode == bytecode::generated::kMakeCell) cell[static_cast<size_t>(in.arg)] = true;
  }
  auto* co = reinterpret_cast<PyCodeObject*>(code.code.get());
  const int nargs = co->co_argcount + co->co_kwonlyargcount;
  if (!r.array_placeholders.empty()) return;  // the graph takes tensors over the arrays
  std::vector<int> slots;
  for (const trace::SourcePtr& s : r.placeholder_sources) {
    if (!s || s->kind() != trace::Source::Kind::kLocal) return;
    int slot = -1;
    for (int i = 0; i < nargs; ++i) {
      if (code.localsplus[static_cast<size_t>(i)] == s->name()) slot = i;
    }
    if (slot < 0 || cell[static_cast<size_t>(slot)]) return;
    slots.push_back(slot);
  }
  out.direct = true;
  out.direct_slots = std::move(slots);
  out.direct_outputs = std::move(outputs);
  out.direct_tuple = tuple;
}

}  // namespace

absl::StatusOr<LiveCapture> CaptureCall(const python::Object& function, const python::Object& self,
                                        const python::Object& args, const python::Object& kwargs,
                                        int id, const trace::DynamicShapes& dynamic, bool capture_scalars) {
  if (!function || !PyFunction_Check(function.get())) {
    return absl::InvalidArgumentError("CaptureCall needs a Python function");
  }
  trace::TraceRequest request;
  request.function = function;
  request.self = self;
  request.allow_breaks = true;
  request.capture_scalar_outputs = capture_scalars;
  request.dynamic = dynamic;
  absl::StatusOr<std::vector<python::Object>> items = python::AsVector(args);
  if (!items.ok()) return items.status();
  for (python::Object& a : *items) request.args.push_back(trace::TraceInput::Object(std::move(a)));
  if (kwargs && kwargs.get() != Py_None) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs.get(), &pos, &key, &value)) {
      absl::StatusOr<std::string> k = python::AsString(python::Object::Borrow(key));
      if (!k.ok()) return k.status();
      request.kwargs.emplace_back(*k, trace::TraceInput::Object(python::Object::Borrow(value)));
    }
  }
  const ops::Registry& registry = ops::DefaultRegistry();
  if (!registry.status().ok()) return registry.status();

  trace::BreakInfo why;
  const auto started = std::chrono::steady_clock::now();
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  absl::StatusOr<trace::TraceResult> traced = trace::Trace(request, registry, &why);
  LiveCapture out;
  out.trace_seconds = seconds_since(started);
  const auto rewrite_started = std::chrono::steady_clock::now();
  ir::Capture& c = out.capture;
  c.set_ir_version(ir::IR_VERSION_CURRENT);
  python::Object code = python::Object::Borrow(PyFunction_GetCode(function.get()));
  ListBytecode(code, c.mutable_original_bytecode());
  // What the capture is of, as the offline one says (explain's pictures and
  // the dump folder's .pb files name it).
  const auto* raw = reinterpret_cast<PyCodeObject*>(code.get());
  if (absl::StatusOr<std::string> name = python::AsString(python::Object::Borrow(raw->co_qualname)); name.ok()) {
    c.set_function_name(*name);
  }
  if (absl::StatusOr<std::string> file = python::AsString(python::Object::Borrow(raw->co_filename)); file.ok()) {
    c.set_source_file(*file);
  }
  c.set_first_line(raw->co_firstlineno);
  if (!traced.ok()) {
    if (traced.status().code() != absl::StatusCode::kUnimplemented || why.message.empty()) {
      return traced.status();
    }
    // A break the rewrite cannot continue after (before the first
    // instruction, e.g. while binding arguments): the call runs as it is.
    *c.add_graph_breaks() = ToProto(why);
    out.skip_reason = std::string(traced.status().message());
    return out;
  }
  if (traced->break_info) *c.add_graph_breaks() = ToProto(*traced->break_info);
  c.mutable_guards()->Swap(&traced->guards);  // the capture's first and only guards
  if (!traced->stop) return absl::InternalError("a trace with breaks allowed did not stop");
  if (!traced->stop->progress && traced->stop->kind == trace::StopState::Kind::kRegion) {
    out.skip_reason = traced->break_info ? trace::FormatBreak(*traced->break_info)
                                         : "nothing to capture before the break";
    return out;
  }
  absl::StatusOr<rewrite::Rewritten> rewritten = rewrite::Rewrite(*traced, {.id = id, .live_objects = true});
  if (!rewritten.ok()) {
    if (rewritten.status().code() != absl::StatusCode::kFailedPrecondition) return rewritten.status();
    out.skip_reason = std::string(rewritten.status().message());
    return out;
  }
  for (ir::InputSpec& spec : traced->inputs) *c.add_inputs() = std::move(spec);
  // Each attribute's metadata is its get_attr node's (the last one, as the
  // loader sets it).
  absl::flat_hash_map<absl::string_view, const ir::Node*> get_attr;
  for (const ir::Node& n : traced->graph.nodes()) {
    if (n.kind() == ir::Node::GET_ATTR) get_attr[n.target()] = &n;
  }
  for (const trace::GraphAttribute& a : traced->attributes) {
    ir::GraphAttribute* attr = c.add_attributes();
    attr->set_target(a.target);
    attr->set_source(a.source);
    if (auto it = get_attr.find(a.target); it != get_attr.end()) *attr->mutable_meta() = it->second->meta().tensor();
    out.attributes.emplace_back(a.target, a.value);
  }
  get_attr.clear();
  if (!rewritten->graph_name.empty()) {
    *c.add_graphs() = std::move(traced->graph);
    c.mutable_graphs(0)->set_name(rewritten->graph_name);  // the global the rewritten code calls it by
  }
  ListBytecode(rewritten->code, c.mutable_rewritten_bytecode());
  out.code = rewritten->code;
  out.graph_name = rewritten->graph_name;
  out.resumes = std::move(rewritten->resumes);
  out.objects = std::move(rewritten->objects);
  FindDirectCall(*traced, out);
  out.rewrite_seconds = seconds_since(rewrite_started);
  return out;
}

}  // namespace dynamo::capture
