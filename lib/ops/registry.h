// The torch op registry: for every supported call target, keyed by its
// canonical name ("torch.add", "Tensor.add", "operator.add",
// "torch.nn.functional.relu"), the schema of its arguments, its tags, and a
// pure-C++ inference function that computes the output metadata exactly as
// torch would, without running a kernel. The ONNX op-schema model: one
// declarative entry per op, built from the shared helpers in infer_helpers.h.
//
//   const Registry& registry = DefaultRegistry();  // RegisterAllOps, built once
//   absl::StatusOr<Value> out = registry.Infer(
//       "torch.add", {Value(x_meta), Value(2.5)}, {{"alpha", Value(2)}});
//   // out->as_tensor(): float32[...]; an error where torch raises, with a message.
//
// What "exactly as torch" means here, and where it stops:
//  - An op with no entry is reported as NotFound ("unknown op"), never guessed;
//    an argument combination an entry does not model is Unimplemented.
//  - dtype rules include torch 2.14's CPU kernel coverage (argmax has no bool
//    kernel, so argmax of a CPU bool tensor is an error, as in torch).
//  - Strides are exact for views and for the outputs whose layout torch
//    defines (TensorIterator outputs, fresh contiguous results); where torch
//    picks a layout the registry does not model, strides are left empty
//    ("not tracked") rather than guessed.
//  - Leafness is not metadata: in-place ops on a leaf that requires grad are
//    accepted here (torch raises for leaves only).
// Python is not used here at all; the differential test (test/ops) proves the
// entries against real torch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "lib/ops/value.h"

namespace dynamo::ops {

// What kind of op an entry is; consumers (tracer, graph builder) use these.
enum Tag : uint32_t {
  kPointwise = 1u << 0,       // elementwise, broadcasting
  kReduction = 1u << 1,       // reduces dims
  kView = 1u << 2,            // output aliases the input (strides are exact)
  kInplace = 1u << 3,         // mutates its first argument and returns it
  kFactory = 1u << 4,         // makes a new tensor from sizes/values
  kRandom = 1u << 5,          // reads the RNG state
  kDataDependent = 1u << 6,   // an output size can depend on tensor values
  kNoTensorOutput = 1u << 7,  // returns a Python value (Tensor.dim, Tensor.size)
};
std::string TagsToString(uint32_t tags);

// One parameter of a signature, parsed from torch-like text:
//   "Tensor input", "Tensor|Number other", "int[1]? dim=None", "*", "*int[] size"
struct Param {
  enum class Type {
    kTensor,
    kNumber,
    kTensorOrNumber,
    kInt,
    kFloat,
    kBool,
    kString,
    kIntList,
    kTensorList,
    kDType,
    kDevice,
    kLayout,
    kMemoryFormat,
    kAny,
  };
  std::string name;
  Type type = Type::kAny;
  bool optional = false;      // "?": None accepted
  int list_size = 0;          // "int[2]": a single int is accepted and repeated
  bool keyword_only = false;  // after "*"
  bool varargs = false;       // "*int[] size": takes the remaining positionals
  bool has_default = false;
  Value default_value;
};

struct Signature {
  std::vector<Param> params;
  std::string text;  // as written, for messages
};

class OpEntry;

// The arguments of one call, bound to a signature (defaults filled, types
// checked). Inference functions read them by parameter name. Args refers to
// the caller's values (and the signature's defaults) rather than copying
// them: it lives only as long as the Infer call that made it.
class Args {
 public:
  Args(const OpEntry& op, int overload, std::vector<const Value*> values, std::vector<Value> owned);
  const OpEntry& op() const { return *op_; }
  int overload() const { return overload_; }  // index of the matched signature

  const Value& Get(absl::string_view name) const;
  bool IsNone(absl::string_view name) const { return Get(name).is_none(); }
  const TensorMeta& Tensor(absl::string_view name) const { return Get(name).as_tensor(); }
  int64_t Int(absl::string_view name) const { return Get(name).as_int(); }
  // A bool parameter; false when this overload has no such parameter.
  bool Bool(absl::string_view name) const {
    const Value& v = Get(name);
    return v.is_bool() && v.as_bool();
  }
  // A number as double (bool/int/float).
  double Number(absl::string_view name) const;
  // An int[] (a lone int is repeated list_size times).
  std::vector<int64_t> IntList(absl::string_view name) const;
  std::vector<TensorMeta> TensorList(absl::string_view name) const;
  std::optional<DType> OptDType(absl::string_view name) const;

 private:
  const OpEntry* op_;
  int overload_;
  std::vector<const Value*> values_;
  // Values made while binding: at most one (a varargs list), so pointers
  // into it stay valid; moving the vector keeps its buffer.
  std::vector<Value> owned_;
};

using InferFn = std::function<absl::StatusOr<Value>(const Args&)>;

class OpEntry {
 public:
  const std::string& name() const { return name_; }
  uint32_t tags() const { return tags_; }
  const std::vector<Signature>& signatures() const { return signatures_; }
  // Binds to the first signature that accepts the arguments. The Args refer
  // to `args` and `kwargs`, which must outlive them.
  absl::StatusOr<Args> Bind(absl::Span<const Value> args, absl::Span<const Kwarg> kwargs) const;
  absl::StatusOr<Value> Infer(absl::Span<const Value> args, absl::Span<const Kwarg> kwargs) const;

 private:
  friend class Registry;
  std::string name_;
  uint32_t tags_ = 0;
  std::vector<Signature> signatures_;
  InferFn infer_;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Declares one op. Signatures are tried in order (torch's overloads). A
  // malformed signature or a duplicate name is remembered and reported by
  // status(), so registration functions stay declarative lists.
  void Add(absl::string_view name, std::vector<absl::string_view> signatures, uint32_t tags,
           InferFn infer);
  // Declares `alias` with the same entry as the already registered `name`
  // (torch.nn.functional.relu and torch.relu share one inference).
  void Alias(absl::string_view alias, absl::string_view name);
  absl::Status status() const { return status_; }

  const OpEntry* Find(absl::string_view name) const;
  // NotFound for an unknown op; otherwise the entry's verdict.
  absl::StatusOr<Value> Infer(absl::string_view name, absl::Span<const Value> args,
                              absl::Span<const Kwarg> kwargs = {}) const;
  std::vector<std::string> Names() const;  // sorted
  size_t size() const { return entries_.size(); }

 private:
  absl::flat_hash_map<std::string, std::shared_ptr<const OpEntry>> entries_;
  absl::Status status_;
};

// Every op family, each an explicit registration function (no static
// initialisers). RegisterAllOps calls them all and returns the first
// registration error.
void RegisterPointwiseOps(Registry& registry);
void RegisterReductionOps(Registry& registry);
void RegisterShapeOps(Registry& registry);
void RegisterNnOps(Registry& registry);
void RegisterFactoryOps(Registry& registry);
void RegisterIndexingOps(Registry& registry);
[[nodiscard]] absl::Status RegisterAllOps(Registry& registry);

// A process-wide registry with every op, built on first use.
const Registry& DefaultRegistry();

}  // namespace dynamo::ops
