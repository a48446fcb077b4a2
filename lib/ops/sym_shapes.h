// Symbolic shape inference: how an op's output sizes depend on the size
// symbols of its inputs (dynamic shapes), beside the registry's integer
// inference. The registry stays the one authority on what torch computes: it
// runs on the hints (the example sizes the trace sees) and this layer, given
// the same call with the symbolic sizes and ints alongside, writes each
// output size as a SymExpr whose value at the hints is the registry's size.
//
//   ShapeEnv env;
//   SymInt b = env.NewSymbol(8);
//   Value x(TensorMeta::Contiguous(DType::kFloat32, {8, 3}));
//   SymValue sx = SymValue::Tensor({b.expr(), 3});
//   Value out = *registry.Infer("torch.relu", {x});
//   absl::StatusOr<SymValue> s = InferSymbolic(*registry.Find("torch.relu"),
//                                              {x}, {sx}, {}, {}, out, env);
//   s->sizes;   // {s0, 3}
//
// A relation a rule needs but cannot prove (two broadcast dims equal, a dim
// above 1, a view's sizes dividing evenly) is asked of the ShapeEnv
// (ShapeEnv::Decide), which answers from the hints and records the answer as
// a guard: the trace is then valid exactly where the guards hold. A rule
// never decides from a hint without asking.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/ops/registry.h"
#include "lib/ops/sym.h"
#include "lib/ops/value.h"

namespace dynamo::ops {

// The symbolic side of a Value, parallel to it: what a tensor's sizes or an
// int are as expressions. A default SymValue is static (the Value's own
// numbers hold for every call), so callers only fill what is symbolic.
//
// Conventions, by the kind of Value:
//   - tensor: `sizes`, one per dim (static dims as constants), or empty.
//   - int: `scalar`.
//   - list or tuple: `items`, one per item, or empty. A varargs call
//     (x.view(b, t, -1)) needs nothing special: each positional has its own
//     SymValue in sym_args, as the Value has its own place in args.
//   - slice: `items` = List of exactly 3, parallel to Slice's start, stop
//     and step, each an Int where that bound is symbolic and static
//     otherwise: x[:, :T] is index Tuple(slice(None), slice(None, 8)) with
//     SymValue::List({{}, SymValue::List({{}, SymValue::Int(T), {}})}).
//   - anything else (None, floats, dtypes): static.
// Results follow the same conventions: Tensor.size() answers a List of
// Ints, size(d) and numel() an Int, split/chunk/unbind/max(dim) a List of
// tensors.
struct SymValue {
  // A tensor: one expression per dim when any dim is symbolic (static dims
  // are constants); empty: static.
  std::vector<SymExpr> sizes;
  // An int: its expression when symbolic.
  std::optional<SymExpr> scalar;
  // A list or tuple: parallel to the Value's items; empty when no item is
  // symbolic.
  std::vector<SymValue> items;

  static SymValue Tensor(std::vector<SymExpr> sizes) { return SymValue{std::move(sizes), {}, {}}; }
  static SymValue Int(SymExpr e) { return SymValue{{}, std::move(e), {}}; }
  static SymValue List(std::vector<SymValue> items) { return SymValue{{}, {}, std::move(items)}; }
  // Nothing in it (or in its items) is symbolic.
  bool is_static() const;
};

// The symbolic sizes of `result`, the registry's output of `op` on
// (args, kwargs). sym_args / sym_kwargs are parallel to args / kwargs (a
// shorter span: the rest are static). The answer is parallel to `result`:
// each output tensor gets `sizes` when one of them is symbolic.
//
// Unimplemented when the op has no symbolic rule, or the call uses an
// argument combination its rule does not model: the caller then specialises
// the inputs (SpecializeAll) and keeps the registry's static result.
// Every rule's answer is checked against `result` at the env's hints; a
// disagreement is Internal (a rule bug, never a silently wrong size).
absl::StatusOr<SymValue> InferSymbolic(const OpEntry& op, absl::Span<const Value> args,
                                       absl::Span<const SymValue> sym_args,
                                       absl::Span<const Kwarg> kwargs,
                                       absl::Span<const SymValue> sym_kwargs, const Value& result,
                                       ShapeEnv& env);

// Whether `op` has a symbolic rule at all (for reports: the share of ops a
// trace specialised).
bool HasSymbolicRule(const OpEntry& op);
// The op names with a rule of their own, sorted (pointwise ops are found by
// their tag instead and are not listed): for tests and reports.
std::vector<std::string> SymbolicRuleNames();

// Guards every symbolic expression in `values` to its hint
// (ShapeEnv::Specialize): the fallback for an op without a rule.
void SpecializeAll(absl::Span<const SymValue> values, ShapeEnv& env);

}  // namespace dynamo::ops
