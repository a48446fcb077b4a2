#include "lib/ops/infer_helpers.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dynamo::ops {
namespace {

enum class Category { kUndefined, kBool, kIntegral, kFloating, kComplex };

Category CategoryOf(DType d) {
  if (d == DType::kBool) return Category::kBool;
  if (IsIntegral(d, false)) return Category::kIntegral;
  if (IsFloating(d)) return Category::kFloating;
  return Category::kComplex;
}

// ResultType's three ranks; nullopt is ATen's "Undefined".
using Maybe = std::optional<DType>;

Maybe PromoteSkipUndefined(Maybe a, Maybe b) {
  if (!a) return b;
  if (!b) return a;
  return PromoteTypes(*a, *b);
}

DType ToComplex(DType d) { return d == DType::kFloat64 ? DType::kComplex128 : DType::kComplex64; }

// at::native::combine_categories: the higher rank wins unless the lower one
// brings a higher category.
Maybe CombineCategories(Maybe higher, Maybe lower) {
  if (higher && IsComplex(*higher)) return higher;
  if (lower && IsComplex(*lower)) {
    if (higher && IsFloating(*higher)) return ToComplex(*higher);
    return lower;
  }
  if (higher && IsFloating(*higher)) return higher;
  if ((higher && *higher == DType::kBool) || (lower && IsFloating(*lower))) {
    return PromoteSkipUndefined(higher, lower);
  }
  if (higher) return higher;
  return lower;
}

}  // namespace

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  Category ca = CategoryOf(a), cb = CategoryOf(b);
  if (ca != cb) {
    if (ca > cb) std::swap(a, b), std::swap(ca, cb);
    // b is of the higher category.
    if (cb == Category::kComplex && a == DType::kFloat64) return DType::kComplex128;
    return b;
  }
  switch (ca) {
    case Category::kIntegral: {
      // uint8 mixes with signed types by widening to the next signed type.
      if (a == DType::kUInt8 || b == DType::kUInt8) {
        DType other = a == DType::kUInt8 ? b : a;
        return other == DType::kInt8 ? DType::kInt16 : other;
      }
      return std::max(a, b);
    }
    case Category::kFloating:
      if ((a == DType::kFloat16 && b == DType::kBFloat16) ||
          (a == DType::kBFloat16 && b == DType::kFloat16)) {
        return DType::kFloat32;
      }
      return std::max(a, b);
    default:
      return std::max(a, b);
  }
}

bool CanCast(DType from, DType to) {
  if (IsComplex(from) && !IsComplex(to)) return false;
  if (IsFloating(from) && IsIntegral(to, false)) return false;
  if (from != DType::kBool && to == DType::kBool) return false;
  return true;
}

namespace {
thread_local DType current_default_float = kDefaultFloat;
thread_local std::optional<Device> current_default_device;
}  // namespace

const Device& DefaultDevice() {
  static const Device kCpu;
  return current_default_device ? *current_default_device : kCpu;
}
bool HasDefaultDevice() { return current_default_device.has_value(); }
DefaultDeviceScope::DefaultDeviceScope(std::optional<Device> device) : previous_(current_default_device) {
  current_default_device = std::move(device);
}
DefaultDeviceScope::~DefaultDeviceScope() { current_default_device = previous_; }

DType DefaultFloat() { return current_default_float; }
DefaultFloatScope::DefaultFloatScope(DType dtype) : previous_(current_default_float) {
  current_default_float = dtype;
}
DefaultFloatScope::~DefaultFloatScope() { current_default_float = previous_; }

DType NumberDType(const Value& number) {
  if (number.is_bool()) return DType::kBool;
  if (number.is_int()) return DType::kInt64;
  return DefaultFloat();
}

DType ToFloatIfIntegral(DType d) { return IsIntegral(d, true) ? DefaultFloat() : d; }

absl::StatusOr<DType> ResultType(absl::Span<const Value* const> operands) {
  Maybe dim, zero, wrapped;
  for (const Value* v : operands) {
    if (v == nullptr || v->is_none()) continue;
    if (v->is_tensor()) {
      const TensorMeta& t = v->as_tensor();
      if (t.dim() > 0) {
        dim = PromoteSkipUndefined(dim, t.dtype);
      } else {
        zero = PromoteSkipUndefined(zero, t.dtype);
      }
    } else if (v->is_number()) {
      wrapped = PromoteSkipUndefined(wrapped, NumberDType(*v));
    } else {
      return TypeError(absl::StrCat("expected a Tensor or a number, got ", TypeName(*v)));
    }
  }
  Maybe result = CombineCategories(dim, CombineCategories(zero, wrapped));
  if (!result) return absl::InvalidArgumentError("result_type of no operands");
  return *result;
}

absl::StatusOr<DType> ResultType(std::initializer_list<const Value*> operands) {
  return ResultType(absl::MakeConstSpan(operands.begin(), operands.size()));
}

absl::Status CheckKernel(absl::string_view kernel, DType dtype, const Device& device,
                         DTypeSet unsupported_on_cpu, int64_t numel) {
  if (numel != 0 && device.type == "cpu" && InSet(unsupported_on_cpu, dtype)) {
    static constexpr absl::string_view kTorchNames[] = {
        "Bool", "Byte",     "Char",  "Short",  "Int",          "Long",
        "Half", "BFloat16", "Float", "Double", "ComplexFloat", "ComplexDouble"};
    return absl::UnimplementedError(absl::StrCat("\"", kernel, "_cpu\" not implemented for '",
                                                 kTorchNames[static_cast<size_t>(dtype)], "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right.
    const ptrdiff_t ia = static_cast<ptrdiff_t>(a.size()) - static_cast<ptrdiff_t>(n - i);
    const ptrdiff_t ib = static_cast<ptrdiff_t>(b.size()) - static_cast<ptrdiff_t>(n - i);
    const int64_t sa = ia >= 0 ? a[static_cast<size_t>(ia)] : 1;
    const int64_t sb = ib >= 0 ? b[static_cast<size_t>(ib)] : 1;
    if (sa == sb || sb == 1) {
      out[i] = sa;
    } else if (sa == 1) {
      out[i] = sb;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("The size of tensor a (", sa,
                                                     ") must match the size of tensor b (", sb,
                                                     ") at non-singleton dimension ", i));
    }
  }
  return out;
}

absl::StatusOr<int64_t> WrapDim(int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  if (dim < -n || dim >= n) {
    return absl::OutOfRangeError(
        absl::StrCat("Dimension out of range (expected to be in range of [", -n, ", ", n - 1,
                     "], but got ", dim, ")"));
  }
  return dim < 0 ? dim + n : dim;
}

absl::StatusOr<std::vector<bool>> DimMask(const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<bool> mask(static_cast<size_t>(std::max<int64_t>(ndim, 1)), false);
  for (int64_t d : dims) {
    absl::StatusOr<int64_t> w = WrapDim(d, ndim);
    if (!w.ok()) return w.status();
    if (mask[static_cast<size_t>(*w)]) {
      return absl::InvalidArgumentError(
          absl::StrCat("dim ", *w, " appears multiple times in the list of dims"));
    }
    mask[static_cast<size_t>(*w)] = true;
  }
  mask.resize(static_cast<size_t>(ndim));
  return mask;
}

std::vector<int64_t> ReducedSizes(const std::vector<int64_t>& sizes, const std::vector<bool>& mask,
                                  bool keepdim) {
  const bool all = std::none_of(mask.begin(), mask.end(), [](bool b) { return b; });
  std::vector<int64_t> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const bool reduced = all || mask[i];
    if (!reduced) {
      out.push_back(sizes[i]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

int64_t Numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

absl::StatusOr<std::vector<int64_t>> InferViewSize(const std::vector<int64_t>& shape,
                                                   int64_t numel) {
  std::vector<int64_t> out = shape;
  int64_t product = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer) return absl::InvalidArgumentError("only one dimension can be inferred");
      infer = i;
    } else if (shape[i] >= 0) {
      product *= shape[i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("invalid shape dimension ", shape[i]));
    }
  }
  const std::string shape_text = absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
  if (numel == product && !infer) return out;
  if (infer && product > 0 && numel % product == 0) {
    out[*infer] = numel / product;
    return out;
  }
  if (infer && product == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot reshape tensor of 0 elements into shape ", shape_text,
        " because the unspecified dimension size -1 can be any value and is ambiguous"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("shape '", shape_text, "' is invalid for input of size ", numel));
}

absl::StatusOr<Device> CommonDevice(absl::Span<const Value* const> inputs) {
  const Device* found = nullptr;
  bool found_is_cpu_scalar = false;
  for (const Value* v : inputs) {
    if (v == nullptr || !v->is_tensor()) continue;
    const TensorMeta& t = v->as_tensor();
    const bool cpu_scalar = t.dim() == 0 && t.device.type == "cpu";
    if (found == nullptr || (found_is_cpu_scalar && !cpu_scalar)) {
      found = &t.device;
      found_is_cpu_scalar = cpu_scalar;
      continue;
    }
    if (!(t.device == *found) && !cpu_scalar) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Expected all tensors to be on the same device, but found at least two devices, ",
          DeviceName(*found), " and ", DeviceName(t.device), "!"));
    }
  }
  return found != nullptr ? *found : Device{};
}

bool AnyRequiresGrad(absl::Span<const Value* const> inputs) {
  return std::any_of(inputs.begin(), inputs.end(), [](const Value* v) {
    return v != nullptr && v->is_tensor() && v->as_tensor().requires_grad;
  });
}

TensorMeta NewTensor(DType dtype, std::vector<int64_t> sizes, const Device& device,
                     bool inputs_require_grad) {
  TensorMeta out = TensorMeta::Contiguous(dtype, std::move(sizes), device);
  out.requires_grad = inputs_require_grad && (IsFloating(dtype) || IsComplex(dtype));
  return out;
}

std::vector<int64_t> IteratorStrides(const std::vector<int64_t>& shape,
                                     absl::Span<const Value* const> inputs) {
  std::vector<const TensorMeta*> ops;
  for (const Value* v : inputs) {
    if (v == nullptr || !v->is_tensor()) continue;  // Python numbers: 0-dim, all-zero strides
    if (!v->as_tensor().has_strides()) return {};
    ops.push_back(&v->as_tensor());
  }
  const size_t ndim = shape.size();
  if (ndim == 0) return {};
  // fast_set_up: every operand (0-dim wrapped numbers included) of one shape.
  bool same_shape =
      !ops.empty() && ops.size() == static_cast<size_t>(std::count_if(
                                        inputs.begin(), inputs.end(), [](const Value* v) {
                                          return v != nullptr && (v->is_tensor() || v->is_number());
                                        }));
  for (const TensorMeta* t : ops) same_shape = same_shape && t->sizes == ops[0]->sizes;
  if (same_shape) {
    bool contiguous = true, dense = true, equal = true;
    for (const TensorMeta* t : ops) {
      contiguous = contiguous && IsContiguous(*t);
      dense = dense && IsNonOverlappingAndDense(*t);
      equal = equal && t->strides == ops[0]->strides;
    }
    if (contiguous) return ContiguousStrides(shape);
    // (channels_last inputs take the next branch too: they are dense and,
    // when all alike, share their strides.)
    if (dense && equal) return ops[0]->strides;
  }
  // compute_strides: broadcast dims get stride 0.
  std::vector<std::vector<int64_t>> strides;
  for (const TensorMeta* t : ops) {
    std::vector<int64_t> st(ndim, 0);
    const size_t offset = ndim - t->sizes.size();
    for (size_t i = 0; i < t->sizes.size(); ++i) {
      st[offset + i] = (t->sizes[i] == 1 && shape[offset + i] != 1) ? 0 : t->strides[i];
    }
    strides.push_back(std::move(st));
  }
  // reorder_dimensions: perm[0] is the fastest-moving dim.
  std::vector<size_t> perm(ndim);
  for (size_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  auto should_swap = [&](size_t dim0, size_t dim1) {
    for (const std::vector<int64_t>& st : strides) {
      const int64_t s0 = st[dim0], s1 = st[dim1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[dim0] > shape[dim1]) return 1;
    }
    return 0;
  };
  for (size_t i = 1; i < ndim; ++i) {
    size_t dim1 = i;
    for (size_t dim0 = i; dim0-- > 0;) {
      const int c = should_swap(perm[dim0], perm[dim1]);
      if (c > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (c < 0) {
        break;
      }
    }
  }
  bool inverted = true;
  for (size_t j = 0; j < ndim; ++j) inverted = inverted && perm[j] == ndim - 1 - j;
  if (inverted) return ContiguousStrides(shape);
  // compatible_stride over the permuted shape (a plain product: size-0 dims
  // zero the strides after them), mapped back to the original dim order.
  std::vector<int64_t> out(ndim);
  int64_t next = 1;
  for (size_t j = 0; j < ndim; ++j) {
    out[perm[j]] = next;
    next *= shape[perm[j]];
  }
  return out;
}

TensorMeta PointwiseOutput(DType dtype, std::vector<int64_t> sizes,
                           absl::Span<const Value* const> inputs, const Device& device) {
  std::vector<int64_t> strides = IteratorStrides(sizes, inputs);
  TensorMeta out = NewTensor(dtype, std::move(sizes), device, AnyRequiresGrad(inputs));
  out.strides = std::move(strides);
  return out;
}

bool IsNonOverlappingAndDense(const TensorMeta& t) {
  if (!t.has_strides()) return false;
  std::vector<size_t> perm(t.sizes.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (t.sizes[a] < 2) return false;
    if (t.sizes[b] < 2) return true;
    return t.strides[a] < t.strides[b];
  });
  int64_t expected = 1;
  for (size_t i : perm) {
    if (t.sizes[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.sizes[i];
  }
  return true;
}

std::vector<int64_t> PreservedStrides(const TensorMeta& t) {
  if (IsNonOverlappingAndDense(t)) return t.strides;
  if (t.dim() >= 4 || !t.has_strides()) return {};
  return ContiguousStrides(t.sizes);
}

bool IsChannelsLastLike(const TensorMeta& t) {
  if (t.dim() != 4 || !t.has_strides()) return false;
  if (t.strides[1] == 0) return false;  // a trivial C dimension defaults to NCHW
  int64_t min = 0;
  for (size_t d : {1, 3, 2, 0}) {
    if (t.sizes[d] == 0) return false;
    if (t.strides[d] < min) return false;
    // N111-like ambiguities fall back to NCHW, as in c10.
    if (d == 0 && min == t.strides[1]) return false;
    min = t.strides[d];
    if (t.sizes[d] > 1) min *= t.sizes[d];
  }
  return true;
}

std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(4);
  strides[1] = 1;
  strides[3] = sizes[1];
  strides[2] = strides[3] * sizes[3];
  strides[0] = strides[2] * sizes[2];
  return strides;
}

std::vector<int64_t> SuggestedStrides(const TensorMeta& input, const std::vector<int64_t>& sizes) {
  if (sizes.size() == 4 && IsChannelsLastLike(input)) return ChannelsLastStrides(sizes);
  return ContiguousStrides(sizes);
}

absl::Status CheckNoInternalOverlap(const TensorMeta& t) {
  if (t.numel() == 0) return absl::OkStatus();  // empty tensors count as contiguous
  for (size_t i = 0; i < t.strides.size() && i < t.sizes.size(); ++i) {
    if (t.sizes[i] > 1 && t.strides[i] == 0) {
      return absl::InvalidArgumentError(
          "unsupported operation: more than one element of the written-to tensor refers to a "
          "single memory "
          "location. Please clone() the tensor before performing the operation.");
    }
  }
  return absl::OkStatus();
}

TensorMeta ViewOf(const TensorMeta& base, std::vector<int64_t> sizes,
                  std::vector<int64_t> strides) {
  TensorMeta out;
  out.dtype = base.dtype;
  out.sizes = std::move(sizes);
  out.strides = std::move(strides);
  out.device = base.device;
  out.requires_grad = base.requires_grad;
  out.data_dependent = base.data_dependent;
  return out;
}

absl::StatusOr<Device> DeviceArgument(const Value& value, const Device& fallback) {
  if (value.is_none()) return fallback;
  Device d;
  if (value.is_device()) {
    d = value.as_device();
  } else if (value.is_string()) {
    return ParseDevice(value.as_string());
  } else {
    return TypeError(absl::StrCat("expected a device, got ", TypeName(value)));
  }
  if (d.type != "cpu" && d.type != "cuda" && d.type != "meta") {
    return absl::InvalidArgumentError(absl::StrCat(
        "Expected one of cpu, cuda, meta device type at start of device string: ", d.type));
  }
  return d;
}

absl::Status TypeError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("TypeError: ", message));
}
absl::Status ValueError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("ValueError: ", message));
}

}  // namespace dynamo::ops
