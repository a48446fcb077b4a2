// Shape ops: views (view, reshape, flatten, unsqueeze, squeeze, permute,
// transpose, t, expand, narrow, select, split, chunk, unbind, detach) whose
// strides are reproduced exactly, copies (contiguous, clone, repeat, cat,
// stack, to and the dtype shorthands), linear algebra (matmul, mm, bmm) and
// the queries that return Python values (size, dim, numel).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ops/infer_helpers.h"
#include "lib/ops/registry.h"

namespace dynamo::ops {
namespace {

std::string Dims(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

// ATen's computeStride: the strides a view of `sizes` over (old sizes,
// strides) needs, or nullopt when some new dim would span two
// non-contiguous chunks of the old layout.
std::optional<std::vector<int64_t>> ComputeViewStrides(const std::vector<int64_t>& old_sizes,
                                                       const std::vector<int64_t>& old_strides,
                                                       const std::vector<int64_t>& new_sizes) {
  if (old_sizes.empty()) return std::vector<int64_t>(new_sizes.size(), 1);
  const int64_t numel = Numel(old_sizes);
  if (numel == 0 && old_sizes == new_sizes) return old_strides;
  std::vector<int64_t> out(new_sizes.size());
  if (numel == 0) {
    for (int64_t d = static_cast<int64_t>(new_sizes.size()) - 1; d >= 0; --d) {
      const size_t i = static_cast<size_t>(d);
      out[i] = i + 1 == new_sizes.size() ? 1 : std::max<int64_t>(new_sizes[i + 1], 1) * out[i + 1];
    }
    return out;
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    const size_t td = static_cast<size_t>(tensor_d);
    tensor_numel *= old_sizes[td];
    if (tensor_d == 0 ||
        (old_sizes[td - 1] != 1 && old_strides[td - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 &&
             (view_numel < tensor_numel || new_sizes[static_cast<size_t>(view_d)] == 1)) {
        out[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

absl::Status NeedsStrides(const TensorMeta& t, absl::string_view op) {
  if (t.has_strides()) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      op, ": the input's strides are not known, so the view's layout cannot be inferred"));
}

absl::Status NoDynamic(const TensorMeta& t, absl::string_view op) {
  if (!t.data_dependent) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(op, " of a tensor whose size depends on data"));
}

absl::StatusOr<Value> View(const TensorMeta& t, const std::vector<int64_t>& shape,
                           absl::string_view op) {
  if (absl::Status s = NoDynamic(t, op); !s.ok()) return s;
  if (absl::Status s = NeedsStrides(t, op); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> sizes = InferViewSize(shape, t.numel());
  if (!sizes.ok()) return sizes.status();
  std::optional<std::vector<int64_t>> strides = ComputeViewStrides(t.sizes, t.strides, *sizes);
  if (!strides) {
    return absl::InvalidArgumentError(
        "view size is not compatible with input tensor's size and stride (at least one dimension "
        "spans across two contiguous subspaces). Use .reshape(...) instead.");
  }
  return Value(ViewOf(t, *std::move(sizes), *std::move(strides)));
}

// reshape: a view where the layout allows one, else a contiguous copy.
absl::StatusOr<Value> Reshape(const TensorMeta& t, const std::vector<int64_t>& shape,
                              absl::string_view op) {
  if (absl::Status s = NoDynamic(t, op); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> sizes = InferViewSize(shape, t.numel());
  if (!sizes.ok()) return sizes.status();
  if (!t.has_strides()) {
    TensorMeta out = ViewOf(t, *std::move(sizes), {});
    return Value(std::move(out));  // view or copy: the layout is not known
  }
  std::optional<std::vector<int64_t>> strides = ComputeViewStrides(t.sizes, t.strides, *sizes);
  if (strides) return Value(ViewOf(t, *std::move(sizes), *std::move(strides)));
  return Value(NewTensor(t.dtype, *std::move(sizes), t.device, t.requires_grad));
}

absl::StatusOr<Value> Flatten(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  if (t.dim() == 0) {
    for (absl::string_view p : {"start_dim", "end_dim"}) {
      if (absl::StatusOr<int64_t> d = WrapDim(args.Int(p), 0); !d.ok()) return d.status();
    }
    return Reshape(t, {1}, "flatten");
  }
  absl::StatusOr<int64_t> start = WrapDim(args.Int("start_dim"), t.dim());
  if (!start.ok()) return start.status();
  absl::StatusOr<int64_t> end = WrapDim(args.Int("end_dim"), t.dim());
  if (!end.ok()) return end.status();
  if (*start > *end) {
    return absl::InvalidArgumentError(
        "flatten() has invalid args: start_dim cannot come after end_dim");
  }
  if (*start == *end) return Value(t);
  std::vector<int64_t> shape(t.sizes.begin(), t.sizes.begin() + *start);
  int64_t n = 1;
  for (int64_t i = *start; i <= *end; ++i) n *= t.sizes[static_cast<size_t>(i)];
  shape.push_back(n);
  shape.insert(shape.end(), t.sizes.begin() + *end + 1, t.sizes.end());
  return Reshape(t, shape, "flatten");
}

absl::StatusOr<Value> Unsqueeze(const TensorMeta& t, int64_t dim) {
  if (absl::Status s = NeedsStrides(t, "unsqueeze"); !s.ok()) return s;
  absl::StatusOr<int64_t> d = WrapDim(dim, t.dim() + 1);
  if (!d.ok()) return d.status();
  const size_t i = static_cast<size_t>(*d);
  std::vector<int64_t> sizes = t.sizes, strides = t.strides;
  const int64_t stride = i >= t.sizes.size() ? 1 : t.sizes[i] * t.strides[i];
  sizes.insert(sizes.begin() + *d, 1);
  strides.insert(strides.begin() + *d, stride);
  return Value(ViewOf(t, std::move(sizes), std::move(strides)));
}

absl::StatusOr<Value> Squeeze(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  if (absl::Status s = NeedsStrides(t, "squeeze"); !s.ok()) return s;
  std::vector<int64_t> sizes, strides;
  std::optional<int64_t> only;
  if (!args.IsNone("dim")) {
    absl::StatusOr<int64_t> d = WrapDim(args.Int("dim"), t.dim());
    if (!d.ok()) return d.status();
    only = *d;
  }
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    const bool drop = t.sizes[i] == 1 && (!only || *only == static_cast<int64_t>(i));
    if (drop) continue;
    sizes.push_back(t.sizes[i]);
    strides.push_back(t.strides[i]);
  }
  return Value(ViewOf(t, std::move(sizes), std::move(strides)));
}

absl::StatusOr<Value> Permute(const TensorMeta& t, const std::vector<int64_t>& dims) {
  if (absl::Status s = NeedsStrides(t, "permute"); !s.ok()) return s;
  if (static_cast<int64_t>(dims.size()) != t.dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("permute(sparse_coo): number of dimensions in the tensor input does not match "
                     "the length of "
                     "the desired ordering of dimensions i.e. input.dim() = ",
                     t.dim(), " is not equal to len(dims) = ", dims.size()));
  }
  std::vector<bool> seen(dims.size(), false);
  std::vector<int64_t> sizes, strides;
  for (int64_t d : dims) {
    absl::StatusOr<int64_t> w = WrapDim(d, t.dim());
    if (!w.ok()) return w.status();
    if (seen[static_cast<size_t>(*w)])
      return absl::InvalidArgumentError("permute(): duplicate dims are not allowed.");
    seen[static_cast<size_t>(*w)] = true;
    sizes.push_back(t.sizes[static_cast<size_t>(*w)]);
    strides.push_back(t.strides[static_cast<size_t>(*w)]);
  }
  return Value(ViewOf(t, std::move(sizes), std::move(strides)));
}

absl::StatusOr<Value> Transpose(const TensorMeta& t, int64_t a, int64_t b) {
  if (absl::Status s = NeedsStrides(t, "transpose"); !s.ok()) return s;
  absl::StatusOr<int64_t> da = WrapDim(a, t.dim());
  if (!da.ok()) return da.status();
  absl::StatusOr<int64_t> db = WrapDim(b, t.dim());
  if (!db.ok()) return db.status();
  TensorMeta out = ViewOf(t, t.sizes, t.strides);
  if (t.dim() == 0) return Value(std::move(out));
  std::swap(out.sizes[static_cast<size_t>(*da)], out.sizes[static_cast<size_t>(*db)]);
  std::swap(out.strides[static_cast<size_t>(*da)], out.strides[static_cast<size_t>(*db)]);
  return Value(std::move(out));
}

absl::StatusOr<Value> TwoDTranspose(const TensorMeta& t) {
  if (t.dim() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("t() expects a tensor with <= 2 dimensions, but self is ", t.dim(), "D"));
  }
  if (t.dim() < 2) {
    if (absl::Status s = NeedsStrides(t, "t"); !s.ok()) return s;
    return Value(ViewOf(t, t.sizes, t.strides));
  }
  return Transpose(t, 0, 1);
}

// at::inferExpandGeometry.
absl::StatusOr<Value> Expand(const TensorMeta& t, const std::vector<int64_t>& target) {
  if (absl::Status s = NeedsStrides(t, "expand"); !s.ok()) return s;
  const int64_t ndim = static_cast<int64_t>(target.size());
  if (ndim < t.dim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expand(", ToString(t), "{", Dims(t.sizes), "}, size=", Dims(target),
        "): the number of sizes provided (", ndim,
        ") must be greater or equal to the number of dimensions in the tensor (", t.dim(), ")"));
  }
  std::vector<int64_t> sizes(static_cast<size_t>(ndim)), strides(static_cast<size_t>(ndim));
  for (int64_t i = ndim - 1; i >= 0; --i) {
    const size_t ui = static_cast<size_t>(i);
    const int64_t offset = ndim - 1 - i;
    const int64_t dim = t.dim() - 1 - offset;
    int64_t size = dim >= 0 ? t.sizes[static_cast<size_t>(dim)] : 1;
    int64_t stride = dim >= 0 ? t.strides[static_cast<size_t>(dim)]
                              : (ui + 1 < sizes.size() ? sizes[ui + 1] * strides[ui + 1] : 0);
    int64_t wanted = target[ui];
    if (wanted == -1) {
      if (dim < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("The expanded size of the tensor (-1) isn't allowed in a leading, "
                         "non-existing dimension ",
                         i));
      }
      wanted = size;
    }
    if (wanted < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trying to create tensor with negative dimension ", wanted));
    }
    if (size != wanted) {
      if (size != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("The expanded size of the tensor (", wanted,
                         ") must match the existing size (", size, ") at non-singleton dimension ",
                         i, ".  Target sizes: ", Dims(target), ".  Tensor sizes: ", Dims(t.sizes)));
      }
      size = wanted;
      stride = 0;
    }
    sizes[ui] = size;
    strides[ui] = stride;
  }
  return Value(ViewOf(t, std::move(sizes), std::move(strides)));
}

absl::StatusOr<int64_t> NeedDims(const TensorMeta& t, absl::string_view op) {
  if (t.dim() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, " expects at least a 1-dimensional tensor"));
  }
  return t.dim();
}

// Pieces of `dim` with the given lengths, each a view with self's strides.
absl::StatusOr<Value> Pieces(const TensorMeta& t, int64_t dim,
                             const std::vector<int64_t>& lengths) {
  std::vector<Value> out;
  for (int64_t len : lengths) {
    TensorMeta piece = ViewOf(t, t.sizes, t.strides);
    piece.sizes[static_cast<size_t>(dim)] = len;
    out.emplace_back(std::move(piece));
  }
  return Value::Tuple(std::move(out));
}

absl::StatusOr<Value> SplitBySize(const TensorMeta& t, int64_t split, int64_t dim_arg) {
  if (absl::StatusOr<int64_t> n = NeedDims(t, "split"); !n.ok()) return n.status();
  if (absl::Status s = NeedsStrides(t, "split"); !s.ok()) return s;
  absl::StatusOr<int64_t> dim = WrapDim(dim_arg, t.dim());
  if (!dim.ok()) return dim.status();
  const int64_t size = t.sizes[static_cast<size_t>(*dim)];
  if (split < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("split expects split_size be non-negative, but got split_size=", split));
  if (split == 0 && size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "split_size can only be 0 if dimension size is 0, but got dimension size of ", size));
  }
  const int64_t chunks = split == 0 ? 1 : std::max<int64_t>((size + split - 1) / split, 1);
  std::vector<int64_t> lengths(static_cast<size_t>(chunks), split);
  lengths.back() = split - (split * chunks - size);
  return Pieces(t, *dim, lengths);
}

absl::StatusOr<Value> SplitWithSizes(const TensorMeta& t, const std::vector<int64_t>& sizes,
                                     int64_t dim_arg) {
  if (absl::StatusOr<int64_t> n = NeedDims(t, "split_with_sizes"); !n.ok()) return n.status();
  if (absl::Status s = NeedsStrides(t, "split"); !s.ok()) return s;
  absl::StatusOr<int64_t> dim = WrapDim(dim_arg, t.dim());
  if (!dim.ok()) return dim.status();
  const int64_t size = t.sizes[static_cast<size_t>(*dim)];
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("split_with_sizes expects split_sizes have only non-negative entries, but "
                       "got split_sizes=",
                       Dims(sizes)));
    }
    sum += s;
  }
  if (sum != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "split_with_sizes expects split_sizes to sum exactly to ", size,
        " (input tensor's size at dimension ", *dim, "), but got split_sizes=", Dims(sizes)));
  }
  return Pieces(t, *dim, sizes);
}

absl::StatusOr<Value> Split(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  const Value& how = args.Get("split_size_or_sections");
  if (how.is_int()) return SplitBySize(t, how.as_int(), args.Int("dim"));
  return SplitWithSizes(t, args.IntList("split_size_or_sections"), args.Int("dim"));
}

absl::StatusOr<Value> Chunk(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  if (absl::StatusOr<int64_t> n = NeedDims(t, "chunk"); !n.ok()) return n.status();
  const int64_t chunks = args.Int("chunks");
  if (chunks <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("chunk expects `chunks` to be greater than 0, got: ", chunks));
  absl::StatusOr<int64_t> dim = WrapDim(args.Int("dim"), t.dim());
  if (!dim.ok()) return dim.status();
  const int64_t size = t.sizes[static_cast<size_t>(*dim)];
  const int64_t split = (size + chunks - 1) / chunks;
  if (split == 0 && size == 0) {
    return SplitWithSizes(t, std::vector<int64_t>(static_cast<size_t>(chunks), 0), *dim);
  }
  return SplitBySize(t, split, *dim);
}

absl::StatusOr<Value> Unbind(const TensorMeta& t, int64_t dim_arg) {
  if (absl::Status s = NeedsStrides(t, "unbind"); !s.ok()) return s;
  if (t.dim() == 0)
    return absl::InvalidArgumentError("Dimension specified as 0 but tensor has no dimensions");
  absl::StatusOr<int64_t> dim = WrapDim(dim_arg, t.dim());
  if (!dim.ok()) return dim.status();
  std::vector<int64_t> sizes = t.sizes, strides = t.strides;
  const int64_t n = sizes[static_cast<size_t>(*dim)];
  sizes.erase(sizes.begin() + *dim);
  strides.erase(strides.begin() + *dim);
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.emplace_back(ViewOf(t, sizes, strides));
  return Value::Tuple(std::move(out));
}

absl::StatusOr<Value> Narrow(const TensorMeta& t, int64_t dim_arg, int64_t start, int64_t length) {
  if (absl::Status s = NeedsStrides(t, "narrow"); !s.ok()) return s;
  if (t.dim() == 0)
    return absl::InvalidArgumentError("narrow() cannot be applied to a 0-dim tensor.");
  absl::StatusOr<int64_t> dim = WrapDim(dim_arg, t.dim());
  if (!dim.ok()) return dim.status();
  const int64_t size = t.sizes[static_cast<size_t>(*dim)];
  if (start < -size || start > size) {
    return absl::OutOfRangeError(absl::StrCat("start out of range (expected to be in range of [",
                                              -size, ", ", size, "], but got ", start, ")"));
  }
  if (start < 0) start += size;
  if (length < 0 || start > size - length) {
    return absl::InvalidArgumentError(absl::StrCat("start (", start, ") + length (", length,
                                                   ") exceeds dimension size (", size, ")."));
  }
  TensorMeta out = ViewOf(t, t.sizes, t.strides);
  out.sizes[static_cast<size_t>(*dim)] = length;
  return Value(std::move(out));
}

absl::StatusOr<Value> Select(const TensorMeta& t, int64_t dim_arg, int64_t index) {
  if (absl::Status s = NeedsStrides(t, "select"); !s.ok()) return s;
  if (t.dim() == 0)
    return absl::InvalidArgumentError("select() cannot be applied to a 0-dim tensor.");
  absl::StatusOr<int64_t> dim = WrapDim(dim_arg, t.dim());
  if (!dim.ok()) return dim.status();
  const int64_t size = t.sizes[static_cast<size_t>(*dim)];
  if (index < -size || index >= size) {
    return absl::OutOfRangeError(absl::StrCat("select(): index ", index,
                                              " out of range for tensor of size ", Dims(t.sizes),
                                              " at dimension ", *dim));
  }
  std::vector<int64_t> sizes = t.sizes, strides = t.strides;
  sizes.erase(sizes.begin() + *dim);
  strides.erase(strides.begin() + *dim);
  return Value(ViewOf(t, std::move(sizes), std::move(strides)));
}

// A copy of `t` with a new dtype, memory_format=preserve_format semantics.
TensorMeta PreservingCopy(const TensorMeta& t, DType dtype, const Device& device) {
  TensorMeta out = NewTensor(dtype, t.sizes, device, t.requires_grad);
  out.strides = PreservedStrides(t);
  return out;
}

absl::StatusOr<MemoryFormat> MemoryFormatOf(const Args& args, MemoryFormat fallback) {
  const Value& v = args.Get("memory_format");
  if (v.is_none()) return fallback;
  return v.as_memory_format();
}

absl::StatusOr<Value> Contiguous(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  absl::StatusOr<MemoryFormat> fmt = MemoryFormatOf(args, MemoryFormat::kContiguous);
  if (!fmt.ok()) return fmt.status();
  if (*fmt == MemoryFormat::kPreserve) {
    return absl::InvalidArgumentError(
        "preserve memory format is unsupported by the contiguous operator");
  }
  if (*fmt != MemoryFormat::kContiguous) {
    return absl::UnimplementedError("contiguous(memory_format=channels_last) is not modelled yet");
  }
  if (!t.has_strides())
    return absl::UnimplementedError("contiguous() of a tensor with unknown strides");
  if (IsContiguous(t)) return Value(t);
  return Value(NewTensor(t.dtype, t.sizes, t.device, t.requires_grad));
}

absl::StatusOr<Value> Clone(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  absl::StatusOr<MemoryFormat> fmt = MemoryFormatOf(args, MemoryFormat::kPreserve);
  if (!fmt.ok()) return fmt.status();
  if (*fmt == MemoryFormat::kContiguous)
    return Value(NewTensor(t.dtype, t.sizes, t.device, t.requires_grad));
  if (*fmt != MemoryFormat::kPreserve)
    return absl::UnimplementedError("clone to channels_last is not modelled yet");
  return Value(PreservingCopy(t, t.dtype, t.device));
}

// Tensor.to(dtype) / to(device, dtype) / to(other): self when nothing changes.
absl::StatusOr<Value> To(const Args& args) {
  const TensorMeta& t = args.Tensor("self");
  DType dtype = t.dtype;
  Device device = t.device;
  if (args.overload() == 0) {
    dtype = args.Get("dtype").as_dtype();
  } else if (args.overload() == 1) {
    absl::StatusOr<Device> d = DeviceArgument(args.Get("device"), t.device);
    if (!d.ok()) return d.status();
    device = *d;
    if (std::optional<DType> d2 = args.OptDType("dtype")) dtype = *d2;
  } else {
    const TensorMeta& other = args.Tensor("other");
    dtype = other.dtype;
    device = other.device;
  }
  const bool copy = args.Bool("copy");
  absl::StatusOr<MemoryFormat> fmt = MemoryFormatOf(args, MemoryFormat::kPreserve);
  if (!fmt.ok()) return fmt.status();
  if (*fmt != MemoryFormat::kPreserve)
    return absl::UnimplementedError("to(memory_format=...) is not modelled yet");
  if (dtype == t.dtype && device == t.device && !copy) return Value(t);
  TensorMeta out = PreservingCopy(t, dtype, device);
  return Value(std::move(out));
}

InferFn Convert(DType dtype) {
  return [dtype](const Args& args) -> absl::StatusOr<Value> {
    const TensorMeta& t = args.Tensor("self");
    absl::StatusOr<MemoryFormat> fmt = MemoryFormatOf(args, MemoryFormat::kPreserve);
    if (!fmt.ok()) return fmt.status();
    if (*fmt != MemoryFormat::kPreserve)
      return absl::UnimplementedError("memory_format is not modelled yet");
    if (t.dtype == dtype) return Value(t);
    return Value(PreservingCopy(t, dtype, t.device));
  };
}

absl::StatusOr<Value> Repeat(const TensorMeta& t, const std::vector<int64_t>& repeats) {
  if (static_cast<int64_t>(repeats.size()) < t.dim()) {
    return absl::InvalidArgumentError(
        "Number of dimensions of repeat dims can not be smaller than number of dimensions of "
        "tensor");
  }
  std::vector<int64_t> sizes(repeats.size());
  const size_t pad = repeats.size() - t.sizes.size();
  for (size_t i = 0; i < repeats.size(); ++i) {
    if (repeats[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trying to create tensor with negative dimension ", repeats[i]));
    }
    sizes[i] = repeats[i] * (i >= pad ? t.sizes[i - pad] : 1);
  }
  return Value(NewTensor(t.dtype, std::move(sizes), t.device, t.requires_grad));
}

// torch.cat: same ndim (legacy 1-d empty tensors skipped), promoted dtype.
absl::StatusOr<Value> Cat(const Args& args) {
  const Value& list = args.Get("tensors");
  if (list.items().empty())
    return absl::InvalidArgumentError("torch.cat(): expected a non-empty list of Tensors");
  std::vector<const Value*> all;
  for (const Value& v : list.items()) all.push_back(&v);
  absl::StatusOr<Device> device = CommonDevice(all);
  if (!device.ok()) return device.status();
  absl::StatusOr<DType> dtype = ResultType(all);
  if (!dtype.ok()) return dtype.status();
  const TensorMeta* ref = nullptr;
  for (const Value* v : all) {
    const TensorMeta& t = v->as_tensor();
    if (t.dim() == 0) {
      return absl::InvalidArgumentError("zero-dimensional tensor cannot be concatenated");
    }
    if (ref == nullptr && !(t.dim() == 1 && t.sizes[0] == 0)) ref = &t;
  }
  if (ref == nullptr) {
    return Value(NewTensor(*dtype, {0}, *device, AnyRequiresGrad(all)));
  }
  absl::StatusOr<int64_t> dim = WrapDim(args.Int("dim"), ref->dim());
  if (!dim.ok()) return dim.status();
  std::vector<int64_t> sizes = ref->sizes;
  sizes[static_cast<size_t>(*dim)] = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    const TensorMeta& t = all[k]->as_tensor();
    if (t.dim() == 1 && t.sizes[0] == 0) continue;
    if (t.dim() != ref->dim()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Tensors must have same number of dimensions: got ", ref->dim(), " and ", t.dim()));
    }
    for (int64_t d = 0; d < t.dim(); ++d) {
      const size_t ud = static_cast<size_t>(d);
      if (d == *dim) continue;
      if (t.sizes[ud] != ref->sizes[ud]) {
        return absl::InvalidArgumentError(
            absl::StrCat("Sizes of tensors must match except in dimension ", *dim,
                         ". Expected size ", ref->sizes[ud], " but got size ", t.sizes[ud],
                         " for tensor number ", k, " in the list."));
      }
    }
    sizes[static_cast<size_t>(*dim)] += t.sizes[static_cast<size_t>(*dim)];
  }
  TensorMeta out = NewTensor(*dtype, std::move(sizes), *device, AnyRequiresGrad(all));
  // The layout is at::cat's compute_output_memory_format: contiguous as soon
  // as one input suggests contiguous or two suggest different formats,
  // otherwise the one format all suggest (channels-last for 4-D). 5-D
  // channels-last is not modelled: such an input leaves the strides unknown.
  for (const Value* v : all) {
    const TensorMeta& t = v->as_tensor();
    if (!t.has_strides() || (t.dim() >= 5 && !IsContiguous(t))) {
      out.strides.clear();
      return Value(std::move(out));
    }
    if (!(t.dim() == 4 && IsChannelsLastLike(t))) return Value(std::move(out));
  }
  out.strides = ChannelsLastStrides(out.sizes);
  return Value(std::move(out));
}

absl::StatusOr<Value> Stack(const Args& args) {
  const Value& list = args.Get("tensors");
  if (list.items().empty())
    return absl::InvalidArgumentError("stack expects a non-empty TensorList");
  const TensorMeta& first = list.items()[0].as_tensor();
  absl::StatusOr<int64_t> dim = WrapDim(args.Int("dim"), first.dim() + 1);
  if (!dim.ok()) return dim.status();
  std::vector<const Value*> all;
  for (size_t k = 0; k < list.items().size(); ++k) {
    const TensorMeta& t = list.items()[k].as_tensor();
    if (t.sizes != first.sizes) {
      return absl::InvalidArgumentError(
          absl::StrCat("stack expects each tensor to be equal size, but got ", Dims(first.sizes),
                       " at entry 0 and ", Dims(t.sizes), " at entry ", k));
    }
    all.push_back(&list.items()[k]);
  }
  absl::StatusOr<Device> device = CommonDevice(all);
  if (!device.ok()) return device.status();
  absl::StatusOr<DType> dtype = ResultType(all);
  if (!dtype.ok()) return dtype.status();
  std::vector<int64_t> sizes = first.sizes;
  sizes.insert(sizes.begin() + *dim, static_cast<int64_t>(all.size()));
  return Value(NewTensor(*dtype, std::move(sizes), *device, AnyRequiresGrad(all)));
}

// ---------------------------------------------------------------- matmul
absl::Status SameDType(const TensorMeta& a, const TensorMeta& b, absl::string_view op) {
  if (a.dtype == b.dtype) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": expected both operands to have the same dtype, but got ",
                   DTypeName(a.dtype), " and ", DTypeName(b.dtype)));
}

absl::Status MatmulKernel(absl::string_view kernel, const TensorMeta& t) {
  return CheckKernel(kernel, t.dtype, t.device, kBoolSet);
}

absl::StatusOr<Value> Mm(const TensorMeta& a, const TensorMeta& b) {
  if (a.dim() != 2) return absl::InvalidArgumentError("self must be a matrix");
  if (b.dim() != 2) return absl::InvalidArgumentError("mat2 must be a matrix");
  if (a.sizes[1] != b.sizes[0]) {
    return absl::InvalidArgumentError(absl::StrCat("mat1 and mat2 shapes cannot be multiplied (",
                                                   a.sizes[0], "x", a.sizes[1], " and ", b.sizes[0],
                                                   "x", b.sizes[1], ")"));
  }
  if (absl::Status s = SameDType(a, b, "mm"); !s.ok()) return s;
  // The CPU addmm returns (zero-filled) before its kernel when there is
  // nothing to multiply.
  if (a.numel() != 0 && b.numel() != 0) {
    if (absl::Status s = MatmulKernel("addmm_impl", a); !s.ok()) return s;
  }
  return Value(
      NewTensor(a.dtype, {a.sizes[0], b.sizes[1]}, a.device, a.requires_grad || b.requires_grad));
}

absl::StatusOr<Value> Bmm(const TensorMeta& a, const TensorMeta& b) {
  if (a.dim() != 3) return absl::InvalidArgumentError("batch1 must be a 3D tensor");
  if (b.dim() != 3) return absl::InvalidArgumentError("batch2 must be a 3D tensor");
  if (a.sizes[0] != b.sizes[0] || a.sizes[2] != b.sizes[1]) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected size for first two dimensions of batch2 tensor to be: [", a.sizes[0],
                     ", ", a.sizes[2], "] but got: [", b.sizes[0], ", ", b.sizes[1], "]."));
  }
  if (absl::Status s = SameDType(a, b, "bmm"); !s.ok()) return s;
  if (absl::Status s = MatmulKernel("bmm", a); !s.ok()) return s;
  return Value(NewTensor(a.dtype, {a.sizes[0], a.sizes[1], b.sizes[2]}, a.device,
                         a.requires_grad || b.requires_grad));
}

// torch.matmul's dispatch on ranks (dot, mv, mm, folded mm, batched).
absl::StatusOr<Value> Matmul(const TensorMeta& a, const TensorMeta& b) {
  const int64_t da = a.dim(), db = b.dim();
  if (da == 0 || db == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "both arguments to matmul need to be at least 1D, but they are ", da, "D and ", db, "D"));
  }
  const bool grad = a.requires_grad || b.requires_grad;
  // mm and mv check dtypes first, but return before their kernels when an
  // operand is empty.
  const bool empty = a.numel() == 0 || b.numel() == 0;
  const bool mm_path = !(da == 1 && db == 1) && !(da >= 3 && db >= 3);
  if (absl::Status s = SameDType(a, b, "matmul"); !s.ok()) return s;
  std::vector<int64_t> sizes;
  if (da == 1 && db == 1) {
    if (a.sizes[0] != b.sizes[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("inconsistent tensor size, expected tensor [", a.sizes[0], "] and src [",
                       b.sizes[0], "] to have the same number of elements, but got ", a.sizes[0],
                       " and ", b.sizes[0], " elements respectively"));
    }
    if (absl::Status s = MatmulKernel("dot", a); !s.ok()) return s;
    return Value(NewTensor(a.dtype, {}, a.device, grad));
  }
  const int64_t k_a = a.sizes.back();
  const int64_t k_b = db == 1 ? b.sizes[0] : b.sizes[static_cast<size_t>(db - 2)];
  if (k_a != k_b) {
    const int64_t rows = da == 1 ? 1 : a.numel() / k_a;
    return absl::InvalidArgumentError(absl::StrCat("mat1 and mat2 shapes cannot be multiplied (",
                                                   rows, "x", k_a, " and ", k_b, "x",
                                                   db == 1 ? 1 : b.sizes.back(), ")"));
  }
  if (da <= 2 && db <= 2) {
    if (!empty) {
      if (absl::Status s = MatmulKernel(db == 1 ? "addmv_impl" : "addmm_impl", a); !s.ok())
        return s;
    }
    if (da == 2) sizes.push_back(a.sizes[0]);
    if (db == 2) sizes.push_back(b.sizes[1]);
    return Value(NewTensor(a.dtype, std::move(sizes), a.device, grad));
  }
  // Batched: broadcast the batch dims, then (n x k) @ (k x m).
  std::vector<int64_t> batch_a(a.sizes.begin(), a.sizes.end() - std::min<int64_t>(da, 2));
  std::vector<int64_t> batch_b(b.sizes.begin(), b.sizes.end() - std::min<int64_t>(db, 2));
  if (da == 1) batch_a.clear();
  if (db == 1) batch_b.clear();
  absl::StatusOr<std::vector<int64_t>> batch = BroadcastShapes(batch_a, batch_b);
  if (!batch.ok()) return batch.status();
  // A batched operand against a matrix folds into one mm; two batched ones use bmm.
  const bool uses_bmm = da >= 3 && db >= 3;
  if (!(empty && mm_path)) {
    if (absl::Status s = MatmulKernel(uses_bmm ? "bmm" : "addmm_impl", a); !s.ok()) return s;
  }
  sizes = *batch;
  if (da >= 2) sizes.push_back(a.sizes[static_cast<size_t>(da - 2)]);
  if (db >= 2) sizes.push_back(b.sizes.back());
  return Value(NewTensor(a.dtype, std::move(sizes), a.device, grad));
}

absl::StatusOr<Value> Flip(const TensorMeta& t, const std::vector<int64_t>& dims) {
  absl::StatusOr<std::vector<bool>> mask = DimMask(dims, t.dim());
  if (!mask.ok()) return mask.status();
  TensorMeta out = NewTensor(t.dtype, t.sizes, t.device, t.requires_grad);
  out.strides = PreservedStrides(t);  // flip allocates with empty_like(preserve_format)
  return Value(std::move(out));
}

absl::StatusOr<Value> Roll(const TensorMeta& t, const std::vector<int64_t>& shifts,
                           const std::vector<int64_t>& dims) {
  if (shifts.empty()) return absl::InvalidArgumentError("`shifts` required");
  if (dims.empty() && shifts.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size()));
  }
  if (!dims.empty() && dims.size() != shifts.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size()));
  }
  TensorMeta out = NewTensor(t.dtype, t.sizes, t.device, t.requires_grad);
  // roll of an empty tensor is a clone, before any dim is looked at.
  if (t.numel() == 0) {
    out.strides = PreservedStrides(t);
    return Value(std::move(out));
  }
  for (int64_t d : dims) {
    if (t.dim() == 0)
      return absl::InvalidArgumentError("Dimension specified as 0 but tensor has no dimensions");
    if (absl::StatusOr<int64_t> w = WrapDim(d, t.dim()); !w.ok()) return w.status();
  }
  // Contiguous for the layouts the test proves; others are not tracked.
  if (!IsContiguous(t) && t.dim() > 2) out.strides.clear();
  return Value(std::move(out));
}

absl::StatusOr<Value> Unflatten(const TensorMeta& t, int64_t dim_arg,
                                const std::vector<int64_t>& sizes) {
  if (t.dim() == 0)
    return absl::InvalidArgumentError(
        "unflatten: Dimension specified as 0 but tensor has no dimensions");
  absl::StatusOr<int64_t> dim = WrapDim(dim_arg, t.dim());
  if (!dim.ok()) return dim.status();
  if (sizes.empty()) return absl::InvalidArgumentError("unflatten: sizes must be non-empty");
  const int64_t size = t.sizes[static_cast<size_t>(*dim)];
  absl::StatusOr<std::vector<int64_t>> inferred = InferViewSize(sizes, size);
  if (!inferred.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unflatten: Provided sizes ", Dims(sizes),
                                                   " don't multiply up to the size of dim ", *dim,
                                                   " (", size, ") in the input tensor"));
  }
  std::vector<int64_t> shape(t.sizes.begin(), t.sizes.begin() + *dim);
  shape.insert(shape.end(), inferred->begin(), inferred->end());
  shape.insert(shape.end(), t.sizes.begin() + *dim + 1, t.sizes.end());
  return View(t, shape, "unflatten");
}

// addmm(input, mat1, mat2, *, beta, alpha): mm plus a bias broadcast to it.
absl::StatusOr<Value> Addmm(const Args& args) {
  const TensorMeta& bias = args.Tensor("input");
  const TensorMeta& a = args.Tensor("mat1");
  const TensorMeta& b = args.Tensor("mat2");
  absl::StatusOr<Value> mm = Mm(a, b);
  if (!mm.ok()) return mm;
  const std::vector<int64_t>& sizes = mm->as_tensor().sizes;
  absl::StatusOr<std::vector<int64_t>> bs = BroadcastShapes(sizes, bias.sizes);
  if (!bs.ok() || *bs != sizes) {
    return absl::InvalidArgumentError(absl::StrCat("The expanded size of the input ",
                                                   Dims(bias.sizes), " does not match the result ",
                                                   Dims(sizes)));
  }
  if (bias.dtype != a.dtype)
    return absl::InvalidArgumentError("self and mat2 must have the same dtype");
  TensorMeta out = mm->as_tensor();
  out.requires_grad = out.requires_grad || bias.requires_grad;
  return Value(std::move(out));
}

// baddbmm(input, batch1, batch2, *, beta, alpha): bmm plus a bias broadcast
// to it (masked attention scores of hand-written attention).
absl::StatusOr<Value> Baddbmm(const Args& args, absl::string_view self) {
  const TensorMeta& bias = args.Tensor(self);
  const TensorMeta& a = args.Tensor("batch1");
  const TensorMeta& b = args.Tensor("batch2");
  absl::StatusOr<Value> bmm = Bmm(a, b);
  if (!bmm.ok()) return bmm;
  const std::vector<int64_t>& sizes = bmm->as_tensor().sizes;
  absl::StatusOr<std::vector<int64_t>> bs = BroadcastShapes(sizes, bias.sizes);
  if (!bs.ok() || *bs != sizes) {
    return absl::InvalidArgumentError(absl::StrCat("The expanded size of the input ",
                                                   Dims(bias.sizes), " does not match the result ",
                                                   Dims(sizes)));
  }
  if (bias.dtype != a.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("Input dtypes must be the same, got: input ",
                                                   DTypeName(bias.dtype), ", batch1: ",
                                                   DTypeName(a.dtype), ", batch2: ",
                                                   DTypeName(b.dtype)));
  }
  TensorMeta out = bmm->as_tensor();
  out.requires_grad = out.requires_grad || bias.requires_grad;
  return Value(std::move(out));
}

void AddBoth(Registry& r, absl::string_view name, absl::string_view fn_sig,
             absl::string_view method_sig, uint32_t tags,
             const std::function<InferFn(absl::string_view)>& make) {
  r.Add(absl::StrCat("torch.", name), {fn_sig}, tags, make("input"));
  r.Add(absl::StrCat("Tensor.", name), {method_sig}, tags, make("self"));
}

}  // namespace

void RegisterShapeOps(Registry& r) {
  r.Add("Tensor.view", {"Tensor self, *int[] size"}, kView,
        [](const Args& a) { return View(a.Tensor("self"), a.IntList("size"), "view"); });
  r.Add("Tensor.reshape", {"Tensor self, *int[] shape"}, kView,
        [](const Args& a) { return Reshape(a.Tensor("self"), a.IntList("shape"), "reshape"); });
  r.Add("torch.reshape", {"Tensor input, int[] shape"}, kView,
        [](const Args& a) { return Reshape(a.Tensor("input"), a.IntList("shape"), "reshape"); });
  r.Add("Tensor.view_as", {"Tensor self, Tensor other"}, kView,
        [](const Args& a) { return View(a.Tensor("self"), a.Tensor("other").sizes, "view_as"); });
  r.Add("Tensor.reshape_as", {"Tensor self, Tensor other"}, kView, [](const Args& a) {
    return Reshape(a.Tensor("self"), a.Tensor("other").sizes, "reshape_as");
  });
  AddBoth(r, "flatten", "Tensor input, int start_dim=0, int end_dim=-1",
          "Tensor self, int start_dim=0, int end_dim=-1", kView, [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) { return Flatten(a, self); };
          });
  AddBoth(r, "unsqueeze", "Tensor input, int dim", "Tensor self, int dim", kView,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Unsqueeze(a.Tensor(self), a.Int("dim"));
            };
          });
  AddBoth(r, "squeeze", "Tensor input, int? dim=None", "Tensor self, int? dim=None", kView,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) { return Squeeze(a, self); };
          });
  r.Add("torch.permute", {"Tensor input, int[] dims"}, kView,
        [](const Args& a) { return Permute(a.Tensor("input"), a.IntList("dims")); });
  r.Add("Tensor.permute", {"Tensor self, *int[] dims"}, kView,
        [](const Args& a) { return Permute(a.Tensor("self"), a.IntList("dims")); });
  AddBoth(r, "transpose", "Tensor input, int dim0, int dim1", "Tensor self, int dim0, int dim1",
          kView, [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Transpose(a.Tensor(self), a.Int("dim0"), a.Int("dim1"));
            };
          });
  r.Alias("torch.swapaxes", "torch.transpose");
  AddBoth(r, "t", "Tensor input", "Tensor self", kView, [](absl::string_view self) {
    return [self = std::string(self)](const Args& a) { return TwoDTranspose(a.Tensor(self)); };
  });
  r.Add("Tensor.expand", {"Tensor self, *int[] size"}, kView,
        [](const Args& a) { return Expand(a.Tensor("self"), a.IntList("size")); });
  r.Add("torch.broadcast_to", {"Tensor input, int[] size"}, kView,
        [](const Args& a) { return Expand(a.Tensor("input"), a.IntList("size")); });
  r.Add("Tensor.broadcast_to", {"Tensor self, int[] size"}, kView,
        [](const Args& a) { return Expand(a.Tensor("self"), a.IntList("size")); });
  r.Add("Tensor.unflatten", {"Tensor self, int dim, int[] sizes"}, kView, [](const Args& a) {
    return Unflatten(a.Tensor("self"), a.Int("dim"), a.IntList("sizes"));
  });
  AddBoth(r, "flip", "Tensor input, int[] dims", "Tensor self, *int[] dims", 0,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Flip(a.Tensor(self), a.IntList("dims"));
            };
          });
  AddBoth(r, "roll", "Tensor input, int[1] shifts, int[1] dims=[]",
          "Tensor self, int[1] shifts, int[1] dims=[]", 0, [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Roll(a.Tensor(self), a.IntList("shifts"), a.IntList("dims"));
            };
          });
  r.Add("torch.addmm", {"Tensor input, Tensor mat1, Tensor mat2, *, Number beta=1, Number alpha=1"},
        0, Addmm);
  AddBoth(r, "baddbmm", "Tensor input, Tensor batch1, Tensor batch2, *, Number beta=1, Number alpha=1",
          "Tensor self, Tensor batch1, Tensor batch2, *, Number beta=1, Number alpha=1", 0,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) { return Baddbmm(a, self); };
          });
  r.Add("Tensor.expand_as", {"Tensor self, Tensor other"}, kView,
        [](const Args& a) { return Expand(a.Tensor("self"), a.Tensor("other").sizes); });
  AddBoth(r, "narrow", "Tensor input, int dim, int start, int length",
          "Tensor self, int dim, int start, int length", kView, [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Narrow(a.Tensor(self), a.Int("dim"), a.Int("start"), a.Int("length"));
            };
          });
  AddBoth(r, "select", "Tensor input, int dim, int index", "Tensor self, int dim, int index", kView,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Select(a.Tensor(self), a.Int("dim"), a.Int("index"));
            };
          });
  r.Add("torch.split", {"Tensor tensor, Any split_size_or_sections, int dim=0"}, kView,
        [](const Args& a) { return Split(a, "tensor"); });
  r.Add("Tensor.split", {"Tensor self, Any split_size, int dim=0"}, kView,
        [](const Args& a) -> absl::StatusOr<Value> {
          const Value& how = a.Get("split_size");
          if (how.is_int()) return SplitBySize(a.Tensor("self"), how.as_int(), a.Int("dim"));
          if (!how.is_list())
            return TypeError("split(): argument 'split_size' must be int or a list of ints");
          std::vector<int64_t> sizes;
          for (const Value& v : how.items()) {
            if (!v.is_int())
              return TypeError("split(): argument 'split_size' must be int or a list of ints");
            sizes.push_back(v.as_int());
          }
          return SplitWithSizes(a.Tensor("self"), sizes, a.Int("dim"));
        });
  AddBoth(r, "chunk", "Tensor input, int chunks, int dim=0", "Tensor self, int chunks, int dim=0",
          kView, [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) { return Chunk(a, self); };
          });
  AddBoth(r, "unbind", "Tensor input, int dim=0", "Tensor self, int dim=0", kView,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Unbind(a.Tensor(self), a.Int("dim"));
            };
          });
  r.Add("Tensor.detach", {"Tensor self"}, kView, [](const Args& a) -> absl::StatusOr<Value> {
    TensorMeta out = a.Tensor("self");
    out.requires_grad = false;
    return Value(std::move(out));
  });
  r.Alias("torch.detach", "Tensor.detach");

  r.Add("Tensor.contiguous", {"Tensor self, *, memory_format? memory_format=None"}, 0,
        [](const Args& a) { return Contiguous(a, "self"); });
  AddBoth(r, "clone", "Tensor input, *, memory_format? memory_format=None",
          "Tensor self, *, memory_format? memory_format=None", 0, [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) { return Clone(a, self); };
          });
  r.Add("Tensor.repeat", {"Tensor self, *int[] repeats"}, 0,
        [](const Args& a) { return Repeat(a.Tensor("self"), a.IntList("repeats")); });
  r.Add("torch.cat", {"Tensor[] tensors, int dim=0"}, 0, Cat);
  r.Alias("torch.concat", "torch.cat");
  r.Add("torch.stack", {"Tensor[] tensors, int dim=0"}, 0, Stack);
  r.Add("Tensor.to",
        {"Tensor self, dtype dtype, bool non_blocking=False, bool copy=False, *, memory_format? "
         "memory_format=None",
         "Tensor self, device? device=None, dtype? dtype=None, bool non_blocking=False, bool "
         "copy=False, *, "
         "memory_format? memory_format=None",
         "Tensor self, Tensor other, bool non_blocking=False, bool copy=False, *, memory_format? "
         "memory_format=None"},
        0, To);
  struct Shorthand {
    absl::string_view name;
    DType dtype;
  };
  static constexpr Shorthand kShorthands[] = {
      {"float", DType::kFloat32}, {"double", DType::kFloat64},   {"half", DType::kFloat16},
      {"int", DType::kInt32},     {"long", DType::kInt64},       {"bool", DType::kBool},
      {"short", DType::kInt16},   {"bfloat16", DType::kBFloat16}};
  for (const Shorthand& s : kShorthands) {
    r.Add(absl::StrCat("Tensor.", s.name), {"Tensor self, memory_format? memory_format=None"}, 0,
          Convert(s.dtype));
  }
  r.Add("Tensor.type_as", {"Tensor self, Tensor other"}, 0,
        [](const Args& a) -> absl::StatusOr<Value> {
          const TensorMeta& t = a.Tensor("self");
          const TensorMeta& o = a.Tensor("other");
          if (t.dtype == o.dtype) return Value(t);
          return Value(PreservingCopy(t, o.dtype, t.device));
        });

  AddBoth(r, "matmul", "Tensor input, Tensor other", "Tensor self, Tensor other", 0,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Matmul(a.Tensor(self), a.Tensor("other"));
            };
          });
  r.Add("operator.matmul", {"Tensor a, Tensor b"}, 0,
        [](const Args& a) { return Matmul(a.Tensor("a"), a.Tensor("b")); });
  AddBoth(r, "mm", "Tensor input, Tensor mat2", "Tensor self, Tensor mat2", 0,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Mm(a.Tensor(self), a.Tensor("mat2"));
            };
          });
  AddBoth(r, "bmm", "Tensor input, Tensor mat2", "Tensor self, Tensor mat2", 0,
          [](absl::string_view self) {
            return [self = std::string(self)](const Args& a) {
              return Bmm(a.Tensor(self), a.Tensor("mat2"));
            };
          });

  // Queries answered from metadata: Python values, no graph node needed.
  r.Add("Tensor.size", {"Tensor self, int? dim=None"}, kNoTensorOutput,
        [](const Args& a) -> absl::StatusOr<Value> {
          const TensorMeta& t = a.Tensor("self");
          if (absl::Status s = NoDynamic(t, "size"); !s.ok()) return s;
          if (a.IsNone("dim")) return Value::IntList(t.sizes, /*is_tuple=*/true);
          absl::StatusOr<int64_t> d = WrapDim(a.Int("dim"), t.dim());
          if (!d.ok()) return d.status();
          if (t.dim() == 0)
            return absl::OutOfRangeError("dimension specified as 0 but tensor has no dimensions");
          return Value(t.sizes[static_cast<size_t>(*d)]);
        });
  r.Add("Tensor.dim", {"Tensor self"}, kNoTensorOutput,
        [](const Args& a) -> absl::StatusOr<Value> { return Value(a.Tensor("self").dim()); });
  r.Alias("Tensor.ndimension", "Tensor.dim");
  r.Add("Tensor.numel", {"Tensor self"}, kNoTensorOutput,
        [](const Args& a) -> absl::StatusOr<Value> {
          const TensorMeta& t = a.Tensor("self");
          if (absl::Status s = NoDynamic(t, "numel"); !s.ok()) return s;
          return Value(t.numel());
        });
  r.Alias("torch.numel", "Tensor.numel");
  r.Alias("Tensor.nelement", "Tensor.numel");
  r.Add("Tensor.stride", {"Tensor self, int? dim=None"}, kNoTensorOutput,
        [](const Args& a) -> absl::StatusOr<Value> {
          const TensorMeta& t = a.Tensor("self");
          if (absl::Status s = NeedsStrides(t, "stride"); !s.ok()) return s;
          if (a.IsNone("dim")) return Value::IntList(t.strides, /*is_tuple=*/true);
          absl::StatusOr<int64_t> d = WrapDim(a.Int("dim"), t.dim());
          if (!d.ok()) return d.status();
          if (t.dim() == 0)
            return absl::OutOfRangeError("dimension specified as 0 but tensor has no dimensions");
          return Value(t.strides[static_cast<size_t>(*d)]);
        });
  r.Add("Tensor.is_contiguous", {"Tensor self"}, kNoTensorOutput,
        [](const Args& a) -> absl::StatusOr<Value> {
          const TensorMeta& t = a.Tensor("self");
          if (absl::Status s = NeedsStrides(t, "is_contiguous"); !s.ok()) return s;
          return Value(IsContiguous(t));
        });
  r.Add("Tensor.is_floating_point", {"Tensor self"}, kNoTensorOutput,
        [](const Args& a) -> absl::StatusOr<Value> {
          return Value(IsFloating(a.Tensor("self").dtype));
        });
  // torch.is_floating_point names its tensor `input` (is_floating_point(input=y)).
  r.Add("torch.is_floating_point", {"Tensor input"}, kNoTensorOutput,
        [](const Args& a) -> absl::StatusOr<Value> {
          return Value(IsFloating(a.Tensor("input").dtype));
        });
}

}  // namespace dynamo::ops
