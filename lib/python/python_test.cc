// lib/python: the handle's ownership rules, exceptions as Status, importing
// scripts and resolving dotted targets.
#include <Python.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lib/python/error.h"
#include "lib/python/object.h"
#include "lib/python/script.h"
#include "test/test_support.h"

namespace dynamo::python {
namespace {

namespace fs = std::filesystem;

// A fresh directory with the given files, removed at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/dynamo_python_test_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = (path_ / name).string();
    std::ofstream(p) << text;
    return p;
  }

 private:
  fs::path path_;
};

TEST_CASE("Object: steal, borrow, copy and move keep counts exact", "[python]") {
  PyObject* raw = PyList_New(0);  // one reference, ours
  REQUIRE(Py_REFCNT(raw) == 1);
  {
    Object owner = Object::Steal(raw);
    CHECK(Py_REFCNT(raw) == 1);
    Object borrowed = Object::Borrow(raw);
    CHECK(Py_REFCNT(raw) == 2);
    Object copy = borrowed;
    CHECK(Py_REFCNT(raw) == 3);
    Object moved = std::move(copy);
    CHECK(Py_REFCNT(raw) == 3);
    CHECK_FALSE(copy);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    moved = Object();
    CHECK(Py_REFCNT(raw) == 2);
    Py_INCREF(raw);  // keep it alive past the scope to observe the final count
  }
  CHECK(Py_REFCNT(raw) == 1);
  { Object last = Object::Steal(raw); }  // and drop it
  CHECK(Object::Steal(nullptr).get() == nullptr);
}

TEST_CASE("FetchError: one-line message, type and traceback payloads", "[python]") {
  Object module = testing::ModuleFromSource(
      "raiser", "def boom():\n    raise ValueError('bad\\nthing')\n");
  absl::StatusOr<Object> result = CallMethod(module, "boom");
  REQUIRE_FALSE(result.ok());
  std::string message(result.status().message());
  CHECK(message.find("ValueError: bad thing") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  CHECK(PythonExceptionType(result.status()) == "ValueError");
  std::optional<std::string> tb = PythonTraceback(result.status());
  REQUIRE(tb);
  CHECK(tb->find("Traceback (most recent call last)") != std::string::npos);
  CHECK(tb->find("raiser.py\", line 2, in boom") != std::string::npos);
  CHECK(PythonRaiseSite(result.status()) == "raiser.py:2");
  CHECK_FALSE(PyErr_Occurred());

  // The context of a failed call is built without losing the exception.
  absl::StatusOr<Object> failed = Call(*GetAttr(module, "boom"));
  REQUIRE_FALSE(failed.ok());
  CHECK(std::string(failed.status().message()) == "calling boom: ValueError: bad thing");

  absl::Status no_error = FetchError("nothing pending");
  CHECK(no_error.code() == absl::StatusCode::kInternal);
}

TEST_CASE("ImportScript: module name, sys.path, __main__ and failures", "[python]") {
  ScratchDir dir;
  std::string helper = dir.Write("script_helper_mod.py", "VALUE = 41\n");
  std::string script = dir.Write("my_model.py",
                                 "import script_helper_mod\n"
                                 "NAME = __name__\n"
                                 "VALUE = script_helper_mod.VALUE + 1\n"
                                 "if __name__ == '__main__':\n    RAN_MAIN = True\n");
  absl::StatusOr<Object> m = ImportScript(script);
  DYNAMO_REQUIRE_OK(m);
  CHECK(*AsString(*GetAttr(*m, "NAME")) == "my_model");
  CHECK(*AsLong(*GetAttr(*m, "VALUE")) == 42);  // its directory was on sys.path
  CHECK_FALSE(GetAttr(*m, "RAN_MAIN").ok());

  absl::StatusOr<Object> as_main = ImportScript(script, {.as_main = true});
  DYNAMO_REQUIRE_OK(as_main);
  CHECK(*AsString(*GetAttr(*as_main, "NAME")) == "__main__");
  CHECK(GetAttr(*as_main, "RAN_MAIN").ok());

  // A script named like a loaded module must not replace it.
  REQUIRE(Import("json").ok());
  std::string shadow = dir.Write("json.py", "X = 1\n");
  absl::StatusOr<Object> json_script = ImportScript(shadow);
  DYNAMO_REQUIRE_OK(json_script);
  CHECK(*AsString(*GetAttr(*json_script, "__name__")) != "json");
  absl::StatusOr<Object> real_json = Import("json");
  CHECK(GetAttr(*real_json, "dumps").ok());

  absl::StatusOr<Object> missing = ImportScript(dir.Write("x", "") + "_does_not_exist.py");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("does not exist") != std::string::npos);

  absl::StatusOr<Object> syntax = ImportScript(dir.Write("broken.py", "def f(:\n  pass\n"));
  REQUIRE_FALSE(syntax.ok());
  CHECK(std::string(syntax.status().message()).find("SyntaxError") != std::string::npos);
  CHECK(std::string(syntax.status().message()).find("line 1") != std::string::npos);

  absl::StatusOr<Object> raises =
      ImportScript(dir.Write("raises.py", "x = 1\nraise RuntimeError('at import')\n"));
  REQUIRE_FALSE(raises.ok());
  std::string msg(raises.status().message());
  CHECK(msg.find("RuntimeError: at import") != std::string::npos);
  CHECK(msg.find("raises.py:2") != std::string::npos);
  CHECK_FALSE(PyErr_Occurred());
}

TEST_CASE("SurelyLacks: only where getattr is sure to raise, nn.Module's __getattr__ included", "[python]") {
  ScratchDir dir;
  // A stand-in for torch.nn.modules.module (SurelyLacks reads it from
  // sys.modules, never imports it): Module.__getattr__ looks in three dicts.
  std::string script = dir.Write("lacks.py",
                                 "import sys, types\n"
                                 "fake = types.ModuleType('torch.nn.modules.module')\n"
                                 "class Module:\n"
                                 "    def __init__(self):\n"
                                 "        self._parameters, self._buffers, self._modules = {}, {}, {}\n"
                                 "    def __getattr__(self, name):\n"
                                 "        for d in (self._parameters, self._buffers, self._modules):\n"
                                 "            if name in d:\n"
                                 "                return d[name]\n"
                                 "        raise AttributeError(name)\n"
                                 "fake.Module = Module\n"
                                 "sys.modules['torch.nn.modules.module'] = fake\n"
                                 "class Conv(Module):\n    pass\n"
                                 "class Own(Module):\n"
                                 "    def __getattr__(self, name):\n        return 'made up'\n"
                                 "class Plain:\n    pass\n"
                                 "plain, conv, own = Plain(), Conv(), Own()\n"
                                 "named = Conv()\n"
                                 "named._modules['__qualname__'] = 'registered'\n"
                                 "written = Plain()\n"
                                 "written.__qualname__ = 'written'\n"
                                 "def function():\n    pass\n"
                                 "holder = Conv()\n"
                                 "holder._parameters['weight'] = 'w'\n"
                                 "holder._buffers['weight'] = 'shadowed'\n"
                                 "holder._buffers['mean'] = 'm'\n"
                                 "holder._modules['child'] = plain\n"
                                 "holder.training = True\n"
                                 "class Klass:\n"
                                 "    level = 1\n"
                                 "    @classmethod\n"
                                 "    def make(cls):\n        return cls\n"
                                 "instance = Klass()\n"
                                 "instance.own = 2\n"
                                 "class Described(Module):\n"
                                 "    @property\n"
                                 "    def child(self):\n        return 'property'\n"
                                 "described = Described()\n"
                                 "described._modules['child'] = plain\n");
  absl::StatusOr<Object> m = ImportScript(script);
  DYNAMO_REQUIRE_OK(m);
  auto lacks = [&](const char* object, const char* name) {
    absl::StatusOr<Object> o = GetAttr(*m, object);
    REQUIRE(o.ok());
    bool sure = SurelyLacks(o->get(), name);
    CHECK_FALSE(PyErr_Occurred());
    // Never sure where getattr finds it.
    Object got = Object::Steal(PyObject_GetAttrString(o->get(), name));
    if (sure) CHECK_FALSE(got);
    PyErr_Clear();
    return sure;
  };
  CHECK(lacks("plain", "__qualname__"));
  CHECK(lacks("conv", "__qualname__"));      // nn.Module.__getattr__ would raise
  CHECK_FALSE(lacks("named", "__qualname__"));  // ... but finds a submodule of that name
  CHECK_FALSE(lacks("own", "__qualname__"));    // another __getattr__ may answer anything
  CHECK_FALSE(lacks("written", "__qualname__"));  // in the instance dict
  CHECK_FALSE(lacks("function", "__qualname__"));
  CHECK_FALSE(lacks("Conv", "__qualname__"));   // a class has one
  CHECK_FALSE(lacks("conv", "__module__"));     // from its class
  CHECK(lacks("conv", "no_such_attribute"));

  // LookupWithoutPython: what it finds is what getattr finds, and where a
  // class attribute, a descriptor or another __getattr__ has a say it
  // leaves the read to Python.
  auto lookup = [&](const char* object, const char* name) {
    absl::StatusOr<Object> o = GetAttr(*m, object);
    REQUIRE(o.ok());
    Object value;
    Found found = LookupWithoutPython(o->get(), Interned(name), &value);
    CHECK_FALSE(PyErr_Occurred());
    Object got = Object::Steal(PyObject_GetAttrString(o->get(), name));
    PyErr_Clear();
    if (found == Found::kFound) CHECK(value.get() == got.get());
    if (found == Found::kMissing) CHECK_FALSE(got);
    return found;
  };
  CHECK(lookup("holder", "weight") == Found::kFound);  // _parameters before _buffers
  CHECK(lookup("holder", "mean") == Found::kFound);
  CHECK(lookup("holder", "child") == Found::kFound);
  CHECK(lookup("holder", "training") == Found::kFound);  // the instance dict
  CHECK(lookup("holder", "nothing") == Found::kMissing);
  CHECK(lookup("instance", "own") == Found::kFound);
  CHECK(lookup("instance", "level") == Found::kUnknown);     // a class attribute
  CHECK(lookup("Klass", "make") == Found::kUnknown);         // a class's dict holds the classmethod itself
  CHECK(lookup("described", "child") == Found::kUnknown);    // the property wins over _modules
  CHECK(lookup("own", "anything") == Found::kUnknown);       // its own __getattr__
  CHECK(lookup("plain", "nothing") == Found::kMissing);
}

TEST_CASE("IdentityName: what getattr says a class and its module are called", "[python]") {
  ScratchDir dir;
  // A heap class's names are read from the class itself where its
  // metaclass is `type`: renamed classes, a metaclass with its own names,
  // builtin classes and functions still name what getattr names.
  std::string script = dir.Write("names.py",
                                 "class Plain:\n    pass\n"
                                 "class Renamed:\n    pass\n"
                                 "Renamed.__qualname__ = 'Other.Name'\n"
                                 "Renamed.__module__ = 'elsewhere'\n"
                                 "class Meta(type):\n"
                                 "    def __getattribute__(cls, name):\n"
                                 "        return 'FromMeta' if name == '__qualname__' else super().__getattribute__(name)\n"
                                 "class Metaed(metaclass=Meta):\n    pass\n"
                                 "class Nested:\n    class Inner:\n        pass\n"
                                 "class Moduleless:\n    pass\n"
                                 "Moduleless.__module__ = 5\n"
                                 "def function():\n    pass\n"
                                 "objects = [Plain(), Renamed(), Metaed(), Nested.Inner(), Moduleless(), Plain, Renamed,\n"
                                 "           Nested.Inner, function, 3, len, int, object(), Metaed]\n");
  absl::StatusOr<Object> m = ImportScript(script);
  DYNAMO_REQUIRE_OK(m);
  absl::StatusOr<Object> objects = GetAttr(*m, "objects");
  DYNAMO_REQUIRE_OK(objects);
  // The rule, spelled in Python on the same objects.
  Object rule = testing::ModuleFromSource("names_rule",
                                          "def name(o):\n"
                                          "    q = getattr(o, '__qualname__', None)\n"
                                          "    if isinstance(q, str) and q:\n"
                                          "        mod = getattr(o, '__module__', None)\n"
                                          "        return f'{mod}.{q}' if isinstance(mod, str) and mod else q\n"
                                          "    t = type(o)\n"
                                          "    mod = getattr(t, '__module__', None)\n"
                                          "    q = getattr(t, '__qualname__', None)\n"
                                          "    return 'instance of ' + (mod if isinstance(mod, str) else '') + '.' + "
                                          "(q if isinstance(q, str) else '')\n");
  std::vector<std::string> got;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objects->get()); ++i) {
    PyObject* o = PyList_GET_ITEM(objects->get(), i);
    Object want = Object::Steal(PyObject_CallMethod(rule.get(), "name", "O", o));
    REQUIRE(want);
    absl::StatusOr<std::string> text = AsString(want);
    DYNAMO_REQUIRE_OK(text);
    CHECK(IdentityName(o) == *text);
    CHECK_FALSE(PyErr_Occurred());
    got.push_back(IdentityName(o));
  }
  CHECK(got[0] == "instance of names.Plain");
  CHECK(got[1] == "instance of elsewhere.Other.Name");
  CHECK(got[2] == "instance of names.FromMeta");
  CHECK(got[3] == "instance of names.Nested.Inner");
  CHECK(got[4] == "instance of .Moduleless");
  CHECK(got[6] == "elsewhere.Other.Name");
  CHECK(got[8] == "names.function");
}

TEST_CASE("ResolveTarget: functions, methods, bound methods and errors", "[python]") {
  ScratchDir dir;
  std::string script = dir.Write("targets.py",
                                 "import math\n"
                                 "def forward(x):\n    return x\n"
                                 "class Model:\n"
                                 "    def forward(self, x):\n        return x\n"
                                 "    class Inner:\n"
                                 "        def go(self):\n            pass\n"
                                 "model = Model()\n"
                                 "number = 3\n");
  absl::StatusOr<Object> m = ImportScript(script);
  DYNAMO_REQUIRE_OK(m);

  absl::StatusOr<Target> fn = ResolveTarget(*m, "forward");
  DYNAMO_REQUIRE_OK(fn);
  CHECK(PyCode_Check(fn->code.get()));
  CHECK_FALSE(fn->self);

  absl::StatusOr<Target> unbound = ResolveTarget(*m, "Model.forward");
  DYNAMO_REQUIRE_OK(unbound);
  CHECK_FALSE(unbound->self);

  absl::StatusOr<Target> bound = ResolveTarget(*m, "model.forward");
  DYNAMO_REQUIRE_OK(bound);
  CHECK(bound->self.get() == GetAttr(*m, "model")->get());
  CHECK(bound->code.get() == unbound->code.get());

  CHECK(ResolveTarget(*m, "Model.Inner.go").ok());

  auto error = [&](const char* target) {
    absl::StatusOr<Target> t = ResolveTarget(*m, target);
    REQUIRE_FALSE(t.ok());
    return std::string(t.status().message());
  };
  CHECK(error("nope") == "the script has no attribute 'nope'");
  CHECK(error("Model.nope") == "'Model' has no attribute 'nope'");
  CHECK(error("model") == "target 'model' is a Model object, not a function; did you mean 'model.forward'?");
  CHECK(error("Model").find("is a class") != std::string::npos);
  CHECK(error("math").find("is a module") != std::string::npos);
  CHECK(error("math.sqrt").find("built-in") != std::string::npos);
  CHECK(error("number").find("is an int, not a Python function") != std::string::npos);
  CHECK(error("a..b").find("not a valid dotted name") != std::string::npos);
  CHECK_FALSE(PyErr_Occurred());
}

}  // namespace
}  // namespace dynamo::python
