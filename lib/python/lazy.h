// Process-wide values made by running Python code, computed on first use.
//
//   PyObject* Apply() {
//     static PyObject* apply = nullptr;  // constant-initialized: no lock
//     return python::LazyObject(apply, [] { return ...new reference or nullptr...; });
//   }
//
// A function-local static with a Python-running initializer is the wrong
// tool: C++ holds the static's initialization lock while the initializer
// runs, and Python code may release the GIL (an import, a file read, a
// finalizer). A second thread then takes the GIL, reaches the same static
// and blocks on its lock still holding the GIL the first thread needs to
// finish — a deadlock, seen with eight threads calling optimized functions.
// Here the GIL is the only lock: the slot is read and published with it
// held; a thread that arrives while another one computes (the GIL released
// inside) computes too, and the first result published is kept. So `make`
// must be safe to run twice, and callers must hold the GIL.
#pragma once

#include <Python.h>

#include <memory>
#include <utility>

namespace dynamo::python {

// `make` returns a new reference, or nullptr with no exception set (then
// the next call tries again). Returns a borrowed reference the slot keeps
// for the life of the process, or nullptr.
template <typename Make>
PyObject* LazyObject(PyObject*& slot, Make&& make) {
  if (slot != nullptr) return slot;
  PyObject* made = std::forward<Make>(make)();
  if (slot == nullptr) {
    slot = made;
  } else {
    Py_XDECREF(made);  // another thread published first while the GIL was released
  }
  return slot;
}

// The same for a C++ value: `make` returns a std::unique_ptr<T> (never
// null). The value is kept for the life of the process.
template <typename T, typename Make>
const T& LazyValue(T*& slot, Make&& make) {
  if (slot == nullptr) {
    std::unique_ptr<T> made = std::forward<Make>(make)();
    if (slot == nullptr) slot = made.release();
  }
  return *slot;
}

}  // namespace dynamo::python
