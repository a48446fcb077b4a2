#include "lib/capture/capture.h"

#include <Python.h>

#include <functional>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/disassemble.h"
#include "lib/capture/input_spec.h"
#include "lib/capture/live.h"
#include "lib/rewrite/rewrite.h"
#include "lib/graph/checker.h"
#include "lib/ops/registry.h"
#include "lib/python/error.h"
#include "lib/python/interpreter.h"
#include "lib/python/script.h"
#include "lib/trace/translator.h"

namespace dynamo::capture {
namespace {

using python::Object;

constexpr absl::string_view kBreakPayload = "dynamo.capture/graph_break";

// The process-wide interpreter and op registry (see capture.h).
absl::Status EnsureRuntime() {
  static absl::Status status = [] {
    absl::StatusOr<std::unique_ptr<python::Interpreter>> py = python::Interpreter::Start();
    if (!py.ok()) return py.status();
    py->release();  // lives until exit on purpose
    return absl::OkStatus();
  }();
  return status;
}

// Example inputs from a real value: tensors become metadata.
absl::StatusOr<trace::TraceInput> FromExample(const Object& value) {
  absl::StatusOr<Object> torch = python::Import("torch");
  if (!torch.ok()) return torch.status();
  Object tensor_type = *python::GetAttr(*torch, "Tensor");
  PyObject* v = value.get();
  if (PyObject_IsInstance(v, tensor_type.get()) == 1) {
    return trace::TraceInput::Object(value);  // the translator keeps its metadata only
  }
  if (PyList_Check(v) || (PyTuple_Check(v) && Py_TYPE(v) == &PyTuple_Type)) {
    std::vector<trace::TraceInput> items;
    std::vector<Object> elements = *python::AsVector(value);
    for (const Object& e : elements) {
      absl::StatusOr<trace::TraceInput> item = FromExample(e);
      if (!item.ok()) return item.status();
      items.push_back(*std::move(item));
    }
    return PyList_Check(v) ? trace::TraceInput::List(std::move(items))
                           : trace::TraceInput::Tuple(std::move(items));
  }
  if (PyDict_Check(v)) {
    std::vector<std::string> keys;
    std::vector<trace::TraceInput> items;
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    while (PyDict_Next(v, &pos, &key, &item)) {
      absl::StatusOr<std::string> k = python::AsString(Object::Borrow(key));
      if (!k.ok()) return absl::InvalidArgumentError("example input dicts need str keys");
      absl::StatusOr<trace::TraceInput> t = FromExample(Object::Borrow(item));
      if (!t.ok()) return t.status();
      keys.push_back(*k);
      items.push_back(*std::move(t));
    }
    return trace::TraceInput::Dict(std::move(keys), std::move(items));
  }
  return trace::TraceInput::Object(value);
}

absl::Status ExampleInputs(const Object& module, const std::string& name,
                           trace::TraceRequest& request) {
  absl::StatusOr<python::Target> fn = python::ResolveTarget(module, name);
  if (!fn.ok()) return absl::InvalidArgumentError(absl::StrCat("--example-inputs: ", fn.status().message()));
  absl::StatusOr<Object> examples = python::Call(fn->callable);
  if (!examples.ok()) {
    return absl::Status(examples.status().code(),
                        absl::StrCat("calling ", name, "() for example inputs failed: ",
                                     examples.status().message()));
  }
  Object args = *examples, kwargs;
  PyObject* e = examples->get();
  if (PyDict_Check(e)) {
    args = python::MakeTuple({});
    kwargs = *examples;
  } else if (PyTuple_Check(e) && PyTuple_GET_SIZE(e) == 2 && PyTuple_Check(PyTuple_GET_ITEM(e, 0)) &&
             PyDict_Check(PyTuple_GET_ITEM(e, 1))) {
    args = Object::Borrow(PyTuple_GET_ITEM(e, 0));
    kwargs = Object::Borrow(PyTuple_GET_ITEM(e, 1));
  } else if (!PyTuple_Check(e) && !PyList_Check(e)) {
    args = python::MakeTuple({*examples});  // a single argument
  }
  std::vector<Object> positional = *python::AsVector(args);
  for (const Object& a : positional) {
    absl::StatusOr<trace::TraceInput> in = FromExample(a);
    if (!in.ok()) return in.status();
    request.args.push_back(*std::move(in));
  }
  if (kwargs) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs.get(), &pos, &key, &value)) {
      absl::StatusOr<std::string> k = python::AsString(Object::Borrow(key));
      absl::StatusOr<trace::TraceInput> in = FromExample(Object::Borrow(value));
      if (!k.ok() || !in.ok()) return absl::InvalidArgumentError("bad example keyword argument");
      request.kwargs.emplace_back(*k, *std::move(in));
    }
  }
  return absl::OkStatus();
}

// The tensor's bytes, contiguous, as the loader reads them back.
absl::StatusOr<std::string> TensorBytes(const Object& tensor) {
  absl::StatusOr<Object> detached = python::CallMethod(tensor, "detach");
  absl::StatusOr<Object> cpu = detached.ok() ? python::CallMethod(*detached, "cpu") : detached.status();
  absl::StatusOr<Object> c = cpu.ok() ? python::CallMethod(*cpu, "contiguous") : cpu.status();
  if (!c.ok()) return c.status();
  absl::StatusOr<Object> ptr = python::CallMethod(*c, "data_ptr");
  absl::StatusOr<Object> numel = python::CallMethod(*c, "numel");
  absl::StatusOr<Object> size = python::CallMethod(*c, "element_size");
  if (!ptr.ok() || !numel.ok() || !size.ok()) return absl::InternalError("reading tensor storage");
  uintptr_t address = static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(ptr->get()));
  size_t bytes = static_cast<size_t>(*python::AsLong(*numel) * *python::AsLong(*size));
  if (bytes == 0) return std::string();
  // `c` keeps the storage alive while it is copied.
  return std::string(reinterpret_cast<const char*>(address), bytes);
}

std::string VersionOf(const char* module, const char* attribute) {
  absl::StatusOr<Object> m = python::Import(module);
  absl::StatusOr<Object> v = m.ok() ? python::GetAttr(*m, attribute) : m.status();
  absl::StatusOr<std::string> s = v.ok() ? python::AsString(*v) : v.status();
  return s.ok() ? *s : "";
}

absl::StatusOr<std::string> Marshal(const Object& code) {
  absl::StatusOr<Object> marshal = python::Import("marshal");
  if (!marshal.ok()) return marshal.status();
  absl::StatusOr<Object> bytes = python::CallMethod(*marshal, "dumps", {code});
  if (!bytes.ok()) return bytes.status();
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(bytes->get(), &data, &size) != 0) return python::FetchError("marshal");
  return std::string(data, static_cast<size_t>(size));
}

// A resume function's argument as a trace input, when the trace knew it
// without running anything: tensors by metadata, real objects as they are.
std::optional<trace::TraceInput> KnownInput(const trace::VarPtr& v) {
  using trace::VarKind;
  if (!v) return std::nullopt;
  if (v->kind == VarKind::kTensor) return trace::TraceInput::Tensor(v->meta);
  if (v->object && v->kind != VarKind::kList && v->kind != VarKind::kDict) return trace::TraceInput::Object(v->object);
  if (v->kind == VarKind::kTuple || v->kind == VarKind::kList) {
    std::vector<trace::TraceInput> items;
    for (const trace::VarPtr& i : v->items) {
      std::optional<trace::TraceInput> in = KnownInput(i);
      if (!in) return std::nullopt;
      items.push_back(*std::move(in));
    }
    return v->kind == VarKind::kTuple ? trace::TraceInput::Tuple(std::move(items))
                                      : trace::TraceInput::List(std::move(items));
  }
  return std::nullopt;
}

// Offline capture past graph breaks: the function, then each resume
// function whose arguments are known (a branch on a tensor: both sides), each
// traced with breaks allowed and rewritten in turn.
absl::Status CaptureBroken(const trace::TraceRequest& top, const ops::Registry& registry,
                           ir::Capture& c, std::vector<trace::GraphAttribute>& attributes) {
  constexpr int kMaxTraces = 64;
  struct Pending {
    trace::TraceRequest request;
    int resume = -1;  // index into c.resume_functions(), -1 for the function itself
  };
  std::vector<Pending> work = {{top, -1}};
  python::Object globals = python::Object::Borrow(PyFunction_GetGlobals(top.function.get()));
  int id = 0;
  for (size_t w = 0; w < work.size(); ++w) {
    const Pending p = work[w];
    const std::string caller = p.resume < 0 ? "" : c.resume_functions(p.resume).name();
    trace::BreakInfo why;
    absl::StatusOr<trace::TraceResult> traced = trace::Trace(p.request, registry, &why);
    if (!traced.ok()) {
      if (p.resume < 0) return traced.status();
      c.mutable_resume_functions(p.resume)->set_note(std::string(traced.status().message()));
      if (!why.message.empty()) *c.add_graph_breaks() = ToProto(why);
      continue;
    }
    if (traced->break_info) *c.add_graph_breaks() = ToProto(*traced->break_info);
    if (p.resume < 0) {
      for (ir::Guard& g : traced->guards) *c.add_guards() = g;
      for (ir::InputSpec& spec : traced->inputs) *c.add_inputs() = spec;
    }
    auto note = [&](const std::string& text) {
      if (p.resume < 0) {
        c.set_graph_index(-1);
      } else {
        c.mutable_resume_functions(p.resume)->set_note(text);
      }
    };
    if (!traced->stop->progress && traced->stop->kind == trace::StopState::Kind::kRegion) {
      note("runs as plain Python: nothing to capture before its break");
      continue;
    }
    absl::StatusOr<rewrite::Rewritten> rw = rewrite::Rewrite(*traced, {.id = id++});
    if (!rw.ok()) {
      if (p.resume < 0) return rw.status();
      note(std::string(rw.status().message()));
      continue;
    }
    int graph_index = -1;
    if (!rw->graph_name.empty()) {
      graph_index = c.graphs_size();
      ir::Graph* g = c.add_graphs();
      *g = traced->graph;
      g->set_name(rw->graph_name);  // the global the rewritten code calls it by
      for (trace::GraphAttribute& a : traced->attributes) {
        bool seen = false;
        for (const trace::GraphAttribute& b : attributes) seen |= b.target == a.target;
        if (!seen) attributes.push_back(a);
      }
    }
    absl::StatusOr<std::string> bytes = Marshal(rw->code);
    if (!bytes.ok()) return bytes.status();
    if (p.resume < 0) {
      c.set_graph_index(graph_index);
      c.set_rewritten_code(*bytes);
      ListBytecode(rw->code, c.mutable_rewritten_bytecode());
    } else {
      ir::ResumeFunction* r = c.mutable_resume_functions(p.resume);
      r->set_traced(true);
      r->set_graph_index(graph_index);
      r->set_rewritten_code(*bytes);
      ListBytecode(rw->code, r->mutable_rewritten_bytecode());
    }
    for (const rewrite::ResumeFunction& rf : rw->resumes) {
      ir::ResumeFunction* r = c.add_resume_functions();
      const int index = c.resume_functions_size() - 1;
      r->set_name(rf.global_name);
      r->set_caller(caller);
      r->set_offset(rf.offset);
      r->set_captured(rf.capture);
      r->set_takes_closure(rf.takes_closure);
      r->set_graph_index(-1);
      ListBytecode(rf.code, r->mutable_bytecode());
      absl::StatusOr<std::string> code_bytes = Marshal(rf.code);
      if (!code_bytes.ok()) return code_bytes.status();
      r->set_code(*code_bytes);
      if (!rf.capture) continue;
      if (rf.takes_closure) {
        r->set_note("traced when it runs: it shares the caller's cells");
        continue;
      }
      if (static_cast<int>(work.size()) >= kMaxTraces) {
        r->set_note("traced when it runs: the capture already holds 64 traces");
        continue;
      }
      trace::TraceRequest next;
      next.allow_breaks = true;
      bool known = true;
      for (const trace::VarPtr& a : rf.arguments) {
        std::optional<trace::TraceInput> in = KnownInput(a);
        // print() returns None: the one call result known without running it.
        if (!a && rf.called && rf.called->kind == trace::VarKind::kBuiltin && rf.called->name == "print") {
          in = trace::TraceInput::Object(python::None());
        }
        if (!in) {
          known = false;
          break;
        }
        next.args.push_back(*std::move(in));
      }
      if (!known) {
        r->set_note(absl::StrCat("traced when it runs: it takes the result of ", rf.after_opcode,
                                 ", known only then"));
        continue;
      }
      next.function = Object::Steal(PyFunction_New(rf.code.get(), globals.get()));
      if (!next.function) return python::FetchError("making a resume function");
      work.push_back({std::move(next), index});
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Captured> CaptureFunction(const CaptureOptions& options) {
  if (absl::Status s = EnsureRuntime(); !s.ok()) return s;
  PyGILState_STATE gil = PyGILState_Ensure();
  struct Release {
    PyGILState_STATE state;
    ~Release() { PyGILState_Release(state); }
  } release{gil};

  // Specs are checked before the script runs: a typo costs no import.
  trace::TraceRequest request;
  DimSpecs dims;
  for (const std::string& text : options.dims) {
    absl::StatusOr<DimSpec> d = ParseDimSpec(text);
    if (!d.ok()) return d.status();
    if (dims.contains(d->name)) return absl::InvalidArgumentError(absl::StrCat("--dim ", d->name, " given twice"));
    request.dynamic.constraints.push_back({d->name, d->min, d->max, d->multiple});
    dims.emplace(d->name, *std::move(d));
  }
  absl::flat_hash_set<std::string> named;  // the symbols the specs use
  std::function<void(const trace::TraceInput&)> collect = [&](const trace::TraceInput& in) {
    for (const std::string& s : in.dim_symbols) {
      if (!s.empty()) named.insert(s);
    }
    for (const trace::TraceInput& item : in.items) collect(item);
  };
  for (const std::string& spec : options.inputs) {
    absl::StatusOr<ParsedInput> parsed = ParseInputSpec(spec, dims);
    if (!parsed.ok()) return parsed.status();
    collect(parsed->value);
    if (!parsed.ok()) return parsed.status();
    if (parsed->name.empty()) {
      if (!request.kwargs.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("positional input '", spec, "' after a named one"));
      }
      request.args.push_back(std::move(parsed->value));
    } else {
      request.kwargs.emplace_back(parsed->name, std::move(parsed->value));
    }
  }
  if (!options.inputs.empty() && !options.example_inputs.empty()) {
    return absl::InvalidArgumentError("give --input specs or --example-inputs, not both");
  }
  for (const std::string& text : options.dims) {
    std::string name(absl::StripAsciiWhitespace(text.substr(0, text.find('='))));
    if (!named.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat("--dim ", name, ": no --input names a size ", name));
    }
  }

  absl::StatusOr<Object> module = python::ImportScript(options.script, {.as_main = options.as_main});
  if (!module.ok()) return module.status();
  absl::StatusOr<python::Target> target = python::ResolveTarget(*module, options.function);
  if (!target.ok()) return target.status();
  if (!options.example_inputs.empty()) {
    if (absl::Status s = ExampleInputs(*module, options.example_inputs, request); !s.ok()) return s;
  }
  request.function = target->function;
  request.self = target->self;

  const ops::Registry& registry = ops::DefaultRegistry();
  if (!registry.status().ok()) {  // a libdynamo bug, reported on every call
    return absl::InternalError(absl::StrCat("the op registry failed to build: ", registry.status().message()));
  }
  trace::BreakInfo why;
  // A capture of one whole graph keeps numbers read from tensors in it, as
  // torch._dynamo's fullgraph and torch.export do; the broken capture
  // below breaks at them, as torch._dynamo does by default.
  request.capture_scalar_outputs = true;
  absl::StatusOr<trace::TraceResult> traced = trace::Trace(request, registry, &why);
  Captured out;
  ir::Capture& c = out.capture;
  std::vector<trace::GraphAttribute> attributes;
  const bool broke = !traced.ok() && traced.status().code() == absl::StatusCode::kUnimplemented &&
                     !why.message.empty();
  if (broke && options.allow_breaks) {
    request.allow_breaks = true;
    request.capture_scalar_outputs = false;
    if (absl::Status s = CaptureBroken(request, registry, c, attributes); !s.ok()) {
      // Nothing could be continued (the break comes before anything ran):
      // the same located error as without --allow-breaks.
      if (s.code() == absl::StatusCode::kUnimplemented) {
        s.SetPayload(kBreakPayload, absl::Cord(ToProto(why).SerializeAsString()));
      }
      return s;
    }
  } else if (!traced.ok()) {
    absl::Status status = traced.status();
    if (broke) status.SetPayload(kBreakPayload, absl::Cord(ToProto(why).SerializeAsString()));
    return status;
  } else {
    for (ir::InputSpec& spec : traced->inputs) *c.add_inputs() = std::move(spec);
    *c.add_graphs() = std::move(traced->graph);
    c.mutable_guards()->Swap(&traced->guards);  // the capture's first and only guards
    attributes = std::move(traced->attributes);
  }
  c.set_ir_version(ir::IR_VERSION_CURRENT);
  c.set_python_version(absl::StrCat(PY_MAJOR_VERSION, ".", PY_MINOR_VERSION, ".", PY_MICRO_VERSION));
  c.set_torch_version(VersionOf("torch", "__version__"));
  absl::StatusOr<bytecode::DecodedCode> code = bytecode::Decode(target->code, {.nested = false});
  if (!code.ok()) return code.status();
  c.set_source_file(code->filename);
  c.set_function_name(code->qualname);
  c.set_first_line(code->first_line);
  for (const bytecode::Instruction& in : code->instructions) {
    ir::BytecodeInstruction* b = c.mutable_original_bytecode()->add_instructions();
    b->set_offset(in.offset);
    b->set_opname(std::string(in.name));
    b->set_arg(in.arg);
    b->set_argrepr(bytecode::ArgRepr(*code, in));
    b->set_line(in.starts_line > 0 ? in.starts_line : 0);
  }
  for (const trace::GraphAttribute& a : attributes) {
    ir::GraphAttribute* attr = c.add_attributes();
    attr->set_target(a.target);
    attr->set_source(a.source);
    for (const ir::Graph& g : c.graphs()) {
      for (const ir::Node& n : g.nodes()) {
        if (n.kind() == ir::Node::GET_ATTR && n.target() == a.target) *attr->mutable_meta() = n.meta().tensor();
      }
    }
    if (options.weights == Weights::kNone) continue;
    absl::StatusOr<std::string> bytes = TensorBytes(a.value);
    if (!bytes.ok()) return bytes.status();
    if (options.weights == Weights::kEmbed) {
      attr->set_data(*std::move(bytes));
    } else {
      // 64-byte aligned, so a reader can map the file and view it in place.
      out.external_data.resize((out.external_data.size() + 63) / 64 * 64, '\0');
      attr->mutable_external()->set_path(options.external_path);
      attr->mutable_external()->set_offset(static_cast<int64_t>(out.external_data.size()));
      attr->mutable_external()->set_length(static_cast<int64_t>(bytes->size()));
      out.external_data += *bytes;
    }
  }
  if (absl::Status s = graph::CheckCapture(c); !s.ok()) {
    return absl::InternalError(absl::StrCat("libdynamo produced an invalid capture (a bug): ", s.message()));
  }
  return out;
}

std::optional<ir::GraphBreak> GraphBreakOf(const absl::Status& status) {
  auto payload = status.GetPayload(kBreakPayload);
  if (!payload) return std::nullopt;
  ir::GraphBreak b;
  if (!b.ParseFromString(std::string(*payload))) return std::nullopt;
  return b;
}

absl::StatusOr<std::string> Serialize(const ir::Capture& capture, absl::string_view format) {
  std::string out;
  if (format == "pb") {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!capture.SerializeToCodedStream(&coded)) return absl::InternalError("serialising the capture");
  } else if (format == "pbtxt") {
    if (!google::protobuf::TextFormat::PrintToString(capture, &out)) {
      return absl::InternalError("printing the capture");
    }
  } else if (format == "json") {
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    o.preserve_proto_field_names = true;
    auto status = google::protobuf::util::MessageToJsonString(capture, &out, o);
    if (!status.ok()) return absl::InternalError(std::string(status.message()));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown format '", format, "' (pb, pbtxt, json)"));
  }
  return out;
}

}  // namespace dynamo::capture
