// CPython 3.13's frame (included by frame.h only). As in 3.12 the evaluator
// owns the frame it is given; 3.13 exports the function that clears and pops
// it (_PyEval_FrameClearAndPop). The code object is f_executable.
#pragma once

extern "C" PyAPI_FUNC(void) _PyEval_FrameClearAndPop(PyThreadState* tstate, _PyInterpreterFrame* frame);

namespace dynamo::embed::frame {

inline PyCodeObject* Code(_PyInterpreterFrame* f) { return _PyFrame_GetCode(f); }
inline PyFunctionObject* Function(_PyInterpreterFrame* f) {
  return reinterpret_cast<PyFunctionObject*>(f->f_funcobj);
}
inline PyObject** Locals(_PyInterpreterFrame* f) { return f->localsplus; }
inline PyObject* Globals(_PyInterpreterFrame* f) { return f->f_globals; }
inline bool Replaceable(_PyInterpreterFrame* f) {
  return f->owner == FRAME_OWNED_BY_THREAD && PyCode_Check(f->f_executable);
}
inline void Release(PyThreadState* ts, _PyInterpreterFrame* f) { _PyEval_FrameClearAndPop(ts, f); }

}  // namespace dynamo::embed::frame
