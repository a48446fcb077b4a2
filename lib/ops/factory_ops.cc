// Factories: zeros/ones/empty/full/rand/randn/randint/arange/eye/linspace/
// tensor, the *_like family and Tensor.new_*. Their outputs depend only on
// the arguments (sizes, fill values, dtype=, device=), never on data.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ops/infer_helpers.h"
#include "lib/ops/registry.h"

namespace dynamo::ops {
namespace {

constexpr absl::string_view kFactoryKwargs =
    ", *, dtype? dtype=None, layout? layout=None, device? device=None, bool? pin_memory=False, "
    "bool requires_grad=False";

absl::StatusOr<Device> DeviceArg(const Args& args, const Device& fallback) {
  return DeviceArgument(args.Get("device"), fallback);
}

absl::Status CheckSizes(const std::vector<int64_t>& sizes) {
  for (int64_t s : sizes) {
    if (s < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Trying to create tensor with negative dimension ", s, ": [",
                       absl::StrJoin(sizes, ", "), "]"));
    }
  }
  return absl::OkStatus();
}

// A fresh tensor: dtype, device and requires_grad from the keyword arguments.
// Without device=, a constructor (no default_device given) makes it on
// DefaultDevice(); *_like and new_* on their tensor's device.
absl::StatusOr<Value> Make(const Args& args, std::vector<int64_t> sizes, DType default_dtype,
                           const std::optional<Device>& default_device = std::nullopt,
                           DTypeSet unsupported = kNoDTypes, absl::string_view kernel = {}) {
  if (absl::Status s = CheckSizes(sizes); !s.ok()) return s;
  const DType dtype = args.OptDType("dtype").value_or(default_dtype);
  absl::StatusOr<Device> device = DeviceArg(args, default_device.value_or(DefaultDevice()));
  if (!device.ok()) return device.status();
  // randn's normal kernel is skipped for an empty result; rand checks its
  // bounds (and so the dtype) first.
  const int64_t numel = kernel == "normal_kernel" ? Numel(sizes) : 1;
  if (absl::Status s = CheckKernel(kernel, dtype, *device, unsupported, numel); !s.ok()) return s;
  const bool requires_grad = args.Bool("requires_grad");
  if (requires_grad && !IsFloating(dtype) && !IsComplex(dtype)) {
    return absl::InvalidArgumentError(
        "Only Tensors of floating point and complex dtype can require gradients");
  }
  TensorMeta out = TensorMeta::Contiguous(dtype, std::move(sizes), *device);
  out.requires_grad = requires_grad;
  return Value(std::move(out));
}

constexpr DTypeSet kNotUniform = kBoolSet | kIntegralSet;  // rand/randn need floating types

InferFn Filled(DTypeSet unsupported = kNoDTypes, absl::string_view kernel = {}) {
  return [unsupported, kernel](const Args& a) {
    return Make(a, a.IntList("size"), DefaultFloat(), std::nullopt, unsupported, kernel);
  };
}

// *_like(input, *, dtype, ..., memory_format=preserve_format).
InferFn Like(DTypeSet unsupported = kNoDTypes, absl::string_view kernel = {}) {
  return [unsupported, kernel](const Args& a) -> absl::StatusOr<Value> {
    const TensorMeta& t = a.Tensor("input");
    absl::StatusOr<Value> out =
        Make(a, t.sizes, a.OptDType("dtype").value_or(t.dtype), t.device, unsupported, kernel);
    if (!out.ok()) return out;
    const Value& fmt = a.Get("memory_format");
    if (fmt.is_none() || fmt.as_memory_format() == MemoryFormat::kPreserve) {
      out->as_tensor().strides = PreservedStrides(t);
    } else if (fmt.as_memory_format() != MemoryFormat::kContiguous) {
      return absl::UnimplementedError(
          "*_like with a channels_last memory_format is not modelled yet");
    }
    return out;
  };
}

// Tensor.new_*(size, *, dtype=None, device=None, ...): self's dtype and device.
InferFn New(DTypeSet unsupported = kNoDTypes) {
  return [unsupported](const Args& a) -> absl::StatusOr<Value> {
    const TensorMeta& t = a.Tensor("self");
    return Make(a, a.IntList("size"), t.dtype, t.device, unsupported);
  };
}

DType FillDType(const Value& v) {
  if (v.is_bool()) return DType::kBool;
  if (v.is_int()) return DType::kInt64;
  return DefaultFloat();
}

absl::StatusOr<Value> Arange(const Args& a) {
  double start = 0, end = 0, step = 1;
  bool all_int = true;
  auto take = [&](absl::string_view name, double* out) {
    const Value& v = a.Get(name);
    if (v.is_none()) return;
    if (v.is_float()) all_int = false;
    *out = a.Number(name);
  };
  if (a.overload() == 0) {
    take("end", &end);
  } else {
    take("start", &start);
    take("end", &end);
    take("step", &step);
  }
  const DType dtype = a.OptDType("dtype").value_or(all_int ? DType::kInt64 : DefaultFloat());
  // The size comes from the bounds and step as given, in double, whatever
  // the dtype (arange(0, 1, 0.3, dtype=int32) has four zeros); only the
  // values are computed in the dtype.
  if (step == 0) return absl::InvalidArgumentError("step must be nonzero");
  if (!((step > 0 && end >= start) || (step < 0 && end <= start))) {
    return absl::InvalidArgumentError("upper bound and larger bound inconsistent with step sign");
  }
  const double size = std::ceil((end - start) / step);
  return Make(a, {static_cast<int64_t>(size)}, dtype);
}

// torch.tensor(data): the shape of nested lists and the dtype of their
// numbers (bool < int64 < default float).
absl::Status Walk(const Value& v, size_t depth, std::vector<int64_t>& sizes, DType& dtype,
                  bool& any) {
  if (v.is_list()) {
    const int64_t n = static_cast<int64_t>(v.items().size());
    if (depth == sizes.size()) {
      if (any) return ValueError("expected a sequence, got a number");
      sizes.push_back(n);
    } else if (sizes[depth] != n) {
      return ValueError(absl::StrCat("expected sequence of length ", sizes[depth], " at dim ",
                                     depth, " (got ", n, ")"));
    }
    for (const Value& item : v.items()) {
      if (absl::Status s = Walk(item, depth + 1, sizes, dtype, any); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (!v.is_number())
    return TypeError(absl::StrCat("tensor(): cannot make a tensor from ", TypeName(v)));
  if (depth != sizes.size()) return TypeError("tensor(): ragged nesting of numbers and sequences");
  const DType d = FillDType(v);
  dtype = any ? PromoteTypes(dtype, d) : d;
  any = true;
  return absl::OkStatus();
}

absl::StatusOr<Value> TensorFromData(const Args& a) {
  // A tensor is copied (with a warning): data.detach().to(device, dtype,
  // copy=True), so its device and dtype by default and its layout preserved
  // as empty_like preserves it.
  if (a.Get("data").is_tensor()) {
    const TensorMeta& t = a.Get("data").as_tensor();
    // torch.tensor is a constructor: under a default device it copies there.
    absl::StatusOr<Value> out = Make(a, t.sizes, t.dtype, HasDefaultDevice() ? DefaultDevice() : t.device);
    if (out.ok()) out->as_tensor().strides = PreservedStrides(t);
    return out;
  }
  std::vector<int64_t> sizes;
  DType dtype = DefaultFloat();  // torch.tensor([]) is float
  bool any = false;
  if (absl::Status s = Walk(a.Get("data"), 0, sizes, dtype, any); !s.ok()) return s;
  return Make(a, std::move(sizes), dtype);
}

}  // namespace

void RegisterFactoryOps(Registry& r) {
  const std::string kw(kFactoryKwargs);
  const std::string mf = ", memory_format? memory_format=None";
  for (absl::string_view name : {"zeros", "ones", "empty"}) {
    r.Add(absl::StrCat("torch.", name),
          {absl::StrCat("*int[] size", kw, name == "empty" ? mf : "")}, kFactory, Filled());
  }
  r.Add("torch.full", {absl::StrCat("int[] size, Number fill_value", kw)}, kFactory,
        [](const Args& a) { return Make(a, a.IntList("size"), FillDType(a.Get("fill_value"))); });
  r.Add("torch.rand", {absl::StrCat("*int[] size, *, Any generator=None", kw.substr(3))},
        kFactory | kRandom, Filled(kNotUniform, "check_uniform_bounds"));
  r.Add("torch.randn", {absl::StrCat("*int[] size, *, Any generator=None", kw.substr(3))},
        kFactory | kRandom, Filled(kNotUniform, "normal_kernel"));
  r.Add(
      "torch.randint",
      {absl::StrCat("int high, int[] size, *, Any generator=None", kw.substr(3)),
       absl::StrCat("int low, int high, int[] size, *, Any generator=None", kw.substr(3))},
      kFactory | kRandom, [](const Args& a) -> absl::StatusOr<Value> {
        const int64_t low = a.overload() == 0 ? 0 : a.Int("low");
        const int64_t high = a.Int("high");
        if (low >= high) {
          return absl::InvalidArgumentError(absl::StrCat(
              "random_ expects 'from' to be less than 'to', but got from=", low, " >= to=", high));
        }
        return Make(a, a.IntList("size"), DType::kInt64);
      });
  r.Add(
      "torch.arange",
      {absl::StrCat("Number end", kw), absl::StrCat("Number start, Number end, Number step=1", kw)},
      kFactory, Arange);
  r.Add("torch.eye", {absl::StrCat("int n", kw), absl::StrCat("int n, int m", kw)}, kFactory,
        [](const Args& a) -> absl::StatusOr<Value> {
          const int64_t n = a.Int("n");
          const int64_t m = a.overload() == 0 ? n : a.Int("m");
          if (n < 0)
            return absl::InvalidArgumentError(
                absl::StrCat("n must be greater or equal to 0, got ", n));
          if (m < 0)
            return absl::InvalidArgumentError(
                absl::StrCat("m must be greater or equal to 0, got ", m));
          return Make(a, {n, m}, DefaultFloat());
        });
  r.Add("torch.linspace", {absl::StrCat("Number start, Number end, int steps", kw)}, kFactory,
        [](const Args& a) -> absl::StatusOr<Value> {
          const int64_t steps = a.Int("steps");
          if (steps < 0) return absl::InvalidArgumentError("number of steps must be non-negative");
          return Make(a, {steps}, DefaultFloat());
        });
  r.Add("torch.tensor",
        {"Any data, *, dtype? dtype=None, device? device=None, bool requires_grad=False, bool "
         "pin_memory=False"},
        kFactory, TensorFromData);

  const std::string like_kw = absl::StrCat(kw, mf);
  for (absl::string_view name : {"zeros_like", "ones_like", "empty_like"}) {
    r.Add(absl::StrCat("torch.", name), {absl::StrCat("Tensor input", like_kw)}, kFactory, Like());
  }
  r.Add("torch.full_like", {absl::StrCat("Tensor input, Number fill_value", like_kw)}, kFactory,
        Like());
  r.Add("torch.rand_like", {absl::StrCat("Tensor input", like_kw)}, kFactory | kRandom,
        Like(kNotUniform, "check_uniform_bounds"));
  r.Add("torch.randn_like", {absl::StrCat("Tensor input", like_kw)}, kFactory | kRandom,
        Like(kNotUniform, "normal_kernel"));
  for (absl::string_view name : {"new_zeros", "new_ones", "new_empty"}) {
    // x.new_zeros(2, 3) and x.new_zeros((2, 3)) alike, as torch's parser takes them.
    r.Add(absl::StrCat("Tensor.", name), {absl::StrCat("Tensor self, *int[] size", kw)}, kFactory,
          New());
  }
  r.Add("Tensor.new_full", {absl::StrCat("Tensor self, int[] size, Number fill_value", kw)},
        kFactory, New());
}

}  // namespace dynamo::ops
