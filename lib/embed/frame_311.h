// CPython 3.11's frame (included by frame.h only). The caller of the
// evaluator (_PyEval_Vector) clears and pops the frame after it returns,
// whether the evaluator ran it or not.
#pragma once

namespace dynamo::embed::frame {

inline PyCodeObject* Code(_PyInterpreterFrame* f) { return f->f_code; }
inline PyFunctionObject* Function(_PyInterpreterFrame* f) { return f->f_func; }
inline PyObject** Locals(_PyInterpreterFrame* f) { return f->localsplus; }
inline PyObject* Globals(_PyInterpreterFrame* f) { return f->f_globals; }
// Frames the evaluator may answer for without running them.
inline bool Replaceable(_PyInterpreterFrame* f) { return f->owner != FRAME_OWNED_BY_GENERATOR; }
inline void Release(PyThreadState*, _PyInterpreterFrame*) {}

}  // namespace dynamo::embed::frame
