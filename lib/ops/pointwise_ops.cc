// Pointwise ops: unary math, binary arithmetic and comparisons (functional,
// method, in-place and operator.* forms), where, clamp, masked_fill.
// Each family is one inference function parameterised by the rule that tells
// its members apart (the dtype rule and the CPU kernels' coverage).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ops/infer_helpers.h"
#include "lib/ops/registry.h"

namespace dynamo::ops {
namespace {

// ---------------------------------------------------------------- unary
enum class UnaryRule {
  kToFloat,     // integral inputs compute in the default float (sin, exp)
  kSame,        // output dtype = input dtype (abs, floor)
  kBoolResult,  // always bool (isnan, logical_not)
};

struct UnarySpec {
  absl::string_view kernel;
  UnaryRule rule;
  DTypeSet cpu_unsupported;           // dtypes (after promotion) torch 2.14's CPU kernel lacks
  absl::string_view bool_error = {};  // torch's own message where it rejects bool first
  bool differentiable = true;
};

InferFn Unary(UnarySpec spec, absl::string_view self = "input") {
  return [spec, self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    const Value& x = args.Get(self);
    const TensorMeta& t = x.as_tensor();
    if (!spec.bool_error.empty() && t.dtype == DType::kBool) {
      return absl::InvalidArgumentError(spec.bool_error);
    }
    DType out = t.dtype;
    if (spec.rule == UnaryRule::kToFloat) out = ToFloatIfIntegral(t.dtype);
    if (spec.rule == UnaryRule::kBoolResult) out = DType::kBool;
    const DType compute = spec.rule == UnaryRule::kBoolResult ? t.dtype : out;
    if (absl::Status s = CheckKernel(spec.kernel, compute, t.device, spec.cpu_unsupported);
        !s.ok()) {
      return s;
    }
    const Value* in[] = {&x};
    TensorMeta result = PointwiseOutput(out, t.sizes, in, t.device);
    if (!spec.differentiable) result.requires_grad = false;
    return Value(std::move(result));
  };
}

// In-place unary (relu_, sigmoid_): the result must fit the input's dtype.
InferFn UnaryInplace(UnarySpec spec, absl::string_view self = "self") {
  InferFn fn = Unary(spec, self);
  return [fn, self = std::string(self)](const Args& args) -> absl::StatusOr<Value> {
    absl::StatusOr<Value> out = fn(args);
    if (!out.ok()) return out;
    const TensorMeta& t = args.Tensor(self);
    if (absl::Status s = CheckNoInternalOverlap(t); !s.ok()) return s;
    if (!CanCast(out->as_tensor().dtype, t.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat("result type ", DTypeName(out->as_tensor().dtype),
                       " can't be cast to the desired output type ", DTypeName(t.dtype)));
    }
    return Value(t);
  };
}

// ---------------------------------------------------------------- binary
enum class BinaryRule {
  kArith,      // add, mul: result_type
  kSub,        // result_type; bool operands rejected
  kTrueDiv,    // result_type, integral -> default float
  kIntegerOk,  // floor_divide, remainder, fmod, pow: result_type, no bool kernel
  kCompare,    // eq, lt, ...: bool
  kLogical,    // logical_and, ...: bool
  kBitwise,    // bitwise_and, ...: integral or bool only
  kFloatMath,  // atan2: result_type, integral -> float
  kMaxMin,     // maximum, minimum: tensors only
};

struct BinarySpec {
  absl::string_view kernel;
  BinaryRule rule;
  DTypeSet cpu_unsupported = kNoDTypes;
  bool has_alpha = false;
  bool has_rounding_mode = false;
  absl::string_view other_name = "other";  // pow calls it "exponent"
};

absl::StatusOr<DType> BinaryDType(const BinarySpec& spec, const Args& args, const Value& a,
                                  const Value& b, const Device& device) {
  if (spec.rule == BinaryRule::kSub) {
    auto is_bool = [](const Value& v) {
      return v.is_bool() || (v.is_tensor() && v.as_tensor().dtype == DType::kBool);
    };
    if (is_bool(a) && is_bool(b)) {
      return absl::InvalidArgumentError(
          "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
          "`logical_xor()` operator instead.");
    }
    if (is_bool(a) || is_bool(b)) {
      return absl::InvalidArgumentError(
          "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
          "to "
          "invert a mask, use the `~` or `logical_not()` operator instead.");
    }
  }
  absl::StatusOr<DType> common = ResultType({&a, &b});
  if (!common.ok()) return common.status();
  DType out = *common;
  DType compute = *common;
  DTypeSet unsupported = spec.cpu_unsupported;
  std::string rounding;
  if (spec.has_rounding_mode && !args.IsNone("rounding_mode")) {
    rounding = args.Get("rounding_mode").as_string();
    if (rounding != "trunc" && rounding != "floor") {
      return absl::InvalidArgumentError(absl::StrCat(
          "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", rounding,
          "'"));
    }
  }
  switch (spec.rule) {
    case BinaryRule::kTrueDiv:
      if (rounding.empty()) {
        out = compute = ToFloatIfIntegral(*common);
      } else if (*common == DType::kBool) {
        return CheckKernel(absl::StrCat("div_", rounding, "_cpu"), DType::kBool, device, kBoolSet);
      }
      break;
    case BinaryRule::kFloatMath:
      out = compute = ToFloatIfIntegral(*common);
      break;
    case BinaryRule::kCompare:
    case BinaryRule::kLogical:
      out = DType::kBool;
      break;
    case BinaryRule::kBitwise:
      if (!IsIntegral(*common, true)) {
        return CheckKernel(spec.kernel, *common, device, ~kNoDTypes);
      }
      break;
    case BinaryRule::kIntegerOk:
      // The one value-dependent rule torch checks before computing anything.
      if (spec.kernel == "pow" && IsIntegral(*common, false) && b.is_int() && b.as_int() < 0) {
        return absl::InvalidArgumentError("Integers to negative integer powers are not allowed.");
      }
      // A tensor to a Python-number power has its own kernel, which covers bool.
      if (spec.kernel == "pow" && a.is_tensor() && !b.is_tensor()) unsupported &= ~kBoolSet;
      break;
    case BinaryRule::kMaxMin:
      if (IsComplex(*common)) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec.kernel, " not implemented for complex tensors."));
      }
      break;
    default:
      break;
  }
  if (spec.has_alpha) {
    const Value& alpha = args.Get("alpha");
    if (alpha.is_float() && IsIntegral(out, true)) {
      return absl::InvalidArgumentError(
          "For integral input tensors, argument alpha must not be a floating point number.");
    }
    if (alpha.is_bool() && out != DType::kBool) {
      return absl::InvalidArgumentError("Boolean alpha only supported for Boolean results.");
    }
  }
  if (absl::Status s = CheckKernel(spec.kernel, compute, device, unsupported); !s.ok()) return s;
  return out;
}

// Out-of-place binary op over operands named `a` and `b` (either may be a
// Python number when the signature allows it; operator.* needs one tensor).
InferFn Binary(BinarySpec spec, absl::string_view a_name, absl::string_view b_name,
               bool inplace = false) {
  return [spec, a_name = std::string(a_name), b_name = std::string(b_name),
          inplace](const Args& args) -> absl::StatusOr<Value> {
    const Value& a = args.Get(a_name);
    const Value& b = args.Get(b_name);
    if (!a.is_tensor() && !b.is_tensor()) {
      return absl::UnimplementedError(absl::StrCat(
          args.op().name(), " on two Python numbers is not a tensor op (the tracer folds it)"));
    }
    const Value* operands[] = {&a, &b};
    absl::StatusOr<Device> device = CommonDevice(operands);
    if (!device.ok()) return device.status();
    absl::StatusOr<DType> dtype = BinaryDType(spec, args, a, b, *device);
    if (!dtype.ok()) return dtype.status();
    static const std::vector<int64_t> kScalar;
    const std::vector<int64_t>& sa = a.is_tensor() ? a.as_tensor().sizes : kScalar;
    const std::vector<int64_t>& sb = b.is_tensor() ? b.as_tensor().sizes : kScalar;
    absl::StatusOr<std::vector<int64_t>> sizes = BroadcastShapes(sa, sb);
    if (!sizes.ok()) return sizes.status();
    if (inplace) {
      const TensorMeta& self = a.as_tensor();
      if (absl::Status s = CheckNoInternalOverlap(self); !s.ok()) return s;
      if (*sizes != self.sizes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output with shape [", absl::StrJoin(self.sizes, ", "),
            "] doesn't match the broadcast shape [", absl::StrJoin(*sizes, ", "), "]"));
      }
      if (!CanCast(*dtype, self.dtype)) {
        return absl::InvalidArgumentError(absl::StrCat("result type ", DTypeName(*dtype),
                                                       " can't be cast to the desired output type ",
                                                       DTypeName(self.dtype)));
      }
      return a;
    }
    TensorMeta out = PointwiseOutput(*dtype, *std::move(sizes), operands, *device);
    if (spec.rule == BinaryRule::kCompare || spec.rule == BinaryRule::kLogical ||
        spec.rule == BinaryRule::kBitwise) {
      out.requires_grad = false;
    }
    return Value(std::move(out));
  };
}

// One binary family: torch.<name>, Tensor.<name>, Tensor.<name>_ and the
// operator module's forms where Python has an operator for it.
void AddBinaryFamily(Registry& r, absl::string_view name, BinarySpec spec,
                     absl::string_view py_operator = {}, absl::string_view py_inplace = {},
                     bool tensor_second = false, bool inplace_method = true) {
  std::string extra;
  if (spec.has_alpha) extra = ", *, Number alpha=1";
  if (spec.has_rounding_mode) extra = ", *, str? rounding_mode=None";
  const std::string other =
      absl::StrCat(tensor_second ? "Tensor " : "Tensor|Number ", spec.other_name);
  const std::string fn_sig = absl::StrCat("Tensor input, ", other, extra);
  const std::string method_sig = absl::StrCat("Tensor self, ", other, extra);
  const uint32_t tags = kPointwise;
  r.Add(absl::StrCat("torch.", name), {fn_sig}, tags, Binary(spec, "input", spec.other_name));
  r.Add(absl::StrCat("Tensor.", name), {method_sig}, tags, Binary(spec, "self", spec.other_name));
  if (inplace_method) {
    r.Add(absl::StrCat("Tensor.", name, "_"), {method_sig}, tags | kInplace,
          Binary(spec, "self", spec.other_name, /*inplace=*/true));
  }
  if (!py_operator.empty()) {
    r.Add(absl::StrCat("operator.", py_operator), {"Tensor|Number a, Tensor|Number b"}, tags,
          Binary(spec, "a", "b"));
  }
  if (!py_inplace.empty()) {
    // `x += y` on a tensor is add_ (the in-place method), on a number is
    // x = y.__radd__(x); the tracer sends only the tensor case here.
    r.Add(absl::StrCat("operator.", py_inplace), {"Tensor a, Tensor|Number b"}, tags | kInplace,
          Binary(spec, "a", "b", /*inplace=*/true));
  }
}

// where(condition, input, other): condition must be bool; the values promote.
absl::StatusOr<Value> InferWhere(const Args& args) {
  const Value& cond = args.Get("condition");
  const Value& x = args.Get("input");
  const Value& y = args.Get("other");
  if (cond.as_tensor().dtype != DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(
        "where expected condition to be a boolean tensor, but got a tensor with dtype ",
        DTypeName(cond.as_tensor().dtype)));
  }
  const Value* all[] = {&cond, &x, &y};
  absl::StatusOr<Device> device = CommonDevice(all);
  if (!device.ok()) return device.status();
  absl::StatusOr<DType> dtype = ResultType({&x, &y});
  if (!dtype.ok()) return dtype.status();
  static const std::vector<int64_t> kScalar;
  std::vector<int64_t> sizes = cond.as_tensor().sizes;
  for (const Value* v : {&x, &y}) {
    absl::StatusOr<std::vector<int64_t>> b =
        BroadcastShapes(sizes, v->is_tensor() ? v->as_tensor().sizes : kScalar);
    if (!b.ok()) return b.status();
    sizes = *std::move(b);
  }
  return Value(PointwiseOutput(*dtype, std::move(sizes), all, *device));
}

// clamp(input, min=None, max=None): promotes with the bounds (torch >= 1.12).
InferFn Clamp(absl::string_view self, bool inplace) {
  return [self = std::string(self), inplace](const Args& args) -> absl::StatusOr<Value> {
    const Value& x = args.Get(self);
    const Value& lo = args.Get("min");
    const Value& hi = args.Get("max");
    if (lo.is_none() && hi.is_none()) {
      return absl::InvalidArgumentError(
          "torch.clamp: At least one of 'min' or 'max' must not be None");
    }
    const Value* all[] = {&x, &lo, &hi};
    absl::StatusOr<Device> device = CommonDevice(all);
    if (!device.ok()) return device.status();
    absl::StatusOr<DType> dtype = ResultType({&x, &lo, &hi});
    if (!dtype.ok()) return dtype.status();
    // The CPU clamp kernel has no bool variant (bool bounds would need one).
    if (absl::Status s = CheckKernel("clamp", *dtype, *device, kBoolSet); !s.ok()) return s;
    std::vector<int64_t> sizes = x.as_tensor().sizes;
    for (const Value* v : {&lo, &hi}) {
      if (!v->is_tensor()) continue;
      absl::StatusOr<std::vector<int64_t>> b = BroadcastShapes(sizes, v->as_tensor().sizes);
      if (!b.ok()) return b.status();
      sizes = *std::move(b);
    }
    if (inplace) {
      if (absl::Status s = CheckNoInternalOverlap(x.as_tensor()); !s.ok()) return s;
      if (sizes != x.as_tensor().sizes || !CanCast(*dtype, x.as_tensor().dtype)) {
        return absl::InvalidArgumentError("clamp_: the result does not fit the input in place");
      }
      return x;
    }
    return Value(PointwiseOutput(*dtype, std::move(sizes), all, *device));
  };
}

// masked_fill(mask, value): the mask broadcasts to self (never the reverse).
InferFn MaskedFill(bool inplace) {
  return [inplace](const Args& args) -> absl::StatusOr<Value> {
    const Value& x = args.Get("self");
    const TensorMeta& mask = args.Tensor("mask");
    const Value& value = args.Get("value");
    if (mask.dtype != DType::kBool) {
      return absl::InvalidArgumentError(
          absl::StrCat("masked_fill_ only supports boolean masks, but got mask with dtype ",
                       DTypeName(mask.dtype)));
    }
    if (value.is_tensor() && value.as_tensor().dim() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
          value.as_tensor().dim(), " dimension(s)."));
    }
    const TensorMeta& self = x.as_tensor();
    absl::StatusOr<std::vector<int64_t>> sizes = BroadcastShapes(self.sizes, mask.sizes);
    if (!sizes.ok()) return sizes.status();
    if (inplace && *sizes != self.sizes) {
      return absl::InvalidArgumentError(
          absl::StrCat("output with shape [", absl::StrJoin(self.sizes, ", "),
                       "] doesn't match the broadcast shape [", absl::StrJoin(*sizes, ", "), "]"));
    }
    if (inplace) {
      if (absl::Status s = CheckNoInternalOverlap(self); !s.ok()) return s;
      return x;
    }
    const Value& mask_value = args.Get("mask");
    const Value* all[] = {&x, &mask_value, &value};
    absl::StatusOr<Device> device = CommonDevice(all);
    if (!device.ok()) return device.status();
    TensorMeta out = NewTensor(self.dtype, *std::move(sizes), *device, AnyRequiresGrad(all));
    // The out-of-place form clones self and then expands the mask into it:
    // the clone keeps self's layout, so only a canonical self is tracked.
    if (self.strides != ContiguousStrides(self.sizes) || out.sizes != self.sizes)
      out.strides.clear();
    return Value(std::move(out));
  };
}

// fill_(value), zero_(), copy_(src): in-place writes that keep self's metadata.
// (fill_ and zero_ write one value everywhere, so torch lets them write to
// expanded tensors.)
absl::StatusOr<Value> Fill(const Args& args) {
  const Value& self = args.Get("self");
  const Value& value = args.Get("value");
  if (value.is_tensor() && value.as_tensor().dim() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fill_ only supports 0-dimension value tensor but got tensor with ",
                     value.as_tensor().dim(), " dimensions."));
  }
  // A tensor value is copied in (a number is written by a fill kernel that
  // tolerates overlapping elements).
  if (value.is_tensor()) {
    if (absl::Status s = CheckNoInternalOverlap(self.as_tensor()); !s.ok()) return s;
  }
  return self;
}

absl::StatusOr<Value> Zero(const Args& args) { return args.Get("self"); }

absl::StatusOr<Value> Copy(const Args& args) {
  const Value& self = args.Get("self");
  const TensorMeta& t = self.as_tensor();
  if (absl::Status s = CheckNoInternalOverlap(t); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> b = BroadcastShapes(t.sizes, args.Tensor("src").sizes);
  if (!b.ok()) return b.status();
  if (*b != t.sizes) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy_: src of shape [", absl::StrJoin(args.Tensor("src").sizes, ", "),
                     "] cannot be broadcast to self's [", absl::StrJoin(t.sizes, ", "), "]"));
  }
  TensorMeta out = t;
  out.requires_grad = t.requires_grad || args.Tensor("src").requires_grad;
  return Value(std::move(out));
}

// addcmul/addcdiv(input, tensor1, tensor2, *, value=1): input + value *
// tensor1 (*|/) tensor2 over the three tensors' broadcast and result type;
// addcdiv refuses two integral operands (it would be an integer division).
InferFn Addc(absl::string_view kernel, absl::string_view self, bool inplace) {
  return [kernel = std::string(kernel), self = std::string(self), inplace](const Args& args) -> absl::StatusOr<Value> {
    const Value& input = args.Get(self);
    const Value& t1 = args.Get("tensor1");
    const Value& t2 = args.Get("tensor2");
    if (kernel == "addcdiv" && IsIntegral(t1.as_tensor().dtype, true) && IsIntegral(t2.as_tensor().dtype, true)) {
      return absl::InvalidArgumentError(
          "Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
          "perform a true division of tensor1 and tensor2.");
    }
    const Value* operands[] = {&input, &t1, &t2};
    absl::StatusOr<Device> device = CommonDevice(operands);
    if (!device.ok()) return device.status();
    absl::StatusOr<DType> dtype = ResultType(operands);
    if (!dtype.ok()) return dtype.status();
    absl::StatusOr<std::vector<int64_t>> sizes = BroadcastShapes(input.as_tensor().sizes, t1.as_tensor().sizes);
    if (sizes.ok()) sizes = BroadcastShapes(*sizes, t2.as_tensor().sizes);
    if (!sizes.ok()) return sizes.status();
    if (device->type == "cpu" && *dtype == DType::kBool) {
      return absl::UnimplementedError(absl::StrCat("\"", kernel, "_cpu_out\" not implemented for 'Bool'"));
    }
    if (inplace) {
      const TensorMeta& out = input.as_tensor();
      if (absl::Status s = CheckNoInternalOverlap(out); !s.ok()) return s;
      if (*sizes != out.sizes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output with shape [", absl::StrJoin(out.sizes, ", "), "] doesn't match the broadcast shape [",
            absl::StrJoin(*sizes, ", "), "]"));
      }
      if (!CanCast(*dtype, out.dtype)) {
        return absl::InvalidArgumentError(absl::StrCat("result type ", DTypeName(*dtype),
                                                       " can't be cast to the desired output type ",
                                                       DTypeName(out.dtype)));
      }
      return input;
    }
    return Value(PointwiseOutput(*dtype, *std::move(sizes), operands, *device));
  };
}

}  // namespace

void RegisterPointwiseOps(Registry& r) {
  // Unary ops that compute in floating point; torch 2's CPU kernels cover
  // every floating dtype (float16 included).
  static constexpr absl::string_view kFloatUnary[] = {
      "sin",  "cos",   "tan",  "exp",  "log",  "sqrt", "rsqrt", "sigmoid",    "tanh", "erf",
      "log1p", "expm1", "asin", "acos", "atan", "sinh", "cosh",  "reciprocal", "log2", "exp2",
  };
  for (absl::string_view name : kFloatUnary) {
    UnarySpec spec{name, UnaryRule::kToFloat, kNoDTypes};
    r.Add(absl::StrCat("torch.", name), {"Tensor input"}, kPointwise, Unary(spec));
    r.Add(absl::StrCat("Tensor.", name), {"Tensor self"}, kPointwise, Unary(spec, "self"));
    r.Add(absl::StrCat("Tensor.", name, "_"), {"Tensor self"}, kPointwise | kInplace,
          UnaryInplace(spec));
  }
  // Unary ops that keep the dtype.
  struct SameUnary {
    absl::string_view name;
    DTypeSet cpu_unsupported;
    absl::string_view bool_error;
  };
  static constexpr absl::string_view kNegBool =
      "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert "
      "a "
      "mask, use the `~` or `logical_not()` operator instead.";
  static constexpr SameUnary kSameUnary[] = {
      {"abs", kBoolSet, {}},
      {"neg", kNoDTypes, kNegBool},
      {"relu", kBoolSet, {}},
      {"floor", kBoolSet, {}},
      {"ceil", kBoolSet, {}},
      {"round", kBoolSet, {}},
      {"trunc", kBoolSet, {}},
      {"sign", kNoDTypes, {}},
  };
  for (const SameUnary& u : kSameUnary) {
    UnarySpec spec{u.name, UnaryRule::kSame, u.cpu_unsupported, u.bool_error};
    r.Add(absl::StrCat("torch.", u.name), {"Tensor input"}, kPointwise, Unary(spec));
    r.Add(absl::StrCat("Tensor.", u.name), {"Tensor self"}, kPointwise, Unary(spec, "self"));
    r.Add(absl::StrCat("Tensor.", u.name, "_"), {"Tensor self"}, kPointwise | kInplace,
          UnaryInplace(spec));
  }
  r.Add("operator.neg", {"Tensor a"}, kPointwise,
        Unary({"neg", UnaryRule::kSame, kNoDTypes, kNegBool}, "a"));
  r.Add("operator.abs", {"Tensor a"}, kPointwise, Unary({"abs", UnaryRule::kSame, kBoolSet}, "a"));
  // Bool results.
  for (absl::string_view name : {"isnan", "isinf", "isfinite", "logical_not"}) {
    UnarySpec spec{name, UnaryRule::kBoolResult, kNoDTypes, {}, /*differentiable=*/false};
    r.Add(absl::StrCat("torch.", name), {"Tensor input"}, kPointwise, Unary(spec));
    r.Add(absl::StrCat("Tensor.", name), {"Tensor self"}, kPointwise, Unary(spec, "self"));
  }
  UnarySpec bitwise_not{"bitwise_not", UnaryRule::kSame, kFloatingSet | kComplexSet, {}, false};
  r.Add("torch.bitwise_not", {"Tensor input"}, kPointwise, Unary(bitwise_not));
  r.Add("Tensor.bitwise_not", {"Tensor self"}, kPointwise, Unary(bitwise_not, "self"));
  r.Add("operator.invert", {"Tensor a"}, kPointwise, Unary(bitwise_not, "a"));

  // Binary families.
  AddBinaryFamily(r, "add", {"add", BinaryRule::kArith, kNoDTypes, /*alpha=*/true}, "add", "iadd");
  AddBinaryFamily(r, "sub", {"sub", BinaryRule::kSub, kNoDTypes, /*alpha=*/true}, "sub", "isub");
  AddBinaryFamily(r, "mul", {"mul", BinaryRule::kArith}, "mul", "imul");
  AddBinaryFamily(r, "div", {"div", BinaryRule::kTrueDiv, kNoDTypes, false, /*rounding=*/true},
                  "truediv", "itruediv");
  AddBinaryFamily(r, "floor_divide", {"floor_divide", BinaryRule::kIntegerOk, kBoolSet}, "floordiv",
                  "ifloordiv");
  AddBinaryFamily(r, "remainder", {"remainder", BinaryRule::kIntegerOk, kBoolSet}, "mod", "imod");
  AddBinaryFamily(r, "fmod", {"fmod", BinaryRule::kIntegerOk, kBoolSet});
  AddBinaryFamily(r, "pow", {"pow", BinaryRule::kIntegerOk, kBoolSet, false, false, "exponent"},
                  "pow", "ipow");
  AddBinaryFamily(r, "atan2", {"atan2", BinaryRule::kFloatMath, kNoDTypes}, {}, {},
                  /*tensor_second=*/true);
  AddBinaryFamily(r, "maximum", {"maximum", BinaryRule::kMaxMin}, {}, {}, /*tensor_second=*/true,
                  /*inplace_method=*/false);
  AddBinaryFamily(r, "minimum", {"minimum", BinaryRule::kMaxMin}, {}, {}, /*tensor_second=*/true,
                  /*inplace_method=*/false);
  for (absl::string_view name : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    AddBinaryFamily(r, name, {name, BinaryRule::kCompare}, name);
  }
  for (absl::string_view name : {"logical_and", "logical_or", "logical_xor"}) {
    AddBinaryFamily(r, name, {name, BinaryRule::kLogical}, {}, {}, /*tensor_second=*/true);
  }
  AddBinaryFamily(r, "bitwise_and", {"bitwise_and", BinaryRule::kBitwise}, "and_", "iand");
  AddBinaryFamily(r, "bitwise_or", {"bitwise_or", BinaryRule::kBitwise}, "or_", "ior");
  AddBinaryFamily(r, "bitwise_xor", {"bitwise_xor", BinaryRule::kBitwise}, "xor", "ixor");

  for (absl::string_view name : {"addcmul", "addcdiv"}) {
    r.Add(absl::StrCat("torch.", name), {"Tensor input, Tensor tensor1, Tensor tensor2, *, Number value=1"},
          kPointwise, Addc(name, "input", false));
    r.Add(absl::StrCat("Tensor.", name), {"Tensor self, Tensor tensor1, Tensor tensor2, *, Number value=1"},
          kPointwise, Addc(name, "self", false));
    r.Add(absl::StrCat("Tensor.", name, "_"), {"Tensor self, Tensor tensor1, Tensor tensor2, *, Number value=1"},
          kPointwise | kInplace, Addc(name, "self", true));
  }
  r.Add("torch.where", {"Tensor condition, Tensor|Number input, Tensor|Number other"}, kPointwise,
        InferWhere);
  r.Add("torch.clamp", {"Tensor input, Tensor|Number? min=None, Tensor|Number? max=None"},
        kPointwise, Clamp("input", false));
  r.Alias("torch.clip", "torch.clamp");
  r.Add("Tensor.clamp", {"Tensor self, Tensor|Number? min=None, Tensor|Number? max=None"},
        kPointwise, Clamp("self", false));
  r.Add("Tensor.clamp_", {"Tensor self, Tensor|Number? min=None, Tensor|Number? max=None"},
        kPointwise | kInplace, Clamp("self", true));
  r.Add("Tensor.masked_fill", {"Tensor self, Tensor mask, Tensor|Number value"}, kPointwise,
        MaskedFill(false));
  r.Add("Tensor.masked_fill_", {"Tensor self, Tensor mask, Tensor|Number value"},
        kPointwise | kInplace, MaskedFill(true));
  r.Add("torch.masked_fill", {"Tensor self, Tensor mask, Tensor|Number value"}, kPointwise,
        MaskedFill(false));
  r.Add("Tensor.fill_", {"Tensor self, Tensor|Number value"}, kInplace, Fill);
  r.Add("Tensor.zero_", {"Tensor self"}, kInplace, Zero);
  r.Add("Tensor.copy_", {"Tensor self, Tensor src, bool non_blocking=False"}, kInplace, Copy);
}

}  // namespace dynamo::ops
