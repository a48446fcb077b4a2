// The one owning handle for PyObject*: the only code in libdynamo that
// touches reference counts.
//
// A raw PyObject* enters only through an explicit choice of ownership:
//
//   Object mod = Object::Steal(PyImport_ImportModule("dis"));  // new reference
//   Object co  = Object::Borrow(PyFunction_GetCode(fn));       // borrowed one
//   if (!mod) return FetchError("importing dis");
//
// Object is a value type: copies add a reference, moves transfer it, the
// destructor drops it. Every use needs the GIL (see Interpreter).
#pragma once

#include <Python.h>

#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace dynamo::python {

class Object {
 public:
  Object() = default;
  // Takes ownership of a new reference (may be null: the result is empty).
  [[nodiscard]] static Object Steal(PyObject* p) { return Object(p); }
  // Shares a borrowed reference: adds one of our own.
  [[nodiscard]] static Object Borrow(PyObject* p) {
    Py_XINCREF(p);
    return Object(p);
  }

  Object(const Object& other) : p_(other.p_) { Py_XINCREF(p_); }
  Object(Object&& other) noexcept : p_(std::exchange(other.p_, nullptr)) {}
  Object& operator=(Object other) noexcept {
    std::swap(p_, other.p_);
    return *this;
  }
  // A handle that outlives the interpreter (a static destroyed after
  // Py_Finalize) must not touch the freed runtime: it lets go silently.
  ~Object() {
    if (p_ != nullptr && Py_IsInitialized()) Py_DECREF(p_);
  }

  [[nodiscard]] PyObject* get() const { return p_; }
  // Gives the reference away (to an API that steals it).
  [[nodiscard]] PyObject* release() { return std::exchange(p_, nullptr); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  explicit Object(PyObject* p) : p_(p) {}
  PyObject* p_ = nullptr;
};

// Small conveniences over the C API; each returns a Status carrying the Python
// exception (see error.h) instead of leaving it set.
absl::StatusOr<Object> GetAttr(const Object& obj, absl::string_view name);
// The interned str for `name`, made once per process (borrowed; null, with
// the exception set, only when it cannot be made): an attribute or key name
// Python hashes once and compares by address.
PyObject* Interned(absl::string_view name);
// A fixed name's interned str, looked up once per call site, for the hot
// paths that ask for the same few names thousands of times a capture:
//   static const python::Name kDtype("dtype");
//   python::Attr(tensor, kDtype.get());
class Name {
 public:
  explicit constexpr Name(const char* text) : text_(text) {}
  PyObject* get() const {
    if (object_ == nullptr) object_ = Interned(text_);
    return object_;
  }

 private:
  const char* text_;
  mutable PyObject* object_ = nullptr;  // borrowed from Interned's table, which keeps it
};
// hasattr(): false when the lookup raises, but unlike PyObject_HasAttr an
// interrupt raised meanwhile is set aside (ClearError), not dropped.
bool HasAttr(PyObject* obj, const char* name);
// o.name, or a null Object when the read fails (the exception cleared): for
// probes whose failure only means "not this kind of object".
Object Attr(PyObject* o, const char* name);
Object Attr(PyObject* o, PyObject* name);  // name: a str (Interned, Name)
absl::StatusOr<Object> Import(absl::string_view module);
// Calls `callable(*args)`.
absl::StatusOr<Object> Call(const Object& callable, const std::vector<Object>& args = {});
absl::StatusOr<Object> CallMethod(const Object& obj, absl::string_view name,
                                  const std::vector<Object>& args = {});

Object FromString(absl::string_view s);
Object FromLong(long long v);
Object FromBool(bool v);
Object None();
// Null when an item is null (a conversion that failed, its exception still
// set): Python never sees a container with a NULL slot.
Object MakeTuple(const std::vector<Object>& items);
Object MakeList(const std::vector<Object>& items);

absl::StatusOr<std::string> AsString(const Object& obj);  // str objects only
absl::StatusOr<long long> AsLong(const Object& obj);      // int objects only
absl::StatusOr<std::vector<Object>> AsVector(const Object& seq);  // any iterable
std::string Repr(const Object& obj);  // never fails: falls back to "<repr failed>"
std::string TypeName(const Object& obj);
// `name` in the type's own __dict__ (no MRO walk), borrowed, or nullptr.
// From 3.12 a static builtin type's tp_dict is NULL (its dict lives per
// interpreter): this reads the dict CPython uses for the type either way.
PyObject* TypeDictItem(PyTypeObject* type, const char* name);

// True when reading `name` from `o` is sure to raise AttributeError, known
// without running Python: neither its class nor its instance dict has it,
// and the class leaves a failed lookup to object's rule or to
// nn.Module.__getattr__, which finds it in none of the module's
// _parameters, _buffers and _modules. False: it may be there, read it.
// (Guards name each object they identify by its __qualname__, which an
// nn.Module instance lacks; asking runs nn.Module.__getattr__ to raise,
// about a microsecond per object, twice per capture.) Never raises.
bool SurelyLacks(PyObject* o, const char* name);
bool SurelyLacks(PyObject* o, PyObject* name);  // name: a str (Interned, Name)

// o.name decided without running any Python code, where that is certain:
// kFound (*value set) from the instance dict, or from nn.Module's
// _parameters, _buffers or _modules where its __getattr__ would look;
// kMissing where getattr is sure to raise (SurelyLacks); kUnknown where a
// class attribute, a descriptor or another __getattr__/__getattribute__
// has a say: read it with PyObject_GetAttr. `name` is a str (Interned).
// Never raises. Reading a submodule this way skips a failed generic lookup
// and a call of nn.Module.__getattr__ in Python (about a microsecond).
enum class Found { kUnknown, kMissing, kFound };
Found LookupWithoutPython(PyObject* o, PyObject* name, Object* value);

// The stable name an ID_MATCH / TYPE_MATCH guard records for an object
// (addresses mean nothing outside the process): "module torch",
// "torch.nn.functional.relu" (module and __qualname__), "torch.float32" for
// torch's dtype, layout and memory_format singletons, "instance of
// mymodel.MLP" for anything else. python/dynamo/guards.py's identity_name
// is the same rule. Never raises.
std::string IdentityName(PyObject* o);

// Exactly a tuple's iterator (iter(a_tuple)).
bool IsTupleIterator(PyObject* o);
// A NumPy number or bool scalar (np.int64(3), np.float32(0.5), np.bool_):
// an immutable value. False without a lookup for any type not named
// "numpy.<kind>", so it is cheap on hot paths; never raises.
bool IsNumpyNumber(PyObject* o);

}  // namespace dynamo::python
