// The PEP 523 frame evaluator behind dynamo.optimize(): while a thread has a
// callback set, every Python frame it starts (optimized functions and the
// frames they call) is checked against a per-code-object cache of
// (guards, rewritten code) in C++; a hit runs the rewritten code, a miss asks
// the callback to capture, and frames that cannot gain (generators,
// coroutines, torch's and the standard library's code, generated code) run
// as CPython would run them.
//
//   dynamo._C.set_eval_frame(callback, cache_size_limit) -> previous callback
//   callback(function, args, kwargs, recompile_reason) ->
//       None                         (run this call eagerly, capture again next time)
//     | (live, code | None, (graph, arg_slots, outputs, is_tuple[, callback_off]) | None[, installed])
//                                    (the call is that graph on those arguments:
//                                     called directly, no bytecode runs; with
//                                     callback_off, as set_eval_frame(None) would)
//     | False                        (run this code eagerly for this callback from now on)
//     | (live, code | None)           (guards; code to run instead, None: the original)
//   `live` is the dynamo._C.LiveCapture capture_call made (its guards are
//   compiled from it in memory).
//   `installed`, when given, is held by the entry and dropped with it (the
//   runtime's handle on the globals it installed for the capture).
//
// The cache belongs to the callback that filled it (one per optimize()
// context, so two backends never share graphs). Needs CPython 3.11.
//
// Memory: what is cached for an object goes when the object goes. An entry
// is dropped when its callback dies (the optimize() context is gone: every
// code object's entries of it go), when an object its guards identify dies
// (lib/guards watches them through weak references), when its code object
// dies, and on reset_caches(). Entries refer to their callback by address
// and never keep it alive (unless it cannot be weakly referenced).
#pragma once

#include <Python.h>

#include "absl/status/status.h"

namespace dynamo::embed {

// dynamo._C.set_eval_frame(callback or None, cache_size_limit=8).
PyObject* SetEvalFrame(PyObject* module, PyObject* args);
// dynamo._C.run_with_eval_frame(callback, cache_size_limit, fn, *args,
// **kwargs): fn(*args, **kwargs) with the callback set for its duration (the
// optimize() wrapper's whole per-call cost, without a Python frame).
PyObject* RunWithEvalFrame(PyObject* module, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
// The same for C callers (lib/embed/callers.h): fn(args..., kwnames) with
// `callback` set; `limit` a Python int (-1 keeps the current limit) or an
// object whose cache_size_limit is read when the call needs it (dynamo.
// config). A call whose guards hold on its arguments is answered from the
// cache without making fn's frame where it can be (see CachedCall).
PyObject* CallWithEvalFrame(PyObject* callback, PyObject* limit, PyObject* fn, PyObject* const* args,
                            size_t nargsf, PyObject* kwnames);
// dynamo._C.mark_skip(code): frames of this code always run as they are.
PyObject* MarkSkip(PyObject* module, PyObject* code);
// dynamo._C.mark_capture(code): frames of this code are captured even where
// its file would be skipped (an optimize()d function of torch's own).
PyObject* MarkCapture(PyObject* module, PyObject* code);
// dynamo._C.reset_caches(): drops every cached entry of every code object.
PyObject* ResetCaches(PyObject* module, PyObject* unused);
// dynamo._C.cache_stats() -> {"hits": n, "direct_hits": n (hits that called
// the graph with no bytecode), "frame_free_hits": n (hits answered before
// the function's frame was made, see CallWithEvalFrame), "misses": n, "entries": n (live, in every code
// object), "owners": n (callbacks with entries, watched), "stamped_subtrees":
// n (of live entries' guards, checked once per module version),
// "skipped_subtrees": n (times one was skipped), "module_versions": bool
// (lib/guards/versions.h), "guard_compile_seconds": s (every capture's)}.
PyObject* CacheStats(PyObject* module, PyObject* unused);

}  // namespace dynamo::embed
