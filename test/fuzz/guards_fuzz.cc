// Fuzzes the guard-program compiler and evaluator (lib/guards) on mutated
// guard lists: the input is a text-format ir::Capture whose `guards` are
// compiled against a fixed frame of ordinary Python values (ints, nested
// containers, an object, a module, a function, a class, a tensor when torch
// imports), then checked on that frame and on the frame with one local
// rebound.
//
// Properties: compiling never crashes; a compiled program passes on the frame
// it was compiled against (Compile refuses guards that do not hold there);
// on any frame Check, Explain and FirstFailing agree.
#include <Python.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "lib/guards/evaluator.h"
#include "lib/python/object.h"
#include "proto/dynamo_ir.pb.h"
#include "test/fuzz/fuzz_support.h"

namespace {

using dynamo::python::Object;

constexpr const char* kFrame = R"PY(
import math, os, types
class Config:
    depth = 3
    def method(self):
        return self.depth
def helper(x):
    return x
cfg = Config()
cfg.name = 'relu'
LOCALS = {
    'a': 1, 'b': [1, 2, (3, 'x')], 'c': {'k': 2.5, 'n': None, 7: 'seven'},
    'o': types.SimpleNamespace(p=3, q=[4], r=cfg), 'm': math, 'f': helper,
    'cls': Config, 'cfg': cfg, 's': 'str', 'n': None, 'fl': 0.5, 'flag': True,
}
GLOBALS = {'G1': 5, 'math': math, 'os': os, 'Config': Config, '__name__': 'fuzzed'}
if not os.environ.get('DYNAMO_FUZZ_NO_TORCH'):
    try:
        import torch
        LOCALS['t'] = torch.ones(2, 3)
        LOCALS['p'] = torch.nn.Linear(3, 2)
        GLOBALS['torch'] = torch
    except ImportError:
        pass
# What a local is rebound to for the second check.
OTHERS = [2, [1, 2], None, 'str2', 0.25, Config(), (1,), {'k': 2.5}]
)PY";

struct Frame {
  Object locals;
  Object globals;
  Object others;
};

const Frame& GetFrame() {
  static const Frame* frame = [] {
    auto* f = new Frame;
    Object ns = Object::Steal(PyDict_New());
    PyDict_SetItemString(ns.get(), "__builtins__", PyEval_GetBuiltins());
    Object name = Object::Steal(PyUnicode_FromString("fuzzframe"));  // the classes' __module__
    PyDict_SetItemString(ns.get(), "__name__", name.get());
    Object ran = Object::Steal(PyRun_String(kFrame, Py_file_input, ns.get(), ns.get()));
    if (!ran) {
      PyErr_Print();
      dynamo::fuzz::Fail("the frame does not build", 0);
    }
    f->locals = Object::Borrow(PyDict_GetItemString(ns.get(), "LOCALS"));
    f->globals = Object::Borrow(PyDict_GetItemString(ns.get(), "GLOBALS"));
    f->others = Object::Borrow(PyDict_GetItemString(ns.get(), "OTHERS"));
    return f;
  }();
  return *frame;
}

class Quiet : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

// Check, Explain and FirstFailing tell one story.
void CheckConsistent(const dynamo::guards::GuardEvaluator& ev, const dynamo::guards::FrameView& view,
                     size_t size) {
  const bool passed = ev.Check(view);
  const std::optional<std::string> why = ev.Explain(view);
  const int first = ev.FirstFailing(view);
  FUZZ_CHECK(passed == !why.has_value() && passed == (first == -1),
             absl::StrCat("Check says ", passed, ", Explain says '", why.value_or("<passes>"),
                          "', FirstFailing says ", first),
             size);
  FUZZ_CHECK(!PyErr_Occurred(), "a guard check left a Python exception set", size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dynamo::fuzz::EnsurePython();
  PyGILState_STATE gil = PyGILState_Ensure();
  {
    const Frame& frame = GetFrame();
    dynamo::ir::Capture capture;
    google::protobuf::TextFormat::Parser parser;
    Quiet quiet;
    parser.RecordErrorsTo(&quiet);
    parser.SetRecursionLimit(100);
    if (parser.ParseFromString(std::string(reinterpret_cast<const char*>(data), size), &capture)) {
      absl::StatusOr<dynamo::guards::OwnedFrame> owned =
          dynamo::guards::OwnedFrame::FromDict(frame.locals, frame.globals);
      FUZZ_CHECK(owned.ok(), "the fixed frame cannot be made", size);
      absl::StatusOr<dynamo::guards::GuardEvaluator> ev =
          dynamo::guards::GuardEvaluator::Compile(capture.guards(), owned->view());
      FUZZ_CHECK(!PyErr_Occurred(), "compiling left a Python exception set", size);
      if (ev.ok()) {
        FUZZ_CHECK(ev->Check(owned->view()), "a program fails on the frame it was compiled against", size);
        CheckConsistent(*ev, owned->view(), size);
        // Rebind one local (chosen by the input) to another kind of value.
        size_t h = 0;
        for (size_t i = 0; i < size; ++i) h = h * 131 + data[i];
        Object keys = Object::Steal(PyDict_Keys(frame.locals.get()));
        PyObject* key = PyList_GetItem(keys.get(), static_cast<Py_ssize_t>(h % PyList_Size(keys.get())));
        PyObject* other = PyList_GetItem(frame.others.get(),
                                         static_cast<Py_ssize_t>((h / 7) % PyList_Size(frame.others.get())));
        owned->Set(PyUnicode_AsUTF8(key), Object::Borrow(other));
        CheckConsistent(*ev, owned->view(), size);
        owned->Set(PyUnicode_AsUTF8(key), Object());  // unbound
        CheckConsistent(*ev, owned->view(), size);
      }
    }
    PyErr_Clear();
  }
  PyGILState_Release(gil);
  return 0;
}
