// torch.nn.functional: the layers of resnet18, mobilenet_v2 and a small
// transformer block (linear, conv2d, pooling, batch_norm, layer_norm,
// embedding, dropout, activations) and triu/tril for causal masks.
// Convolution and pooling sizes follow ATen's conv_output_size and
// pooling_output_shape; dtype rules follow the CPU kernels of torch 2.14.
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

// A fresh output laid out by the input's suggest_memory_format(), as the
// CPU convolution, pooling, batch_norm and constant_pad_nd kernels allocate.
TensorMeta LikeInput(const TensorMeta& t, DType dtype, std::vector<int64_t> sizes,
                     bool requires_grad) {
  TensorMeta out = NewTensor(dtype, std::move(sizes), t.device, requires_grad);
  if (!t.has_strides()) {
    out.strides.clear();
  } else {
    out.strides = SuggestedStrides(t, out.sizes);
  }
  return out;
}

absl::Status SameDTypes(const TensorMeta& input, const TensorMeta& other, absl::string_view what) {
  if (input.dtype == other.dtype) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("Input type (", DTypeName(input.dtype), ") and ",
                                                 what, " type (", DTypeName(other.dtype),
                                                 ") should be the same"));
}

// ---------------------------------------------------------------- linear
absl::StatusOr<Value> Linear(const Args& args) {
  const TensorMeta& x = args.Tensor("input");
  const TensorMeta& w = args.Tensor("weight");
  if (w.dim() != 2)
    return absl::UnimplementedError("linear with a weight that is not 2-D is not modelled");
  if (x.dim() == 0)
    return absl::InvalidArgumentError(
        "both arguments to linear need to be at least 1D, but they are 0D and 2D");
  const int64_t in = x.sizes.back();
  if (in != w.sizes[1]) {
    const int64_t rows = x.dim() == 1 ? 1 : x.numel() / std::max<int64_t>(in, 1);
    return absl::InvalidArgumentError(absl::StrCat("mat1 and mat2 shapes cannot be multiplied (",
                                                   rows, "x", in, " and ", w.sizes[1], "x",
                                                   w.sizes[0], ")"));
  }
  std::vector<int64_t> sizes(x.sizes.begin(), x.sizes.end() - 1);
  sizes.push_back(w.sizes[0]);
  const bool empty = Numel(sizes) == 0;
  bool grad = x.requires_grad || w.requires_grad;
  if (!args.IsNone("bias")) {
    const TensorMeta& b = args.Tensor("bias");
    grad = grad || b.requires_grad;
    absl::StatusOr<std::vector<int64_t>> bs = BroadcastShapes(sizes, b.sizes);
    if (!bs.ok() || *bs != sizes) {
      return absl::InvalidArgumentError(absl::StrCat("linear: bias of size ", Dims(b.sizes),
                                                     " does not broadcast to the output ",
                                                     Dims(sizes)));
    }
    if (b.dtype != x.dtype) {
      return absl::InvalidArgumentError("self and mat2 must have the same dtype");
    }
  }
  if (x.dtype != w.dtype) return absl::InvalidArgumentError("mat1 and mat2 must have the same dtype");
  if (!empty) {
    if (absl::Status s = CheckKernel("addmm_impl", x.dtype, x.device, kBoolSet); !s.ok())
      return s;
  }
  return Value(NewTensor(x.dtype, std::move(sizes), x.device, grad));
}

// ---------------------------------------------------------------- conv
absl::StatusOr<std::vector<int64_t>> Pair(const Args& args, absl::string_view name, int64_t n) {
  std::vector<int64_t> v = args.IntList(name);
  if (v.size() == 1) v.assign(static_cast<size_t>(n), v[0]);
  if (static_cast<int64_t>(v.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must have ", n, " elements, got ", Dims(v)));
  }
  return v;
}

absl::StatusOr<Value> Conv2d(const Args& args) {
  const TensorMeta& x = args.Tensor("input");
  const TensorMeta& w = args.Tensor("weight");
  const int64_t groups = args.Int("groups");
  if (x.dim() != 3 && x.dim() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: ",
        Dims(x.sizes)));
  }
  if (w.dim() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("weight should have at least three dimensions"));
  }
  const bool batched = x.dim() == 4;
  std::vector<int64_t> in = x.sizes;
  if (!batched) in.insert(in.begin(), 1);
  if (groups <= 0) return absl::InvalidArgumentError("non-positive groups is not supported");
  absl::StatusOr<std::vector<int64_t>> stride = Pair(args, "stride", 2);
  if (!stride.ok()) return stride.status();
  absl::StatusOr<std::vector<int64_t>> dilation = Pair(args, "dilation", 2);
  if (!dilation.ok()) return dilation.status();
  std::vector<int64_t> padding(2, 0);
  bool same = false;
  const Value& pad_value = args.Get("padding");
  if (pad_value.is_string()) {
    if (pad_value.as_string() == "same") {
      same = true;
      if ((*stride)[0] != 1 || (*stride)[1] != 1) {
        return absl::InvalidArgumentError(
            "padding='same' is not supported for strided convolutions");
      }
    } else if (pad_value.as_string() != "valid") {
      return absl::InvalidArgumentError(absl::StrCat("Invalid padding string: '",
                                                     pad_value.as_string(),
                                                     "', should be one of {'valid', 'same'}"));
    }
  } else {
    absl::StatusOr<std::vector<int64_t>> p = Pair(args, "padding", 2);
    if (!p.ok()) return p.status();
    padding = *p;
  }
  for (int i = 0; i < 2; ++i) {
    if ((*stride)[i] <= 0)
      return absl::InvalidArgumentError("non-positive stride is not supported");
    if ((*dilation)[i] <= 0)
      return absl::InvalidArgumentError("dilation should be greater than zero");
    if (padding[static_cast<size_t>(i)] < 0)
      return absl::InvalidArgumentError("negative padding is not supported");
  }
  if (in[1] != w.sizes[1] * groups) {
    return absl::InvalidArgumentError(
        absl::StrCat("Given groups=", groups, ", weight of size ", Dims(w.sizes),
                     ", expected input", Dims(x.sizes), " to have ", w.sizes[1] * groups,
                     " channels, but got ", in[1], " channels instead"));
  }
  if (w.sizes[0] % groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Given groups=", groups, ", expected weight to be divisible by ", groups,
                     " at dimension 0, but got weight of size ", Dims(w.sizes)));
  }
  bool grad = x.requires_grad || w.requires_grad;
  if (!args.IsNone("bias")) {
    const TensorMeta& b = args.Tensor("bias");
    grad = grad || b.requires_grad;
    if (b.dim() != 1 || b.sizes[0] != w.sizes[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Given weight of size ", Dims(w.sizes), ", expected bias to be 1-dimensional with ",
          w.sizes[0], " elements, but got bias of size ", Dims(b.sizes), " instead"));
    }
    if (absl::Status s = SameDTypes(x, b, "bias"); !s.ok()) return s;
  }
  if (absl::Status s = SameDTypes(x, w, "weight"); !s.ok()) return s;
  std::vector<int64_t> out = {in[0], w.sizes[0]};
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = (*dilation)[i] * (w.sizes[i + 2] - 1) + 1;
    const int64_t padded = in[i + 2] + (same ? 0 : 2 * padding[i]);
    if (!same && padded < k) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Calculated padded input size per channel: (", in[2] + 2 * padding[0], " x ",
          in[3] + 2 * padding[1], "). Kernel size: (", (*dilation)[0] * (w.sizes[2] - 1) + 1, " x ",
          (*dilation)[1] * (w.sizes[3] - 1) + 1,
          "). Kernel size can't be greater than actual input size"));
    }
    out.push_back(same ? in[i + 2] : (padded - k) / (*stride)[i] + 1);
  }
  if (absl::Status s = CheckKernel("slow_conv2d", x.dtype, x.device, kBoolSet); !s.ok())
    return s;
  if (!batched) out.erase(out.begin());
  return Value(LikeInput(x, x.dtype, std::move(out), grad));
}

// ---------------------------------------------------------------- pooling
// ATen's pooling_output_shape.
int64_t PoolOutput(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                   bool ceil) {
  const int64_t num = in + 2 * pad - dilation * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  // div_rtn: rounds toward negative infinity.
  int64_t out = num / stride;
  if ((num % stride != 0) && ((num < 0) != (stride < 0))) --out;
  out += 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

enum class PoolKind { kMax, kAvg };

absl::StatusOr<Value> Pool2d(const Args& args, PoolKind kind) {
  const TensorMeta& x = args.Tensor("input");
  absl::StatusOr<std::vector<int64_t>> kernel = Pair(args, "kernel_size", 2);
  if (!kernel.ok()) return kernel.status();
  std::vector<int64_t> stride = args.IntList("stride");
  if (args.IsNone("stride") || stride.empty()) stride = *kernel;
  if (stride.size() == 1) stride.assign(2, stride[0]);
  absl::StatusOr<std::vector<int64_t>> padding = Pair(args, "padding", 2);
  if (!padding.ok()) return padding.status();
  std::vector<int64_t> dilation = {1, 1};
  if (kind == PoolKind::kMax) {
    absl::StatusOr<std::vector<int64_t>> d = Pair(args, "dilation", 2);
    if (!d.ok()) return d.status();
    dilation = *d;
  }
  const bool ceil = args.Bool("ceil_mode");
  const absl::string_view name = kind == PoolKind::kMax ? "max_pool2d" : "avg_pool2d";
  if (x.dim() != 3 && x.dim() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("non-empty 3D or 4D (batch mode) tensor expected for input"));
  }
  for (size_t i = 0; i < 2; ++i) {
    if ((*kernel)[i] <= 0)
      return absl::InvalidArgumentError("kernel size should be greater than zero");
    if (stride[i] <= 0) return absl::InvalidArgumentError("stride should be greater than zero");
    if (dilation[i] <= 0) return absl::InvalidArgumentError("dilation should be greater than zero");
    if ((*padding)[i] < 0 || (*padding)[i] > (*kernel)[i] / 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("pad should be at most half of kernel size, but got pad=", (*padding)[i],
                       " and kernel_size=", (*kernel)[i]));
    }
  }
  const int64_t n = x.dim();
  for (int64_t i = (n == 4 ? 1 : 0); i < n; ++i) {
    if (x.sizes[static_cast<size_t>(i)] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch "
                       "size for input, but got:",
                       Dims(x.sizes)));
    }
  }
  std::vector<int64_t> out(x.sizes.begin(), x.sizes.end() - 2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t in = x.sizes[static_cast<size_t>(n - 2) + i];
    const int64_t o = PoolOutput(in, (*kernel)[i], (*padding)[i], stride[i], dilation[i], ceil);
    if (o < 1) {
      return absl::InvalidArgumentError(absl::StrCat("Given input size: ", Dims(x.sizes),
                                                     ". Calculated output size is too small"));
    }
    out.push_back(o);
  }
  if (kind == PoolKind::kAvg && !args.IsNone("divisor_override") &&
      args.Int("divisor_override") == 0) {
    return absl::InvalidArgumentError("divisor must be not zero");
  }
  const DTypeSet unsupported = kind == PoolKind::kMax
                                   ? kBoolSet
                                   : (kBoolSet | Bit(DType::kInt32) | Bit(DType::kInt16) |
                                      Bit(DType::kInt8) | Bit(DType::kUInt8));
  if (absl::Status s = CheckKernel(name, x.dtype, x.device, unsupported); !s.ok()) return s;
  TensorMeta result = LikeInput(x, x.dtype, out, x.requires_grad);
  if (kind == PoolKind::kMax && args.Bool("return_indices")) {
    TensorMeta indices = LikeInput(x, DType::kInt64, out, false);
    return Value::Tuple({Value(std::move(result)), Value(std::move(indices))});
  }
  return Value(std::move(result));
}

absl::StatusOr<Value> AdaptiveAvgPool2d(const Args& args) {
  const TensorMeta& x = args.Tensor("input");
  if (x.dim() != 3 && x.dim() != 4) {
    return absl::InvalidArgumentError("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got " +
                                      Dims(x.sizes));
  }
  const Value& size_value = args.Get("output_size");
  std::vector<std::optional<int64_t>> size;
  if (size_value.is_int()) {
    size.assign(2, size_value.as_int());
  } else {
    for (const Value& v : size_value.items()) {
      if (v.is_none()) {
        size.emplace_back();
      } else if (v.is_int()) {
        size.emplace_back(v.as_int());
      } else {
        return TypeError("adaptive_avg_pool2d(): output_size must be ints or None");
      }
    }
  }
  if (size.size() != 2)
    return absl::InvalidArgumentError("adaptive_avg_pool2d: output_size must be 2");
  const int64_t n = x.dim();
  for (int64_t i = 1; i < n; ++i) {
    if (x.sizes[static_cast<size_t>(i)] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("adaptive_avg_pool2d(): Expected input to have non-zero size for non-batch "
                       "dimensions, but input has sizes ",
                       Dims(x.sizes), " with dimension ", i, " being empty"));
    }
  }
  std::vector<int64_t> out(x.sizes.begin(), x.sizes.end() - 2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t o = size[i] ? *size[i] : x.sizes[static_cast<size_t>(n - 2) + i];
    if (o < 0)
      return absl::InvalidArgumentError(
          "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0");
    out.push_back(o);
  }
  const bool global = out[out.size() - 1] == 1 && out[out.size() - 2] == 1;
  if (global) {
    // torch takes mean(dims=(-1, -2), keepdim=True) here: mean's dtype rule.
    if (!IsFloating(x.dtype) && !IsComplex(x.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat("mean(): could not infer output dtype. Input dtype must be either a "
                       "floating point or complex dtype. Got: ",
                       DTypeName(x.dtype)));
    }
  } else if (absl::Status s = CheckKernel("adaptive_avg_pool2d", x.dtype, x.device,
                                          kBoolSet | kIntegralSet);
             !s.ok()) {
    return s;
  }
  return Value(LikeInput(x, x.dtype, std::move(out), x.requires_grad));
}

// ---------------------------------------------------------------- norms
absl::StatusOr<Value> BatchNorm(const Args& args) {
  const TensorMeta& x = args.Tensor("input");
  const bool training = args.Bool("training");
  if (x.dim() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_norm: expected 2D or more input (got ", x.dim(), "D input)"));
  }
  const int64_t channels = x.sizes[1];
  if (training) {
    int64_t per_channel = x.sizes[0];
    for (size_t i = 2; i < x.sizes.size(); ++i) per_channel *= x.sizes[i];
    if (per_channel == 1) {
      return ValueError(absl::StrCat(
          "Expected more than 1 value per channel when training, got input size ", Dims(x.sizes)));
    }
  }
  bool grad = x.requires_grad;
  std::optional<DType> param_dtype;
  for (absl::string_view name : {"running_mean", "running_var", "weight", "bias"}) {
    if (args.IsNone(name)) {
      if (!training && (name == "running_mean" || name == "running_var")) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " must be defined in evaluation mode"));
      }
      continue;
    }
    const TensorMeta& p = args.Tensor(name);
    if (p.numel() != channels) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " should contain ", channels, " elements not ", p.numel()));
    }
    if (name == "weight" || name == "bias") grad = grad || p.requires_grad;
    if (param_dtype && *param_dtype != p.dtype) {
      return absl::InvalidArgumentError("batch_norm: the parameters must share one dtype");
    }
    param_dtype = p.dtype;
  }
  if (absl::Status s =
          CheckKernel("batch_norm", x.dtype, x.device, kBoolSet | kIntegralSet);
      !s.ok()) {
    return s;
  }
  // CPU batch_norm mixes dtypes only for a bfloat16 input with float params.
  if (param_dtype && *param_dtype != x.dtype &&
      !(x.dtype == DType::kBFloat16 && *param_dtype == DType::kFloat32)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mixed dtype (CPU): expect parameter to have scalar type of ", DTypeName(x.dtype)));
  }
  return Value(LikeInput(x, x.dtype, x.sizes, grad));
}

absl::StatusOr<Value> LayerNorm(const Args& args) {
  const TensorMeta& x = args.Tensor("input");
  const std::vector<int64_t> shape = args.IntList("normalized_shape");
  const size_t k = shape.size();
  bool matches = k >= 1 && k <= x.sizes.size();
  for (size_t i = 0; matches && i < k; ++i) matches = x.sizes[x.sizes.size() - k + i] == shape[i];
  if (k == 0) {
    return absl::InvalidArgumentError(
        "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
        "element, but got normalized_shape = []");
  }
  if (!matches) {
    return absl::InvalidArgumentError(
        absl::StrCat("Given normalized_shape=", Dims(shape), ", expected input with shape [*, ",
                     absl::StrJoin(shape, ", "), "], but got input of size", Dims(x.sizes)));
  }
  bool grad = x.requires_grad;
  for (absl::string_view name : {"weight", "bias"}) {
    if (args.IsNone(name)) continue;
    const TensorMeta& p = args.Tensor(name);
    if (p.sizes != shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected ", name, " to be of same shape as normalized_shape, but got ",
                       name, " of shape ", Dims(p.sizes), " and normalized_shape = ", Dims(shape)));
    }
    grad = grad || p.requires_grad;
  }
  if (absl::Status s =
          CheckKernel("LayerNormKernelImpl", x.dtype, x.device, kBoolSet | kIntegralSet);
      !s.ok()) {
    return s;
  }
  for (absl::string_view name : {"weight", "bias"}) {
    if (!args.IsNone(name) && args.Tensor(name).dtype != x.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("expected scalar type ", DTypeName(x.dtype),
                                                     " but found ",
                                                     DTypeName(args.Tensor(name).dtype)));
    }
  }
  return Value(NewTensor(x.dtype, x.sizes, x.device, grad));
}

absl::StatusOr<Value> Embedding(const Args& args) {
  const TensorMeta& idx = args.Tensor("input");
  const TensorMeta& w = args.Tensor("weight");
  if (w.dim() != 2) return absl::InvalidArgumentError("'weight' must be 2-D");
  if (!args.IsNone("padding_idx")) {
    const int64_t p = args.Int("padding_idx");
    if (p >= w.sizes[0] || p < -w.sizes[0]) {
      return absl::InvalidArgumentError("Padding_idx must be within num_embeddings");
    }
  }
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected tensor for argument #1 'indices' to have one of the following "
                     "scalar types: Long, Int; but got ",
                     DTypeName(idx.dtype), " instead"));
  }
  std::vector<int64_t> sizes = idx.sizes;
  sizes.push_back(w.sizes[1]);
  return Value(NewTensor(w.dtype, std::move(sizes), w.device, w.requires_grad));
}

// ------------------------------------------------ scaled_dot_product_attention
// F.scaled_dot_product_attention(query (..., L, E), key (..., S, E), value
// (..., S, Ev)) -> (..., L, Ev): the batch dims of the three broadcast (with
// enable_gqa, key/value heads, dim -3, divide the query's); attn_mask (bool,
// float32 or the query's dtype) broadcasts to the scores (..., L, S) without
// growing them. The layout follows the CPU backend torch picks: the math
// path returns a contiguous result; the flash kernel (4-D, value width equal
// to the query's, no dropout, unit stride in the last dim of all three)
// keeps the query's memory order. Where the choice is not certain, strides are not
// claimed.
absl::StatusOr<Value> ScaledDotProductAttention(const Args& args) {
  const TensorMeta& q = args.Tensor("query");
  const TensorMeta& k = args.Tensor("key");
  const TensorMeta& v = args.Tensor("value");
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: ",
        q.dim(), " key.dim: ", k.dim(), " and value.dim: ", v.dim(), " instead."));
  }
  if (q.dtype != k.dtype || q.dtype != v.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Expected query, key, and value to have the same dtype, but got query.dtype: ",
        DTypeName(q.dtype), " key.dtype: ", DTypeName(k.dtype), " and value.dtype: ",
        DTypeName(v.dtype), " instead."));
  }
  const bool has_mask = !args.IsNone("attn_mask");
  if (has_mask && args.Bool("is_causal")) {
    return absl::InvalidArgumentError(
        "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
  }
  if (args.Number("dropout_p") > 1.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dropout probability has to be between 0 and 1, but got ", args.Number("dropout_p")));
  }
  if (!IsFloating(q.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a floating point query, key and value, got ", DTypeName(q.dtype)));
  }
  const int64_t L = q.sizes[q.sizes.size() - 2], E = q.sizes.back();
  const int64_t S = k.sizes[k.sizes.size() - 2], Ev = v.sizes.back();
  if (k.sizes.back() != E || v.sizes[v.sizes.size() - 2] != S) {
    return absl::InvalidArgumentError(absl::StrCat(
        "query (..., ", L, ", ", E, "), key (..., ", S, ", ", k.sizes.back(), ") and value (..., ",
        v.sizes[v.sizes.size() - 2], ", ", Ev, ") do not multiply"));
  }
  std::vector<int64_t> qb(q.sizes.begin(), q.sizes.end() - 2);
  std::vector<int64_t> kb(k.sizes.begin(), k.sizes.end() - 2);
  std::vector<int64_t> vb(v.sizes.begin(), v.sizes.end() - 2);
  if (args.Bool("enable_gqa") && !qb.empty() && !kb.empty() && !vb.empty()) {
    const int64_t hq = qb.back();
    if (kb.back() == 0 || vb.back() == 0 || hq % kb.back() != 0 || hq % vb.back() != 0) {
      return absl::InvalidArgumentError(
          "Number of heads in key and value must divide the number of heads in query");
    }
    kb.back() = vb.back() = hq;  // repeated to the query's heads
  }
  absl::StatusOr<std::vector<int64_t>> batch = BroadcastShapes(qb, kb);
  if (batch.ok()) batch = BroadcastShapes(*batch, vb);
  if (!batch.ok()) return batch.status();
  bool grad = q.requires_grad || k.requires_grad || v.requires_grad;
  if (has_mask) {
    const TensorMeta& m = args.Tensor("attn_mask");
    if (m.dtype != DType::kBool && m.dtype != DType::kFloat32 && m.dtype != q.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
          "attn_mask.dtype: ",
          DTypeName(m.dtype), " and  query.dtype: ", DTypeName(q.dtype), " instead."));
    }
    if (m.dim() < 2) {
      return absl::OutOfRangeError(absl::StrCat("IndexError: Dimension out of range (expected to be in range of [-",
                                     std::max<int64_t>(m.dim(), 1), ", ",
                                     std::max<int64_t>(m.dim(), 1) - 1, "], but got -2)"));
    }
    std::vector<int64_t> scores = *batch;
    scores.push_back(L);
    scores.push_back(S);
    // 3-D inputs are attended as one batch of heads: the scores are 4-D.
    if (scores.size() == 3) scores.insert(scores.begin(), 1);
    absl::StatusOr<std::vector<int64_t>> b = BroadcastShapes(scores, m.sizes);
    if (!b.ok()) return b.status();
    if (*b != scores) {
      return absl::InvalidArgumentError(absl::StrCat("output with shape ", Dims(scores),
                                                     " doesn't match the broadcast shape ",
                                                     Dims(*b)));
    }
    grad = grad || m.requires_grad;
  }
  const bool batches_equal = qb == kb && qb == vb;  // no broadcasting, no repeated heads
  std::vector<int64_t> sizes = *std::move(batch);
  sizes.push_back(L);
  sizes.push_back(Ev);
  TensorMeta out = NewTensor(q.dtype, std::move(sizes), q.device, grad);
  const bool known = q.has_strides() && k.has_strides() && v.has_strides();
  const bool math = q.dim() != 4 || Ev != E || args.Number("dropout_p") > 0.0 ||
                    (known && (q.strides.back() != 1 || k.strides.back() != 1 ||
                               v.strides.back() != 1));
  if (known && (math || IsContiguous(q))) return Value(std::move(out));
  if (known && batches_equal && k.dim() == 4 && v.dim() == 4) {
    // The kernel allocates empty_like(query): a dense query's strides (size-1
    // dims included), else dense strides in the query's memory order
    // (infer_dense_strides: the heads of a (B, L, 3, H, E) projection
    // permuted to (B, H, L, E) come back (B, L, H, E) in memory).
    out.strides = IsNonOverlappingAndDense(q) ? q.strides : IteratorStrides(q.sizes, {&args.Get("query")});
  } else {
    out.strides.clear();
  }
  return Value(std::move(out));
}

// --------------------------------------- fused attention (torch 2 fast paths)
// nn.MultiheadAttention and nn.TransformerEncoderLayer take these in eval
// with grad disabled: self-attention over 3-D (B, L, E) inputs, in_proj and
// out_proj weights in nn's shapes. Anything else torch accepts here that is
// not modelled is Unimplemented (a graph break), never guessed.

// The checks both fused kernels make on the input, the projections and the mask.
absl::Status CheckFusedAttention(const Args& args, const TensorMeta& x, int64_t heads) {
  if (x.dim() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("expected 3-D `query`, got ", x.dim(), "-D tensor"));
  }
  const int64_t E = x.sizes[2];
  if (args.Int("embed_dim") != E) {
    return absl::InvalidArgumentError(absl::StrCat("passed-in embed_dim ", args.Int("embed_dim"),
                                                   " didn't match last dim of query ", E));
  }
  if (heads <= 0 || E % heads != 0) {
    return absl::InvalidArgumentError("`embed_dim` must divide evenly by `num_heads`");
  }
  const TensorMeta& qkv = args.Tensor("qkv_weight");
  if (qkv.dim() != 2 || qkv.sizes[0] != 3 * E) {
    return absl::InvalidArgumentError("expected `qkv_weight` first dim to be 3x embed_dim");
  }
  const std::pair<const char*, std::vector<int64_t>> shapes[] = {
      {"qkv_weight", {3 * E, E}}, {"qkv_bias", {3 * E}}, {"proj_weight", {E, E}}, {"proj_bias", {E}}};
  for (const auto& [name, sizes] : shapes) {
    const TensorMeta& w = args.Tensor(name);
    if (w.sizes != sizes) {
      return absl::UnimplementedError(absl::StrCat("fused attention with ", name, " of shape ",
                                                   Dims(w.sizes), " is not modelled"));
    }
    if (w.dtype != x.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("expected m1 and m2 to have the same dtype, but got: ",
                                                     DTypeName(x.dtype), " != ", DTypeName(w.dtype)));
    }
  }
  if (args.IsNone("mask")) return absl::OkStatus();
  const TensorMeta& m = args.Tensor("mask");
  if (m.dtype != DType::kBool && m.dtype != x.dtype) {
    return absl::UnimplementedError("a fused-attention mask of another dtype is not modelled");
  }
  const int64_t B = x.sizes[0], L = x.sizes[1];
  const std::vector<int64_t> merged = {B, heads, L, L};
  if (m.dim() == 4) {
    if (m.sizes == merged) return absl::OkStatus();
    return absl::UnimplementedError("a fused-attention mask of another 4-D shape is not modelled");
  }
  if (args.IsNone("mask_type")) return absl::InvalidArgumentError("Mask Type should be defined");
  switch (args.Int("mask_type")) {
    case 0:
      if (m.sizes != std::vector<int64_t>{L, L}) {
        return absl::InvalidArgumentError("For mask_type == 0 mask shape should be (L, L)");
      }
      return absl::OkStatus();
    case 1:
      if (m.sizes != std::vector<int64_t>{B, L}) {
        return absl::InvalidArgumentError("For mask_type == 1 mask shape should be (B, L)");
      }
      return absl::OkStatus();
    case 2:
      return absl::InvalidArgumentError("For mask_type == 2 mask shape should match input shape");
    default:
      return absl::UnimplementedError("a fused-attention mask_type other than 0, 1, 2 is not modelled");
  }
}

bool AnyRequiresGrad(const Args& args, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (!args.IsNone(n) && args.Tensor(n).requires_grad) return true;
  }
  return false;
}

// torch._native_multi_head_attention -> (output (B, L, E), weights): the
// weights are (B, L, L) averaged over heads, (B, H, L, L) per head, or None
// when not asked for (or when L is 0).
absl::StatusOr<Value> NativeMultiHeadAttention(const Args& args) {
  const TensorMeta& q = args.Tensor("query");
  if (absl::Status s = CheckFusedAttention(args, q, args.Int("num_head")); !s.ok()) return s;
  for (const char* name : {"key", "value"}) {
    if (args.Tensor(name).sizes != q.sizes) {
      return absl::InvalidArgumentError("expected `query`/`key`/`value` shapes to match");
    }
    if (args.Tensor(name).dtype != q.dtype) {
      return absl::UnimplementedError("fused attention over mixed dtypes is not modelled");
    }
  }
  const bool grad = AnyRequiresGrad(args, {"query", "key", "value", "qkv_weight", "qkv_bias",
                                           "proj_weight", "proj_bias", "mask"});
  TensorMeta out = NewTensor(q.dtype, q.sizes, q.device, grad);
  const int64_t B = q.sizes[0], L = q.sizes[1], H = args.Int("num_head");
  if (!args.Bool("need_weights") || L == 0) return Value::Tuple({Value(std::move(out)), Value()});
  std::vector<int64_t> sizes = args.Bool("average_attn_weights") ? std::vector<int64_t>{B, L, L}
                                                                 : std::vector<int64_t>{B, H, L, L};
  TensorMeta weights = NewTensor(q.dtype, std::move(sizes), q.device, grad);
  return Value::Tuple({Value(std::move(out)), Value(std::move(weights))});
}

// torch._transformer_encoder_layer_fwd: the whole layer, the input's shape.
absl::StatusOr<Value> TransformerEncoderLayerFwd(const Args& args) {
  const TensorMeta& x = args.Tensor("src");
  if (absl::Status s = CheckFusedAttention(args, x, args.Int("num_heads")); !s.ok()) return s;
  const int64_t E = x.dim() == 3 ? x.sizes[2] : 0;
  const TensorMeta& w1 = args.Tensor("ffn_weight_1");
  const int64_t F = w1.dim() == 2 ? w1.sizes[0] : -1;
  const std::pair<const char*, std::vector<int64_t>> shapes[] = {
      {"norm_weight_1", {E}}, {"norm_bias_1", {E}}, {"norm_weight_2", {E}}, {"norm_bias_2", {E}},
      {"ffn_weight_1", {F, E}}, {"ffn_bias_1", {F}}, {"ffn_weight_2", {E, F}}, {"ffn_bias_2", {E}}};
  for (const auto& [name, sizes] : shapes) {
    const TensorMeta& w = args.Tensor(name);
    if (w.sizes != sizes || w.dtype != x.dtype) {
      return absl::UnimplementedError(absl::StrCat("the fused encoder layer with ", name, " ",
                                                   DTypeName(w.dtype), Dims(w.sizes),
                                                   " is not modelled"));
    }
  }
  const bool grad = AnyRequiresGrad(
      args, {"src", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "norm_weight_1",
             "norm_bias_1", "norm_weight_2", "norm_bias_2", "ffn_weight_1", "ffn_bias_1",
             "ffn_weight_2", "ffn_bias_2", "mask"});
  return Value(NewTensor(x.dtype, x.sizes, x.device, grad));
}

// ---------------------------------------------------------------- dropout
absl::StatusOr<Value> Dropout(const Args& args, absl::string_view train_param) {
  const Value& input = args.Get("input");
  const TensorMeta& x = input.as_tensor();
  const double p = args.Number("p");
  if (p < 0.0 || p > 1.0) {
    return ValueError(absl::StrCat("dropout probability has to be between 0 and 1, but got ", p));
  }
  const bool train = args.Bool(train_param);
  const bool inplace = args.Bool("inplace");
  if (p == 0 || !train || x.numel() == 0) return input;
  if (p == 1) {
    if (inplace) return input;
    TensorMeta out = NewTensor(x.dtype, x.sizes, x.device, x.requires_grad);
    if (!IsContiguous(x)) out.strides.clear();
    return Value(std::move(out));
  }
  // The noise is drawn with bernoulli_ and scaled by 1/(1-p) in place.
  if (absl::Status s = CheckKernel("bernoulli_scalar_cpu_", x.dtype, x.device, kNoDTypes); !s.ok())
    return s;
  if (!IsFloating(x.dtype) && !IsComplex(x.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "result type Float can't be cast to the desired output type ", DTypeName(x.dtype)));
  }
  if (inplace) return input;
  TensorMeta out = NewTensor(x.dtype, x.sizes, x.device, x.requires_grad);
  if (!IsContiguous(x)) out.strides.clear();
  return Value(std::move(out));
}

// ---------------------------------------------------------------- activations
struct Activation {
  absl::string_view kernel;
  DTypeSet cpu_unsupported;
};

InferFn ActivationFn(Activation a, absl::string_view self = "input") {
  return [a, self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const Value& input = args.Get(self);
    const TensorMeta& x = input.as_tensor();
    if (absl::Status s = CheckKernel(a.kernel, x.dtype, x.device, a.cpu_unsupported); !s.ok())
      return s;
    if (a.kernel == "GeluKernelImpl") {
      const std::string& approx = args.Get("approximate").as_string();
      if (approx != "none" && approx != "tanh") {
        return absl::InvalidArgumentError(
            absl::StrCat("approximate argument must be either none or tanh."));
      }
    }
    if (args.Bool("inplace")) {
      if (absl::Status s = CheckNoInternalOverlap(x); !s.ok()) return s;
      return input;
    }
    const Value* in[] = {&input};
    return Value(PointwiseOutput(x.dtype, x.sizes, in, x.device));
  };
}

// F.pad, constant mode: pairs of (before, after) from the last dim backwards.
absl::StatusOr<Value> Pad(const Args& args) {
  const TensorMeta& x = args.Tensor("input");
  const std::vector<int64_t> pad = args.IntList("pad");
  const std::string& mode = args.Get("mode").as_string();
  if (mode != "constant") {
    return absl::UnimplementedError(
        absl::StrCat("F.pad with mode='", mode, "' is not modelled yet"));
  }
  if (pad.size() % 2 != 0)
    return absl::InvalidArgumentError("Padding length must be divisible by 2");
  if (static_cast<int64_t>(pad.size()) / 2 > x.dim()) {
    return absl::InvalidArgumentError("Padding length too large");
  }
  std::vector<int64_t> sizes = x.sizes;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const size_t d = sizes.size() - 1 - i;
    const int64_t size = sizes[d] + pad[2 * i] + pad[2 * i + 1];
    if (size < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "The input size ", sizes[d], ", plus negative padding ", pad[2 * i], " and ",
          pad[2 * i + 1], " resulted in a negative output size, which is invalid. Check dimension ",
          d, " of your input."));
    }
    sizes[d] = size;
  }
  // Without positive padding torch narrows the input and clones the view
  // (preserve_format); otherwise it allocates by suggest_memory_format.
  if (std::all_of(pad.begin(), pad.end(), [](int64_t p) { return p <= 0; })) {
    TensorMeta narrowed = ViewOf(x, sizes, x.strides);
    TensorMeta out = NewTensor(x.dtype, std::move(sizes), x.device, x.requires_grad);
    out.strides = PreservedStrides(narrowed);
    return Value(std::move(out));
  }
  return Value(LikeInput(x, x.dtype, std::move(sizes), x.requires_grad));
}

absl::StatusOr<Value> Triangle(const Args& args, absl::string_view self, absl::string_view name) {
  const TensorMeta& x = args.Tensor(self);
  if (x.dim() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": input tensor must have at least 2 dimensions"));
  }
  TensorMeta out = NewTensor(x.dtype, x.sizes, x.device, x.requires_grad);
  if (!IsContiguous(x)) out.strides.clear();
  return Value(std::move(out));
}

}  // namespace

void RegisterNnOps(Registry& r) {
  const std::string f = "torch.nn.functional.";
  r.Add(f + "linear", {"Tensor input, Tensor weight, Tensor? bias=None"}, 0, Linear);
  r.Add(f + "conv2d",
        {"Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, Any padding=0, int[2] "
         "dilation=1, "
         "int groups=1"},
        0, [](const Args& a) -> absl::StatusOr<Value> {
          const Value& p = a.Get("padding");
          const bool ok = p.is_string() || p.is_int() ||
                          (p.is_list() && std::all_of(p.items().begin(), p.items().end(),
                                                      [](const Value& v) { return v.is_int(); }));
          // Declared Any for its string form ('same', 'valid').
          if (!ok)
            return TypeError("conv2d(): argument 'padding' must be a tuple of ints or a string");
          return Conv2d(a);
        });
  r.Add(f + "max_pool2d",
        {"Tensor input, int[2] kernel_size, int[2]? stride=None, int[2] padding=0, int[2] "
         "dilation=1, "
         "bool ceil_mode=False, bool return_indices=False"},
        0, [](const Args& a) { return Pool2d(a, PoolKind::kMax); });
  r.Add(f + "avg_pool2d",
        {"Tensor input, int[2] kernel_size, int[2]? stride=None, int[2] padding=0, bool "
         "ceil_mode=False, "
         "bool count_include_pad=True, int? divisor_override=None"},
        0, [](const Args& a) { return Pool2d(a, PoolKind::kAvg); });
  r.Add(f + "adaptive_avg_pool2d", {"Tensor input, Any output_size"}, 0, AdaptiveAvgPool2d);
  r.Add(f + "batch_norm",
        {"Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, Tensor? "
         "bias=None, "
         "bool training=False, float momentum=0.1, float eps=1e-05"},
        0, BatchNorm);
  r.Add(f + "layer_norm",
        {"Tensor input, int[1] normalized_shape, Tensor? weight=None, Tensor? bias=None, float "
         "eps=1e-05"},
        0, LayerNorm);
  r.Add(f + "embedding",
        {"Tensor input, Tensor weight, int? padding_idx=None, float? max_norm=None, float "
         "norm_type=2.0, "
         "bool scale_grad_by_freq=False, bool sparse=False"},
        0, Embedding);
  r.Add(f + "dropout", {"Tensor input, float p=0.5, bool training=True, bool inplace=False"},
        kRandom, [](const Args& a) { return Dropout(a, "training"); });
  r.Add("torch.dropout", {"Tensor input, float p, bool train"}, kRandom,
        [](const Args& a) { return Dropout(a, "train"); });
  r.Add(f + "scaled_dot_product_attention",
        {"Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, "
         "bool is_causal=False, *, float? scale=None, bool enable_gqa=False"},
        kRandom, ScaledDotProductAttention);
  r.Add("torch._native_multi_head_attention",
        {"Tensor query, Tensor key, Tensor value, int embed_dim, int num_head, Tensor qkv_weight, "
         "Tensor qkv_bias, Tensor proj_weight, Tensor proj_bias, Tensor? mask=None, "
         "bool need_weights=True, bool average_attn_weights=True, int? mask_type=None"},
        0, NativeMultiHeadAttention);
  r.Add("torch._transformer_encoder_layer_fwd",
        {"Tensor src, int embed_dim, int num_heads, Tensor qkv_weight, Tensor qkv_bias, "
         "Tensor proj_weight, Tensor proj_bias, bool use_gelu, bool norm_first, float eps, "
         "Tensor norm_weight_1, Tensor norm_bias_1, Tensor norm_weight_2, Tensor norm_bias_2, "
         "Tensor ffn_weight_1, Tensor ffn_bias_1, Tensor ffn_weight_2, Tensor ffn_bias_2, "
         "Tensor? mask=None, int? mask_type=None"},
        0, TransformerEncoderLayerFwd);

  const Activation relu{"relu", kBoolSet};
  r.Add(f + "relu", {"Tensor input, bool inplace=False"}, kPointwise, ActivationFn(relu));
  r.Add("torch.relu_", {"Tensor input"}, kPointwise | kInplace,
        [relu](const Args& a) -> absl::StatusOr<Value> {
          absl::StatusOr<Value> out = ActivationFn(relu)(a);
          if (!out.ok()) return out;
          if (absl::Status s = CheckNoInternalOverlap(a.Tensor("input")); !s.ok()) return s;
          return a.Get("input");
        });
  const Activation hardtanh{"hardtanh", kBoolSet};
  r.Add(f + "hardtanh", {"Tensor input, float min_val=-1.0, float max_val=1.0, bool inplace=False"},
        kPointwise, [hardtanh](const Args& a) -> absl::StatusOr<Value> {
          // F.hardtanh checks its bounds in Python before any kernel.
          if (a.Number("min_val") > a.Number("max_val")) {
            return absl::InvalidArgumentError("min_val cannot be greater than max_val");
          }
          return ActivationFn(hardtanh)(a);
        });
  r.Add(f + "relu6", {"Tensor input, bool inplace=False"}, kPointwise, ActivationFn(hardtanh));
  r.Add(f + "gelu", {"Tensor input, *, str approximate=\"none\""}, kPointwise,
        ActivationFn({"GeluKernelImpl", kBoolSet | kIntegralSet}));
  r.Add(f + "silu", {"Tensor input, bool inplace=False"}, kPointwise,
        ActivationFn({"silu", kBoolSet | kIntegralSet}));
  r.Add(f + "leaky_relu", {"Tensor input, float negative_slope=0.01, bool inplace=False"},
        kPointwise, ActivationFn({"leaky_relu", kBoolSet | kIntegralSet}));
  r.Add(f + "hardswish", {"Tensor input, bool inplace=False"}, kPointwise,
        ActivationFn({"hardswish", kBoolSet | kIntegralSet}));
  r.Add(f + "hardsigmoid", {"Tensor input, bool inplace=False"}, kPointwise,
        ActivationFn({"hardsigmoid", kBoolSet | kIntegralSet}));
  r.Add(f + "pad", {"Tensor input, int[] pad, str mode=\"constant\", float? value=None"}, 0, Pad);
  r.Alias(f + "sigmoid", "torch.sigmoid");
  r.Alias(f + "tanh", "torch.tanh");
  for (absl::string_view name : {"triu", "tril"}) {
    r.Add(absl::StrCat("torch.", name), {"Tensor input, int diagonal=0"}, 0,
          [name](const Args& a) { return Triangle(a, "input", name); });
    r.Add(absl::StrCat("Tensor.", name), {"Tensor self, int diagonal=0"}, 0,
          [name](const Args& a) { return Triangle(a, "self", name); });
  }
}

}  // namespace dynamo::ops
