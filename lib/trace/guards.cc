#include "lib/trace/guards.h"

#include <Python.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ops/proto_conversion.h"
#include "lib/python/error.h"
#include "lib/trace/variables.h"

namespace dynamo::trace {

ir::Guard* GuardSet::Add(ir::Guard::Kind kind, const std::string& source, const std::string& key) {
  absl::flat_hash_set<absl::string_view>& seen = seen_[static_cast<size_t>(kind)];
  if (seen.contains(key.empty() ? source : key)) return nullptr;
  ir::Guard* g = guards_.Add();
  g->set_kind(kind);
  g->set_source(source);
  // The set holds a view of the guard's own source text (each guard is
  // allocated once and its source never set again), or of a kept key.
  seen.insert(key.empty() ? absl::string_view(g->source()) : absl::string_view(keys_.emplace_back(key)));
  return g;
}

void GuardSet::TensorMatch(const SourcePtr& source, const ops::TensorMeta& meta) {
  if (!source) return;
  if (ir::Guard* g = Add(ir::Guard::TENSOR_MATCH, source->ToString())) {
    *g->mutable_tensor() = ops::ToProto(meta);
    g->set_reason("tensor input");
  }
}

void GuardSet::TensorMatch(const SourcePtr& source, const ops::TensorMeta& meta,
                           const std::vector<ops::SymExpr>& sizes, const std::vector<ops::SymExpr>& strides) {
  if (!source) return;
  if (ir::Guard* g = Add(ir::Guard::TENSOR_MATCH, source->ToString())) {
    *g->mutable_tensor() = ops::ToProto(meta);
    if (!sizes.empty()) ops::SetSymDims(sizes, g->mutable_tensor()->mutable_sizes());
    if (!strides.empty()) ops::SetSymDims(strides, g->mutable_tensor()->mutable_strides());
    g->set_reason(sizes.empty() ? "tensor input" : "tensor input with dynamic sizes");
  }
}

void GuardSet::EqualsMatch(const SourcePtr& source, const python::Object& value) {
  if (!source) return;
  if (value.get() == Py_None) {
    if (ir::Guard* g = Add(ir::Guard::IS_NONE, source->ToString())) g->set_reason("read as None");
    return;
  }
  // A NumPy scalar is recorded by its repr ("np.int64(3)"): the Python
  // number it holds would compare unequal in type to it.
  absl::StatusOr<ops::Value> v = python::IsNumpyNumber(value.get())
                                     ? absl::StatusOr<ops::Value>(absl::InvalidArgumentError("a NumPy scalar"))
                                     : ToValue(Var::Constant(value));
  absl::StatusOr<ir::Argument> arg =
      v.ok() ? ops::ToArgument(*v) : absl::StatusOr<ir::Argument>(v.status());
  if (!arg.ok()) {
    // Not expressible as an IR constant (bytes, a code object): its type and
    // repr still pin it for people; the live cache compares the object.
    ir::Argument repr;
    repr.set_string_value(python::Repr(value));
    arg = repr;
  }
  if (ir::Guard* g = Add(ir::Guard::EQUALS_MATCH, source->ToString())) {
    *g->mutable_value() = *arg;
    g->set_reason("constant read during the trace");
  }
}

void GuardSet::IdMatch(const SourcePtr& source, const python::Object& value) {
  if (!source) return;
  if (ir::Guard* g = Add(ir::Guard::ID_MATCH, source->ToString())) {
    g->mutable_value()->set_string_value(python::IdentityName(value.get()));
    g->set_reason("object identity read during the trace");
  }
}

void GuardSet::TypeMatch(const SourcePtr& source, const python::Object& value) {
  if (!source) return;
  if (ir::Guard* g = Add(ir::Guard::TYPE_MATCH, source->ToString())) {
    python::Object type = python::Object::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(value.get())));
    g->mutable_value()->set_string_value(python::IdentityName(type.get()));  // "mymodel.Config", "builtins.int"
    g->set_reason("type read during the trace");
  }
}

void GuardSet::Reidentify(const SourcePtr& source, const python::Object& value) {
  if (!source) return;
  const std::string path = source->ToString();
  python::Object type = python::Object::Borrow(reinterpret_cast<PyObject*>(Py_TYPE(value.get())));
  for (ir::Guard& g : guards_) {
    if (g.source() != path) continue;
    if (g.kind() == ir::Guard::ID_MATCH) g.mutable_value()->set_string_value(python::IdentityName(value.get()));
    if (g.kind() == ir::Guard::TYPE_MATCH) g.mutable_value()->set_string_value(python::IdentityName(type.get()));
  }
}

void GuardSet::LengthMatch(const SourcePtr& source, int64_t length) {
  if (!source) return;
  if (ir::Guard* g = Add(ir::Guard::LENGTH_MATCH, source->ToString())) {
    g->mutable_value()->set_int_value(length);
    g->set_reason("container iterated or measured");
  }
}

void GuardSet::HasAttr(const SourcePtr& object, const std::string& name, bool present) {
  if (!object) return;
  if (ir::Guard* g = Add(ir::Guard::HASATTR, Source::Attr(object, name)->ToString())) {
    g->mutable_value()->set_bool_value(present);
    g->set_reason(present ? "attribute read as present" : "attribute read as absent");
  }
}

void GuardSet::HasItem(const SourcePtr& mapping, const std::string& key, bool present) {
  if (!mapping) return;
  if (ir::Guard* g = Add(ir::Guard::HASATTR, Source::Item(mapping, key)->ToString())) {
    g->mutable_value()->set_bool_value(present);
    g->set_reason(present ? "key read as present" : "key read as absent");
  }
}

void GuardSet::Aliasing(const std::vector<SourcePtr>& sources, const std::vector<const void*>& identities) {
  if (sources.size() < 2) return;
  std::vector<std::string> paths;
  std::vector<int> groups;
  std::vector<const void*> seen;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!sources[i]) continue;
    std::string path = sources[i]->ToString();
    if (std::find(paths.begin(), paths.end(), path) != paths.end()) continue;
    auto it = std::find(seen.begin(), seen.end(), identities[i]);
    groups.push_back(static_cast<int>(it - seen.begin()));
    if (it == seen.end()) seen.push_back(identities[i]);
    paths.push_back(std::move(path));
  }
  if (paths.size() < 2) return;
  if (ir::Guard* g = Add(ir::Guard::OBJECT_ALIASING, paths[0],
                         absl::StrCat(absl::StrJoin(paths, ","), "|", absl::StrJoin(groups, ",")))) {
    for (size_t i = 0; i < paths.size(); ++i) {
      g->add_sources(paths[i]);
      g->add_groups(groups[i]);
    }
    g->set_reason(seen.size() == paths.size() ? "values read as distinct objects"
                                              : "values read as the same object");
  }
}

void GuardSet::GlobalDType(const std::string& name, ops::DType value) {
  if (ir::Guard* g = Add(ir::Guard::GLOBAL_STATE, name)) {
    g->mutable_value()->set_dtype(ops::ToProto(value));
    g->set_reason("global state read by the trace");
  }
}

void GuardSet::GlobalInt(const std::string& name, int64_t value) {
  if (ir::Guard* g = Add(ir::Guard::GLOBAL_STATE, name)) {
    g->mutable_value()->set_int_value(value);
    g->set_reason("global state read by the trace");
  }
}

void GuardSet::GlobalString(const std::string& name, const std::string& value) {
  if (ir::Guard* g = Add(ir::Guard::GLOBAL_STATE, name)) {
    g->mutable_value()->set_string_value(value);
    g->set_reason("global state read by the trace");
  }
}

void GuardSet::GlobalState(const std::string& name, bool value) {
  if (ir::Guard* g = Add(ir::Guard::GLOBAL_STATE, name)) {
    g->mutable_value()->set_bool_value(value);
    g->set_reason("global state read by the graph");
  }
}

}  // namespace dynamo::trace
