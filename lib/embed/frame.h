// The parts of CPython's internal frame (_PyInterpreterFrame) the PEP 523
// evaluator reads, one small file per version: the struct changes between
// 3.11, 3.12 and 3.13, and from 3.12 on an evaluator that does not run a
// frame must also clear it and pop it off the thread's stack itself.
//
//   PyCodeObject* co = frame::Code(f);
//   PyObject** locals = frame::Locals(f);
//   frame::Release(ts, f);  // after answering for a frame without running it
#pragma once

#include <Python.h>
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#if PY_VERSION_HEX >= 0x030E0000
#error "libdynamo's frame evaluator supports CPython 3.11 to 3.13"
#elif PY_VERSION_HEX >= 0x030D0000
#include "lib/embed/frame_313.h"
#elif PY_VERSION_HEX >= 0x030C0000
#include "lib/embed/frame_312.h"
#else
#include "lib/embed/frame_311.h"
#endif

namespace dynamo::embed::frame {

// The per-code-object slot the evaluator keeps its cache in: 3.12 renamed
// the private functions to PyUnstable_* (the old names are deprecated).
inline Py_ssize_t RequestCodeExtraIndex(freefunc free) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Eval_RequestCodeExtraIndex(free);
#else
  return _PyEval_RequestCodeExtraIndex(free);
#endif
}
inline int GetCodeExtra(PyObject* code, Py_ssize_t index, void** extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_GetExtra(code, index, extra);
#else
  return _PyCode_GetExtra(code, index, extra);
#endif
}
inline int SetCodeExtra(PyObject* code, Py_ssize_t index, void* extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_SetExtra(code, index, extra);
#else
  return _PyCode_SetExtra(code, index, extra);
#endif
}

}  // namespace dynamo::embed::frame
