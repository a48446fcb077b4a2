// Reductions: sum, mean, prod, amax/amin, max/min (three overloads), argmax,
// std/var, all/any, logsumexp, and the dim-wise scans and normalisers that
// share their dim handling (cumsum, softmax, log_softmax).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/ops/infer_helpers.h"
#include "lib/ops/registry.h"

namespace dynamo::ops {
namespace {

enum class ReduceDType {
  kSumLike,    // integral and bool -> int64 (sum, prod, cumsum), dtype= overrides
  kFloatOnly,  // must be floating/complex (mean), dtype= overrides
  kSame,       // amax, amin
  kBool,       // all, any (uint8 stays uint8)
  kToFloat,    // logsumexp: integral -> default float
  kStd,        // std/var: floating only, complex -> real
};

struct ReduceSpec {
  absl::string_view name;
  ReduceDType rule;
  DTypeSet cpu_unsupported = kNoDTypes;
  // amax/argmax/max: reducing an empty dim, or everything of an empty tensor,
  // is an error (there is no identity element).
  bool needs_identity = false;
  bool has_dtype = false;
};

absl::StatusOr<DType> ReducedDType(const ReduceSpec& spec, const Args& args, const TensorMeta& t) {
  std::optional<DType> requested = spec.has_dtype ? args.OptDType("dtype") : std::nullopt;
  DType out = t.dtype;
  switch (spec.rule) {
    case ReduceDType::kSumLike:
      out = requested ? *requested : (IsIntegral(t.dtype, true) ? DType::kInt64 : t.dtype);
      break;
    case ReduceDType::kFloatOnly: {
      DType d = requested ? *requested : t.dtype;
      if (!IsFloating(d) && !IsComplex(d)) {
        return absl::InvalidArgumentError(absl::StrCat(
            spec.name, "(): could not infer output dtype. ", requested ? "Optional" : "Input",
            " dtype must be either a floating point or complex dtype. Got: ", DTypeName(d)));
      }
      out = d;
      break;
    }
    case ReduceDType::kSame:
      break;
    case ReduceDType::kBool:
      out = t.dtype == DType::kUInt8 ? DType::kUInt8 : DType::kBool;
      break;
    case ReduceDType::kToFloat:
      out = ToFloatIfIntegral(t.dtype);
      break;
    case ReduceDType::kStd:
      if (!IsFloating(t.dtype) && !IsComplex(t.dtype)) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec.name, ": only support floating point and complex dtypes"));
      }
      if (t.dtype == DType::kComplex64) out = DType::kFloat32;
      if (t.dtype == DType::kComplex128) out = DType::kFloat64;
      break;
  }
  const DType compute = spec.rule == ReduceDType::kBool ? t.dtype : out;
  if (absl::Status s = CheckKernel(spec.name, compute, t.device, spec.cpu_unsupported,
                                   // logsumexp is composite: its exp runs even when empty
                                   spec.name == "logsumexp" ? 1 : t.numel());
      !s.ok()) {
    return s;
  }
  return out;
}

// The dims a call names: None or [] mean all of them.
std::vector<int64_t> DimsOf(const Args& args, absl::string_view name) {
  const Value& v = args.Get(name);
  if (v.is_none()) return {};
  return args.IntList(name);
}

absl::StatusOr<std::vector<int64_t>> ReduceShape(const ReduceSpec& spec, const TensorMeta& t,
                                                 const std::vector<int64_t>& dims, bool keepdim) {
  absl::StatusOr<std::vector<bool>> mask = DimMask(dims, t.dim());
  if (!mask.ok()) return mask.status();
  if (spec.needs_identity) {
    if (dims.empty() && t.numel() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec.name,
          "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
          "reduction dim with the 'dim' argument."));
    }
    for (size_t i = 0; i < mask->size(); ++i) {
      if ((*mask)[i] && t.sizes[i] == 0) {
        return absl::OutOfRangeError(
            absl::StrCat(spec.name, "(): Expected reduction dim ", i, " to have non-zero size."));
      }
    }
  }
  return ReducedSizes(t.sizes, *mask, keepdim);
}

// sum(input, dim=None, keepdim=False, *, dtype=None) and friends.
InferFn Reduce(ReduceSpec spec, absl::string_view self) {
  return [spec, self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const Value& x = args.Get(self);
    const TensorMeta& t = x.as_tensor();
    absl::StatusOr<DType> dtype = ReducedDType(spec, args, t);
    if (!dtype.ok()) return dtype.status();
    const std::vector<int64_t> dims = DimsOf(args, "dim");
    if (spec.name == "logsumexp" && dims.empty() && !args.Bool("keepdim") && t.dim() > 0 &&
        t.numel() != 0) {
      // torch resizes its result to the reduced shape but broadcasts the
      // max it subtracts with keepdim, and the two disagree.
      return absl::InvalidArgumentError(
          absl::StrCat("output with shape [] doesn't match the broadcast shape (logsumexp with "
                       "dim=[])"));
    }
    absl::StatusOr<std::vector<int64_t>> sizes = ReduceShape(spec, t, dims, args.Bool("keepdim"));
    if (!sizes.ok()) return sizes.status();
    TensorMeta out = NewTensor(*dtype, *std::move(sizes), t.device, t.requires_grad);
    return Value(std::move(out));
  };
}

// argmax/argmin(input, dim=None, keepdim=False): int64 indices.
InferFn ArgReduce(absl::string_view name, absl::string_view self) {
  return [name = std::string(name),
          self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const TensorMeta& t = args.Tensor(self);
    if (t.dtype == DType::kBool) {
      return absl::InvalidArgumentError(absl::StrCat(name, "(): does not support bool input"));
    }
    ReduceSpec spec{name, ReduceDType::kSame, kNoDTypes, /*needs_identity=*/true};
    std::vector<int64_t> dims;
    if (!args.IsNone("dim")) dims.push_back(args.Int("dim"));
    absl::StatusOr<std::vector<int64_t>> sizes = ReduceShape(spec, t, dims, args.Bool("keepdim"));
    if (!sizes.ok()) return sizes.status();
    return Value(NewTensor(DType::kInt64, *std::move(sizes), t.device, false));
  };
}

// max/min: (input) -> value; (input, dim, keepdim) -> (values, indices);
// (input, other) -> maximum/minimum.
InferFn MaxMin(absl::string_view name, absl::string_view self) {
  return [name = std::string(name),
          self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const Value& x = args.Get(self);
    const TensorMeta& t = x.as_tensor();
    ReduceSpec spec{name, ReduceDType::kSame, kNoDTypes, /*needs_identity=*/true};
    if (args.overload() == 0) {
      absl::StatusOr<std::vector<int64_t>> sizes = ReduceShape(spec, t, {}, false);
      if (!sizes.ok()) return sizes.status();
      return Value(NewTensor(t.dtype, *std::move(sizes), t.device, t.requires_grad));
    }
    if (args.overload() == 1) {
      absl::StatusOr<std::vector<int64_t>> sizes =
          ReduceShape(spec, t, {args.Int("dim")}, args.Bool("keepdim"));
      if (!sizes.ok()) return sizes.status();
      return Value::Tuple({Value(NewTensor(t.dtype, *sizes, t.device, t.requires_grad)),
                           Value(NewTensor(DType::kInt64, *sizes, t.device, false))});
    }
    const Value& other = args.Get("other");
    const Value* both[] = {&x, &other};
    absl::StatusOr<Device> device = CommonDevice(both);
    if (!device.ok()) return device.status();
    absl::StatusOr<DType> dtype = ResultType({&x, &other});
    if (!dtype.ok()) return dtype.status();
    absl::StatusOr<std::vector<int64_t>> sizes = BroadcastShapes(t.sizes, other.as_tensor().sizes);
    if (!sizes.ok()) return sizes.status();
    return Value(PointwiseOutput(*dtype, *std::move(sizes), both, *device));
  };
}

// std/var: (input, dim, unbiased, keepdim) or (input, dim=None, *, correction, keepdim).
InferFn StdVar(absl::string_view name, absl::string_view self) {
  return [name = std::string(name),
          self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const TensorMeta& t = args.Tensor(self);
    ReduceSpec spec{name, ReduceDType::kStd};
    absl::StatusOr<DType> dtype = ReducedDType(spec, args, t);
    if (!dtype.ok()) return dtype.status();
    absl::StatusOr<std::vector<int64_t>> sizes =
        ReduceShape(spec, t, DimsOf(args, "dim"), args.Bool("keepdim"));
    if (!sizes.ok()) return sizes.status();
    return Value(NewTensor(*dtype, *std::move(sizes), t.device, t.requires_grad));
  };
}

// all/any: (input) or (input, int dim, keepdim=False).
InferFn AllAny(absl::string_view name, absl::string_view self) {
  return [name = std::string(name),
          self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const TensorMeta& t = args.Tensor(self);
    ReduceSpec spec{name, ReduceDType::kBool};
    absl::StatusOr<DType> dtype = ReducedDType(spec, args, t);
    if (!dtype.ok()) return dtype.status();
    std::vector<int64_t> dims;
    bool keepdim = false;
    if (args.overload() == 1) {
      dims.push_back(args.Int("dim"));
      keepdim = args.Bool("keepdim");
    }
    absl::StatusOr<std::vector<int64_t>> sizes = ReduceShape(spec, t, dims, keepdim);
    if (!sizes.ok()) return sizes.status();
    return Value(NewTensor(*dtype, *std::move(sizes), t.device, false));
  };
}

enum class ScanKind { kCumsum, kSoftmax };

// cumsum(input, dim, *, dtype) and softmax/log_softmax(input, dim, dtype):
// same shape, dim checked, dtype by the family's rule.
InferFn Scan(absl::string_view name, ScanKind kind, absl::string_view self) {
  return [name = std::string(name), kind,
          self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const TensorMeta& t = args.Tensor(self);
    const Value& dim_value = args.Get("dim");
    int64_t dim = 0;
    if (dim_value.is_none()) {
      // F.softmax(x) without dim: torch's legacy choice (with a warning).
      const int64_t n = t.dim();
      dim = (n == 0 || n == 1 || n == 3) ? 0 : 1;
    } else {
      dim = dim_value.as_int();
    }
    absl::StatusOr<int64_t> wrapped = WrapDim(dim, t.dim());
    if (!wrapped.ok()) return wrapped.status();
    std::optional<DType> requested = args.OptDType("dtype");
    DType out = t.dtype;
    if (kind == ScanKind::kCumsum) {
      out = requested ? *requested : (IsIntegral(t.dtype, true) ? DType::kInt64 : t.dtype);
      if (absl::Status s = CheckKernel(name, out, t.device, kNoDTypes, t.dim() == 0 ? 0 : t.numel());
          !s.ok()) {
        return s;
      }
    } else {
      out = requested ? *requested : t.dtype;
      // softmax computes in the requested dtype (the input is converted first).
      if (absl::Status s = CheckKernel(absl::StrCat(name, "_lastdim_kernel_impl"), out, t.device,
                                       kBoolSet | kIntegralSet, t.numel());
          !s.ok()) {
        return s;
      }
    }
    return Value(NewTensor(out, t.sizes, t.device, t.requires_grad));
  };
}

// sort(input, dim=-1, descending=False): values keep self's dense layout.
InferFn Sort(absl::string_view self) {
  return [self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const TensorMeta& t = args.Tensor(self);
    absl::StatusOr<int64_t> dim = WrapDim(args.Int("dim"), t.dim());
    if (!dim.ok()) return dim.status();
    TensorMeta values = NewTensor(t.dtype, t.sizes, t.device, t.requires_grad);
    values.strides = PreservedStrides(t);
    TensorMeta indices = NewTensor(DType::kInt64, t.sizes, t.device, false);
    indices.strides = values.strides;
    return Value::Tuple({Value(std::move(values)), Value(std::move(indices))});
  };
}

// argsort(input, dim=-1, descending=False): sort's indices.
InferFn ArgSort(absl::string_view self) {
  return [sort = Sort(self)](const Args& args) -> absl::StatusOr<Value> {
    absl::StatusOr<Value> both = sort(args);
    if (!both.ok()) return both.status();
    return both->items()[1];
  };
}

// topk(input, k, dim=-1, largest=True, sorted=True): dim shrinks to k.
InferFn TopK(absl::string_view self) {
  return [self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const TensorMeta& t = args.Tensor(self);
    absl::StatusOr<int64_t> dim = WrapDim(args.Int("dim"), t.dim());
    if (!dim.ok()) return dim.status();
    const int64_t k = args.Int("k");
    const int64_t size = t.dim() == 0 ? 1 : t.sizes[static_cast<size_t>(*dim)];
    if (k < 0 || k > size) return absl::OutOfRangeError("selected index k out of range");
    if (t.dtype == DType::kBool && t.device.type == "cpu") {
      return absl::InvalidArgumentError("topk does not support bool dtypes on CPU");
    }
    std::vector<int64_t> sizes = t.sizes;
    if (t.dim() > 0) sizes[static_cast<size_t>(*dim)] = k;
    TensorMeta values = NewTensor(t.dtype, sizes, t.device, t.requires_grad);
    TensorMeta indices = NewTensor(DType::kInt64, sizes, t.device, false);
    values.strides.clear();  // topk restrides its outputs like its input: not tracked
    indices.strides.clear();
    return Value::Tuple({Value(std::move(values)), Value(std::move(indices))});
  };
}

void AddBoth(Registry& r, absl::string_view name, std::vector<absl::string_view> fn_sigs,
             std::vector<absl::string_view> method_sigs, uint32_t tags,
             const std::function<InferFn(absl::string_view self)>& make) {
  r.Add(absl::StrCat("torch.", name), std::move(fn_sigs), tags, make("input"));
  r.Add(absl::StrCat("Tensor.", name), std::move(method_sigs), tags, make("self"));
}

}  // namespace

void RegisterReductionOps(Registry& r) {
  auto reduce = [](ReduceSpec spec) {
    return [spec](absl::string_view self) { return Reduce(spec, self); };
  };
  AddBoth(r, "sum",
          {"Tensor input, *, dtype? dtype=None",
           "Tensor input, int[1]? dim, bool keepdim=False, *, dtype? dtype=None"},
          {"Tensor self, *, dtype? dtype=None",
           "Tensor self, int[1]? dim, bool keepdim=False, *, dtype? dtype=None"},
          kReduction, reduce({"sum", ReduceDType::kSumLike, kNoDTypes, false, true}));
  AddBoth(r, "mean",
          {"Tensor input, *, dtype? dtype=None",
           "Tensor input, int[1]? dim, bool keepdim=False, *, dtype? dtype=None"},
          {"Tensor self, *, dtype? dtype=None",
           "Tensor self, int[1]? dim, bool keepdim=False, *, dtype? dtype=None"},
          kReduction, reduce({"mean", ReduceDType::kFloatOnly, kNoDTypes, false, true}));
  AddBoth(r, "prod",
          {"Tensor input, *, dtype? dtype=None",
           "Tensor input, int[1] dim, bool keepdim=False, *, dtype? dtype=None"},
          {"Tensor self, *, dtype? dtype=None",
           "Tensor self, int[1] dim, bool keepdim=False, *, dtype? dtype=None"},
          kReduction, reduce({"prod", ReduceDType::kSumLike, kNoDTypes, false, true}));
  for (absl::string_view name : {"amax", "amin"}) {
    AddBoth(r, name, {"Tensor input, int[1]? dim=[], bool keepdim=False"},
            {"Tensor self, int[1]? dim=[], bool keepdim=False"}, kReduction,
            reduce({name, ReduceDType::kSame, kNoDTypes, /*needs_identity=*/true}));
  }
  AddBoth(r, "logsumexp", {"Tensor input, int[1] dim, bool keepdim=False"},
          {"Tensor self, int[1] dim, bool keepdim=False"}, kReduction,
          reduce({"logsumexp", ReduceDType::kToFloat, kNoDTypes}));
  for (absl::string_view name : {"argmax", "argmin"}) {
    AddBoth(r, name, {"Tensor input, int? dim=None, bool keepdim=False"},
            {"Tensor self, int? dim=None, bool keepdim=False"}, kReduction,
            [name](absl::string_view self) { return ArgReduce(name, self); });
  }
  for (absl::string_view name : {"max", "min"}) {
    AddBoth(
        r, name,
        {"Tensor input", "Tensor input, int dim, bool keepdim=False", "Tensor input, Tensor other"},
        {"Tensor self", "Tensor self, int dim, bool keepdim=False", "Tensor self, Tensor other"},
        kReduction, [name](absl::string_view self) { return MaxMin(name, self); });
  }
  for (absl::string_view name : {"std", "var"}) {
    AddBoth(r, name,
            {"Tensor input, bool unbiased=True",
             "Tensor input, int[1]? dim, bool unbiased=True, bool keepdim=False",
             "Tensor input, int[1]? dim=None, *, int? correction=None, bool keepdim=False"},
            {"Tensor self, bool unbiased=True",
             "Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False",
             "Tensor self, int[1]? dim=None, *, int? correction=None, bool keepdim=False"},
            kReduction, [name](absl::string_view self) { return StdVar(name, self); });
  }
  for (absl::string_view name : {"all", "any"}) {
    AddBoth(r, name, {"Tensor input", "Tensor input, int dim, bool keepdim=False"},
            {"Tensor self", "Tensor self, int dim, bool keepdim=False"}, kReduction,
            [name](absl::string_view self) { return AllAny(name, self); });
  }
  AddBoth(r, "sort",
          {"Tensor input, int dim=-1, bool descending=False",
           "Tensor input, *, bool? stable, int dim=-1, bool descending=False"},
          {"Tensor self, int dim=-1, bool descending=False",
           "Tensor self, *, bool? stable, int dim=-1, bool descending=False"},
          0, Sort);
  AddBoth(r, "argsort",
          {"Tensor input, int dim=-1, bool descending=False",
           "Tensor input, *, bool stable, int dim=-1, bool descending=False"},
          {"Tensor self, int dim=-1, bool descending=False",
           "Tensor self, *, bool stable, int dim=-1, bool descending=False"},
          0, ArgSort);
  AddBoth(r, "topk", {"Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True"},
          {"Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True"}, 0, TopK);
  AddBoth(r, "cumsum", {"Tensor input, int dim, *, dtype? dtype=None"},
          {"Tensor self, int dim, *, dtype? dtype=None"}, 0,
          [](absl::string_view self) { return Scan("cumsum", ScanKind::kCumsum, self); });
  for (absl::string_view name : {"softmax", "log_softmax"}) {
    AddBoth(r, name, {"Tensor input, int dim, dtype? dtype=None"},
            {"Tensor self, int dim, dtype? dtype=None"}, 0,
            [name](absl::string_view self) { return Scan(name, ScanKind::kSoftmax, self); });
    r.Add(absl::StrCat("torch.nn.functional.", name),
          {"Tensor input, int? dim=None, int _stacklevel=3, dtype? dtype=None"}, 0,
          Scan(name, ScanKind::kSoftmax, "input"));
  }
}

}  // namespace dynamo::ops
