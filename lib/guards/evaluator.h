// The C++ guard evaluator: a capture's guards (ir::Guard, made by
// lib/trace/guards.h) compiled once into a program over a frame's locals and
// globals, then checked on every call by the live cache. Check() only reads
// objects through the C API; Explain() names the first failing guard with
// both values, worded like the offline checker (python/dynamo/guards.py).
//
//   OwnedFrame seen = *OwnedFrame::ForCode(code, locals_dict, globals);  // or a live frame
//   absl::StatusOr<GuardEvaluator> ev = GuardEvaluator::Compile(traced.guards, seen.view());
//   if (ev->Check(frame)) { /* run the cached graph */ }
//   else if (std::optional<std::string> why = ev->Explain(frame)) {
//     // "L['x']: dtype: expected torch.float32, got torch.float64"
//   }
//
// How it is compiled:
// - Each source path (L['self'].layer1[0].conv1.stride) is parsed once into
//   accessor steps, and all guards share one tree of them: a prefix such as
//   L['self'].layer1 is read once per Check for all the guards below it.
//   Locals are slot indexes resolved by name at compile time; names, keys
//   and attributes are interned strings.
// - Steps are specialised on what the frame held at compile time, under the
//   object's type and that type's version tag (so a class changed later
//   falls back to the general path): an attribute found in the instance
//   __dict__ (or a module's dict) is one dict lookup; a torch.nn.Module's
//   submodule, parameter or buffer is read from _parameters/_buffers/_modules
//   exactly as nn.Module.__getattr__ would, without running it; Sequential,
//   ModuleList and ModuleDict items and lengths read _modules the same way.
//   Anything else uses PyObject_GetAttr / PyObject_GetItem, which may run a
//   class's Python __getattr__ or __getitem__.
// - ID_MATCH and TYPE_MATCH record only a name; they pin the very object or
//   type found in the compile-time frame (checked against that name) and
//   compare pointers (a bound method: its function and its object). EQUALS_MATCH compares exact types at every level
//   (True is not 1, a list is not a tuple) and then values. TENSOR_MATCH pins
//   the tensor's exact type, the torch.dtype and torch.device objects, and
//   calls the tensor type's C getters directly.
// - Within each accessor the cheapest checks run first; Explain() walks the
//   guards in their original order, so it reports the first failing one.
//
// Cells: a frame's cell and free variables hold a cell object once the frame
// has run MAKE_CELL / COPY_FREE_VARS (and the plain value before). For a slot
// marked in FrameView::cells, a cell object is read through to its contents
// (an empty cell counts as unbound); other slots are taken as they are.
//
// Every call needs the GIL and no pending Python exception. A source that
// cannot be read (a missing local, global, attribute, key or index) makes its
// guard fail; the error is cleared. Drop an evaluator with the GIL held.
//
// What it keeps alive: constants and copies (EQUALS_MATCH), interned names,
// torch's dtype and device objects -- never what it identifies. What ID_MATCH
// and TYPE_MATCH compare by address (modules, functions, classes, the
// nn.Module instances the trace read, a tensor's exact class) is watched
// through a weak reference: when one dies, the evaluator is dead -- Check()
// fails for good, so a new object at the same address is never taken for
// it -- and the callback given to OnDeath() runs (the live cache drops the
// entry there). Objects that cannot be weakly referenced (lists, dicts,
// tuples, ints) are held instead, which makes address reuse impossible;
// classes that are not heap types live forever and are not watched. Plans
// specialised on a type keep no reference at all: a type's version tag is
// never reused, so a dead type's plan can never apply to a new one.
#pragma once

#include <Python.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/python/object.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::guards {

// How the evaluator sees a frame. Check() must be given frames of the same
// code object as the one Compile() saw (the same names in the same slots).
struct FrameView {
  // localsplus values, borrowed; NULL for an unbound slot.
  PyObject* const* locals = nullptr;
  // Parallel names: co_varnames, then the cell variables that are not
  // arguments, then co_freevars (CPython 3.11's localsplus order).
  const std::vector<std::string>* names = nullptr;
  // Parallel flags: true for cell and free variables (see "Cells" above).
  // Null when the frame has none.
  const std::vector<bool>* cells = nullptr;
  // The frame's globals dict, borrowed.
  PyObject* globals = nullptr;
};

// A frame assembled from Python objects, for tests, benchmarks and callers
// that hold no live frame. Owns its values; view() borrows them.
class OwnedFrame {
 public:
  // A frame of `code` (a code object) whose locals are the entries of the
  // dict `locals` (names it lacks are unbound; extra keys are an error).
  [[nodiscard]] static absl::StatusOr<OwnedFrame> ForCode(const python::Object& code,
                                                          const python::Object& locals,
                                                          const python::Object& globals);
  // A frame whose names are exactly the keys of `locals`, in order, none of
  // them a cell.
  [[nodiscard]] static absl::StatusOr<OwnedFrame> FromDict(const python::Object& locals,
                                                           const python::Object& globals);

  // Rebinds a local (empty `value`: unbound). False when there is no such name.
  bool Set(absl::string_view name, python::Object value);
  FrameView view() const;

 private:
  void Sync();
  std::vector<std::string> names_;
  std::vector<bool> cells_;
  std::vector<python::Object> values_;
  std::vector<PyObject*> raw_;  // values_' pointers, what view() hands out
  python::Object globals_;
};

class GuardEvaluator {
 public:
  // Compiles `guards` against the frame the trace saw. Fails (InvalidArgument
  // or FailedPrecondition) on a source it cannot parse, a local the frame
  // does not have, a source that cannot be read in that frame, an ID_MATCH or
  // TYPE_MATCH whose name is not the object's found there, a symbolic size, or
  // any guard that does not hold on that frame.
  [[nodiscard]] static absl::StatusOr<GuardEvaluator> Compile(std::vector<ir::Guard> guards,
                                                              const FrameView& at_capture);
  // With an `owner`, the evaluator reads `guards` in place (for its
  // messages) and keeps `owner` alive, which keeps them alive and unchanged;
  // without one, it copies them.
  [[nodiscard]] static absl::StatusOr<GuardEvaluator> Compile(
      const google::protobuf::RepeatedPtrField<ir::Guard>& guards, const FrameView& at_capture,
      std::shared_ptr<const void> owner = nullptr);

  // True when every guard holds.
  bool Check(const FrameView& frame) const;
  // The first failing guard in the original order, as "<source>: <problem>"
  // (python/dynamo/guards.py's wording); nullopt when all hold.
  std::optional<std::string> Explain(const FrameView& frame) const;
  // Index (in the compiled list) of the first failing guard, or -1.
  int FirstFailing(const FrameView& frame) const;

  // False once an object the guards identify by address has died.
  bool alive() const;
  // Runs `f` once, when the first such object dies: from its weak
  // reference's callback, with the GIL, possibly inside another object's
  // deallocation or the garbage collector; `f` may drop this evaluator.
  // Replaces an earlier one.
  void OnDeath(std::function<void()> f) const;
  // The number of objects watched through weak references.
  size_t watched_count() const;

  // The number of guards.
  size_t size() const;
  // The number of distinct accessors (source prefixes) Check() reads.
  size_t accessor_count() const;
  // The number of subtrees checked once per version (lib/guards/versions.h):
  // while nothing their stamp records has changed, Check() skips their guards.
  size_t stamped_count() const;
  // How many times any evaluator skipped such a subtree (process-wide).
  static uint64_t skipped_subtrees();
  // How many objects an aliasing check took as a stamp recorded them without
  // comparing the stamp again, no dict having changed since it matched
  // (process-wide).
  static uint64_t quiet_aliases();
  // How many tensor checks torch's own TensorGuards answered, and how many
  // times one GlobalStateGuard check stood for the global-state guards it
  // covers (process-wide): the fast paths of Check(), which fall back to
  // reading each field where they say no.
  static uint64_t torch_tensor_checks();
  static uint64_t global_snapshot_hits();

  struct Program;  // defined in evaluator.cc

 private:
  explicit GuardEvaluator(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  static absl::StatusOr<GuardEvaluator> Compile(std::shared_ptr<Program> p, const FrameView& at_capture);
  std::shared_ptr<const Program> program_;
};

}  // namespace dynamo::guards
