#include "lib/embed/eval_frame.h"

#include <Python.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include "absl/strings/str_cat.h"
#include "lib/embed/frame.h"
#include "lib/embed/live_capture.h"
#include "lib/guards/evaluator.h"
#include "lib/guards/versions.h"
#include "lib/python/error.h"
#include "lib/python/object.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::embed {
namespace {

using python::Object;

struct Entry {
  explicit Entry(guards::GuardEvaluator g) : guards(std::move(g)) {}

  // The callback whose capture this is, by address. Not a reference: every
  // entry of a callback goes when it dies (see Owner), before its address can
  // be reused, so an optimize() context that is dropped takes its captures
  // with it. A callback that cannot be weakly referenced is held instead.
  PyObject* owner = nullptr;
  Object owner_held;
  guards::GuardEvaluator guards;
  Object code;                // the rewritten code; empty: run the original
  Object function;            // prebuilt for codes without a closure
  // A capture that is one graph on the arguments (see LiveCapture::direct):
  // the compiled graph, the argument slots it takes, the outputs returned.
  Object graph;
  std::vector<int> slots;
  std::vector<int> outputs;
  bool tuple = false;
  // The graph runs with this thread's callback off (a backend's compiled
  // code: the modules it runs are its business, not frames to capture).
  bool callback_off = false;
  // What the callback installed in the function's globals for this capture
  // (the compiled graph, resume functions): dropping it removes them.
  Object installed;
  // Whether its guards ever held on a later call (see CodeState::churned).
  mutable bool hit = false;
};

// Everything the evaluator keeps about one code object, in its co_extra slot.
// Entries are shared so that one being run stays alive when a recursive call
// adds to the list or a reset() inside the graph clears it.
struct CodeState {
  uint64_t serial = 0;  // tells this state from a later one at the same address
  bool skip = false;  // always run as it is
  bool warned = false;
  std::vector<std::string> names;  // localsplus names
  std::vector<bool> cells;
  std::vector<std::shared_ptr<const Entry>> entries;
  // Per callback, entries dropped because an object their guards identify
  // died: `churned` those that never held on a later call (objects made and
  // dropped per call: a fresh GraphModule, a module built inside the call),
  // which count towards the cache size limit as if they were still there --
  // the number of captures is what it would be if nothing died, only the
  // memory goes; `all` of them count towards kAccumulatedLimit.
  struct Dropped {
    size_t churned = 0;
    size_t all = 0;
  };
  absl::flat_hash_map<PyObject*, Dropped> dropped;
};

// How many captures one callback may make of one code object, counting
// entries dropped when their objects died (torch._dynamo's
// accumulated_cache_size_limit); at least the cache size limit.
constexpr size_t kAccumulatedLimit = 256;

// Lifetime of a CodeState, in one place: StateOf creates it and hands it to
// the code object's co_extra slot, which owns it; FreeState (the slot's free
// function, run by code_dealloc) is the only place that deletes it, and
// `live_states` (what ResetCaches walks) loses it there too.
Py_ssize_t extra_index = -1;
absl::flat_hash_set<CodeState*>* live_states = nullptr;
uint64_t next_serial = 1;

// Where a callback's entries are, so that they go when it dies: a weak
// reference to the callback whose own callback is OwnerDied, and the states
// (by address and serial) that hold entries of it.
struct Owner {
  Object watch;
  absl::flat_hash_map<CodeState*, uint64_t> states;
};
absl::flat_hash_map<PyObject*, Owner>* owners = nullptr;  // by callback address
thread_local PyObject* callback = nullptr;      // strong reference while set
thread_local size_t cache_limit = 8;
size_t hits = 0, misses = 0, direct_hits = 0, frame_free_hits = 0;
double guard_compile_seconds = 0;  // every capture's guards, compiled after the callback
std::vector<std::string>* skip_prefixes = nullptr;

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

PyObject* EvalFrame(PyThreadState* ts, _PyInterpreterFrame* frame, int throw_flag);

// The PEP 523 hook is one slot per interpreter that torch._dynamo uses too,
// so it is handled as a stack: ours is installed when the first region with
// our callback opens (in any thread) on top of whatever is current, frames we
// do not capture run through the evaluator below ours, and when the last
// region closes ours is removed again — if it is still on top. An evaluator
// installed over ours since then (torch.compile inside our region) puts ours
// back when it leaves, and ours stays installed, dormant (no callback set),
// until a later region closes with it on top.
_PyFrameEvalFunction below = nullptr;  // nullptr: CPython's own
int open_regions = 0;                  // under the GIL

// The frame this thread is handing to the evaluator below ours. An evaluator
// that installed itself over ours keeps ours as its own "previous", so the
// two can point at each other; a frame handed down that comes back to us is
// run by CPython itself instead of going round again.
thread_local _PyInterpreterFrame* handing_down = nullptr;

PyObject* RunBelow(PyThreadState* ts, _PyInterpreterFrame* frame, int throw_flag) {
  if (below == nullptr || handing_down == frame) return _PyEval_EvalFrameDefault(ts, frame, throw_flag);
  _PyInterpreterFrame* outer = handing_down;
  handing_down = frame;
  PyObject* result = below(ts, frame, throw_flag);
  handing_down = outer;
  return result;
}

// The same, noting that the frame was handed on: whoever ran it cleared it.
PyObject* RunBelow(PyThreadState* ts, _PyInterpreterFrame* frame, int throw_flag, bool& ran) {
  ran = true;
  return RunBelow(ts, frame, throw_flag);
}

void OpenRegion() {
  if (open_regions++ > 0) return;
  PyInterpreterState* interp = PyInterpreterState_Get();
  _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
  if (current == EvalFrame) return;  // left installed, dormant: `below` is still what is below it
  below = current == _PyEval_EvalFrameDefault ? nullptr : current;
  _PyInterpreterState_SetEvalFrameFunc(interp, EvalFrame);
}

void CloseRegion() {
  if (--open_regions > 0) return;
  PyInterpreterState* interp = PyInterpreterState_Get();
  if (_PyInterpreterState_GetEvalFrameFunc(interp) != EvalFrame) return;
  _PyInterpreterState_SetEvalFrameFunc(interp, below != nullptr ? below : _PyEval_EvalFrameDefault);
  below = nullptr;
}

// torch._dynamo's own per-thread switch (torch._C._dynamo.eval_frame.
// set_eval_frame), when this torch has one; strong, for good.
PyObject* torch_set_eval_frame = nullptr;
// torch._dynamo's callback this thread had when our region opened, put back
// when it closes: inside our region torch._dynamo sees nothing (as inside its
// own disable()), so the two never compile the same frames.
thread_local PyObject* suspended_torch = nullptr;

bool ForeignEvaluator() {
  if (below != nullptr) return true;
  _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
  return current != EvalFrame && current != _PyEval_EvalFrameDefault;
}

// Sets this thread's callback to `cb` (a strong reference it takes, or
// nullptr), opening or closing a region when it turns on or off; *previous
// gets the one it replaces (owned by the caller). False, with a Python
// exception set, only where torch's switch raised.
bool SwapCallback(PyObject* cb, PyObject** previous) {
  *previous = callback;
  if (*previous == nullptr && cb != nullptr) {
    if (torch_set_eval_frame != nullptr && ForeignEvaluator()) {
      PyObject* none = Py_None;
      PyObject* theirs = PyObject_Vectorcall(torch_set_eval_frame, &none, 1, nullptr);
      if (theirs == nullptr) {
        Py_DECREF(cb);
        return false;
      }
      if (theirs == Py_None) Py_DECREF(theirs);
      else suspended_torch = theirs;
    }
    callback = cb;
    OpenRegion();
  } else if (*previous != nullptr && cb == nullptr) {
    callback = nullptr;
    CloseRegion();
    if (suspended_torch != nullptr) {
      PyObject* theirs = suspended_torch;
      suspended_torch = nullptr;
      PyObject* none = PyObject_Vectorcall(torch_set_eval_frame, &theirs, 1, nullptr);
      Py_DECREF(theirs);
      if (none == nullptr) return false;
      Py_DECREF(none);
    }
  } else {
    callback = cb;
  }
  return true;
}

void FreeState(void* p) {
  // CPython calls every registered slot's free function when a code object
  // dies, set or not: a code that only another evaluator (torch._dynamo's)
  // gave extras to has NULL in ours.
  if (p == nullptr) return;
  auto* state = static_cast<CodeState*>(p);
  live_states->erase(state);
  for (const auto& e : state->entries) {
    if (auto it = owners->find(e->owner); it != owners->end()) it->second.states.erase(state);
  }
  // Dropping the entries may run Python (a backend's compiled graph dies);
  // by then the state is gone from every list.
  std::vector<std::shared_ptr<const Entry>> dying = std::move(state->entries);
  delete state;
}

// The state at `s` if it is still the one numbered `serial`.
CodeState* LiveState(CodeState* s, uint64_t serial) {
  return live_states->contains(s) && s->serial == serial ? s : nullptr;
}

// Moves the entries of `state` that `drop` picks into `out`: the caller drops
// them once it is done with its lists, since dropping one may run Python
// (a compiled graph, a module dies) that reaches these lists again.
template <typename Pred>
void TakeEntries(CodeState* state, Pred drop, std::vector<std::shared_ptr<const Entry>>* out) {
  auto& es = state->entries;
  for (auto it = es.begin(); it != es.end();) {
    if (drop(**it)) {
      out->push_back(std::move(*it));
      it = es.erase(it);
    } else {
      ++it;
    }
  }
}

// An object one of the entry's guards identifies died (GuardEvaluator::
// OnDeath): the entry can never match again, so it goes, with its graph.
void DropEntry(CodeState* s, uint64_t serial, const Entry* entry) {
  CodeState* state = LiveState(s, serial);
  if (state == nullptr) return;
  std::vector<std::shared_ptr<const Entry>> dying;
  TakeEntries(state, [entry](const Entry& e) { return &e == entry; }, &dying);
  if (!dying.empty()) {
    CodeState::Dropped& d = state->dropped[entry->owner];
    d.churned += entry->hit ? 0 : 1;
    ++d.all;
  }
}

// A callback died (its optimize() context is gone): so do its entries, in
// every code object. `key` holds the callback's address.
PyObject* OwnerDied(PyObject* key, PyObject* /*weakref*/) {
  PyObject* cb = static_cast<PyObject*>(PyLong_AsVoidPtr(key));
  auto it = owners->find(cb);
  if (it == owners->end()) Py_RETURN_NONE;
  Owner gone = std::move(it->second);
  owners->erase(it);
  std::vector<std::shared_ptr<const Entry>> dying;
  for (const auto& [s, serial] : gone.states) {
    if (CodeState* state = LiveState(s, serial)) {
      TakeEntries(state, [cb](const Entry& e) { return e.owner == cb; }, &dying);
      state->dropped.erase(cb);
    }
  }
  dying.clear();
  Py_RETURN_NONE;
}

PyMethodDef kOwnerDied = {"dynamo_callback_died", OwnerDied, METH_O, nullptr};

// A new entry of callback `cb` for `state`, its owner and the objects its
// guards identify watched, so that it goes when any of them dies.
std::shared_ptr<const Entry> AddEntry(CodeState* state, PyObject* cb, Entry entry) {
  entry.owner = cb;
  auto it = owners->find(cb);
  if (it == owners->end()) {
    Object key = Object::Steal(PyLong_FromVoidPtr(cb));
    Object died = key ? Object::Steal(PyCFunction_New(&kOwnerDied, key.get())) : Object();
    Object watch = died ? Object::Steal(PyWeakref_NewRef(cb, died.get())) : Object();
    if (watch) {
      it = owners->emplace(cb, Owner{std::move(watch), {}}).first;
    } else {
      python::ClearError();  // no weak references to this callback: the entry holds it
    }
  }
  if (it != owners->end()) {
    it->second.states[state] = state->serial;
  } else {
    entry.owner_held = Object::Borrow(cb);
  }
  auto added = std::make_shared<const Entry>(std::move(entry));
  const Entry* raw = added.get();
  added->guards.OnDeath([state, serial = state->serial, raw] { DropEntry(state, serial, raw); });
  state->entries.push_back(added);
  return added;
}

// Whether frames of `co` are worth capturing: user code only.
bool Skipped(PyCodeObject* co) {
  if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) return true;
  // Module and class bodies (no fast locals) run once, at import: a module
  // imported lazily inside an optimized call is not the user's model code.
  if (!(co->co_flags & CO_OPTIMIZED)) return true;
  const char* file = PyUnicode_AsUTF8(co->co_filename);
  if (file == nullptr) {
    python::ClearError();
    return true;
  }
  std::string f(file);
  // Generated graph forwards (torch.fx's: capturing one would capture its
  // own graph again; a live capture's own forward has no frame, see
  // lib/embed/graph_forward.h) and frozen modules; code exec'd from a string
  // ("<string>") is user code like any other.
  if (f.empty() || StartsWith(f, "<eval_with_key") || StartsWith(f, "<frozen")) {
    return true;
  }
  // Comprehensions are traced inline with the function that makes them; on
  // their own they start from a live iterator the trace cannot read.
  const char* name = PyUnicode_AsUTF8(co->co_name);
  if (name != nullptr && (std::string(name) == "<listcomp>" || std::string(name) == "<dictcomp>" ||
                          std::string(name) == "<setcomp>" || std::string(name) == "<genexpr>")) {
    return true;
  }
  // A class's own attribute protocol runs on every attribute read of its
  // instances, the capture's and the guards' included: captured, its
  // rewritten code would read attributes of self through it again, without
  // end (transformers' PretrainedConfig.__getattribute__).
  if (name != nullptr && (std::string(name) == "__getattribute__" || std::string(name) == "__getattr__" ||
                          std::string(name) == "__setattr__" || std::string(name) == "__delattr__")) {
    return true;
  }
  for (const std::string& p : *skip_prefixes) {
    if (StartsWith(f, p)) return true;
  }
  return false;
}

// The frame's localsplus names (varnames, cells that are not arguments, free
// variables) and which of them hold cells, as the guard evaluator reads them.
bool FillNames(CodeState* state, PyCodeObject* co) {
  Object varnames = Object::Steal(PyCode_GetVarnames(co));
  Object cellvars = Object::Steal(PyCode_GetCellvars(co));
  Object freevars = Object::Steal(PyCode_GetFreevars(co));
  if (!varnames || !cellvars || !freevars) return false;
  state->names.clear();
  state->cells.clear();
  for (PyObject* tuple : {varnames.get(), cellvars.get(), freevars.get()}) {
    const bool cell = tuple != varnames.get();
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
      const char* n = PyUnicode_AsUTF8(PyTuple_GET_ITEM(tuple, i));
      if (n == nullptr) return false;
      bool seen = false;
      for (size_t k = 0; k < state->names.size(); ++k) {
        if (state->names[k] == n) {
          state->cells[k] = state->cells[k] || cell;  // an argument captured by a closure
          seen = true;
        }
      }
      if (!seen) {
        state->names.push_back(n);
        state->cells.push_back(cell);
      }
    }
  }
  return true;
}

CodeState* StateOf(PyCodeObject* co) {
  void* extra = nullptr;
  if (frame::GetCodeExtra(reinterpret_cast<PyObject*>(co), extra_index, &extra) != 0) {
    python::ClearError();
    return nullptr;
  }
  if (extra != nullptr) return static_cast<CodeState*>(extra);
  auto* state = new CodeState();
  state->serial = next_serial++;
  state->skip = Skipped(co);
  if (!state->skip) {
    // localsplus: varnames, cells that are not arguments, free variables.
    if (!FillNames(state, co)) {
      python::ClearError();
      state->skip = true;
    }
  }
  if (frame::SetCodeExtra(reinterpret_cast<PyObject*>(co), extra_index, state) != 0) {
    python::ClearError();
    delete state;
    return nullptr;
  }
  live_states->insert(state);
  return state;
}

// The call that made this frame, rebuilt from its bound parameters: the
// positional ones (and *args), then keyword-only ones (and **kwargs) by name.
struct Call {
  std::vector<PyObject*> values;  // borrowed from the frame
  Object kwnames;
  size_t positional = 0;
};

bool RebuildCall(_PyInterpreterFrame* frame, Call& call) {
  PyCodeObject* co = frame::Code(frame);
  PyObject** l = frame::Locals(frame);
  const int argc = co->co_argcount, kwonly = co->co_kwonlyargcount;
  const bool varargs = co->co_flags & CO_VARARGS, varkw = co->co_flags & CO_VARKEYWORDS;
  for (int i = 0; i < argc; ++i) call.values.push_back(l[i]);
  if (varargs) {
    PyObject* t = l[argc + kwonly];
    if (t == nullptr || !PyTuple_Check(t)) return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) call.values.push_back(PyTuple_GET_ITEM(t, i));
  }
  call.positional = call.values.size();
  std::vector<Object> names;
  Object varnames = Object::Steal(PyCode_GetVarnames(co));
  if (!varnames) return false;
  for (int i = argc; i < argc + kwonly; ++i) {
    names.push_back(Object::Borrow(PyTuple_GET_ITEM(varnames.get(), i)));
    call.values.push_back(l[i]);
  }
  if (varkw) {
    PyObject* d = l[argc + kwonly + (varargs ? 1 : 0)];
    if (d == nullptr || !PyDict_Check(d)) return false;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
      names.push_back(Object::Borrow(k));
      call.values.push_back(v);
    }
  }
  for (PyObject* v : call.values) {
    if (v == nullptr) return false;  // a parameter not bound (cannot happen at entry)
  }
  if (!names.empty()) call.kwnames = python::MakeTuple(names);
  return true;
}

// The graph called straight from the arguments (a frame's localsplus, or
// the call's own, see CachedCall): no bytecode runs.
PyObject* RunDirect(const Entry& entry, PyObject* const* locals) {
  PyObject* small[8];
  std::vector<PyObject*> big;
  PyObject** argv = small;
  if (entry.slots.size() > 8) {
    big.resize(entry.slots.size());
    argv = big.data();
  }
  for (size_t i = 0; i < entry.slots.size(); ++i) argv[i] = locals[entry.slots[i]];
  Object out;
  if (entry.callback_off) {
    // As set_eval_frame(None) around the call (runtime._without_capture).
    PyObject* previous = nullptr;
    if (SwapCallback(nullptr, &previous)) {
      out = Object::Steal(PyObject_Vectorcall(entry.graph.get(), argv, entry.slots.size(), nullptr));
    }
    // Put back even when turning it off failed (torch's switch raised).
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject* inner = nullptr;  // what the graph left set: normally none
    if (!SwapCallback(previous, &inner)) out = Object();
    Py_XDECREF(inner);
    if (type != nullptr) {
      if (PyErr_Occurred()) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
      } else {
        PyErr_Restore(type, value, tb);
      }
    }
  } else {
    out = Object::Steal(PyObject_Vectorcall(entry.graph.get(), argv, entry.slots.size(), nullptr));
  }
  if (!out) return nullptr;
  Object items = Object::Steal(PySequence_Fast(out.get(), "dynamo: a compiled graph must return a sequence"));
  if (!items) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.get());
  auto item = [&](int k) -> PyObject* {
    if (k >= n) {
      PyErr_SetString(PyExc_RuntimeError, "dynamo: the compiled graph returned fewer outputs than it has");
      return nullptr;
    }
    return Py_NewRef(PySequence_Fast_GET_ITEM(items.get(), k));
  };
  if (!entry.tuple) return item(entry.outputs[0]);
  Object result = Object::Steal(PyTuple_New(static_cast<Py_ssize_t>(entry.outputs.size())));
  for (size_t i = 0; i < entry.outputs.size(); ++i) {
    PyObject* v = item(entry.outputs[i]);
    if (v == nullptr) return nullptr;
    PyTuple_SET_ITEM(result.get(), static_cast<Py_ssize_t>(i), v);
  }
  return result.release();
}

PyObject* RunEntry(const Entry& entry, _PyInterpreterFrame* frame, int throw_flag, PyThreadState* ts,
                   bool& ran) {
  if (entry.graph) {
    ++direct_hits;
    return RunDirect(entry, frame::Locals(frame));
  }
  if (!entry.code) return RunBelow(ts, frame, throw_flag, ran);
  Call call;
  if (!RebuildCall(frame, call)) return RunBelow(ts, frame, throw_flag, ran);
  Object fn = entry.function;
  if (!fn) {
    fn = Object::Steal(PyFunction_New(entry.code.get(), frame::Globals(frame)));
    if (!fn) return nullptr;
    PyObject* closure = frame::Function(frame)->func_closure;
    if (closure != nullptr && PyFunction_SetClosure(fn.get(), closure) != 0) return nullptr;
  }
  // The frame CPython made for the original code is released after this
  // returns: by EvalFrame on 3.12+, by CPython's caller on 3.11.
  return PyObject_Vectorcall(fn.get(), call.values.data(), call.positional, call.kwnames.get());
}

// Guards may run a class's Python __getattr__ or __getitem__: those frames
// run as plain Python, never captured from inside a guard (which would
// compile guards that run them again, without end).
struct EvaluatorOff {
  PyObject* saved = callback;
  EvaluatorOff() { callback = nullptr; }
  ~EvaluatorOff() { callback = saved; }
};

// A frame's localsplus as its guards read them at entry, where the frame's
// own slots will not do: the first `given` slots copied, the rest unbound,
// and the free variables (still NULL at entry: COPY_FREE_VARS has not run)
// taken from the function's closure, as the frame will.
class EntryLocals {
 public:
  PyObject** From(PyCodeObject* co, PyObject* const* given, int n_given, PyObject* closure) {
    const int n = co->co_nlocalsplus;
    PyObject** l = n <= kSmall ? small_ : (big_.assign(static_cast<size_t>(n), nullptr), big_.data());
    std::fill(l, l + n, nullptr);
    std::copy(given, given + std::min(n_given, n), l);
    if (co->co_nfreevars > 0 && closure != nullptr) {
      for (int i = 0; i < co->co_nfreevars && i < PyTuple_GET_SIZE(closure); ++i) {
        l[n - co->co_nfreevars + i] = PyTuple_GET_ITEM(closure, i);
      }
    }
    return l;
  }

 private:
  static constexpr int kSmall = 64;
  PyObject* small_[kSmall];
  std::vector<PyObject*> big_;
};

// The first entry of callback `cb` whose guards hold on `view`, or null
// (with an exception set where Ctrl-C came inside a guard's Python: an
// __getattr__, an __eq__). `mine` counts cb's entries, `last` is the last of
// them. Entries are held while in use, by index: checking guards may run
// Python, which may add entries or reset them.
std::shared_ptr<const Entry> Lookup(CodeState* state, PyObject* cb, const guards::FrameView& view, size_t* mine,
                                    std::shared_ptr<const Entry>* last) {
  for (size_t i = 0; i < state->entries.size(); ++i) {
    std::shared_ptr<const Entry> e = state->entries[i];
    if (e->owner != cb) continue;
    ++*mine;
    *last = e;
    bool holds;
    {
      EvaluatorOff off;
      holds = e->guards.Check(view);
    }
    // Ctrl-C stops the call here rather than reading as a failed guard
    // (python::ClearError).
    if (python::RaisePendingInterrupt()) return nullptr;
    if (holds) return e;
  }
  return nullptr;
}

// An entry found is counted where it is used.
void CountHit(const Entry& e) {
  ++hits;
  e.hit = true;
}

// Answers for one frame: runs it below (`ran`), or a cached or new capture
// in its place.
PyObject* Answer(PyThreadState* ts, _PyInterpreterFrame* frame, int throw_flag, PyObject* cb, bool& ran) {
  CodeState* state = StateOf(frame::Code(frame));
  if (state == nullptr || state->skip) return RunBelow(ts, frame, throw_flag, ran);

  PyCodeObject* co = frame::Code(frame);
  PyObject** locals = frame::Locals(frame);
  EntryLocals copy;
  if (co->co_nfreevars > 0 && frame::Function(frame)->func_closure != nullptr) {
    locals = copy.From(co, locals, co->co_nlocalsplus, frame::Function(frame)->func_closure);
  }
  guards::FrameView view;
  view.locals = locals;
  view.names = &state->names;
  view.cells = &state->cells;
  view.globals = frame::Globals(frame);
  size_t mine = 0;
  std::shared_ptr<const Entry> last;
  std::shared_ptr<const Entry> found = Lookup(state, cb, view, &mine, &last);
  if (PyErr_Occurred()) return nullptr;
  if (found != nullptr) {
    CountHit(*found);
    return RunEntry(*found, frame, throw_flag, ts, ran);
  }
  ++misses;
  CodeState::Dropped dropped;
  if (!state->dropped.empty()) {
    if (auto it = state->dropped.find(cb); it != state->dropped.end()) dropped = it->second;
  }
  const bool full = mine + dropped.churned >= cache_limit;
  if (full || mine + dropped.all >= std::max(kAccumulatedLimit, cache_limit)) {
    if (!state->warned) {
      state->warned = true;
      std::string msg =
          full
              ? absl::StrCat("dynamo: ", PyUnicode_AsUTF8(frame::Code(frame)->co_qualname), " (",
                             PyUnicode_AsUTF8(frame::Code(frame)->co_filename), ":", frame::Code(frame)->co_firstlineno,
                             ") was captured ", cache_limit,
                             " times (config.cache_size_limit); it runs eagerly from now on")
              : absl::StrCat("dynamo: ", PyUnicode_AsUTF8(frame::Code(frame)->co_qualname), " (",
                             PyUnicode_AsUTF8(frame::Code(frame)->co_filename), ":", frame::Code(frame)->co_firstlineno,
                             ") was captured ", mine + dropped.all, " times, ", dropped.all,
                             " of them dropped when objects their guards identify died; it runs eagerly "
                             "from now on");
      if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 1) != 0) return nullptr;
    }
    return RunBelow(ts, frame, throw_flag, ran);
  }

  Call call;
  if (!RebuildCall(frame, call)) return RunBelow(ts, frame, throw_flag, ran);
  Object args = Object::Steal(PyTuple_New(static_cast<Py_ssize_t>(call.positional)));
  for (size_t i = 0; i < call.positional; ++i) {
    Py_INCREF(call.values[i]);
    PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(i), call.values[i]);
  }
  Object kwargs = Object::Steal(PyDict_New());
  if (call.kwnames) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(call.kwnames.get()); ++i) {
      PyDict_SetItem(kwargs.get(), PyTuple_GET_ITEM(call.kwnames.get(), i),
                     call.values[call.positional + static_cast<size_t>(i)]);
    }
  }
  Object reason = python::None();
  if (last != nullptr) {
    EvaluatorOff off;
    std::optional<std::string> why = last->guards.Explain(view);
    if (why) reason = python::FromString(*why);
  }
  if (python::RaisePendingInterrupt()) return nullptr;
  // Capture with the evaluator off: the callback's own frames (the runtime,
  // the backend) run as plain Python.
  Object keep = Object::Borrow(cb);
  callback = nullptr;
  // No cyclic collection while capturing and compiling guards: a capture
  // makes thousands of objects in cycles, and a full collection of the heap
  // in its middle costs more than the capture (it runs after).
  struct CollectorOff {
    int was = PyGC_Disable();
    ~CollectorOff() {
      if (was) PyGC_Enable();
    }
  } collector_off;
  PyObject* call_args[] = {reinterpret_cast<PyObject*>(frame::Function(frame)), args.get(), kwargs.get(), reason.get()};
  Object result = Object::Steal(PyObject_Vectorcall(cb, call_args, 4, nullptr));
  callback = keep.get();
  if (!result) return nullptr;  // nopython: the break propagates
  if (result.get() == Py_None) return RunBelow(ts, frame, throw_flag, ran);
  if (result.get() == Py_False) {
    // This code runs eagerly for this callback from now on (its capture
    // failed); other optimize() contexts still try their own.
    absl::StatusOr<guards::GuardEvaluator> none = guards::GuardEvaluator::Compile(std::vector<ir::Guard>{}, view);
    if (!none.ok()) return RunBelow(ts, frame, throw_flag, ran);
    AddEntry(state, cb, Entry(*std::move(none)));
    return RunBelow(ts, frame, throw_flag, ran);
  }

  PyObject *live = nullptr, *code = nullptr, *direct = nullptr, *installed = nullptr;
  if (!PyArg_ParseTuple(result.get(), "OO|OO", &live, &code, &direct, &installed)) return nullptr;
  // The capture as capture_call made it, still in memory (no parse).
  const ir::Capture* capture = LiveCaptureOf(live);
  if (capture == nullptr) {
    PyErr_SetString(PyExc_TypeError, "dynamo: the frame callback returns a dynamo._C.LiveCapture");
    return nullptr;
  }
  const auto compile_started = std::chrono::steady_clock::now();
  absl::StatusOr<guards::GuardEvaluator> compiled = [&] {
    EvaluatorOff off;
    // The evaluator reads the capture's guards in place (for its messages)
    // and holds the LiveCapture, which never changes them.
    auto owner = std::make_shared<Object>(Object::Borrow(live));
    return guards::GuardEvaluator::Compile(capture->guards(), view, std::move(owner));
  }();
  guard_compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - compile_started).count();
  if (python::RaisePendingInterrupt()) return nullptr;  // not a reason to skip the code
  if (!compiled.ok()) {
    std::string msg = absl::StrCat("dynamo: running ", PyUnicode_AsUTF8(frame::Code(frame)->co_qualname),
                                   " eagerly: its guards cannot be checked (", compiled.status().message(), ")");
    state->skip = true;
    if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 1) != 0) return nullptr;
    return RunBelow(ts, frame, throw_flag, ran);
  }
  Entry entry(*std::move(compiled));
  if (installed != nullptr && installed != Py_None) entry.installed = Object::Borrow(installed);
  if (direct != nullptr && direct != Py_None) {
    // (compiled graph, argument slots, outputs, returns a tuple[, callback off])
    PyObject *graph, *slots, *outputs;
    int tuple = 0, off = 0;
    if (!PyArg_ParseTuple(direct, "OO!O!p|p", &graph, &PyTuple_Type, &slots, &PyTuple_Type, &outputs, &tuple,
                          &off)) {
      return nullptr;
    }
    entry.callback_off = off != 0;
    entry.graph = Object::Borrow(graph);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(slots); ++i) {
      entry.slots.push_back(static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(slots, i))));
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(outputs); ++i) {
      entry.outputs.push_back(static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(outputs, i))));
    }
    entry.tuple = tuple != 0;
    if (entry.outputs.empty() || PyErr_Occurred()) return nullptr;
  }
  if (code != Py_None) {
    entry.code = Object::Borrow(code);
    if (CodeState* generated = StateOf(reinterpret_cast<PyCodeObject*>(code))) generated->skip = true;
    if (frame::Function(frame)->func_closure == nullptr) {
      entry.function = Object::Steal(PyFunction_New(code, frame::Globals(frame)));
      if (!entry.function) return nullptr;
    }
  }
  std::shared_ptr<const Entry> added = AddEntry(state, cb, std::move(entry));
  return RunEntry(*added, frame, throw_flag, ts, ran);
}

PyObject* EvalFrame(PyThreadState* ts, _PyInterpreterFrame* frame, int throw_flag) {
  PyObject* cb = callback;
  if (cb == nullptr || throw_flag || !frame::Replaceable(frame) || handing_down == frame) {
    return RunBelow(ts, frame, throw_flag);
  }
  bool ran = false;
  PyObject* result = Answer(ts, frame, throw_flag, cb, ran);
  // A frame answered for without running it is released here (3.12+; 3.11's
  // caller does it).
  if (!ran) frame::Release(ts, frame);
  return result;
}

absl::Status Install() {
  if (extra_index >= 0) return absl::OkStatus();
  extra_index = frame::RequestCodeExtraIndex(FreeState);
  if (extra_index < 0) return absl::InternalError("no co_extra slot left");
  live_states = new absl::flat_hash_set<CodeState*>();
  owners = new absl::flat_hash_map<PyObject*, Owner>();
  skip_prefixes = new std::vector<std::string>();
  // torch's and the standard library's code, and this package's own.
  for (const char* module : {"torch", "os", "dynamo", "numpy", "scipy", "typing"}) {
    absl::StatusOr<Object> m = python::Import(module);
    if (!m.ok()) continue;
    Object file = Object::Steal(PyObject_GetAttrString(m->get(), "__file__"));
    if (!file || !PyUnicode_Check(file.get())) {
      python::ClearError();
      continue;
    }
    std::string f = PyUnicode_AsUTF8(file.get());
    std::string dir = f.substr(0, f.rfind('/') + 1);
    // os.py lives in the standard library's top directory.
    skip_prefixes->push_back(dir);
  }
  python::ClearError();
  if (absl::StatusOr<Object> torch_c = python::Import("torch._C"); torch_c.ok()) {
    Object dyn = Object::Steal(PyObject_GetAttrString(torch_c->get(), "_dynamo"));
    Object frames = dyn ? Object::Steal(PyObject_GetAttrString(dyn.get(), "eval_frame")) : Object();
    if (frames) torch_set_eval_frame = PyObject_GetAttrString(frames.get(), "set_eval_frame");
  }
  python::ClearError();
  return absl::OkStatus();
}

}  // namespace

PyObject* SetEvalFrame(PyObject* /*module*/, PyObject* args) {
  PyObject* cb = nullptr;
  Py_ssize_t limit = -1;  // -1: keep the current limit
  if (!PyArg_ParseTuple(args, "O|n:set_eval_frame", &cb, &limit)) return nullptr;
  if (cb != Py_None && !PyCallable_Check(cb)) {
    PyErr_SetString(PyExc_TypeError, "set_eval_frame: the callback must be callable or None");
    return nullptr;
  }
  if (absl::Status s = Install(); !s.ok()) {
    PyErr_SetString(PyExc_RuntimeError, std::string(s.message()).c_str());
    return nullptr;
  }
  PyObject* previous = nullptr;
  if (!SwapCallback(cb == Py_None ? nullptr : Py_NewRef(cb), &previous)) return nullptr;
  if (previous == nullptr) previous = Py_NewRef(Py_None);
  if (limit >= 0) cache_limit = static_cast<size_t>(limit);
  return previous;  // the caller's reference to the old callback
}

namespace {

// A call of an optimized function answered from its code's cache without
// making the frame: the guards read the call's arguments where the frame's
// localsplus would have them, and the entry that holds runs on them. Only
// for calls whose arguments bind one to one (positional, the defaults
// filled in; no keywords, no *args or **kwargs), made outside any region
// (this thread has no callback and no other evaluator is installed), to a
// code the evaluator has entries for; anything else, and a miss, leaves
// `entry` empty and the call goes through its frame as before. (So does an
// entry that runs the original code, checked again there: running it takes
// its frame.)
struct CachedCall {
  std::shared_ptr<const Entry> entry;
  PyFunctionObject* function = nullptr;  // borrowed from the call
  Object defaults;                       // held: a guard's Python may replace __defaults__
  PyObject* bound[16];                   // the positional parameters, borrowed
  int argc = 0;
  EntryLocals locals;
  PyObject** localsplus = nullptr;
};

// False with an exception set only for Ctrl-C inside a guard.
bool FindCached(PyObject* cb, PyObject* target, PyObject* const* args, size_t nargs, PyObject* kwnames,
                CachedCall* call) {
  if (callback != nullptr || kwnames != nullptr || ForeignEvaluator()) return true;
  PyObject* fn = target;
  PyObject* self = nullptr;
  if (PyMethod_Check(target)) {
    self = PyMethod_Self(target);
    fn = PyMethod_Function(target);
  }
  if (!PyFunction_Check(fn)) return true;
  auto* func = reinterpret_cast<PyFunctionObject*>(fn);
  auto* co = reinterpret_cast<PyCodeObject*>(func->func_code);
  const int argc = co->co_argcount;
  const size_t given = nargs + (self != nullptr ? 1 : 0);
  if ((co->co_flags & (CO_VARARGS | CO_VARKEYWORDS)) || co->co_kwonlyargcount != 0 || argc > 16 ||
      given > static_cast<size_t>(argc)) {
    return true;
  }
  void* extra = nullptr;
  if (frame::GetCodeExtra(func->func_code, extra_index, &extra) != 0) {
    python::ClearError();
    return true;
  }
  auto* state = static_cast<CodeState*>(extra);
  if (state == nullptr || state->skip || state->entries.empty()) return true;
  PyObject* defaults = func->func_defaults;
  call->defaults = Object::Borrow(defaults);
  const int n_defaults = defaults != nullptr ? static_cast<int>(PyTuple_GET_SIZE(defaults)) : 0;
  if (static_cast<int>(given) < argc - n_defaults) return true;  // a missing argument: CPython says which
  int k = 0;
  if (self != nullptr) call->bound[k++] = self;
  for (size_t i = 0; i < nargs; ++i) call->bound[k++] = args[i];
  for (; k < argc; ++k) call->bound[k] = PyTuple_GET_ITEM(defaults, k - (argc - n_defaults));
  call->function = func;
  call->argc = argc;
  call->localsplus = call->locals.From(co, call->bound, argc, func->func_closure);
  guards::FrameView view;
  view.locals = call->localsplus;
  view.names = &state->names;
  view.cells = &state->cells;
  view.globals = func->func_globals;
  size_t mine = 0;
  std::shared_ptr<const Entry> last;
  std::shared_ptr<const Entry> found = Lookup(state, cb, view, &mine, &last);
  if (PyErr_Occurred()) return false;
  if (found != nullptr && (found->graph || found->code)) {
    CountHit(*found);
    call->entry = std::move(found);
  }
  return true;
}

// Runs the entry FindCached found, with the callback set: the graph on the
// arguments, or the rewritten code called with them (what RunEntry does
// for a frame).
PyObject* RunCached(const CachedCall& call) {
  const Entry& entry = *call.entry;
  if (entry.graph) {
    ++direct_hits;
    return RunDirect(entry, call.localsplus);
  }
  Object fn = entry.function;
  if (!fn) {
    fn = Object::Steal(PyFunction_New(entry.code.get(), call.function->func_globals));
    if (!fn) return nullptr;
    if (call.function->func_closure != nullptr && PyFunction_SetClosure(fn.get(), call.function->func_closure) != 0) {
      return nullptr;
    }
  }
  return PyObject_Vectorcall(fn.get(), call.bound, static_cast<size_t>(call.argc), nullptr);
}

}  // namespace

PyObject* CallWithEvalFrame(PyObject* cb, PyObject* limit_object, PyObject* fn, PyObject* const* args,
                            size_t nargsf, PyObject* kwnames) {
  if (extra_index < 0) {
    if (absl::Status s = Install(); !s.ok()) {
      PyErr_SetString(PyExc_RuntimeError, std::string(s.message()).c_str());
      return nullptr;
    }
  }
  CachedCall cached;
  if (cb != Py_None && !FindCached(cb, fn, args, PyVectorcall_NARGS(nargsf), kwnames, &cached)) return nullptr;
  if (cached.entry != nullptr) ++frame_free_hits;
  if (cached.entry != nullptr && cached.entry->graph && cached.entry->callback_off) {
    // The graph runs with the callback off: no region to open at all.
    ++direct_hits;
    return RunDirect(*cached.entry, cached.localsplus);
  }
  Object limit_read;
  if (!PyLong_Check(limit_object)) {
    limit_read = Object::Steal(PyObject_GetAttrString(limit_object, "cache_size_limit"));
    if (!limit_read) return nullptr;
    limit_object = limit_read.get();
  }
  const Py_ssize_t limit = PyLong_AsSsize_t(limit_object);
  if (limit == -1 && PyErr_Occurred()) return nullptr;
  const size_t previous_limit = cache_limit;
  PyObject* previous = nullptr;
  if (!SwapCallback(cb == Py_None ? nullptr : Py_NewRef(cb), &previous)) return nullptr;
  if (limit >= 0) cache_limit = static_cast<size_t>(limit);
  PyObject* result = cached.entry != nullptr ? RunCached(cached) : PyObject_Vectorcall(fn, args, nargsf, kwnames);
  PyObject* ours = nullptr;
  const bool restored = SwapCallback(previous, &ours);
  Py_XDECREF(ours);
  cache_limit = previous_limit;
  if (!restored) Py_CLEAR(result);
  return result;
}

PyObject* RunWithEvalFrame(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames) {
  if (nargs < 3) {
    PyErr_SetString(PyExc_TypeError, "run_with_eval_frame(callback, cache_size_limit, fn, *args, **kwargs)");
    return nullptr;
  }
  return CallWithEvalFrame(args[0], args[1], args[2], args + 3, static_cast<size_t>(nargs - 3), kwnames);
}

PyObject* MarkSkip(PyObject* /*module*/, PyObject* code) {
  if (!PyCode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "mark_skip needs a code object");
    return nullptr;
  }
  if (absl::Status s = Install(); !s.ok()) {
    PyErr_SetString(PyExc_RuntimeError, std::string(s.message()).c_str());
    return nullptr;
  }
  if (CodeState* state = StateOf(reinterpret_cast<PyCodeObject*>(code))) state->skip = true;
  Py_RETURN_NONE;
}

PyObject* MarkCapture(PyObject* /*module*/, PyObject* code) {
  if (!PyCode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "mark_capture needs a code object");
    return nullptr;
  }
  if (absl::Status s = Install(); !s.ok()) {
    PyErr_SetString(PyExc_RuntimeError, std::string(s.message()).c_str());
    return nullptr;
  }
  auto* co = reinterpret_cast<PyCodeObject*>(code);
  CodeState* state = StateOf(co);
  if (state != nullptr && state->skip && state->names.empty()) {
    // Skipped for its file (torch's own nn.Sequential.forward, say), but
    // asked for by name: capture it.
    if (!(co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) {
      if (!FillNames(state, co)) return nullptr;
      state->skip = false;
    }
  }
  Py_RETURN_NONE;
}

PyObject* ResetCaches(PyObject* /*module*/, PyObject* /*unused*/) {
  // Entries are moved out first and dropped after the walk: dropping one can
  // free a code object (a rewritten one), whose FreeState edits live_states.
  std::vector<std::shared_ptr<const Entry>> dropped;
  absl::flat_hash_map<PyObject*, Owner> watched;
  if (live_states != nullptr) {
    for (CodeState* s : *live_states) {
      for (auto& e : s->entries) dropped.push_back(std::move(e));
      s->entries.clear();
      s->dropped.clear();
      s->warned = false;
    }
    watched.swap(*owners);
  }
  dropped.clear();
  watched.clear();
  hits = misses = direct_hits = frame_free_hits = 0;
  Py_RETURN_NONE;
}

PyObject* CacheStats(PyObject* /*module*/, PyObject* /*unused*/) {
  size_t entries = 0;
  if (live_states != nullptr) {
    for (const CodeState* s : *live_states) entries += s->entries.size();
  }
  const size_t watched_owners = owners != nullptr ? owners->size() : 0;
  size_t stamped = 0;
  if (live_states != nullptr) {
    for (const CodeState* s : *live_states) {
      for (const auto& e : s->entries) stamped += e->guards.stamped_count();
    }
  }
  // stamped_subtrees: guard subtrees of cached entries checked once per
  // module version; skipped_subtrees: how often one was skipped (both 0 where
  // the interpreter's dict versions cannot be relied on: module_versions).
  // torch_tensor_checks / global_snapshot_hits: guards answered by torch's
  // own TensorGuards and GlobalStateGuard checks; quiet_aliases: objects
  // aliasing checks took from a stamp without comparing it again
  // (lib/guards/evaluator.h).
  return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:K,s:K,s:K,s:K,s:O,s:d}", "hits", static_cast<Py_ssize_t>(hits), "direct_hits",
                       static_cast<Py_ssize_t>(direct_hits), "frame_free_hits",
                       static_cast<Py_ssize_t>(frame_free_hits), "misses", static_cast<Py_ssize_t>(misses),
                       "entries", static_cast<Py_ssize_t>(entries), "owners",
                       static_cast<Py_ssize_t>(watched_owners), "stamped_subtrees", static_cast<Py_ssize_t>(stamped),
                       "skipped_subtrees", static_cast<unsigned long long>(guards::GuardEvaluator::skipped_subtrees()),
                       "torch_tensor_checks",
                       static_cast<unsigned long long>(guards::GuardEvaluator::torch_tensor_checks()),
                       "global_snapshot_hits",
                       static_cast<unsigned long long>(guards::GuardEvaluator::global_snapshot_hits()),
                       "quiet_aliases", static_cast<unsigned long long>(guards::GuardEvaluator::quiet_aliases()),
                       "module_versions", guards::VersionTagsReliable() ? Py_True : Py_False,
                       "guard_compile_seconds", guard_compile_seconds);
}

}  // namespace dynamo::embed
