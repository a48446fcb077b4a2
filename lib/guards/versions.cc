#include "lib/guards/versions.h"

#include "lib/python/error.h"
#include "lib/python/object.h"

namespace dynamo::guards {
namespace {

using python::Object;

// ma_version_tag is deprecated from 3.12 (it is still kept, and changed on
// every change to the dict): reading it is the point of this file.
uint64_t DictTag(PyObject* d) {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  return reinterpret_cast<PyDictObject*>(d)->ma_version_tag;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

}  // namespace

PyObject* InstanceDict(PyObject* o) {
  PyObject** slot = _PyObject_GetDictPtr(o);
  if (slot == nullptr) {
    if (PyErr_Occurred()) python::ClearError();
    return nullptr;
  }
  PyObject* d = *slot;
  return d != nullptr && PyDict_CheckExact(d) ? d : nullptr;
}

namespace {

bool IsDictOrODict(PyObject* d) { return PyDict_CheckExact(d) || Py_IS_TYPE(d, &PyODict_Type); }

const char* const kNnDicts[3] = {"_parameters", "_buffers", "_modules"};

bool Probe() {
  Object name = python::FromString("_dynamo_version_probe");
  Object bases = Object::Steal(PyTuple_Pack(1, reinterpret_cast<PyObject*>(&PyBaseObject_Type)));
  Object ns = Object::Steal(PyDict_New());
  if (!name || !bases || !ns) return false;
  Object cls = Object::Steal(PyObject_CallFunctionObjArgs(reinterpret_cast<PyObject*>(&PyType_Type), name.get(),
                                                          bases.get(), ns.get(), nullptr));
  Object obj = cls ? Object::Steal(PyObject_CallNoArgs(cls.get())) : Object();
  if (!obj) return false;
  Object one = python::FromLong(1), two = python::FromLong(2);
  if (PyObject_SetAttrString(obj.get(), "a", one.get()) != 0) return false;
  PyObject* d = InstanceDict(obj.get());
  if (d == nullptr) return false;
  uint64_t before = DictTag(d);
  // Each kind of change an attribute write makes: a new value, a new name, a deletion.
  if (PyObject_SetAttrString(obj.get(), "a", two.get()) != 0 || DictTag(d) == before) return false;
  before = DictTag(d);
  if (PyObject_SetAttrString(obj.get(), "b", one.get()) != 0 || DictTag(d) == before) return false;
  before = DictTag(d);
  if (PyObject_DelAttrString(obj.get(), "a") != 0 || DictTag(d) == before) return false;
  // And an OrderedDict (nn.Module's hooks) written through its own method.
  Object od = Object::Steal(PyODict_New());
  if (!od) return false;
  before = DictTag(od.get());
  if (PyODict_SetItem(od.get(), name.get(), one.get()) != 0 || DictTag(od.get()) == before) return false;
  return true;
}

// The private dict a reading writes (its value flips, so that every write
// is a change), and how far one write moves the counter.
struct EpochProbe {
  PyObject* dict = nullptr;  // leaked: readings last as long as the process
  PyObject* key = nullptr;
  bool flip = false;
  uint64_t step = 0;

  uint64_t Read() {
    flip = !flip;
    if (PyDict_SetItem(dict, key, flip ? Py_True : Py_False) != 0) {
      python::ClearError();
      return 0;
    }
    return DictTag(dict);
  }
};

EpochProbe* Epoch() {
  static EpochProbe* probe = [] {
    auto* p = new EpochProbe;
    p->dict = PyDict_New();
    p->key = PyUnicode_InternFromString("epoch");
    if (p->dict == nullptr || p->key == nullptr) {
      python::ClearError();
      return p;  // no dict: every reading is 0, never "unchanged"
    }
    uint64_t a = p->Read();
    uint64_t b = p->Read();
    p->step = b > a ? b - a : 0;
    return p;
  }();
  return probe;
}

}  // namespace

uint64_t ReadDictEpoch() { return Epoch()->Read(); }

uint64_t DictVersion(PyObject* dict) { return DictTag(dict); }

bool DictsUnchangedSince(uint64_t then, uint64_t* now) {
  EpochProbe* p = Epoch();
  *now = p->Read();
  return p->step != 0 && then != 0 && *now == then + p->step;
}

bool VersionTagsReliable() {
  static const bool reliable = [] {
    bool ok = Probe();
    python::ClearError();
    return ok;
  }();
  return reliable;
}

bool RecordPart(PyObject* object, const StampNeeds& needs, StampPart* out) {
  StampPart part;
  part.object = object;
  part.needs = needs;
  if (needs.attributes || needs.nn_dicts) {
    PyTypeObject* t = Py_TYPE(object);
    if (!HasValidTypeTag(t)) return false;
    part.type = t;
    part.type_tag = t->tp_version_tag;
    part.dict = InstanceDict(object);
    if (part.dict == nullptr) return false;
    part.dict_slot = _PyObject_GetDictPtr(object);
    if (part.dict_slot == nullptr || *part.dict_slot != part.dict) return false;
    part.dict_tag = DictTag(part.dict);
  }
  if (needs.nn_dicts) {
    for (int i = 0; i < 3; ++i) {
      PyObject* d = PyDict_GetItemString(part.dict, kNnDicts[i]);
      if (d == nullptr || !IsDictOrODict(d)) return false;
      part.nn[i] = d;
      part.nn_tags[i] = DictTag(d);
    }
  }
  if (needs.own_tag) {
    if (!IsDictOrODict(object)) return false;
    part.own_tag = DictTag(object);
  }
  *out = part;
  return true;
}

bool PartMatches(const StampPart& part) {
  PyObject* o = part.object;
  if (part.needs.attributes || part.needs.nn_dicts) {
    PyTypeObject* t = Py_TYPE(o);
    if (t != part.type || t->tp_version_tag != part.type_tag || !HasValidTypeTag(t)) return false;
    // The same type, so the same place for the instance dict.
    if (*part.dict_slot != part.dict || DictTag(part.dict) != part.dict_tag) return false;
  }
  if (part.needs.nn_dicts) {
    // Held by the unchanged __dict__: the same three dicts.
    for (int i = 0; i < 3; ++i) {
      if (DictTag(part.nn[i]) != part.nn_tags[i]) return false;
    }
  }
  return !part.needs.own_tag || DictTag(o) == part.own_tag;
}

}  // namespace dynamo::guards
