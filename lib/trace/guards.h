// The guards a trace depends on, collected as the translator reads values:
// each is an ir::Guard (kind, source path, expected value), deduplicated by
// (kind, source) and kept in the order first needed, so output is stable.
//
//   GuardSet guards;
//   guards.TensorMatch(Source::Local("x"), meta);          // L['x'] dtype/shape/...
//   guards.EqualsMatch(Source::Local("n"), FromLong(3));   // L['n'] == 3
//   std::vector<ir::Guard> out = std::move(guards).Take();
#pragma once

#include <array>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "lib/ops/meta.h"
#include "lib/ops/sym.h"
#include "lib/python/object.h"
#include "lib/trace/source.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::trace {

class GuardSet {
 public:
  // dtype, device, sizes, strides, requires_grad of a tensor input.
  void TensorMatch(const SourcePtr& source, const ops::TensorMeta& meta);
  // With dynamic shapes: sizes and strides as expressions over symbols
  // (a symbol binds the call's size there; see the SHAPE_ENV guard).
  void TensorMatch(const SourcePtr& source, const ops::TensorMeta& meta, const std::vector<ops::SymExpr>& sizes,
                   const std::vector<ops::SymExpr>& strides);
  // value == expected, for constants (None becomes IS_NONE).
  void EqualsMatch(const SourcePtr& source, const python::Object& value);
  // value is this very object (modules, functions, classes, nn.Modules). The
  // recorded expectation is a stable name (python::IdentityName), since addresses
  // mean nothing outside this process; the live cache compares identity.
  void IdMatch(const SourcePtr& source, const python::Object& value);
  // type(value) is the type of `value` (recorded as python::IdentityName of the type).
  void TypeMatch(const SourcePtr& source, const python::Object& value);
  // `value`, at `source`, changed class during the trace (a lazy module
  // becoming its cls_to_become when it initialized): the ID_MATCH and
  // TYPE_MATCH guards already recorded on it name what it is now.
  void Reidentify(const SourcePtr& source, const python::Object& value);
  // len(value) == length (containers that were iterated or measured).
  void LengthMatch(const SourcePtr& source, int64_t length);
  // hasattr(value at `object`, name) == present: an attribute's absence is a
  // fact the trace read as much as its value (getattr with a default).
  void HasAttr(const SourcePtr& object, const std::string& name, bool present);
  // `key in value at mapping` == present (HASATTR on mapping[key]).
  void HasItem(const SourcePtr& mapping, const std::string& key, bool present);
  // Which of these values are the same object: `identities` parallel to
  // `sources` (equal identities: the same object). One guard, over every
  // pair, so that f(a, a) and f(a, b) never share a trace.
  void Aliasing(const std::vector<SourcePtr>& sources, const std::vector<const void*>& identities);
  // Interpreter-wide state the trace read: "grad_mode" -> enabled.
  void GlobalState(const std::string& name, bool value);
  // A dtype-valued state ("default_dtype" -> torch.get_default_dtype()).
  void GlobalDType(const std::string& name, ops::DType value);
  // An int-valued state ("torch_dispatch_modes" -> the dispatch-mode stack's depth).
  void GlobalInt(const std::string& name, int64_t value);
  // A str-valued state ("torch_function_modes" -> python::TorchFunctionModes()).
  void GlobalString(const std::string& name, const std::string& value);

  const google::protobuf::RepeatedPtrField<ir::Guard>& guards() const { return guards_; }
  // The guards, moved out: the set is done (a trace's last step). A
  // repeated field, as a capture holds them: Swap hands them over whole.
  google::protobuf::RepeatedPtrField<ir::Guard> Take() && { return std::move(guards_); }

 private:
  ir::Guard* Add(ir::Guard::Kind kind, const std::string& source, const std::string& key = "");
  google::protobuf::RepeatedPtrField<ir::Guard> guards_;
  // Per kind, the sources (or keys) already guarded: views of the guards'
  // sources (a guard's source is never set again) and of keys_.
  std::array<absl::flat_hash_set<absl::string_view>, ir::Guard::Kind_ARRAYSIZE> seen_;
  std::deque<std::string> keys_;  // (a deque: its strings never move)
};

}  // namespace dynamo::trace
