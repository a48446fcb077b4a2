// Indexing: operator.getitem / operator.setitem with ints, slices, None,
// Ellipsis, lists of ints, integer tensors and boolean masks (whose result
// sizes depend on data and are marked so), plus nonzero, masked_select,
// index_select and gather. Basic indexing is a view with exact strides
// (torch's applySlicing); advanced indexing makes a new tensor.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ops/infer_helpers.h"
#include "lib/ops/registry.h"

namespace dynamo::ops {
namespace {

std::string Dims(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (int64_t d : v) parts.push_back(d == kDynamicSize ? "?" : absl::StrCat(d));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

absl::Status IndexError(absl::string_view message) {
  return absl::OutOfRangeError(absl::StrCat("IndexError: ", message));
}

// A nested list of ints as an index: its shape, with every value checked
// against the size of the dim it indexes (values are known here).
absl::Status ListIndexShape(const Value& v, size_t depth, int64_t dim_size, int64_t dim,
                            std::vector<int64_t>& shape) {
  if (v.is_list()) {
    const int64_t n = static_cast<int64_t>(v.items().size());
    if (depth == shape.size()) {
      shape.push_back(n);
    } else if (depth > shape.size() || shape[depth] != n) {
      return absl::InvalidArgumentError("ragged nested sequence used as an index");
    }
    for (const Value& item : v.items()) {
      if (absl::Status s = ListIndexShape(item, depth + 1, dim_size, dim, shape); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (v.is_bool()) return absl::UnimplementedError("indexing with a list of bools is not modelled");
  if (!v.is_int())
    return IndexError(absl::StrCat("tensors used as indices must be long, int, byte or bool tensors"));
  if (depth != shape.size())
    return absl::InvalidArgumentError("ragged nested sequence used as an index");
  const int64_t i = v.as_int();
  if (i < -dim_size || i >= dim_size) {
    return IndexError(absl::StrCat("index ", i, " is out of bounds for dimension ", dim,
                                   " with size ", dim_size));
  }
  return absl::OkStatus();
}

struct Indexed {
  TensorMeta meta;        // the result
  bool advanced = false;  // a copy rather than a view
};

// torch's applySlicing followed by index() for the advanced parts.
absl::StatusOr<Indexed> ApplyIndex(const TensorMeta& t, const Value& index) {
  if (t.data_dependent)
    return absl::UnimplementedError("indexing a tensor whose size depends on data");
  if (!t.has_strides())
    return absl::UnimplementedError("indexing a tensor whose strides are not known");
  std::vector<Value> items;
  if (index.is_list() && index.as_list().is_tuple) {
    items = index.items();
  } else if (index.is_list()) {
    // torch (like numpy) reads a list holding slices, None, Ellipsis or
    // sequences as a tuple of indices; a flat list of ints is one index.
    const bool as_tuple =
        std::any_of(index.items().begin(), index.items().end(), [](const Value& v) {
          return v.is_slice() || v.is_none() || v.is_ellipsis() || v.is_list() || v.is_tensor();
        });
    if (as_tuple) {
      items = index.items();
    } else {
      items = {index};
    }
  } else {
    items = {index};
  }
  // (Several ellipses are accepted: torch lets each skip the unindexed dims.)
  int64_t consumed = 0;
  for (const Value& it : items) {
    if (it.is_int() || it.is_slice() || it.is_list()) {
      ++consumed;
    } else if (it.is_tensor()) {
      const DType d = it.as_tensor().dtype;
      consumed += (d == DType::kBool || d == DType::kUInt8)
                      ? std::max<int64_t>(it.as_tensor().dim(), 0)
                      : 1;
      if (d == DType::kBool || d == DType::kUInt8) {
        if (it.as_tensor().dim() == 0)
          return absl::UnimplementedError("indexing with a 0-dim boolean tensor is not modelled");
      }
    } else if (it.is_bool()) {
      return absl::UnimplementedError("indexing with a Python bool is not modelled");
    } else if (!it.is_none() && !it.is_ellipsis()) {
      return IndexError(
          absl::StrCat("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                       "Variables are valid indices (got ",
                       TypeName(it), ")"));
    }
  }
  if (consumed > t.dim()) {
    if (t.dim() == 0) {
      return IndexError(
          "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
          "C++ to convert a 0-dim tensor to a number");
    }
    return IndexError(absl::StrCat("too many indices for tensor of dimension ", t.dim()));
  }
  std::vector<int64_t> sizes = t.sizes, strides = t.strides;
  struct Advanced {
    size_t dim;  // position in the result after basic indexing
    std::vector<int64_t> shape;
    int64_t consumed;
    bool mask;
  };
  std::vector<Advanced> advanced;
  bool indices_contiguous = true;  // every tensor index is contiguous (see the layout below)
  size_t d = 0;      // current dim of the result
  int64_t orig = 0;  // current dim of the input (for messages)
  for (const Value& it : items) {
    const bool uses_dim = !it.is_none() && !it.is_ellipsis();
    if (uses_dim && d >= sizes.size()) {
      return IndexError(absl::StrCat("Dimension out of range (expected to be in range of [",
                                     -static_cast<int64_t>(sizes.size()), ", ",
                                     static_cast<int64_t>(sizes.size()) - 1, "], but got ", d,
                                     ")"));
    }
    if (it.is_int()) {
      const int64_t size = sizes[d];
      const int64_t i = it.as_int();
      if (i < -size || i >= size) {
        return IndexError(absl::StrCat("index ", i, " is out of bounds for dimension ", orig,
                                       " with size ", size));
      }
      sizes.erase(sizes.begin() + static_cast<ptrdiff_t>(d));
      strides.erase(strides.begin() + static_cast<ptrdiff_t>(d));
      ++orig;
    } else if (it.is_slice()) {
      const Slice& s = it.as_slice();
      const int64_t step = s.step.value_or(1);
      if (step <= 0) return ValueError("step must be greater than zero");
      const int64_t size = sizes[d];
      int64_t start = s.start.value_or(0);
      int64_t stop = s.stop.value_or(INT64_MAX);
      if (start < 0) start += size;
      if (stop < 0) stop += size;
      start = std::clamp<int64_t>(start, 0, size);
      stop = std::clamp<int64_t>(stop, start, size);
      sizes[d] = (stop - start + step - 1) / step;
      strides[d] *= step;
      ++d;
      ++orig;
    } else if (it.is_none()) {
      const int64_t stride = d < sizes.size() ? sizes[d] * strides[d] : 1;
      sizes.insert(sizes.begin() + static_cast<ptrdiff_t>(d), 1);
      strides.insert(strides.begin() + static_cast<ptrdiff_t>(d), stride);
      ++d;
    } else if (it.is_ellipsis()) {
      d += static_cast<size_t>(t.dim() - consumed);
      orig += t.dim() - consumed;
    } else if (it.is_list()) {
      std::vector<int64_t> shape;
      if (absl::Status s = ListIndexShape(it, 0, sizes[d], orig, shape); !s.ok()) return s;
      advanced.push_back({d, shape, 1, false});
      ++d;
      ++orig;
    } else {
      const TensorMeta& idx = it.as_tensor();
      if (idx.dtype == DType::kBool || idx.dtype == DType::kUInt8) {
        for (int64_t k = 0; k < idx.dim(); ++k) {
          if (idx.sizes[static_cast<size_t>(k)] != sizes[d + static_cast<size_t>(k)]) {
            return IndexError(absl::StrCat("The shape of the mask ", Dims(idx.sizes), " at index ",
                                           k, " does not match the shape of the indexed tensor ",
                                           Dims(t.sizes), " at index ", orig + k));
          }
        }
        advanced.push_back({d, {kDynamicSize}, idx.dim(), true});
        d += static_cast<size_t>(idx.dim());
        orig += idx.dim();
      } else if (idx.dtype == DType::kInt64 || idx.dtype == DType::kInt32) {
        // Values are not known: out-of-range ones fail at run time only.
        indices_contiguous = indices_contiguous && idx.has_strides() && IsContiguous(idx);
        advanced.push_back({d, idx.sizes, 1, false});
        ++d;
        ++orig;
      } else {
        return IndexError("tensors used as indices must be long, int, byte or bool tensors");
      }
    }
  }
  Indexed out;
  if (advanced.empty()) {
    out.meta = ViewOf(t, std::move(sizes), std::move(strides));
    return out;
  }
  // Broadcast the advanced indices together.
  std::vector<int64_t> shape;
  bool dynamic = false;
  for (const Advanced& a : advanced) {
    if (a.mask) {
      if (dynamic || advanced.size() > 1) {
        return absl::UnimplementedError(
            "a boolean mask combined with other advanced indices is not modelled");
      }
      dynamic = true;
    }
    absl::StatusOr<std::vector<int64_t>> b = BroadcastShapes(shape, a.shape);
    if (!b.ok()) {
      return IndexError(absl::StrCat(
          "shape mismatch: indexing tensors could not be broadcast together with shapes ",
          Dims(shape), ", ", Dims(a.shape)));
    }
    shape = *std::move(b);
  }
  bool adjacent = true;
  for (size_t i = 1; i < advanced.size(); ++i) {
    if (advanced[i].dim != advanced[i - 1].dim + static_cast<size_t>(advanced[i - 1].consumed))
      adjacent = false;
  }
  // Drop the indexed dims, then put the broadcast shape where they were
  // (adjacent indices) or in front (separated ones), as numpy does.
  std::vector<bool> indexed(sizes.size(), false);
  for (const Advanced& a : advanced) {
    for (int64_t k = 0; k < a.consumed; ++k) indexed[a.dim + static_cast<size_t>(k)] = true;
  }
  out.meta = NewTensor(t.dtype, PlaceAdvancedIndex(sizes, indexed, adjacent, advanced[0].dim, shape), t.device,
                       t.requires_grad);
  // index() allocates its result like TensorIterator: contiguous when the
  // tensor and every index tensor are (embedding-style lookups); other layouts
  // (channels-last inputs, transposed indices) are not modelled, so unknown.
  if (!(t.has_strides() && IsContiguous(t) && indices_contiguous)) out.meta.strides.clear();
  out.meta.data_dependent = dynamic;
  out.advanced = true;
  return out;
}

absl::StatusOr<Value> GetItem(const Args& args) {
  absl::StatusOr<Indexed> r = ApplyIndex(args.Tensor("a"), args.Get("b"));
  if (!r.ok()) return r.status();
  return Value(std::move(r->meta));
}

// x[index] = value: the value must broadcast to the indexed shape (leading
// size-1 dims of the value are dropped first, as torch does).
absl::StatusOr<Value> SetItem(const Args& args) {
  const TensorMeta& t = args.Tensor("a");
  absl::StatusOr<Indexed> r = ApplyIndex(t, args.Get("b"));
  if (!r.ok()) return r.status();
  const Value& value = args.Get("c");
  if (!value.is_tensor()) return Value();
  if (r->advanced && value.as_tensor().dtype != t.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Index put requires the source and destination dtypes match, got ", DTypeName(t.dtype),
        " for the destination and ", DTypeName(value.as_tensor().dtype), " for the source."));
  }
  std::vector<int64_t> vs = value.as_tensor().sizes;
  while (!vs.empty() && vs.front() == 1) vs.erase(vs.begin());
  const std::vector<int64_t>& target = r->meta.sizes;
  bool ok = vs.size() <= target.size();
  for (size_t i = 0; ok && i < vs.size(); ++i) {
    const int64_t want = target[target.size() - vs.size() + i];
    if (want == kDynamicSize && vs[i] != 1) {
      return absl::UnimplementedError(
          "assigning a tensor through a boolean mask: the fit depends on data");
    }
    ok = vs[i] == 1 || vs[i] == want || want == kDynamicSize;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape mismatch: value tensor of shape ", Dims(value.as_tensor().sizes),
                     " cannot be broadcast to indexing result of shape ", Dims(target)));
  }
  return Value();
}

absl::StatusOr<Value> Nonzero(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  TensorMeta out = NewTensor(DType::kInt64, {kDynamicSize, t.dim()}, t.device, false);
  out.strides.clear();
  out.data_dependent = true;
  if (args.Bool("as_tuple")) {
    std::vector<Value> parts;
    for (int64_t i = 0; i < std::max<int64_t>(t.dim(), 1); ++i) {
      TensorMeta p = NewTensor(DType::kInt64, {kDynamicSize}, t.device, false);
      p.strides.clear();
      p.data_dependent = true;
      parts.emplace_back(std::move(p));
    }
    return Value::Tuple(std::move(parts));
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> MaskedSelect(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  const TensorMeta& mask = args.Tensor("mask");
  if (mask.dtype != DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("masked_select: expected BoolTensor for mask"));
  }
  absl::StatusOr<std::vector<int64_t>> b = BroadcastShapes(t.sizes, mask.sizes);
  if (!b.ok()) return b.status();
  TensorMeta out = NewTensor(t.dtype, {kDynamicSize}, t.device, t.requires_grad);
  out.strides.clear();
  out.data_dependent = true;
  return Value(std::move(out));
}

absl::StatusOr<Value> IndexSelect(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  const TensorMeta& idx = args.Tensor("index");
  if (idx.dim() > 1) return IndexError("index_select(): Index is supposed to be a vector");
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32) {
    return absl::InvalidArgumentError("index_select(): Expected dtype int32/int64 for index");
  }
  absl::StatusOr<int64_t> dim = WrapDim(args.Int("dim"), t.dim());
  if (!dim.ok()) return dim.status();
  std::vector<int64_t> sizes = t.sizes;
  // A 0-dim input stays 0-dim; its index must name exactly one element.
  if (t.dim() == 0 && idx.numel() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "index_select(): Index to scalar can have only 1 value, got ", idx.numel(), " value(s)"));
  }
  if (t.dim() > 0) sizes[static_cast<size_t>(*dim)] = idx.numel();
  return Value(NewTensor(t.dtype, std::move(sizes), t.device, t.requires_grad));
}

absl::StatusOr<Value> Gather(const Args& args, absl::string_view self) {
  const TensorMeta& t = args.Tensor(self);
  const TensorMeta& idx = args.Tensor("index");
  absl::StatusOr<int64_t> dim = WrapDim(args.Int("dim"), t.dim());
  if (!dim.ok()) return dim.status();
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32)
    return absl::InvalidArgumentError("gather(): Expected dtype int32/int64 for index");
  if (std::max<int64_t>(idx.dim(), 1) != std::max<int64_t>(t.dim(), 1)) {
    return absl::InvalidArgumentError(
        "Index tensor must have the same number of dimensions as input tensor");
  }
  for (int64_t i = 0; i < idx.dim() && t.dim() > 0; ++i) {
    if (i != *dim && idx.sizes[static_cast<size_t>(i)] > t.sizes[static_cast<size_t>(i)]) {
      return absl::InvalidArgumentError(
          absl::StrCat("Size does not match at dimension ", i, " expected index ", Dims(idx.sizes),
                       " to be smaller than self ", Dims(t.sizes), " apart from dimension ", *dim));
    }
  }
  return Value(NewTensor(t.dtype, idx.sizes, t.device, t.requires_grad));
}

}  // namespace

void RegisterIndexingOps(Registry& r) {
  // A view for basic indices, a copy for advanced ones, data-dependent for masks.
  r.Add("operator.getitem", {"Tensor a, Any b"}, kDataDependent, GetItem);
  r.Add("operator.setitem", {"Tensor a, Any b, Tensor|Number c"}, kInplace, SetItem);
  r.Add("torch.nonzero", {"Tensor input, *, bool as_tuple=False"}, kDataDependent,
        [](const Args& a) { return Nonzero(a, "input"); });
  r.Add("Tensor.nonzero", {"Tensor self, *, bool as_tuple=False"}, kDataDependent,
        [](const Args& a) { return Nonzero(a, "self"); });
  r.Add("torch.masked_select", {"Tensor input, Tensor mask"}, kDataDependent,
        [](const Args& a) { return MaskedSelect(a, "input"); });
  r.Add("Tensor.masked_select", {"Tensor self, Tensor mask"}, kDataDependent,
        [](const Args& a) { return MaskedSelect(a, "self"); });
  r.Add("torch.index_select", {"Tensor input, int dim, Tensor index"}, 0,
        [](const Args& a) { return IndexSelect(a, "input"); });
  r.Add("Tensor.index_select", {"Tensor self, int dim, Tensor index"}, 0,
        [](const Args& a) { return IndexSelect(a, "self"); });
  r.Add("torch.gather", {"Tensor input, int dim, Tensor index, *, bool sparse_grad=False"}, 0,
        [](const Args& a) { return Gather(a, "input"); });
  r.Add("Tensor.gather", {"Tensor self, int dim, Tensor index, *, bool sparse_grad=False"}, 0,
        [](const Args& a) { return Gather(a, "self"); });
}

}  // namespace dynamo::ops
