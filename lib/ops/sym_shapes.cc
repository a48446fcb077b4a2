// Symbolic shape rules (see sym_shapes.h): one small rule per op family,
// found by op name in one table, built from the shared helpers below
// (SymBroadcast, SymReduce, SymViewSizes, SymSlice, PoolOut, ...). Every op
// tagged kPointwise (aliases included, since an alias keeps its tags) shares
// the broadcast rule without being listed.
//
// How a rule reads its call: the registry binds the arguments on the hints
// (Args), and Call maps each bound parameter back to the caller's SymValue
// by address (Args::Get points into the caller's spans, at a signature
// default, or at the varargs list Bind made from the trailing positionals).
// A rule writes every output size as an expression (constants included);
// InferSymbolic then checks each against the registry's size at the hints
// and drops what is constant.
#include "lib/ops/sym_shapes.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/ops/infer_helpers.h"

namespace dynamo::ops {

bool SymValue::is_static() const {
  for (const SymExpr& e : sizes) {
    if (!e.is_constant()) return false;
  }
  if (scalar && !scalar->is_constant()) return false;
  for (const SymValue& item : items) {
    if (!item.is_static()) return false;
  }
  return true;
}

namespace {

#define SS_CONCAT_INNER(a, b) a##b
#define SS_CONCAT(a, b) SS_CONCAT_INNER(a, b)
#define SS_TRY(expr)                                   \
  do {                                                 \
    if (absl::Status _st = (expr); !_st.ok()) return _st; \
  } while (0)
#define SS_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                   \
  if (!tmp.ok()) return tmp.status();  \
  lhs = *std::move(tmp)
#define SS_ASSIGN(lhs, expr) SS_ASSIGN_IMPL(SS_CONCAT(ss_or_, __LINE__), lhs, expr)

using Sizes = std::vector<SymExpr>;

Sizes Constants(const std::vector<int64_t>& v) { return Sizes(v.begin(), v.end()); }

SymExpr Product(const Sizes& s, size_t begin, size_t end) {
  SymExpr p(1);
  for (size_t i = begin; i < end; ++i) p = p * s[i];
  return p;
}
SymExpr Product(const Sizes& s) { return Product(s, 0, s.size()); }

// ---------------------------------------------------------------- facts
// The answer for the hints, guarded unless the ranges settle it. Rules
// branch on it exactly where the registry branches on a size.
absl::StatusOr<bool> Is(ShapeEnv& env, RelKind kind, const SymExpr& a, const SymExpr& b) {
  if (std::optional<int64_t> x = a.constant()) {
    if (std::optional<int64_t> y = b.constant()) {
      // Constant questions are free: no env round trip on the static parts.
      switch (kind) {
        case RelKind::kEq: return *x == *y;
        case RelKind::kNe: return *x != *y;
        case RelKind::kLt: return *x < *y;
        case RelKind::kLe: return *x <= *y;
        case RelKind::kGt: return *x > *y;
        case RelKind::kGe: return *x >= *y;
      }
    }
  }
  if (kind == RelKind::kEq && a == b) return true;
  return env.Decide(kind, a, b);
}

// A relation the registry checked before it accepted the call: it holds at
// the hints, and the guard keeps the trace to the sizes where it still does.
absl::Status Require(ShapeEnv& env, RelKind kind, const SymExpr& a, const SymExpr& b) {
  absl::StatusOr<bool> holds = Is(env, kind, a, b);
  if (!holds.ok()) return holds.status();
  if (!*holds) {
    return absl::InternalError(absl::StrCat("symbolic shapes: ", a.ToString(), " ",
                                            RelKindOperator(kind), " ", b.ToString(),
                                            " fails at the hints, yet the registry accepted"));
  }
  return absl::OkStatus();
}

absl::Status NotModelled(absl::string_view what) {
  return absl::UnimplementedError(absl::StrCat("symbolic shapes: ", what, " is not modelled"));
}

// at::infer_size over expressions: a 1 on either side takes the other, two
// sizes that are not 1 must be equal (guarded: s0 vs s1 records s0 == s1).
absl::StatusOr<Sizes> SymBroadcast(ShapeEnv& env, const Sizes& a, const Sizes& b) {
  const size_t n = std::max(a.size(), b.size());
  Sizes out(n);
  for (size_t i = 0; i < n; ++i) {
    const SymExpr x = i < a.size() ? a[a.size() - 1 - i] : SymExpr(1);
    const SymExpr y = i < b.size() ? b[b.size() - 1 - i] : SymExpr(1);
    SymExpr& o = out[n - 1 - i];
    if (x == y) {
      o = x;
      continue;
    }
    SS_ASSIGN(bool x_one, Is(env, RelKind::kEq, x, 1));
    if (x_one) {
      o = y;
      continue;
    }
    SS_ASSIGN(bool y_one, Is(env, RelKind::kEq, y, 1));
    if (y_one) {
      o = x;
      continue;
    }
    SS_TRY(Require(env, RelKind::kEq, x, y));
    o = y.is_constant() ? y : x;  // after the guard they are one size; keep the simpler
  }
  return out;
}

// `from` broadcasts to `to` without growing it (in-place ops, biases,
// attention masks): every size of the broadcast equals `to`'s.
absl::Status RequireBroadcastsTo(ShapeEnv& env, const Sizes& from, const Sizes& to) {
  SS_ASSIGN(Sizes b, SymBroadcast(env, to, from));
  if (b.size() != to.size()) return absl::InternalError("symbolic shapes: broadcast grew the rank");
  for (size_t i = 0; i < b.size(); ++i) SS_TRY(Require(env, RelKind::kEq, b[i], to[i]));
  return absl::OkStatus();
}

// ReducedSizes over expressions: an empty mask reduces every dim.
Sizes SymReduce(const Sizes& s, const std::vector<bool>& mask, bool keepdim) {
  Sizes out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool reduced = mask.empty() || mask[i];
    if (!reduced) {
      out.push_back(s[i]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

// InferViewSize over expressions. The inferred -1 is numel divided by the
// other sizes: an exact polynomial quotient when there is one
// ((768*s0*s1)/(s0*s1) is 768), otherwise numel // rest under the guard
// numel % rest == 0. Without -1 the products must agree (guarded).
absl::StatusOr<Sizes> SymViewSizes(ShapeEnv& env, Sizes shape, const SymExpr& numel) {
  std::optional<size_t> infer;
  SymExpr rest(1);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i].constant() == -1) {
      if (infer) return absl::InternalError("symbolic shapes: two -1 in a view");
      infer = i;
    } else {
      rest = rest * shape[i];
    }
  }
  if (!infer) {
    SS_TRY(Require(env, RelKind::kEq, rest, numel));
    return shape;
  }
  if (rest.constant() == 0) return NotModelled("a view with -1 and a zero size");
  SS_ASSIGN(std::optional<SymExpr> exact, DivideExact(numel, rest));
  if (exact) {
    shape[*infer] = *exact;
    return shape;
  }
  SS_ASSIGN(SymExpr remainder, Mod(numel, rest));
  SS_TRY(Require(env, RelKind::kEq, remainder, 0));
  SS_ASSIGN(shape[*infer], FloorDiv(numel, rest));
  return shape;
}

// A slice of a dim of `size`, as applySlicing computes it: negative bounds
// count from the end, then both are clamped (stop to [start, size]). Each
// comparison the clamping makes on a symbolic bound is decided (and
// guarded), so the length is an exact expression wherever the guards hold:
// x[:, :T] with T another dim's symbol records T <= size.
absl::StatusOr<SymExpr> SymSlice(ShapeEnv& env, const SymExpr& size,
                                 const std::optional<SymExpr>& start_arg,
                                 const std::optional<SymExpr>& stop_arg, int64_t step) {
  SymExpr start = start_arg.value_or(SymExpr(0));
  SS_ASSIGN(bool start_negative, Is(env, RelKind::kLt, start, 0));
  if (start_negative) start = start + size;
  SS_ASSIGN(bool below, Is(env, RelKind::kLt, start, 0));
  if (below) {
    start = 0;
  } else {
    SS_ASSIGN(bool above, Is(env, RelKind::kGt, start, size));
    if (above) start = size;
  }
  SymExpr stop = size;
  if (stop_arg) {
    stop = *stop_arg;
    SS_ASSIGN(bool stop_negative, Is(env, RelKind::kLt, stop, 0));
    if (stop_negative) stop = stop + size;
    SS_ASSIGN(bool before_start, Is(env, RelKind::kLt, stop, start));
    if (before_start) {
      stop = start;
    } else {
      SS_ASSIGN(bool past_end, Is(env, RelKind::kGt, stop, size));
      if (past_end) stop = size;
    }
  }
  if (step == 1) return stop - start;
  return FloorDiv(stop - start + (step - 1), step);
}

// ATen's pooling_output_shape (and the convolution's, without ceil_mode):
// (in + 2p - d*(k-1) - 1 [+ s-1 with ceil]) // s + 1, one less with ceil
// when the last window would start in the right padding.
absl::StatusOr<SymExpr> PoolOut(ShapeEnv& env, const SymExpr& in, int64_t k, int64_t pad,
                                int64_t stride, int64_t dilation, bool ceil) {
  const SymExpr num = in + (2 * pad - dilation * (k - 1) - 1 + (ceil ? stride - 1 : 0));
  SS_ASSIGN(SymExpr out, FloorDiv(num, stride));
  out = out + 1;
  if (ceil) {
    SS_ASSIGN(bool last_in_padding, Is(env, RelKind::kGe, (out - 1) * stride, in + pad));
    if (last_in_padding) out = out - 1;
  }
  SS_TRY(Require(env, RelKind::kGe, out, 1));
  return out;
}

// ---------------------------------------------------------------- the call
// One call as a rule sees it: the bound arguments (hints), their symbolic
// side, and the env to ask.
class Call {
 public:
  Call(const Args& args, absl::Span<const Value> pos, absl::Span<const SymValue> sym_pos,
       absl::Span<const Kwarg> kwargs, absl::Span<const SymValue> sym_kwargs, ShapeEnv& env)
      : args_(args),
        pos_(pos),
        sym_pos_(sym_pos),
        kwargs_(kwargs),
        sym_kwargs_(sym_kwargs),
        env_(env) {}

  ShapeEnv& env() const { return env_; }
  const Args& args() const { return args_; }
  const OpEntry& op() const { return args_.op(); }
  const std::vector<Param>& params() const {
    return op().signatures()[static_cast<size_t>(args_.overload())].params;
  }
  const Param* FindParam(absl::string_view name) const {
    for (const Param& p : params()) {
      if (p.name == name) return &p;
    }
    return nullptr;
  }
  bool Has(absl::string_view name) const { return FindParam(name) != nullptr; }
  const Value& Get(absl::string_view name) const { return args_.Get(name); }
  bool IsNone(absl::string_view name) const { return Get(name).is_none(); }
  // The first parameter: the tensor a method or function works on.
  const std::string& Self() const { return params().front().name; }

  // The SymValue parallel to a bound parameter (static for a default).
  SymValue Sym(absl::string_view name) const {
    const Value* v = &Get(name);
    for (size_t i = 0; i < pos_.size(); ++i) {
      if (&pos_[i] == v) return i < sym_pos_.size() ? sym_pos_[i] : SymValue{};
    }
    for (size_t i = 0; i < kwargs_.size(); ++i) {
      if (&kwargs_[i].value == v) return i < sym_kwargs_.size() ? sym_kwargs_[i] : SymValue{};
    }
    const Param* p = FindParam(name);
    if (p != nullptr && p->varargs && v != &p->default_value && v->is_list() &&
        v->items().size() <= pos_.size()) {
      // The list Bind made from the trailing positionals (view(b, t, -1)).
      const size_t first = pos_.size() - v->items().size();
      std::vector<SymValue> items;
      for (size_t i = first; i < pos_.size(); ++i) {
        items.push_back(i < sym_pos_.size() ? sym_pos_[i] : SymValue{});
      }
      return SymValue::List(std::move(items));
    }
    return SymValue{};
  }

  // A tensor parameter's sizes (constants where static).
  Sizes SizesOf(absl::string_view name) const { return SizesOf(Get(name), Sym(name)); }
  static Sizes SizesOf(const Value& v, const SymValue& s) {
    if (!s.sizes.empty()) return s.sizes;
    return Constants(v.as_tensor().sizes);
  }
  // An int parameter as an expression.
  SymExpr IntOf(absl::string_view name) const { return IntOf(Get(name), Sym(name)); }
  static SymExpr IntOf(const Value& v, const SymValue& s) {
    if (s.scalar) return *s.scalar;
    return SymExpr(v.as_int());
  }
  // An int[] parameter (a lone int repeated `repeat` times) as expressions.
  Sizes IntListOf(absl::string_view name, size_t repeat = 1) const {
    const Value& v = Get(name);
    const SymValue s = Sym(name);
    if (v.is_int()) return Sizes(repeat, IntOf(v, s));
    Sizes out;
    for (size_t i = 0; i < v.items().size(); ++i) {
      out.push_back(IntOf(v.items()[i], i < s.items.size() ? s.items[i] : SymValue{}));
    }
    return out;
  }
  // An int the rule needs as a number (a dim, a stride, a chunk count):
  // a symbolic one is specialised to its hint (guarded).
  int64_t StaticInt(absl::string_view name) const { return Specialized(Get(name), Sym(name)); }
  int64_t Specialized(const Value& v, const SymValue& s) const {
    if (s.scalar && !s.scalar->is_constant()) {
      return env_.Specialize(SymInt::Symbolic(v.as_int(), *s.scalar)).hint();
    }
    return v.as_int();
  }
  std::vector<int64_t> StaticIntList(absl::string_view name, size_t repeat = 1) const {
    const Value& v = Get(name);
    const SymValue s = Sym(name);
    if (v.is_int()) return std::vector<int64_t>(repeat, Specialized(v, s));
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.items().size(); ++i) {
      out.push_back(Specialized(v.items()[i], i < s.items.size() ? s.items[i] : SymValue{}));
    }
    return out;
  }
  // The tensors of a Tensor[] parameter with their SymValues.
  std::vector<std::pair<const Value*, SymValue>> TensorItems(absl::string_view name) const {
    const Value& v = Get(name);
    const SymValue s = Sym(name);
    std::vector<std::pair<const Value*, SymValue>> out;
    for (size_t i = 0; i < v.items().size(); ++i) {
      out.emplace_back(&v.items()[i], i < s.items.size() ? s.items[i] : SymValue{});
    }
    return out;
  }

 private:
  const Args& args_;
  absl::Span<const Value> pos_;
  absl::Span<const SymValue> sym_pos_;
  absl::Span<const Kwarg> kwargs_;
  absl::Span<const SymValue> sym_kwargs_;
  ShapeEnv& env_;
};

using Result = absl::StatusOr<SymValue>;
using Rule = Result (*)(const Call&);

// An output list of n tensors of the same sizes (values and indices).
SymValue Repeated(const Sizes& sizes, size_t n) {
  return SymValue::List(std::vector<SymValue>(n, SymValue::Tensor(sizes)));
}

absl::StatusOr<size_t> Wrap(int64_t dim, size_t ndim) {
  SS_ASSIGN(int64_t d, WrapDim(dim, static_cast<int64_t>(ndim)));
  return static_cast<size_t>(d);
}

// ---------------------------------------------------------------- pointwise
// Every tensor argument broadcasts (numbers do not shape the result); an
// in-place op keeps self's sizes, the others broadcasting into them.
Result Pointwise(const Call& c) {
  Sizes out;
  std::optional<Sizes> self;
  for (const Param& p : c.params()) {
    if (!c.Get(p.name).is_tensor()) continue;
    Sizes s = c.SizesOf(p.name);
    if (!self) self = s;
    SS_ASSIGN(out, SymBroadcast(c.env(), out, s));
  }
  if (!self) return NotModelled("a pointwise op without a tensor");
  if (c.op().tags() & kInplace) {
    SS_TRY(RequireBroadcastsTo(c.env(), out, *self));
    return SymValue::Tensor(*self);
  }
  return SymValue::Tensor(out);
}

// ---------------------------------------------------------------- same shape
// The result (or each result of a tuple: sort's values and indices) has
// self's sizes: conversions, copies, scans, softmax, dropout, *_like.
Result SameAsSelf(const Call& c) {
  return SymValue::Tensor(c.SizesOf(c.Self()));
}

Result SameAsSelfPair(const Call& c) { return Repeated(c.SizesOf(c.Self()), 2); }

Result LayerNorm(const Call& c) {
  const Sizes x = c.SizesOf("input");
  const Sizes shape = c.IntListOf("normalized_shape");
  if (shape.size() > x.size()) return absl::InternalError("layer_norm: shape longer than input");
  const size_t k = shape.size();
  for (size_t i = 0; i < k; ++i) {
    SS_TRY(Require(c.env(), RelKind::kEq, x[x.size() - k + i], shape[i]));
  }
  for (absl::string_view name : {"weight", "bias"}) {
    if (c.IsNone(name)) continue;
    const Sizes p = c.SizesOf(name);
    for (size_t i = 0; i < k && i < p.size(); ++i) {
      SS_TRY(Require(c.env(), RelKind::kEq, p[i], shape[i]));
    }
  }
  return SymValue::Tensor(x);
}

Result BatchNorm(const Call& c) {
  const Sizes x = c.SizesOf("input");
  for (absl::string_view name : {"running_mean", "running_var", "weight", "bias"}) {
    if (c.IsNone(name)) continue;
    const Sizes p = c.SizesOf(name);
    if (p.size() == 1 && x.size() >= 2) SS_TRY(Require(c.env(), RelKind::kEq, p[0], x[1]));
  }
  if (c.args().Bool("training")) {
    // torch refuses one value per channel when training.
    SymExpr per_channel = x[0];
    for (size_t i = 2; i < x.size(); ++i) per_channel = per_channel * x[i];
    SS_TRY(Require(c.env(), RelKind::kNe, per_channel, 1));
  }
  return SymValue::Tensor(x);
}

// ---------------------------------------------------------------- reductions
// sum/mean/prod/amax/amin/logsumexp/std/var/argmax/argmin/all/any and
// max/min: the reduced dims are static ints; max/min(dim) return (values,
// indices), max/min(other) is maximum/minimum.
Result Reduction(const Call& c) {
  if (c.Has("other")) return Pointwise(c);
  const Sizes x = c.SizesOf(c.Self());
  std::vector<int64_t> dims;
  if (c.Has("dim") && !c.IsNone("dim")) dims = c.StaticIntList("dim");
  SS_ASSIGN(std::vector<bool> mask, DimMask(dims, static_cast<int64_t>(x.size())));
  if (dims.empty()) mask.clear();
  const Sizes out = SymReduce(x, mask, c.args().Bool("keepdim"));
  const bool pair = (c.op().name() == "torch.max" || c.op().name() == "torch.min" ||
                     c.op().name() == "Tensor.max" || c.op().name() == "Tensor.min") &&
                    c.Has("dim");
  if (pair) return Repeated(out, 2);
  return SymValue::Tensor(out);
}

Result TopK(const Call& c) {
  Sizes x = c.SizesOf(c.Self());
  const SymExpr k = c.IntOf("k");
  if (!x.empty()) {
    SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
    SS_TRY(Require(c.env(), RelKind::kLe, k, x[d]));
    SS_TRY(Require(c.env(), RelKind::kGe, k, 0));
    x[d] = k;
  }
  return Repeated(x, 2);
}

// ---------------------------------------------------------------- views
Result ViewRule(const Call& c) {
  const absl::string_view list = c.Has("size") ? "size" : "shape";
  const Sizes x = c.SizesOf(c.Self());
  SS_ASSIGN(Sizes out, SymViewSizes(c.env(), c.IntListOf(list), Product(x)));
  return SymValue::Tensor(std::move(out));
}

Result ViewAs(const Call& c) {
  const Sizes other = c.SizesOf("other");
  SS_TRY(Require(c.env(), RelKind::kEq, Product(c.SizesOf(c.Self())), Product(other)));
  return SymValue::Tensor(other);
}

Result Flatten(const Call& c) {
  const Sizes x = c.SizesOf(c.Self());
  if (x.empty()) return SymValue::Tensor({1});
  SS_ASSIGN(size_t start, Wrap(c.StaticInt("start_dim"), x.size()));
  SS_ASSIGN(size_t end, Wrap(c.StaticInt("end_dim"), x.size()));
  Sizes out(x.begin(), x.begin() + static_cast<ptrdiff_t>(start));
  out.push_back(Product(x, start, end + 1));
  out.insert(out.end(), x.begin() + static_cast<ptrdiff_t>(end) + 1, x.end());
  return SymValue::Tensor(std::move(out));
}

Result Unflatten(const Call& c) {
  const Sizes x = c.SizesOf(c.Self());
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
  SS_ASSIGN(Sizes inner, SymViewSizes(c.env(), c.IntListOf("sizes"), x[d]));
  Sizes out(x.begin(), x.begin() + static_cast<ptrdiff_t>(d));
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), x.begin() + static_cast<ptrdiff_t>(d) + 1, x.end());
  return SymValue::Tensor(std::move(out));
}

Result Unsqueeze(const Call& c) {
  Sizes x = c.SizesOf(c.Self());
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size() + 1));
  x.insert(x.begin() + static_cast<ptrdiff_t>(d), 1);
  return SymValue::Tensor(std::move(x));
}

// A dim is dropped when it is 1: asked of the env, since an expression
// (s0 - 1) may be 1 for some sizes and not others.
Result Squeeze(const Call& c) {
  const Sizes x = c.SizesOf(c.Self());
  std::optional<size_t> only;
  if (!c.IsNone("dim")) {
    SS_ASSIGN(only, Wrap(c.StaticInt("dim"), x.size()));
  }
  Sizes out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!only || *only == i) {
      SS_ASSIGN(bool one, Is(c.env(), RelKind::kEq, x[i], 1));
      if (one) continue;
    }
    out.push_back(x[i]);
  }
  return SymValue::Tensor(std::move(out));
}

Result Permute(const Call& c) {
  const Sizes x = c.SizesOf(c.Self());
  const std::vector<int64_t> dims = c.StaticIntList("dims");
  Sizes out;
  for (int64_t d : dims) {
    SS_ASSIGN(size_t w, Wrap(d, x.size()));
    out.push_back(x[w]);
  }
  return SymValue::Tensor(std::move(out));
}

Result Transpose(const Call& c) {
  Sizes x = c.SizesOf(c.Self());
  if (x.empty()) return SymValue::Tensor(x);
  SS_ASSIGN(size_t a, Wrap(c.StaticInt("dim0"), x.size()));
  SS_ASSIGN(size_t b, Wrap(c.StaticInt("dim1"), x.size()));
  std::swap(x[a], x[b]);
  return SymValue::Tensor(std::move(x));
}

Result T(const Call& c) {
  Sizes x = c.SizesOf(c.Self());
  if (x.size() == 2) std::swap(x[0], x[1]);
  return SymValue::Tensor(std::move(x));
}

// Expand: -1 keeps a size; a size equal to the target stays, otherwise it
// must be 1 and takes the target (both asked, as torch asks them).
Result Expand(const Call& c) {
  const Sizes x = c.SizesOf(c.Self());
  const Sizes target = c.Has("other") ? c.SizesOf("other") : c.IntListOf("size");
  if (target.size() < x.size()) return absl::InternalError("expand: fewer sizes than dims");
  Sizes out(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    const size_t offset = target.size() - 1 - i;
    const bool exists = offset < x.size();
    const SymExpr size = exists ? x[x.size() - 1 - offset] : SymExpr(1);
    SymExpr wanted = target[i];
    if (wanted.constant() == -1) wanted = size;
    SS_TRY(Require(c.env(), RelKind::kGe, wanted, 0));
    SS_ASSIGN(bool same, Is(c.env(), RelKind::kEq, size, wanted));
    if (!same) SS_TRY(Require(c.env(), RelKind::kEq, size, 1));
    // Equal sizes are one size under the guard; keep the simpler spelling.
    out[i] = same && !wanted.is_constant() ? size : wanted;
  }
  return SymValue::Tensor(std::move(out));
}

Result Repeat(const Call& c) {
  const Sizes x = c.SizesOf(c.Self());
  const Sizes repeats = c.IntListOf("repeats");
  if (repeats.size() < x.size()) return absl::InternalError("repeat: fewer repeats than dims");
  const size_t pad = repeats.size() - x.size();
  Sizes out;
  for (size_t i = 0; i < repeats.size(); ++i) {
    SS_TRY(Require(c.env(), RelKind::kGe, repeats[i], 0));
    out.push_back(repeats[i] * (i >= pad ? x[i - pad] : SymExpr(1)));
  }
  return SymValue::Tensor(std::move(out));
}

Result Narrow(const Call& c) {
  Sizes x = c.SizesOf(c.Self());
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
  SymExpr start = c.IntOf("start");
  const SymExpr length = c.IntOf("length");
  SS_TRY(Require(c.env(), RelKind::kGe, start, -x[d]));
  SS_TRY(Require(c.env(), RelKind::kLe, start, x[d]));
  SS_ASSIGN(bool negative, Is(c.env(), RelKind::kLt, start, 0));
  if (negative) start = start + x[d];
  SS_TRY(Require(c.env(), RelKind::kGe, length, 0));
  SS_TRY(Require(c.env(), RelKind::kLe, start + length, x[d]));
  x[d] = length;
  return SymValue::Tensor(std::move(x));
}

// An int index into a dim of `size`: in [-size, size) (guarded).
absl::Status RequireIndex(ShapeEnv& env, const SymExpr& index, const SymExpr& size) {
  SS_TRY(Require(env, RelKind::kGe, index, -size));
  return Require(env, RelKind::kLt, index, size);
}

Result Select(const Call& c) {
  Sizes x = c.SizesOf(c.Self());
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
  SS_TRY(RequireIndex(c.env(), c.IntOf("index"), x[d]));
  x.erase(x.begin() + static_cast<ptrdiff_t>(d));
  return SymValue::Tensor(std::move(x));
}

// Pieces of `split` along a dim of `size`: how many is the registry's
// count at the hints, kept by guarding (n-1)*split < size <= n*split; the
// last piece takes the rest.
absl::StatusOr<SymValue> SplitBySize(ShapeEnv& env, const Sizes& x, size_t d, const SymExpr& split,
                                     size_t pieces) {
  if (pieces == 0) return absl::InternalError("split: no pieces");
  const SymExpr n(static_cast<int64_t>(pieces));
  if (pieces > 1) SS_TRY(Require(env, RelKind::kLt, (n - 1) * split, x[d]));
  SS_TRY(Require(env, RelKind::kLe, x[d], n * split));
  std::vector<SymValue> out;
  for (size_t i = 0; i < pieces; ++i) {
    Sizes piece = x;
    piece[d] = i + 1 < pieces ? split : x[d] - (n - 1) * split;
    out.push_back(SymValue::Tensor(std::move(piece)));
  }
  return SymValue::List(std::move(out));
}

size_t ResultCount(const Value& result) { return result.is_list() ? result.items().size() : 0; }

Result Split(const Call& c, const Value& result) {
  const absl::string_view how = c.Has("split_size") ? "split_size" : "split_size_or_sections";
  const Sizes x = c.SizesOf(c.Self());
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
  if (c.Get(how).is_int()) {
    const SymExpr split = c.IntOf(how);
    if (split.constant() == 0) return NotModelled("split of size 0");
    return SplitBySize(c.env(), x, d, split, ResultCount(result));
  }
  const Sizes sizes = c.IntListOf(how);
  SymExpr sum(0);
  std::vector<SymValue> out;
  for (const SymExpr& s : sizes) {
    SS_TRY(Require(c.env(), RelKind::kGe, s, 0));
    sum = sum + s;
    Sizes piece = x;
    piece[d] = s;
    out.push_back(SymValue::Tensor(std::move(piece)));
  }
  SS_TRY(Require(c.env(), RelKind::kEq, sum, x[d]));
  return SymValue::List(std::move(out));
}

Result Chunk(const Call& c, const Value& result) {
  const Sizes x = c.SizesOf(c.Self());
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
  const int64_t chunks = c.StaticInt("chunks");
  SS_ASSIGN(bool empty, Is(c.env(), RelKind::kEq, x[d], 0));
  if (empty || chunks <= 0) return NotModelled("chunk of an empty dim");
  SS_ASSIGN(SymExpr split, FloorDiv(x[d] + (chunks - 1), chunks));
  return SplitBySize(c.env(), x, d, split, ResultCount(result));
}

// unbind makes one output per element: their number is the size itself,
// so a symbolic dim is specialised.
Result Unbind(const Call& c, const Value& result) {
  Sizes x = c.SizesOf(c.Self());
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
  const int64_t n = static_cast<int64_t>(ResultCount(result));
  c.env().Specialize(SymInt::Symbolic(n, x[d]));
  x.erase(x.begin() + static_cast<ptrdiff_t>(d));
  return Repeated(x, static_cast<size_t>(n));
}

// cat: the non-cat sizes agree with the first non-empty input (guarded),
// the cat dim adds up; legacy 1-d empty inputs are skipped.
Result Cat(const Call& c) {
  const auto items = c.TensorItems("tensors");
  std::vector<Sizes> all;
  for (const auto& item : items) {
    Sizes s = Call::SizesOf(*item.first, item.second);
    if (s.size() == 1 && s[0].constant() == 0) continue;
    if (s.size() == 1 && item.first->as_tensor().sizes[0] == 0) {
      return NotModelled("cat of a 1-d input whose symbolic size is 0 at the hints");
    }
    all.push_back(std::move(s));
  }
  if (all.empty()) return SymValue::Tensor({0});
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), all[0].size()));
  Sizes out = all[0];
  out[d] = 0;
  for (const Sizes& s : all) {
    if (s.size() != out.size()) return absl::InternalError("cat: ranks differ");
    for (size_t i = 0; i < s.size(); ++i) {
      if (i != d) SS_TRY(Require(c.env(), RelKind::kEq, s[i], all[0][i]));
    }
    out[d] = out[d] + s[d];
  }
  return SymValue::Tensor(std::move(out));
}

Result Stack(const Call& c) {
  const auto items = c.TensorItems("tensors");
  if (items.empty()) return absl::InternalError("stack: no tensors");
  const Sizes first = Call::SizesOf(*items[0].first, items[0].second);
  for (const auto& item : items) {
    const Sizes s = Call::SizesOf(*item.first, item.second);
    if (s.size() != first.size()) return absl::InternalError("stack: ranks differ");
    for (size_t i = 0; i < s.size(); ++i) SS_TRY(Require(c.env(), RelKind::kEq, s[i], first[i]));
  }
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), first.size() + 1));
  Sizes out = first;
  out.insert(out.begin() + static_cast<ptrdiff_t>(d), static_cast<int64_t>(items.size()));
  return SymValue::Tensor(std::move(out));
}

// ---------------------------------------------------------------- queries
// size() is a tuple of ints, size(d) one int, numel() their product.
Result Size(const Call& c) {
  const Sizes x = c.SizesOf(c.Self());
  if (c.IsNone("dim")) {
    std::vector<SymValue> items;
    for (const SymExpr& e : x) items.push_back(SymValue::Int(e));
    return SymValue::List(std::move(items));
  }
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
  return SymValue::Int(x[d]);
}

Result Numel(const Call& c) { return SymValue::Int(Product(c.SizesOf(c.Self()))); }

// Answers that do not depend on sizes (dim(), is_floating_point()).
Result StaticAnswer(const Call&) { return SymValue{}; }

// ---------------------------------------------------------------- linear algebra
Result Mm(const Call& c) {
  const Sizes a = c.SizesOf(c.Self());
  const Sizes b = c.SizesOf("mat2");
  SS_TRY(Require(c.env(), RelKind::kEq, a[1], b[0]));
  return SymValue::Tensor({a[0], b[1]});
}

Result Bmm(const Call& c) {
  const Sizes a = c.SizesOf(c.Has("batch1") ? "batch1" : c.Self());
  const Sizes b = c.SizesOf(c.Has("batch2") ? "batch2" : "mat2");
  SS_TRY(Require(c.env(), RelKind::kEq, a[0], b[0]));
  SS_TRY(Require(c.env(), RelKind::kEq, a[2], b[1]));
  return SymValue::Tensor({a[0], a[1], b[2]});
}

// torch.matmul's rank cases: dot, mv, mm, and batched with the batch dims
// broadcast.
absl::StatusOr<Sizes> SymMatmul(ShapeEnv& env, const Sizes& a, const Sizes& b) {
  const size_t da = a.size(), db = b.size();
  if (da == 0 || db == 0) return absl::InternalError("matmul of a 0-d tensor");
  if (da == 1 && db == 1) {
    SS_TRY(Require(env, RelKind::kEq, a[0], b[0]));
    return Sizes{};
  }
  const SymExpr k_b = db == 1 ? b[0] : b[db - 2];
  SS_TRY(Require(env, RelKind::kEq, a.back(), k_b));
  Sizes out;
  if (da >= 3 || db >= 3) {
    const Sizes batch_a(a.begin(), a.end() - static_cast<ptrdiff_t>(std::min<size_t>(da, 2)));
    const Sizes batch_b(b.begin(), b.end() - static_cast<ptrdiff_t>(std::min<size_t>(db, 2)));
    SS_ASSIGN(out, SymBroadcast(env, da == 1 ? Sizes{} : batch_a, db == 1 ? Sizes{} : batch_b));
  }
  if (da >= 2) out.push_back(a[da - 2]);
  if (db >= 2) out.push_back(b.back());
  return out;
}

Result Matmul(const Call& c) {
  const absl::string_view other = c.Has("other") ? "other" : "b";
  SS_ASSIGN(Sizes out, SymMatmul(c.env(), c.SizesOf(c.Self()), c.SizesOf(other)));
  return SymValue::Tensor(std::move(out));
}

Result Linear(const Call& c) {
  const Sizes x = c.SizesOf("input");
  const Sizes w = c.SizesOf("weight");
  SS_TRY(Require(c.env(), RelKind::kEq, x.back(), w[1]));
  Sizes out(x.begin(), x.end() - 1);
  out.push_back(w[0]);
  if (!c.IsNone("bias")) SS_TRY(RequireBroadcastsTo(c.env(), c.SizesOf("bias"), out));
  return SymValue::Tensor(std::move(out));
}

Result Addmm(const Call& c) {
  const Sizes a = c.SizesOf("mat1");
  const Sizes b = c.SizesOf("mat2");
  SS_TRY(Require(c.env(), RelKind::kEq, a[1], b[0]));
  const Sizes out = {a[0], b[1]};
  SS_TRY(RequireBroadcastsTo(c.env(), c.SizesOf("input"), out));
  return SymValue::Tensor(out);
}

Result Baddbmm(const Call& c) {
  SS_ASSIGN(SymValue out, Bmm(c));
  SS_TRY(RequireBroadcastsTo(c.env(), c.SizesOf(c.Self()), out.sizes));
  return out;
}

// scaled_dot_product_attention: (..., L, E) x (..., S, E) x (..., S, Ev) ->
// (..., L, Ev), batch dims broadcast; the mask broadcasts to the scores.
Result Attention(const Call& c) {
  if (c.args().Bool("enable_gqa")) return NotModelled("scaled_dot_product_attention with enable_gqa");
  const Sizes q = c.SizesOf("query"), k = c.SizesOf("key"), v = c.SizesOf("value");
  const SymExpr L = q[q.size() - 2], E = q.back(), S = k[k.size() - 2], Ev = v.back();
  SS_TRY(Require(c.env(), RelKind::kEq, k.back(), E));
  SS_TRY(Require(c.env(), RelKind::kEq, v[v.size() - 2], S));
  SS_ASSIGN(Sizes batch, SymBroadcast(c.env(), Sizes(q.begin(), q.end() - 2),
                                      Sizes(k.begin(), k.end() - 2)));
  SS_ASSIGN(batch, SymBroadcast(c.env(), batch, Sizes(v.begin(), v.end() - 2)));
  if (!c.IsNone("attn_mask")) {
    Sizes scores = batch;
    scores.push_back(L);
    scores.push_back(S);
    if (scores.size() == 3) scores.insert(scores.begin(), 1);
    SS_TRY(RequireBroadcastsTo(c.env(), c.SizesOf("attn_mask"), scores));
  }
  batch.push_back(L);
  batch.push_back(Ev);
  return SymValue::Tensor(std::move(batch));
}

// ---------------------------------------------------------------- nn
std::vector<int64_t> Pair(std::vector<int64_t> v) {
  if (v.size() == 1) v.assign(2, v[0]);
  return v;
}

// conv2d: each spatial size is (in + 2p - d*(k-1) - 1) // s + 1 (padding
// "same" keeps it), over the input's symbolic sizes; the kernel, stride,
// padding and dilation are specialised.
Result Conv2d(const Call& c) {
  Sizes x = c.SizesOf("input");
  const Sizes w = c.SizesOf("weight");
  const bool batched = x.size() == 4;
  if (!batched) x.insert(x.begin(), 1);
  const int64_t groups = c.StaticInt("groups");
  const std::vector<int64_t> stride = Pair(c.StaticIntList("stride", 2));
  const std::vector<int64_t> dilation = Pair(c.StaticIntList("dilation", 2));
  std::vector<int64_t> padding = {0, 0};
  const Value& pad = c.Get("padding");
  const bool same = pad.is_string() && pad.as_string() == "same";
  if (!pad.is_string()) padding = Pair(c.StaticIntList("padding", 2));
  SS_TRY(Require(c.env(), RelKind::kEq, x[1], w[1] * groups));
  Sizes out = {x[0], w[0]};
  for (size_t i = 0; i < 2; ++i) {
    const std::optional<int64_t> k = w[i + 2].constant();
    if (!k) return NotModelled("conv2d with a symbolic kernel size");
    if (same) {
      out.push_back(x[i + 2]);
      continue;
    }
    const int64_t k_eff = dilation[i] * (*k - 1) + 1;
    SS_TRY(Require(c.env(), RelKind::kGe, x[i + 2] + 2 * padding[i], k_eff));
    SS_ASSIGN(SymExpr o, PoolOut(c.env(), x[i + 2], *k, padding[i], stride[i], dilation[i], false));
    out.push_back(o);
  }
  if (!batched) out.erase(out.begin());
  return SymValue::Tensor(std::move(out));
}

Result Pool2d(const Call& c) {
  const Sizes x = c.SizesOf("input");
  const std::vector<int64_t> kernel = Pair(c.StaticIntList("kernel_size", 2));
  std::vector<int64_t> stride;
  if (!c.IsNone("stride")) stride = Pair(c.StaticIntList("stride", 2));
  if (stride.empty()) stride = kernel;
  const std::vector<int64_t> padding = Pair(c.StaticIntList("padding", 2));
  std::vector<int64_t> dilation = {1, 1};
  if (c.Has("dilation")) dilation = Pair(c.StaticIntList("dilation", 2));
  const bool ceil = c.args().Bool("ceil_mode");
  Sizes out(x.begin(), x.end() - 2);
  for (size_t i = 0; i < 2; ++i) {
    SS_ASSIGN(SymExpr o, PoolOut(c.env(), x[x.size() - 2 + i], kernel[i], padding[i], stride[i],
                                 dilation[i], ceil));
    out.push_back(o);
  }
  if (c.Has("return_indices") && c.args().Bool("return_indices")) return Repeated(out, 2);
  return SymValue::Tensor(std::move(out));
}

// adaptive_avg_pool2d: the output size is given (None keeps the input's).
Result AdaptivePool2d(const Call& c) {
  const Sizes x = c.SizesOf("input");
  const Value& size = c.Get("output_size");
  const SymValue sym = c.Sym("output_size");
  Sizes out(x.begin(), x.end() - 2);
  for (size_t i = 0; i < 2; ++i) {
    if (size.is_int()) {
      out.push_back(Call::IntOf(size, sym));
      continue;
    }
    const Value& item = size.items()[i];
    if (item.is_none()) {
      out.push_back(x[x.size() - 2 + i]);
    } else {
      out.push_back(Call::IntOf(item, i < sym.items.size() ? sym.items[i] : SymValue{}));
    }
  }
  return SymValue::Tensor(std::move(out));
}

Result Embedding(const Call& c) {
  Sizes out = c.SizesOf("input");
  out.push_back(c.SizesOf("weight")[1]);
  return SymValue::Tensor(std::move(out));
}

// F.pad, constant mode: each padded dim grows by its two (possibly
// symbolic) amounts, which must leave it non-negative.
Result Pad(const Call& c) {
  if (c.Get("mode").as_string() != "constant") return NotModelled("F.pad other than constant");
  Sizes x = c.SizesOf("input");
  const Sizes pad = c.IntListOf("pad");
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    SymExpr& d = x[x.size() - 1 - i];
    d = d + pad[2 * i] + pad[2 * i + 1];
    SS_TRY(Require(c.env(), RelKind::kGe, d, 0));
  }
  return SymValue::Tensor(std::move(x));
}

// ---------------------------------------------------------------- factories
absl::StatusOr<SymValue> Made(ShapeEnv& env, Sizes sizes) {
  for (const SymExpr& s : sizes) SS_TRY(Require(env, RelKind::kGe, s, 0));
  return SymValue::Tensor(std::move(sizes));
}

Result Filled(const Call& c) { return Made(c.env(), c.IntListOf("size")); }

Result Eye(const Call& c) {
  const SymExpr n = c.IntOf("n");
  return Made(c.env(), {n, c.Has("m") ? c.IntOf("m") : n});
}

Result Linspace(const Call& c) { return Made(c.env(), {c.IntOf("steps")}); }

// arange over ints: ceil((end - start) / step), the step specialised. Float
// bounds (a ceil over doubles) are not modelled.
Result Arange(const Call& c) {
  for (absl::string_view name : {"start", "end", "step"}) {
    if (c.Has(name) && c.Get(name).is_float()) return NotModelled("arange with float bounds");
  }
  const SymExpr end = c.IntOf("end");
  const SymExpr start = c.Has("start") ? c.IntOf("start") : SymExpr(0);
  const int64_t step = c.Has("step") ? c.StaticInt("step") : 1;
  if (step == 0) return absl::InternalError("arange: step 0");
  SS_TRY(Require(c.env(), step > 0 ? RelKind::kGe : RelKind::kLe, end, start));
  const SymExpr span = step > 0 ? end - start : start - end;
  const int64_t magnitude = step > 0 ? step : -step;
  if (magnitude == 1) return SymValue::Tensor({span});
  SS_ASSIGN(SymExpr n, FloorDiv(span + (magnitude - 1), magnitude));
  return SymValue::Tensor({n});
}

// ---------------------------------------------------------------- indexing
// The bounds of a Slice value with its SymValue (List of start/stop/step).
std::optional<SymExpr> SliceBound(const std::optional<int64_t>& v, const SymValue& sym, size_t i) {
  if (i < sym.items.size() && sym.items[i].scalar) return sym.items[i].scalar;
  if (!v) return std::nullopt;
  return SymExpr(*v);
}

// The extreme values of a nested list index (checked against the dim).
void ListIndexShape(const Value& v, size_t depth, Sizes& shape, int64_t& lo, int64_t& hi) {
  if (!v.is_list()) {
    lo = std::min(lo, v.as_int());
    hi = std::max(hi, v.as_int());
    return;
  }
  if (depth == shape.size()) shape.push_back(static_cast<int64_t>(v.items().size()));
  for (const Value& item : v.items()) ListIndexShape(item, depth + 1, shape, lo, hi);
}

// The sizes of a[b], as ApplyIndex computes them: ints, slices (bounds may
// be symbolic), None, Ellipsis, int lists and integer tensors (advanced
// indexing, broadcast together). Boolean masks are data-dependent.
absl::StatusOr<Sizes> IndexedSizes(const Call& c) {
  const Sizes x = c.SizesOf("a");
  const Value& index = c.Get("b");
  const SymValue sym_index = c.Sym("b");
  std::vector<const Value*> items;
  std::vector<SymValue> sym_items;
  bool as_tuple = index.is_list() && index.as_list().is_tuple;
  if (index.is_list() && !as_tuple) {
    as_tuple = std::any_of(index.items().begin(), index.items().end(), [](const Value& v) {
      return v.is_slice() || v.is_none() || v.is_ellipsis() || v.is_list() || v.is_tensor();
    });
  }
  if (as_tuple) {
    for (size_t i = 0; i < index.items().size(); ++i) {
      items.push_back(&index.items()[i]);
      sym_items.push_back(i < sym_index.items.size() ? sym_index.items[i] : SymValue{});
    }
  } else {
    items.push_back(&index);
    sym_items.push_back(sym_index);
  }
  size_t consumed = 0;
  for (const Value* it : items) {
    if (it->is_tensor() && (it->as_tensor().dtype == DType::kBool ||
                            it->as_tensor().dtype == DType::kUInt8)) {
      return NotModelled("indexing with a boolean mask (data-dependent)");
    }
    if (it->is_int() || it->is_slice() || it->is_list() || it->is_tensor()) ++consumed;
  }
  struct Advanced {
    size_t dim;
    Sizes shape;
  };
  std::vector<Advanced> advanced;
  Sizes sizes = x;
  size_t d = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    const Value& it = *items[k];
    const SymValue& s = sym_items[k];
    if (it.is_int()) {
      SS_TRY(RequireIndex(c.env(), Call::IntOf(it, s), sizes[d]));
      sizes.erase(sizes.begin() + static_cast<ptrdiff_t>(d));
    } else if (it.is_slice()) {
      const Slice& slice = it.as_slice();
      int64_t step = slice.step.value_or(1);
      if (s.items.size() == 3 && s.items[2].scalar && !s.items[2].scalar->is_constant()) {
        step = c.env().Specialize(SymInt::Symbolic(step, *s.items[2].scalar)).hint();
      }
      SS_ASSIGN(sizes[d], SymSlice(c.env(), sizes[d], SliceBound(slice.start, s, 0),
                                   SliceBound(slice.stop, s, 1), step));
      ++d;
    } else if (it.is_none()) {
      sizes.insert(sizes.begin() + static_cast<ptrdiff_t>(d), 1);
      ++d;
    } else if (it.is_ellipsis()) {
      d += x.size() - consumed;
    } else if (it.is_list()) {
      Sizes shape;
      int64_t lo = 0, hi = 0;
      ListIndexShape(it, 0, shape, lo, hi);
      SS_TRY(RequireIndex(c.env(), lo, sizes[d]));
      SS_TRY(RequireIndex(c.env(), hi, sizes[d]));
      advanced.push_back({d, std::move(shape)});
      ++d;
    } else if (it.is_tensor()) {
      advanced.push_back({d, Call::SizesOf(it, s)});
      ++d;
    } else {
      return NotModelled("this index");
    }
  }
  if (advanced.empty()) return sizes;
  Sizes shape;
  bool adjacent = true;
  for (size_t i = 0; i < advanced.size(); ++i) {
    SS_ASSIGN(shape, SymBroadcast(c.env(), shape, advanced[i].shape));
    if (i > 0 && advanced[i].dim != advanced[i - 1].dim + 1) adjacent = false;
  }
  std::vector<bool> indexed(sizes.size(), false);
  for (const Advanced& a : advanced) indexed[a.dim] = true;
  return PlaceAdvancedIndex(sizes, indexed, adjacent, advanced[0].dim, shape);
}

Result GetItem(const Call& c) {
  SS_ASSIGN(Sizes sizes, IndexedSizes(c));
  return SymValue::Tensor(std::move(sizes));
}

// a[b] = c answers None; what it needs is that the value (its leading 1s
// dropped) broadcasts to the indexed sizes, which is guarded.
Result SetItem(const Call& c) {
  SS_ASSIGN(Sizes target, IndexedSizes(c));
  if (!c.Get("c").is_tensor()) return SymValue{};
  Sizes value = c.SizesOf("c");
  while (!value.empty()) {
    SS_ASSIGN(bool one, Is(c.env(), RelKind::kEq, value.front(), 1));
    if (!one) break;
    value.erase(value.begin());
  }
  if (value.size() > target.size()) return absl::InternalError("setitem: value of higher rank");
  const size_t offset = target.size() - value.size();
  for (size_t i = 0; i < value.size(); ++i) {
    SS_ASSIGN(bool one, Is(c.env(), RelKind::kEq, value[i], 1));
    if (!one) SS_TRY(Require(c.env(), RelKind::kEq, value[i], target[offset + i]));
  }
  return SymValue{};
}

Result IndexSelect(const Call& c) {
  Sizes x = c.SizesOf(c.Self());
  const Sizes index = c.SizesOf("index");
  if (x.empty()) return SymValue::Tensor(x);
  SS_ASSIGN(size_t d, Wrap(c.StaticInt("dim"), x.size()));
  x[d] = index.empty() ? SymExpr(1) : index[0];
  return SymValue::Tensor(std::move(x));
}

Result Gather(const Call& c) { return SymValue::Tensor(c.SizesOf("index")); }

// ---------------------------------------------------------------- the table
// Rules that need the registry's result (how many pieces a split made).
using CountedRule = Result (*)(const Call&, const Value&);

struct RuleRef {
  Rule rule = nullptr;
  CountedRule counted = nullptr;
};

// "name" -> torch.name and Tensor.name.
std::vector<std::string> Both(std::initializer_list<absl::string_view> names) {
  std::vector<std::string> out;
  for (absl::string_view n : names) {
    out.push_back(absl::StrCat("torch.", n));
    out.push_back(absl::StrCat("Tensor.", n));
  }
  return out;
}

const absl::flat_hash_map<std::string, RuleRef>& Rules() {
  static const auto* const rules = [] {
    auto* m = new absl::flat_hash_map<std::string, RuleRef>();
    auto add = [m](const std::vector<std::string>& names, Rule rule) {
      for (const std::string& n : names) (*m)[n] = RuleRef{rule, nullptr};
    };
    auto add_counted = [m](const std::vector<std::string>& names, CountedRule rule) {
      for (const std::string& n : names) (*m)[n] = RuleRef{nullptr, rule};
    };
    const std::string f = "torch.nn.functional.";
    // Same sizes as self. (Pointwise ops, activations included, need no
    // entry: their tag finds the broadcast rule.)
    std::vector<std::string> same = Both({"softmax", "log_softmax", "cumsum", "flip", "roll",
                                          "clone", "triu", "tril"});
    for (absl::string_view n : {"softmax", "log_softmax", "dropout"}) same.push_back(f + std::string(n));
    for (absl::string_view n :
         {"torch.dropout", "Tensor.detach", "torch.detach", "Tensor.contiguous", "Tensor.to",
          "Tensor.float", "Tensor.double", "Tensor.half", "Tensor.int", "Tensor.long",
          "Tensor.bool", "Tensor.short", "Tensor.bfloat16", "Tensor.type_as", "torch.zeros_like",
          "torch.ones_like", "torch.empty_like", "torch.full_like", "torch.rand_like",
          "torch.randn_like", "Tensor.argsort", "torch.argsort"}) {
      same.push_back(std::string(n));
    }
    add(same, SameAsSelf);
    add(Both({"sort"}), SameAsSelfPair);
    // In-place ops without the pointwise tag: self's sizes, src broadcast in.
    add({"Tensor.fill_", "Tensor.zero_", "Tensor.copy_"}, Pointwise);
    add({f + "layer_norm"}, LayerNorm);
    add({f + "batch_norm"}, BatchNorm);
    // Reductions.
    add(Both({"sum", "mean", "prod", "amax", "amin", "logsumexp", "argmax", "argmin", "max",
              "min", "std", "var", "all", "any"}),
        Reduction);
    add(Both({"topk"}), TopK);
    // Shape ops.
    add({"Tensor.view", "Tensor.reshape", "torch.reshape"}, ViewRule);
    add({"Tensor.view_as", "Tensor.reshape_as"}, ViewAs);
    add(Both({"flatten"}), Flatten);
    add({"Tensor.unflatten"}, Unflatten);
    add(Both({"unsqueeze"}), Unsqueeze);
    add(Both({"squeeze"}), Squeeze);
    add(Both({"permute"}), Permute);
    add(Both({"transpose"}), Transpose);
    add({"torch.swapaxes"}, Transpose);
    add(Both({"t"}), T);
    add({"Tensor.expand", "torch.broadcast_to", "Tensor.broadcast_to", "Tensor.expand_as"},
        Expand);
    add({"Tensor.repeat"}, Repeat);
    add(Both({"narrow"}), Narrow);
    add(Both({"select"}), Select);
    add_counted({"torch.split", "Tensor.split"}, Split);
    add_counted(Both({"chunk"}), Chunk);
    add_counted(Both({"unbind"}), Unbind);
    add({"torch.cat", "torch.concat"}, Cat);
    add({"torch.stack"}, Stack);
    add({"Tensor.size"}, Size);
    add({"Tensor.numel", "torch.numel", "Tensor.nelement"}, Numel);
    add({"Tensor.dim", "Tensor.ndimension", "Tensor.is_floating_point",
         "torch.is_floating_point"},
        StaticAnswer);
    // Linear algebra.
    add(Both({"matmul"}), Matmul);
    add({"operator.matmul"}, Matmul);
    add(Both({"mm"}), Mm);
    add(Both({"bmm"}), Bmm);
    add({"torch.addmm"}, Addmm);
    add(Both({"baddbmm"}), Baddbmm);
    add({f + "linear"}, Linear);
    add({f + "scaled_dot_product_attention"}, Attention);
    // NN.
    add({f + "conv2d"}, Conv2d);
    add({f + "max_pool2d", f + "avg_pool2d"}, Pool2d);
    add({f + "adaptive_avg_pool2d"}, AdaptivePool2d);
    add({f + "embedding"}, Embedding);
    add({f + "pad"}, Pad);
    // Factories.
    add({"torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand", "torch.randn",
         "torch.randint", "Tensor.new_zeros", "Tensor.new_ones", "Tensor.new_empty",
         "Tensor.new_full"},
        Filled);
    add({"torch.eye"}, Eye);
    add({"torch.linspace"}, Linspace);
    add({"torch.arange"}, Arange);
    // Indexing.
    add({"operator.getitem"}, GetItem);
    add({"operator.setitem"}, SetItem);
    add(Both({"index_select"}), IndexSelect);
    add(Both({"gather"}), Gather);
    return m;
  }();
  return *rules;
}

std::optional<RuleRef> FindRule(const OpEntry& op) {
  const auto& rules = Rules();
  if (auto it = rules.find(op.name()); it != rules.end()) return it->second;
  if (op.tags() & kPointwise) return RuleRef{Pointwise, nullptr};
  return std::nullopt;
}

// ---------------------------------------------------------------- checking
// The caller's SymValue must have the Value's shape: sizes per dim of a
// tensor, three bounds of a slice, items of a list.
absl::Status CheckParallel(const Value& v, const SymValue& s) {
  if (s.is_static()) return absl::OkStatus();
  if (v.is_tensor()) {
    if (v.as_tensor().data_dependent) return NotModelled("a data-dependent input");
    if (s.sizes.size() != v.as_tensor().sizes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("symbolic sizes of rank ", s.sizes.size(),
                                                     " for ", ToString(v)));
    }
    return absl::OkStatus();
  }
  if (v.is_int()) {
    if (!s.scalar || !s.sizes.empty() || !s.items.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("an int needs a scalar SymValue: ", ToString(v)));
    }
    return absl::OkStatus();
  }
  if (v.is_slice()) {
    if (s.items.size() != 3) {
      return absl::InvalidArgumentError("a slice's SymValue lists start, stop and step");
    }
    const Slice& slice = v.as_slice();
    const std::optional<int64_t>* fields[] = {&slice.start, &slice.stop, &slice.step};
    for (size_t i = 0; i < 3; ++i) {
      if (s.items[i].is_static()) continue;
      if (!fields[i]->has_value() || !s.items[i].scalar) {
        return absl::InvalidArgumentError("a symbolic slice bound must be an int");
      }
    }
    return absl::OkStatus();
  }
  if (v.is_list()) {
    if (s.items.size() != v.items().size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SymValue of ", s.items.size(), " items for ", ToString(v)));
    }
    for (size_t i = 0; i < s.items.size(); ++i) SS_TRY(CheckParallel(v.items()[i], s.items[i]));
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("a symbolic SymValue for ", ToString(v)));
}

// Simplifies the rule's answer under the env, checks it against the
// registry's result at the hints, and drops what is constant.
absl::Status Finish(SymValue& s, const Value& result, ShapeEnv& env, const SymBindings& hints,
                    absl::string_view op) {
  auto check = [&](SymExpr& e, int64_t expected, absl::string_view what) -> absl::Status {
    SS_ASSIGN(e, env.Simplify(e));
    absl::StatusOr<int64_t> at_hints = e.Evaluate(hints);
    if (!at_hints.ok() || *at_hints != expected) {
      return absl::InternalError(absl::StrCat(
          "symbolic shapes: ", op, ": ", what, " = ", e.ToString(), " is ",
          at_hints.ok() ? absl::StrCat(*at_hints) : at_hints.status().ToString(),
          " at the hints, the registry says ", expected));
    }
    return absl::OkStatus();
  };
  if (result.is_tensor()) {
    const std::vector<int64_t>& sizes = result.as_tensor().sizes;
    if (s.sizes.empty()) return absl::OkStatus();
    if (s.sizes.size() != sizes.size()) {
      return absl::InternalError(absl::StrCat("symbolic shapes: ", op, ": rank ", s.sizes.size(),
                                              ", the registry says ", ToString(result)));
    }
    bool all_constant = true;
    for (size_t i = 0; i < sizes.size(); ++i) {
      SS_TRY(check(s.sizes[i], sizes[i], absl::StrCat("size ", i)));
      all_constant = all_constant && s.sizes[i].is_constant();
    }
    if (all_constant) s.sizes.clear();
    return absl::OkStatus();
  }
  if (result.is_int()) {
    if (!s.scalar) return absl::OkStatus();
    SS_TRY(check(*s.scalar, result.as_int(), "int"));
    if (s.scalar->is_constant()) s.scalar.reset();
    return absl::OkStatus();
  }
  if (result.is_list()) {
    if (s.items.empty()) return absl::OkStatus();
    if (s.items.size() != result.items().size()) {
      return absl::InternalError(absl::StrCat("symbolic shapes: ", op, ": ", s.items.size(),
                                              " outputs, the registry says ", ToString(result)));
    }
    bool all_static = true;
    for (size_t i = 0; i < s.items.size(); ++i) {
      SS_TRY(Finish(s.items[i], result.items()[i], env, hints, op));
      all_static = all_static && s.items[i].is_static();
    }
    if (all_static) s.items.clear();
    return absl::OkStatus();
  }
  if (!s.is_static()) {
    return absl::InternalError(absl::StrCat("symbolic shapes: ", op, ": symbolic answer for ",
                                            ToString(result)));
  }
  return absl::OkStatus();
}

bool AllStatic(absl::Span<const SymValue> values) {
  return std::all_of(values.begin(), values.end(), [](const SymValue& v) { return v.is_static(); });
}

}  // namespace

absl::StatusOr<SymValue> InferSymbolic(const OpEntry& op, absl::Span<const Value> args,
                                       absl::Span<const SymValue> sym_args,
                                       absl::Span<const Kwarg> kwargs,
                                       absl::Span<const SymValue> sym_kwargs, const Value& result,
                                       ShapeEnv& env) {
  // Every op of every trace comes here: static calls leave at once.
  if (AllStatic(sym_args) && AllStatic(sym_kwargs)) return SymValue{};
  if (sym_args.size() > args.size() || sym_kwargs.size() > kwargs.size()) {
    return absl::InvalidArgumentError("more SymValues than arguments");
  }
  std::optional<RuleRef> rule = FindRule(op);
  if (!rule) return NotModelled(absl::StrCat(op.name(), " (no symbolic rule)"));
  for (size_t i = 0; i < sym_args.size(); ++i) SS_TRY(CheckParallel(args[i], sym_args[i]));
  for (size_t i = 0; i < sym_kwargs.size(); ++i) {
    SS_TRY(CheckParallel(kwargs[i].value, sym_kwargs[i]));
  }
  if (result.is_tensor() && result.as_tensor().data_dependent) {
    return NotModelled(absl::StrCat(op.name(), " with a data-dependent result"));
  }
  absl::StatusOr<Args> bound = op.Bind(args, kwargs);
  if (!bound.ok()) return bound.status();
  const Call call(*bound, args, sym_args, kwargs, sym_kwargs, env);
  absl::StatusOr<SymValue> out = rule->rule ? rule->rule(call) : rule->counted(call, result);
  if (!out.ok()) return out.status();
  SS_TRY(Finish(*out, result, env, env.hints(), op.name()));
  return out;
}

bool HasSymbolicRule(const OpEntry& op) { return FindRule(op).has_value(); }

std::vector<std::string> SymbolicRuleNames() {
  std::vector<std::string> names;
  for (const auto& entry : Rules()) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  return names;
}

void SpecializeAll(absl::Span<const SymValue> values, ShapeEnv& env) {
  for (const SymValue& v : values) {
    auto pin = [&](const SymExpr& e) {
      if (e.is_constant()) return;
      absl::StatusOr<int64_t> hint = e.Evaluate(env.hints());
      // An expression over symbols the env does not know has no hint to pin.
      if (hint.ok()) env.Specialize(SymInt::Symbolic(*hint, e));
    };
    for (const SymExpr& e : v.sizes) pin(e);
    if (v.scalar) pin(*v.scalar);
    SpecializeAll(v.items, env);
  }
}

}  // namespace dynamo::ops
