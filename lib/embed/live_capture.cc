#include "lib/embed/live_capture.h"

#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_split.h"
#include "lib/embed/graph_forward.h"
#include "lib/python/error.h"
#include "lib/python/object.h"

namespace dynamo::embed {
namespace {

using python::Object;

struct LiveCaptureObject {
  PyObject_HEAD
  ir::Capture* capture;  // owned
  PyObject* bytes;       // its serialization, made on the first serialize()
};

PyTypeObject* live_capture_type = nullptr;  // set once by AddLiveCaptureType; leaked

const ir::Capture& CaptureIn(PyObject* self) { return *reinterpret_cast<LiveCaptureObject*>(self)->capture; }

// How deep arguments may nest; the loader's bound (trust.MAX_ARGUMENT_DEPTH).
constexpr int kMaxArgumentDepth = 64;

// Builds forward_table's tuple from one graph's nodes. Each method returns
// null with a Python exception set on failure: ValueError for a graph that
// does not hold together, or whatever the Python hooks raise.
class TableBuilder {
 public:
  TableBuilder(PyObject* local_type, PyObject* resolve, PyObject* constant, const ir::Capture& capture)
      : local_type_(local_type), resolve_(resolve), constant_(constant), capture_(capture) {
    for (const ir::GraphAttribute& a : capture.attributes()) attributes_.insert(a.target());
  }

  Object Build(const ir::Graph& graph) {
    int n_params = 0;
    for (const ir::Node& node : graph.nodes()) n_params += node.kind() == ir::Node::PLACEHOLDER ? 1 : 0;
    std::vector<Object> params, steps, names, targets;
    Object output;
    for (const ir::Node& node : graph.nodes()) {
      if (output) return Fail(node, "comes after the output node");
      if (env_.contains(node.name())) return Fail(node, "a second node of that name");
      Object name = python::FromString(node.name());
      if (!name) return {};
      if (PyUnicode_IsIdentifier(name.get()) != 1) return Fail(node, "is not a plain identifier");
      // Placeholders hold the first slots, wherever they stand.
      const int slot = node.kind() == ir::Node::PLACEHOLDER ? static_cast<int>(params.size())
                                                            : n_params + static_cast<int>(steps.size());
      Object step;
      switch (node.kind()) {
        case ir::Node::PLACEHOLDER: {
          // The forward's parameter names: "self" is the module's, and
          // names like our renames get one of ours ("_v<i>").
          if (node.name() == "self" || node.name().rfind("_v", 0) == 0) {
            name = python::FromString("_v" + std::to_string(params.size() + steps.size()));  // nodes before it
            if (!name) return {};
          }
          params.push_back(name);
          break;
        }
        case ir::Node::OUTPUT: {
          Object args = Args(node);
          if (!args) return {};
          output = PyTuple_GET_SIZE(args.get()) == 1 ? Object::Borrow(PyTuple_GET_ITEM(args.get(), 0)) : args;
          break;
        }
        case ir::Node::GET_ATTR: {
          if (!attributes_.contains(node.target())) return Fail(node, "reads no attribute of the capture");
          std::vector<Object> parts;
          for (absl::string_view part : absl::StrSplit(node.target(), '.')) {
            parts.push_back(python::FromString(std::string(part)));
            if (!parts.back()) return {};
          }
          step = python::MakeTuple({python::FromLong(kStepAttributes), python::MakeTuple(parts), python::MakeTuple({}),
                                    Object::Steal(PyDict_New()), python::FromLong(slot)});
          read_.insert(node.target());
          break;
        }
        case ir::Node::CALL_FUNCTION:
        case ir::Node::CALL_METHOD: {
          const int kind = node.kind() == ir::Node::CALL_FUNCTION ? kStepCall : kStepMethod;
          if (kind == kStepMethod && node.args().empty()) return Fail(node, "a method call without its object");
          Object target = Object::Steal(PyObject_CallFunction(resolve_, "isOO", kind, node.target().c_str(),
                                                              node.inferred_on_meta() ? Py_True : Py_False,
                                                              name.get()));
          Object args = target ? Args(node) : Object();
          Object kwargs = args ? Kwargs(node) : Object();
          if (!kwargs) return {};
          step = python::MakeTuple({python::FromLong(kind), target, args, kwargs, python::FromLong(slot)});
          break;
        }
        default:
          return Fail(node, "is of a kind libdynamo does not write");
      }
      if (node.kind() != ir::Node::PLACEHOLDER && node.kind() != ir::Node::OUTPUT) {
        if (!step) return {};
        steps.push_back(step);
        names.push_back(name);
        targets.push_back(python::FromString(node.target()));
        if (!targets.back()) return {};
      }
      if (node.kind() != ir::Node::OUTPUT) {
        Object local = Object::Steal(PyObject_CallFunction(local_type_, "Oi", name.get(), slot));
        if (!local) return {};
        env_.emplace(node.name(), std::move(local));
      }
    }
    if (!output) {
      PyErr_SetString(PyExc_ValueError, "the graph has no output node");
      return {};
    }
    // The attributes read, in the capture's order (the order FX's module,
    // built from the capture, holds them in).
    std::vector<Object> read;
    for (const ir::GraphAttribute& a : capture_.attributes()) {
      if (read_.erase(a.target()) == 0) continue;
      read.push_back(python::FromString(a.target()));
      if (!read.back()) return {};
    }
    return python::MakeTuple({python::MakeTuple(params), python::MakeTuple(steps), output, python::MakeTuple(names),
                              python::MakeTuple(targets), python::MakeTuple(read)});
  }

 private:
  static Object Fail(const ir::Node& node, const char* what) {
    PyErr_Format(PyExc_ValueError, "node %.100s: %s", node.name().c_str(), what);
    return {};
  }

  Object Args(const ir::Node& node) {
    std::vector<Object> args;
    for (const ir::Argument& a : node.args()) {
      args.push_back(Value(node, a, 0));
      if (!args.back()) return {};
    }
    return python::MakeTuple(args);
  }

  Object Kwargs(const ir::Node& node) {
    Object kwargs = Object::Steal(PyDict_New());
    if (!kwargs) return {};
    for (const ir::KeywordArgument& k : node.kwargs()) {
      Object value = Value(node, k.value(), 0);
      if (!value || PyDict_SetItemString(kwargs.get(), k.name().c_str(), value.get()) != 0) return {};
    }
    return kwargs;
  }

  Object Node(const ir::Node& node, const std::string& name) {
    auto it = env_.find(name);
    if (it == env_.end()) return Fail(node, "an argument is no earlier node");
    return it->second;
  }

  Object Hook(const char* kind, Object value) {
    if (!value) return {};
    return Object::Steal(PyObject_CallFunction(constant_, "sO", kind, value.get()));
  }

  Object Bound(const ir::Node& node, bool has, long long value, const std::string& from) {
    if (!from.empty()) return Node(node, from);
    return has ? python::FromLong(value) : python::None();
  }

  Object Value(const ir::Node& node, const ir::Argument& a, int depth) {
    if (depth > kMaxArgumentDepth) return Fail(node, "arguments nest too deep");
    switch (a.value_case()) {
      case ir::Argument::kNode:
        return Node(node, a.node());
      case ir::Argument::kIntValue:
        return python::FromLong(a.int_value());
      case ir::Argument::kFloatValue:
        return Object::Steal(PyFloat_FromDouble(a.float_value()));
      case ir::Argument::kBoolValue:
        return python::FromBool(a.bool_value());
      case ir::Argument::kStringValue:
        return python::FromString(a.string_value());
      case ir::Argument::kNone:
      case ir::Argument::VALUE_NOT_SET:
        return python::None();
      case ir::Argument::kEllipsis:
        return Object::Borrow(Py_Ellipsis);
      case ir::Argument::kList: {
        std::vector<Object> items;
        for (const ir::Argument& item : a.list().items()) {
          items.push_back(Value(node, item, depth + 1));
          if (!items.back()) return {};
        }
        return a.list().is_tuple() ? python::MakeTuple(items) : python::MakeList(items);
      }
      case ir::Argument::kDict: {
        const ir::ArgumentDict& d = a.dict();
        if (d.keys_size() != d.values_size()) return Fail(node, "a dict with unequal keys and values");
        Object dict = Object::Steal(PyDict_New());
        if (!dict) return {};
        for (int i = 0; i < d.keys_size(); ++i) {
          Object value = Value(node, d.values(i), depth + 1);
          if (!value || PyDict_SetItemString(dict.get(), d.keys(i).c_str(), value.get()) != 0) return {};
        }
        return dict;
      }
      case ir::Argument::kSlice: {
        const ir::Slice& s = a.slice();
        Object start = Bound(node, s.has_start(), s.start(), s.start_node());
        Object stop = start ? Bound(node, s.has_stop(), s.stop(), s.stop_node()) : Object();
        Object step = stop ? Bound(node, s.has_step(), s.step(), s.step_node()) : Object();
        if (!step) return {};
        return Object::Steal(PySlice_New(start.get(), stop.get(), step.get()));
      }
      case ir::Argument::kDtype:
        return Hook("dtype", python::FromLong(a.dtype()));
      case ir::Argument::kMemoryFormat:
        return Hook("memory_format", python::FromLong(a.memory_format()));
      case ir::Argument::kLayout:
        return Hook("layout", python::FromString(a.layout()));
      case ir::Argument::kDevice:
        return Hook("device", python::MakeTuple({python::FromString(a.device().type()), python::FromLong(a.device().index())}));
    }
    return Fail(node, "an argument of a kind libdynamo does not write");
  }

  PyObject* local_type_;  // borrowed, as are the hooks: the call's arguments
  PyObject* resolve_;
  PyObject* constant_;
  const ir::Capture& capture_;
  absl::flat_hash_set<std::string> attributes_;  // the capture's
  absl::flat_hash_set<std::string> read_;        // those get_attr nodes read
  absl::flat_hash_map<std::string, Object> env_;  // node name -> its local_type object
};

PyObject* ForwardTable(PyObject* self, PyObject* args) {
  PyObject *local_type, *resolve, *constant;
  if (!PyArg_ParseTuple(args, "O!OO:forward_table", &PyType_Type, &local_type, &resolve, &constant)) return nullptr;
  const ir::Capture& capture = CaptureIn(self);
  if (capture.graphs_size() == 0 || capture.graphs(0).subgraphs_size() > 0) Py_RETURN_NONE;
  return TableBuilder(local_type, resolve, constant, capture).Build(capture.graphs(0)).release();
}

PyObject* Serialize(PyObject* self, PyObject* /*unused*/) {
  auto* o = reinterpret_cast<LiveCaptureObject*>(self);
  if (o->bytes == nullptr) {
    std::string bytes;
    if (!o->capture->SerializeToString(&bytes)) {
      PyErr_SetString(PyExc_RuntimeError, "LiveCapture: the capture cannot be serialized");
      return nullptr;
    }
    o->bytes = PyBytes_FromStringAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size()));
    if (o->bytes == nullptr) return nullptr;
  }
  return Py_NewRef(o->bytes);
}

PyObject* FunctionName(PyObject* self, void* /*closure*/) { return python::FromString(CaptureIn(self).function_name()).release(); }

// The names of the inputs that are tensors: the graph's placeholders, in order.
PyObject* TensorInputs(PyObject* self, void* /*closure*/) {
  std::vector<Object> names;
  for (const ir::InputSpec& spec : CaptureIn(self).inputs()) {
    if (spec.value_case() != ir::InputSpec::kTensor) continue;
    names.push_back(python::FromString(spec.name()));
    if (!names.back()) return nullptr;
  }
  return python::MakeTuple(names).release();
}

PyObject* HasSymbols(PyObject* self, void* /*closure*/) {
  for (const ir::Guard& g : CaptureIn(self).guards()) {
    if (g.kind() == ir::Guard::SHAPE_ENV) Py_RETURN_TRUE;
  }
  Py_RETURN_FALSE;
}

PyObject* BreakCount(PyObject* self, void* /*closure*/) {
  return PyLong_FromLong(CaptureIn(self).graph_breaks_size());
}

void LiveCaptureDealloc(PyObject* self) {
  auto* o = reinterpret_cast<LiveCaptureObject*>(self);
  delete o->capture;
  Py_XDECREF(o->bytes);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMethodDef kLiveCaptureMethods[] = {
    {"forward_table", ForwardTable, METH_VARARGS,
     "forward_table(local_type, resolve, constant): the graph's GraphForward table, or None "
     "(lib/embed/live_capture.h)."},
    {"serialize", Serialize, METH_NOARGS, "The capture as serialized ir.Capture bytes (made once)."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef kLiveCaptureGetters[] = {
    {"function_name", FunctionName, nullptr, "The captured function's qualified name.", nullptr},
    {"tensor_inputs", TensorInputs, nullptr, "The source names of the graph's tensor inputs, in order.", nullptr},
    {"has_symbols", HasSymbols, nullptr, "Whether a guard is on symbolic sizes (dynamic shapes).", nullptr},
    {"break_count", BreakCount, nullptr, "How many graph breaks the capture records.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot kLiveCaptureSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(LiveCaptureDealloc)},
    {Py_tp_methods, kLiveCaptureMethods},
    {Py_tp_getset, kLiveCaptureGetters},
    {Py_tp_doc, const_cast<char*>("A live capture kept in C++ memory (lib/embed/live_capture.h); "
                                  "only dynamo._C.capture_call makes one.")},
    {0, nullptr},
};

PyType_Spec kLiveCaptureSpec = {"dynamo._C.LiveCapture", sizeof(LiveCaptureObject), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, kLiveCaptureSlots};

}  // namespace

absl::Status AddLiveCaptureType(PyObject* module) {
  if (live_capture_type == nullptr) {
    live_capture_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kLiveCaptureSpec));
    if (live_capture_type == nullptr) return python::FetchError("making dynamo._C.LiveCapture");
  }
  if (PyModule_AddObjectRef(module, "LiveCapture", reinterpret_cast<PyObject*>(live_capture_type)) != 0) {
    return python::FetchError("adding dynamo._C.LiveCapture");
  }
  return absl::OkStatus();
}

Object NewLiveCapture(ir::Capture capture) {
  if (live_capture_type == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "dynamo._C.LiveCapture is not set up");
    return {};
  }
  auto* o = PyObject_New(LiveCaptureObject, live_capture_type);
  if (o == nullptr) return {};
  o->capture = new ir::Capture(std::move(capture));
  o->bytes = nullptr;
  return Object::Steal(reinterpret_cast<PyObject*>(o));
}

const ir::Capture* LiveCaptureOf(PyObject* obj) {
  if (live_capture_type == nullptr || Py_TYPE(obj) != live_capture_type) return nullptr;
  return reinterpret_cast<LiveCaptureObject*>(obj)->capture;
}

}  // namespace dynamo::embed
