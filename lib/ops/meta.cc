#include "lib/ops/meta.h"

#include <algorithm>
#include <array>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace dynamo::ops {
namespace {

constexpr std::array<absl::string_view, kNumDTypes> kNames = {
    "bool",    "uint8",    "int8",    "int16",   "int32",     "int64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128"};

}  // namespace

absl::string_view DTypeName(DType dtype) { return kNames[static_cast<size_t>(dtype)]; }

std::optional<DType> DTypeFromName(absl::string_view name) {
  absl::ConsumePrefix(&name, "torch.");
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<DType>(i);
  }
  struct Alias {
    absl::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float", DType::kFloat32},    {"double", DType::kFloat64},    {"half", DType::kFloat16},
      {"long", DType::kInt64},       {"int", DType::kInt32},         {"short", DType::kInt16},
      {"cfloat", DType::kComplex64}, {"cdouble", DType::kComplex128}};
  for (const Alias& a : kAliases) {
    if (a.name == name) return a.dtype;
  }
  return std::nullopt;
}

bool IsFloating(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32 ||
         d == DType::kFloat64;
}
bool IsComplex(DType d) { return d == DType::kComplex64 || d == DType::kComplex128; }
bool IsIntegral(DType d, bool include_bool) {
  if (d == DType::kBool) return include_bool;
  return d == DType::kUInt8 || d == DType::kInt8 || d == DType::kInt16 || d == DType::kInt32 ||
         d == DType::kInt64;
}

std::string DeviceName(const Device& device) {
  if (device.index < 0) return device.type;
  return absl::StrCat(device.type, ":", device.index);
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  Device d;
  const size_t colon = text.find(':');
  d.type = std::string(text.substr(0, colon));
  if (d.type != "cpu" && d.type != "cuda" && d.type != "meta") {
    return absl::InvalidArgumentError(absl::StrCat(
        "Expected one of cpu, cuda, meta device type at start of device string: ", d.type));
  }
  if (colon == absl::string_view::npos) return d;
  const absl::string_view index = text.substr(colon + 1);
  const bool digits = !index.empty() && index.size() <= 3 &&
                      std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
  int64_t n = 0;
  if (!digits || (index.size() > 1 && index[0] == '0') || !absl::SimpleAtoi(index, &n) || n > 127) {
    return absl::InvalidArgumentError(absl::StrCat("Invalid device string: '", text, "'"));
  }
  d.index = n;
  return d;
}

TensorMeta TensorMeta::Contiguous(DType dtype, std::vector<int64_t> sizes, Device device) {
  TensorMeta m;
  m.dtype = dtype;
  m.strides = ContiguousStrides(sizes);
  m.sizes = std::move(sizes);
  m.device = std::move(device);
  return m;
}

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s == kDynamicSize) return -1;
    n *= s;
  }
  return n;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    // torch multiplies by max(size, 1): a size-0 dim does not zero the rest.
    // Saturates rather than overflow (undefined behaviour): sizes that big
    // are refused where they enter (input specs, IR readers).
    if (__builtin_mul_overflow(running, sizes[i] > 1 ? sizes[i] : 1, &running)) {
      running = std::numeric_limits<int64_t>::max();
    }
  }
  return strides;
}

bool IsContiguous(const TensorMeta& meta) {
  if (!meta.has_strides()) return false;
  if (meta.numel() == 0) return true;
  int64_t expected = 1;
  for (size_t i = meta.sizes.size(); i-- > 0;) {
    if (meta.sizes[i] == 1) continue;
    if (meta.strides[i] != expected) return false;
    expected *= meta.sizes[i];
  }
  return true;
}

std::string ToString(const TensorMeta& meta) {
  std::vector<std::string> dims;
  for (int64_t s : meta.sizes) dims.push_back(s == kDynamicSize ? "?" : absl::StrCat(s));
  return absl::StrCat(DTypeName(meta.dtype), "[", absl::StrJoin(dims, ", "), "]");
}

}  // namespace dynamo::ops
