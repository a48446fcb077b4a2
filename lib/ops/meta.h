// Tensor metadata as the op registry sees it: dtype, sizes, strides, device,
// requires_grad. Plain C++ (no protobuf, no Python) so inference is cheap;
// proto_conversion.h maps it to and from ir::TensorMeta.
//
//   TensorMeta x = TensorMeta::Contiguous(DType::kFloat32, {8, 3, 224, 224});
//   x.strides;           // {150528, 50176, 224, 1}
//   DTypeName(x.dtype);  // "float32"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dynamo::ops {

// In the order of torch's ScalarType lattice (promotion uses it).
enum class DType {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
};
inline constexpr int kNumDTypes = 12;

// torch's name without the "torch." prefix: "float32", "int64", "bool".
absl::string_view DTypeName(DType dtype);
// Accepts torch's names and aliases ("float", "long", "half", "torch.int32").
std::optional<DType> DTypeFromName(absl::string_view name);
bool IsFloating(DType dtype);  // float16, bfloat16, float32, float64
bool IsComplex(DType dtype);
// Integral types; bool counts only when include_bool.
bool IsIntegral(DType dtype, bool include_bool);

struct Device {
  std::string type = "cpu";
  int64_t index = -1;  // -1: none given
  bool operator==(const Device&) const = default;
};
std::string DeviceName(const Device& device);  // "cpu", "cuda:0"
// torch.device's string grammar, over the device types the registry infers
// (cpu, cuda, meta): "cuda", "cuda:1" (an index 0..127 in plain digits, no
// sign, space or leading zero). Anything else is InvalidArgument, worded as
// torch words it.
absl::StatusOr<Device> ParseDevice(absl::string_view text);

// A size that depends on tensor values (boolean-mask indexing, nonzero).
inline constexpr int64_t kDynamicSize = -1;

struct TensorMeta {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  // Empty when the layout is not tracked (see Registry: only outputs whose
  // layout torch defines exactly get strides).
  std::vector<int64_t> strides;
  Device device;
  bool requires_grad = false;
  // Some size is kDynamicSize because it depends on values.
  bool data_dependent = false;

  static TensorMeta Contiguous(DType dtype, std::vector<int64_t> sizes, Device device = {});
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  // Product of sizes; -1 when some size is dynamic.
  int64_t numel() const;
  bool has_strides() const { return strides.size() == sizes.size(); }
  bool operator==(const TensorMeta&) const = default;
};

// Row-major strides for `sizes` (size-0 and size-1 dims get torch's values).
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& sizes);
// torch's is_contiguous(): size-1 dims' strides do not matter.
bool IsContiguous(const TensorMeta& meta);
// "float32[2, 3]" for messages.
std::string ToString(const TensorMeta& meta);

}  // namespace dynamo::ops
