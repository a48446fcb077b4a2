// The shared rules every op entry is built from: torch's type promotion,
// broadcasting, dim wrapping, reductions, and the construction of outputs.
// Each reproduces the ATen rule of the same name (c10::promoteTypes,
// at::result_type, at::infer_size, c10::maybe_wrap_dim, ...) so that an entry
// reads like its ATen definition:
//
//   const Value& a = args.Get("input");
//   const Value& b = args.Get("other");
//   absl::StatusOr<DType> dtype = ResultType({&a, &b});              // promotion
//   absl::StatusOr<std::vector<int64_t>> sizes =
//       BroadcastShapes(a.as_tensor().sizes, b.as_tensor().sizes);   // broadcasting
//   const Value* inputs[] = {&a, &b};
//   return Value(PointwiseOutput(*dtype, *sizes, inputs, a.as_tensor().device));
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/ops/registry.h"
#include "lib/ops/value.h"

namespace dynamo::ops {

// The dtype torch.get_default_dtype() returns in a fresh process.
inline constexpr DType kDefaultFloat = DType::kFloat32;

// The default float dtype inference uses (Python floats, integer-to-float
// promotions, factory functions without dtype=): kDefaultFloat unless a
// DefaultFloatScope on this thread says otherwise (a trace sets the
// interpreter's torch.get_default_dtype() and guards it).
DType DefaultFloat();
class DefaultFloatScope {
 public:
  explicit DefaultFloatScope(DType dtype);
  ~DefaultFloatScope();
  DefaultFloatScope(const DefaultFloatScope&) = delete;
  DefaultFloatScope& operator=(const DefaultFloatScope&) = delete;

 private:
  DType previous_;
};

// The device torch's factory functions (torch.zeros, torch.tensor, ...: the
// constructors torch.set_default_device affects) make tensors on when given
// no device=: the CPU unless a DefaultDeviceScope on this thread says
// otherwise (a trace under torch.set_default_device or `with
// torch.device(...)` sets that device and guards it).
const Device& DefaultDevice();
// Whether a DefaultDeviceScope is active (torch.tensor(t) then follows it
// rather than t's device, as torch's DeviceContext makes it).
bool HasDefaultDevice();
class DefaultDeviceScope {
 public:
  explicit DefaultDeviceScope(std::optional<Device> device);
  ~DefaultDeviceScope();
  DefaultDeviceScope(const DefaultDeviceScope&) = delete;
  DefaultDeviceScope& operator=(const DefaultDeviceScope&) = delete;

 private:
  std::optional<Device> previous_;
};

// ---------------------------------------------------------------- dtypes
// A set of dtypes (bit i = DType i), for kernel coverage declarations.
using DTypeSet = uint32_t;
constexpr DTypeSet Bit(DType d) { return 1u << static_cast<unsigned>(d); }
inline constexpr DTypeSet kNoDTypes = 0;
inline constexpr DTypeSet kHalf = Bit(DType::kFloat16);
inline constexpr DTypeSet kBoolSet = Bit(DType::kBool);
inline constexpr DTypeSet kIntegralSet = Bit(DType::kUInt8) | Bit(DType::kInt8) |
                                         Bit(DType::kInt16) | Bit(DType::kInt32) |
                                         Bit(DType::kInt64);
inline constexpr DTypeSet kFloatingSet =
    Bit(DType::kFloat16) | Bit(DType::kBFloat16) | Bit(DType::kFloat32) | Bit(DType::kFloat64);
inline constexpr DTypeSet kComplexSet = Bit(DType::kComplex64) | Bit(DType::kComplex128);
inline constexpr bool InSet(DTypeSet set, DType d) { return (set & Bit(d)) != 0; }

// c10::promoteTypes.
DType PromoteTypes(DType a, DType b);
// c10::canCast: no float->integral, complex->non-complex, non-bool->bool.
bool CanCast(DType from, DType to);
// at::result_type over tensors and Python numbers (None ignored): dimensioned
// tensors outrank 0-dim tensors, which outrank Python numbers, unless a lower
// rank brings a higher category (bool < integral < floating < complex).
absl::StatusOr<DType> ResultType(absl::Span<const Value* const> operands);
absl::StatusOr<DType> ResultType(std::initializer_list<const Value*> operands);
// The dtype a Python number becomes as a tensor (bool, int64, default float).
DType NumberDType(const Value& number);
// Integral (and bool) -> the default float; floats and complex unchanged.
DType ToFloatIfIntegral(DType d);
// Rejects what torch's CPU kernels do not implement (e.g. "bmm" on bool in
// torch 2.14). Only checked on the CPU: other devices have other kernels.
// Reductions and softmax return before dispatching on empty inputs: they
// pass `numel`, and 0 skips the check.
absl::Status CheckKernel(absl::string_view kernel, DType dtype, const Device& device,
                         DTypeSet unsupported_on_cpu, int64_t numel = 1);

// ---------------------------------------------------------------- shapes
// at::infer_size: numpy-style broadcasting, with torch's message on mismatch.
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b);
// c10::maybe_wrap_dim; a 0-dim tensor accepts dims -1 and 0.
absl::StatusOr<int64_t> WrapDim(int64_t dim, int64_t ndim);
// Wraps a list of dims and rejects repeats ("dim 1 appears multiple times").
absl::StatusOr<std::vector<bool>> DimMask(const std::vector<int64_t>& dims, int64_t ndim);
// The sizes after reducing `mask`'s dims (all dims when the mask is empty).
std::vector<int64_t> ReducedSizes(const std::vector<int64_t>& sizes, const std::vector<bool>& mask,
                                  bool keepdim);
int64_t Numel(const std::vector<int64_t>& sizes);
// at::infer_size for view/reshape: one -1 inferred, products must agree.
absl::StatusOr<std::vector<int64_t>> InferViewSize(const std::vector<int64_t>& shape,
                                                   int64_t numel);

// ---------------------------------------------------------------- outputs
// The device and requires_grad of an output computed from `inputs`, and the
// check that tensors on different devices are not mixed (0-dim CPU tensors
// may join others, as in torch).
absl::StatusOr<Device> CommonDevice(absl::Span<const Value* const> inputs);
bool AnyRequiresGrad(absl::Span<const Value* const> inputs);
// A fresh contiguous output. requires_grad follows the inputs where the
// output dtype can carry gradients (floating and complex).
TensorMeta NewTensor(DType dtype, std::vector<int64_t> sizes, const Device& device,
                     bool inputs_require_grad);
// The strides TensorIterator gives an output it allocates for `inputs`
// broadcast to `shape` (at::TensorIteratorBase::fast_set_up, then
// reorder_dimensions: the output follows the inputs' memory order, so
// pointwise ops on transposed or channels-last tensors keep that layout).
// Empty when an input's strides are not known.
std::vector<int64_t> IteratorStrides(const std::vector<int64_t>& shape,
                                     absl::Span<const Value* const> inputs);
// A pointwise op's output, laid out by IteratorStrides.
TensorMeta PointwiseOutput(DType dtype, std::vector<int64_t> sizes,
                           absl::Span<const Value* const> inputs, const Device& device);
// torch's is_non_overlapping_and_dense: some permutation of a contiguous layout.
bool IsNonOverlappingAndDense(const TensorMeta& t);
// The strides empty_like(t, memory_format=preserve_format) gives: a dense,
// non-overlapping layout is kept; otherwise contiguous below 4-D, and
// untracked (empty) from 4-D on, where torch consults suggest_memory_format.
std::vector<int64_t> PreservedStrides(const TensorMeta& t);
// In-place ops refuse outputs where several elements share memory (an
// expanded tensor): at::assert_no_internal_overlap.
absl::Status CheckNoInternalOverlap(const TensorMeta& t);
// c10's is_channels_last_strides_2d: a 4-D layout whose strides put the
// channels innermost (what suggest_memory_format() calls ChannelsLast).
bool IsChannelsLastLike(const TensorMeta& t);
// get_channels_last_strides_2d: NHWC strides for 4-D NCHW sizes.
std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& sizes);
// The strides of a fresh output of `sizes` allocated with
// input.suggest_memory_format() (convolution, pooling, batch_norm, pad):
// channels-last for a channels-last-like 4-D input, contiguous otherwise.
std::vector<int64_t> SuggestedStrides(const TensorMeta& input, const std::vector<int64_t>& sizes);
// numpy's placement of advanced indices (x[idx] with tensor or list
// indices): the dims `indexed` marks are dropped and `shape` (the indices
// broadcast together) goes where the first of them was when they are
// adjacent, else in front. For integer sizes and, in sym_shapes.cc,
// symbolic ones.
template <typename Size>
std::vector<Size> PlaceAdvancedIndex(const std::vector<Size>& sizes, const std::vector<bool>& indexed,
                                     bool adjacent, size_t first, const std::vector<Size>& shape) {
  std::vector<Size> rest;
  size_t insert_at = adjacent ? first : 0;
  size_t removed_before = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (indexed[i]) {
      if (i < insert_at) ++removed_before;
      continue;
    }
    rest.push_back(sizes[i]);
  }
  insert_at -= removed_before;
  rest.insert(rest.begin() + static_cast<std::ptrdiff_t>(insert_at), shape.begin(), shape.end());
  return rest;
}

// A view of `base` with the given geometry (keeps dtype, device, grad).
TensorMeta ViewOf(const TensorMeta& base, std::vector<int64_t> sizes, std::vector<int64_t> strides);

// A device argument (torch.device or a string like "cuda:1"); `fallback`
// when it is None. Only the device types the registry knows are accepted.
absl::StatusOr<Device> DeviceArgument(const Value& value, const Device& fallback);

// Error helpers, so messages look alike.
absl::Status TypeError(absl::string_view message);
absl::Status ValueError(absl::string_view message);

}  // namespace dynamo::ops
