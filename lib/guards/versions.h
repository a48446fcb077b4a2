// Version stamps: what lets the guard evaluator skip every guard below an
// object (an nn.Module, typically) while nothing those guards read can have
// changed since they last held.
//
// A guard below a module reads the module's attributes: its instance
// __dict__, the dicts nn.Module.__getattr__ reads (_parameters, _buffers,
// _modules), attributes its class provides, and what those hold (tuples,
// dicts of hooks, submodules, which have their own parts). CPython gives
// each dict a version tag that changes on every change to the dict and is
// never handed out twice, and each class a version tag that changes when the
// class or a base changes. So the state a subtree of guards read is summed up
// by a few tags: if they are all the same, every guard of the subtree gives
// the result it gave when they were recorded (lib/guards/evaluator.cc decides
// which guards are such pure functions of what the tags cover).
//
//   StampPart part;
//   if (RecordPart(module, needs, &part)) { ... later ... }
//   if (PartMatches(part)) { /* unchanged since recorded */ }
//
// Parts are recorded and matched in preorder of the accessor tree: a part's
// object is borrowed, kept alive by the parts before it (the dict of its
// parent module holds it), so it may only be read once every part before it
// has matched.
#pragma once

#include <Python.h>

#include <cstdint>

namespace dynamo::guards {

// What of one object a stamp covers.
struct StampNeeds {
  bool attributes = false;  // its exact type (and version tag) and its instance __dict__
  bool nn_dicts = false;    // its _parameters, _buffers and _modules (read by nn.Module.__getattr__)
  bool own_tag = false;     // the object is a dict or an OrderedDict: its own version
  bool any() const { return attributes || nn_dicts || own_tag; }
};

// One object's part of a stamp, as recorded. Every pointer is borrowed (see
// the header comment).
struct StampPart {
  PyObject* object = nullptr;
  StampNeeds needs;
  PyTypeObject* type = nullptr;
  unsigned int type_tag = 0;
  PyObject* dict = nullptr;  // the instance __dict__
  PyObject** dict_slot = nullptr;  // where the object keeps it (fixed while its type is)
  uint64_t dict_tag = 0;
  PyObject* nn[3] = {nullptr, nullptr, nullptr};  // _parameters, _buffers, _modules (held by `dict`)
  uint64_t nn_tags[3] = {0, 0, 0};
  uint64_t own_tag = 0;
};

// Whether a class's version tag stands for its current state: CPython gives
// a class a new tag when it or a base changes, and never hands one out
// twice. 0 (and, before 3.13, a cleared Py_TPFLAGS_VALID_VERSION_TAG) means
// none is assigned since the last change.
inline bool HasValidTypeTag(PyTypeObject* t) {
#if PY_VERSION_HEX < 0x030D0000
  if (!(t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) return false;
#endif
  return t->tp_version_tag != 0;
}

// True when this interpreter changes a dict's version tag on every change,
// attribute writes to an instance included. CPython 3.11 and 3.12 do; 3.13
// does not for attributes stored inline in the instance, so stamps are off
// there and every guard is checked on every call. Decided once, by trying it
// on a fresh class. Needs the GIL.
bool VersionTagsReliable();

// The interpreter's dict-change counter. CPython 3.11 and 3.12 take every
// dict's new version tag, on every change to any dict, from one counter, so
// a reading of it is a moment: DictsUnchangedSince(then, &now) is true when
// no dict anywhere has changed since `then` was read (a stamp whose parts
// matched at `then` still matches). A reading writes a private dict, which
// is a step of the counter of its own, known and allowed for. Only where
// VersionTagsReliable(); needs the GIL. No Python code runs.
uint64_t ReadDictEpoch();
bool DictsUnchangedSince(uint64_t then, uint64_t* now);

// The instance __dict__ of `o` (made if the instance keeps its attributes
// inline), borrowed; null when it has none or it is not exactly a dict.
// Never raises.
PyObject* InstanceDict(PyObject* o);

// A dict's version tag (see the header comment): equal readings of one
// dict mean it has not changed in between. No Python code runs.
uint64_t DictVersion(PyObject* dict);

// Records what `needs` names of `object`; false when the object cannot be
// stamped (no instance dict, a class without a valid version tag, an
// _parameters that is not a plain dict, ...). No Python code runs.
bool RecordPart(PyObject* object, const StampNeeds& needs, StampPart* out);

// Whether the object of `part` is unchanged since it was recorded. No Python
// code runs.
bool PartMatches(const StampPart& part);

}  // namespace dynamo::guards
