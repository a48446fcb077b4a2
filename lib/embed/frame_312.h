// CPython 3.12's frame (included by frame.h only). From 3.12 the evaluator
// owns the frame it is given: _PyEval_EvalFrameDefault clears and pops it on
// the way out, so an evaluator that answers without running it must do the
// same. CPython's own functions for that (_PyFrame_ClearExceptCode,
// _PyThreadState_PopFrame) are not exported from libpython 3.12, so Release
// does their work for the only frames it is given: fresh, thread-owned
// frames that never ran and have no frame object (Replaceable).
#pragma once

namespace dynamo::embed::frame {

inline PyCodeObject* Code(_PyInterpreterFrame* f) { return f->f_code; }
inline PyFunctionObject* Function(_PyInterpreterFrame* f) {
  return reinterpret_cast<PyFunctionObject*>(f->f_funcobj);
}
inline PyObject** Locals(_PyInterpreterFrame* f) { return f->localsplus; }
inline PyObject* Globals(_PyInterpreterFrame* f) { return f->f_globals; }
// A frame object would have to take over the frame's data (CPython's
// take_ownership): such frames, which only a debugger could have made before
// the frame ran, are left to CPython.
inline bool Replaceable(_PyInterpreterFrame* f) {
  return f->owner == FRAME_OWNED_BY_THREAD && f->frame_obj == nullptr;
}

inline void Release(PyThreadState* ts, _PyInterpreterFrame* f) {
  // Clear: the references the frame holds (its arguments and locals, the
  // locals dict of a class body, the function, the code).
  for (int i = 0; i < f->stacktop; ++i) Py_XDECREF(f->localsplus[i]);
  Py_XDECREF(f->f_locals);
  Py_DECREF(f->f_funcobj);
  Py_DECREF(f->f_code);
  // Pop: the frame is the newest on the thread's data stack. When it was
  // the first in a chunk, the chunk goes back to the arena allocator it came
  // from and the previous chunk becomes current again.
  PyObject** base = reinterpret_cast<PyObject**>(f);
  _PyStackChunk* chunk = ts->datastack_chunk;
  if (base == &chunk->data[0] && chunk->previous != nullptr) {
    _PyStackChunk* previous = chunk->previous;
    ts->datastack_top = &previous->data[previous->top];
    ts->datastack_chunk = previous;
    ts->datastack_limit = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(previous) + previous->size);
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    arena.free(arena.ctx, chunk, chunk->size);
  } else {
    ts->datastack_top = base;
  }
}

}  // namespace dynamo::embed::frame
