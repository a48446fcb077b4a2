// Symbolic shape rules, proven against the registry itself: each call is
// inferred on the hints, given its symbolic sizes, and then re-run through
// the registry at many other sizes (fixed seed) that the recorded guards
// admit; the symbolic answer evaluated there must be the registry's. Sizes
// the guards reject are shown rejected.
#include "lib/ops/sym_shapes.h"

#include <catch2/catch.hpp>

#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "lib/ops/infer_helpers.h"
#include "lib/ops/registry.h"
#include "test/test_support.h"

namespace dynamo::ops {
namespace {

// One argument: a template Value (dtype, kind) and its symbolic side; the
// concrete Value for some sizes is made by Concretize.
struct A {
  Value value;
  SymValue sym;
};

A Ten(std::vector<SymExpr> sizes, DType dtype = DType::kFloat32) {
  return {Value(TensorMeta::Contiguous(dtype, std::vector<int64_t>(sizes.size(), 0))),
          SymValue::Tensor(std::move(sizes))};
}
A Int(SymExpr e) { return {Value(int64_t{0}), SymValue::Int(std::move(e))}; }
A Lit(Value v) { return {std::move(v), {}}; }
A Seq(std::vector<A> items, bool tuple = true) {
  std::vector<Value> values;
  std::vector<SymValue> syms;
  for (A& a : items) {
    values.push_back(std::move(a.value));
    syms.push_back(std::move(a.sym));
  }
  return {tuple ? Value::Tuple(std::move(values)) : Value::List(std::move(values)),
          SymValue::List(std::move(syms))};
}
// A slice whose bounds may be symbolic (the sym_shapes.h convention).
A Sl(std::optional<SymExpr> start, std::optional<SymExpr> stop, std::optional<int64_t> step = {}) {
  Slice s;
  std::vector<SymValue> items(3);
  if (start) {
    s.start = 0;
    items[0] = SymValue::Int(*start);
  }
  if (stop) {
    s.stop = 0;
    items[1] = SymValue::Int(*stop);
  }
  s.step = step;
  return {Value(s), SymValue::List(std::move(items))};
}

int64_t Eval(const SymExpr& e, const SymBindings& b) {
  absl::StatusOr<int64_t> v = e.Evaluate(b);
  INFO(e.ToString());
  DYNAMO_REQUIRE_OK(v);
  return *v;
}

Value Concretize(const Value& v, const SymValue& s, const SymBindings& b) {
  if (v.is_tensor()) {
    if (s.sizes.empty()) return v;
    std::vector<int64_t> sizes;
    for (const SymExpr& e : s.sizes) sizes.push_back(Eval(e, b));
    TensorMeta t = TensorMeta::Contiguous(v.as_tensor().dtype, std::move(sizes));
    t.requires_grad = v.as_tensor().requires_grad;
    return Value(std::move(t));
  }
  if (v.is_int()) return s.scalar ? Value(Eval(*s.scalar, b)) : v;
  if (v.is_slice()) {
    Slice out = v.as_slice();
    std::optional<int64_t>* fields[] = {&out.start, &out.stop, &out.step};
    for (size_t i = 0; i < s.items.size() && i < 3; ++i) {
      if (s.items[i].scalar) *fields[i] = Eval(*s.items[i].scalar, b);
    }
    return Value(out);
  }
  if (v.is_list()) {
    std::vector<Value> items;
    for (size_t i = 0; i < v.items().size(); ++i) {
      items.push_back(Concretize(v.items()[i], i < s.items.size() ? s.items[i] : SymValue{}, b));
    }
    return Value(ValueList{std::move(items), v.as_list().is_tuple});
  }
  return v;
}

SymBindings Hints(const ShapeEnv& env) {
  SymBindings b;
  for (const SymbolInfo& s : env.symbols()) b[s.name] = s.hint;
  return b;
}

// The symbolic answer at `b` equals what the registry computed there.
void ExpectMatches(const SymValue& s, const Value& at_hints, const Value& actual,
                   const SymBindings& b) {
  if (at_hints.is_tensor()) {
    REQUIRE(actual.is_tensor());
    std::vector<int64_t> expected = at_hints.as_tensor().sizes;
    if (!s.sizes.empty()) {
      expected.clear();
      for (const SymExpr& e : s.sizes) expected.push_back(Eval(e, b));
    }
    CHECK(expected == actual.as_tensor().sizes);
  } else if (at_hints.is_int()) {
    REQUIRE(actual.is_int());
    CHECK((s.scalar ? Eval(*s.scalar, b) : at_hints.as_int()) == actual.as_int());
  } else if (at_hints.is_list()) {
    REQUIRE(actual.is_list());
    REQUIRE(actual.items().size() == at_hints.items().size());
    for (size_t i = 0; i < actual.items().size(); ++i) {
      ExpectMatches(i < s.items.size() ? s.items[i] : SymValue{}, at_hints.items()[i],
                    actual.items()[i], b);
    }
  }
}

struct Outcome {
  SymValue sym;
  Value result;
  int accepted = 0;  // other sizes the guards admitted
};

std::string Describe(const SymValue& s) {
  std::string out;
  for (const SymExpr& e : s.sizes) out += e.ToString() + ", ";
  if (s.scalar) out += "int " + s.scalar->ToString();
  for (const SymValue& i : s.items) out += "(" + Describe(i) + ") ";
  return "[" + out + "]";
}

// Infers `op` symbolically, then checks the answer at up to `trials` random
// sizes the guards admit (some symbols kept at their hints or copied from
// another, so equalities are often met).
Outcome Check(ShapeEnv& env, const std::string& op, const std::vector<A>& args,
              const std::vector<std::pair<std::string, A>>& kwargs = {}, int min_accepted = 3,
              int trials = 150) {
  INFO(op);
  auto make = [&](const SymBindings& b, std::vector<Value>& pos, std::vector<Kwarg>& kw) {
    pos.clear();
    kw.clear();
    for (const A& a : args) pos.push_back(Concretize(a.value, a.sym, b));
    for (const auto& named : kwargs) {
      kw.push_back({named.first, Concretize(named.second.value, named.second.sym, b)});
    }
  };
  std::vector<SymValue> sym_args, sym_kwargs;
  for (const A& a : args) sym_args.push_back(a.sym);
  for (const auto& named : kwargs) sym_kwargs.push_back(named.second.sym);
  const SymBindings hints = Hints(env);
  std::vector<Value> pos;
  std::vector<Kwarg> kw;
  make(hints, pos, kw);
  const OpEntry* entry = DefaultRegistry().Find(op);
  REQUIRE(entry != nullptr);
  absl::StatusOr<Value> result = entry->Infer(pos, kw);
  DYNAMO_REQUIRE_OK(result);
  absl::StatusOr<SymValue> sym = InferSymbolic(*entry, pos, sym_args, kw, sym_kwargs, *result, env);
  DYNAMO_REQUIRE_OK(sym);
  Outcome out{*sym, *result, 0};
  INFO("symbolic: " << Describe(*sym));
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> pick(0, 3);
  std::uniform_int_distribution<int64_t> size(2, 40);
  for (int t = 0; t < trials; ++t) {
    SymBindings b;
    std::vector<int64_t> chosen;
    for (const SymbolInfo& s : env.symbols()) {
      int64_t v = s.hint;
      switch (pick(rng)) {
        case 0: break;
        case 1:
          if (!chosen.empty()) v = chosen[static_cast<size_t>(rng() % chosen.size())];
          break;
        default: v = size(rng); break;
      }
      b[s.name] = v;
      chosen.push_back(v);
    }
    absl::StatusOr<GuardCheck> ok = env.CheckGuards(b);
    DYNAMO_REQUIRE_OK(ok);
    if (!ok->passed || b == hints) continue;
    make(b, pos, kw);
    absl::StatusOr<Value> actual = entry->Infer(pos, kw);
    std::string at;
    for (const SymbolInfo& s : env.symbols()) at += s.name + "=" + std::to_string(b[s.name]) + " ";
    INFO("at " << at);
    DYNAMO_REQUIRE_OK(actual);  // the guards admit only sizes the registry accepts
    ExpectMatches(*sym, *result, *actual, b);
    ++out.accepted;
  }
  CHECK(out.accepted >= min_accepted);
  return out;
}

std::vector<std::string> GuardTexts(const ShapeEnv& env) {
  std::vector<std::string> out;
  for (const SymRelation& g : env.guards()) out.push_back(g.ToString());
  return out;
}

bool Rejects(const ShapeEnv& env, const SymBindings& b) {
  absl::StatusOr<GuardCheck> c = env.CheckGuards(b);
  return c.ok() && !c->passed;
}

std::string Sizes(const SymValue& s) {
  std::vector<std::string> parts;
  for (const SymExpr& e : s.sizes) parts.push_back(e.ToString());
  std::string out = "[";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + "]";
}

Value List(std::vector<int64_t> v) { return Value::IntList(v); }

// ---------------------------------------------------------------------------

TEST_CASE("sym_shapes: the header's example", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymInt b = env.NewSymbol(8);
  Value x(TensorMeta::Contiguous(DType::kFloat32, {8, 3}));
  SymValue sx = SymValue::Tensor({b.expr(), 3});
  const Registry& registry = DefaultRegistry();
  Value out = *registry.Infer("torch.relu", {x});
  absl::StatusOr<SymValue> s =
      InferSymbolic(*registry.Find("torch.relu"), {x}, {sx}, {}, {}, out, env);
  DYNAMO_REQUIRE_OK(s);
  CHECK(Sizes(*s) == "[s0, 3]");
}

TEST_CASE("sym_shapes: the static fast path", "[ops][sym_shapes]") {
  ShapeEnv env;
  Value x(TensorMeta::Contiguous(DType::kFloat32, {4, 3}));
  const OpEntry& add = *DefaultRegistry().Find("torch.add");
  Value out = *add.Infer({x, x}, {});
  // No SymValues, or SymValues whose sizes are constants: static, no guard.
  absl::StatusOr<SymValue> s = InferSymbolic(add, {x, x}, {}, {}, {}, out, env);
  DYNAMO_REQUIRE_OK(s);
  CHECK(s->is_static());
  s = InferSymbolic(add, {x, x}, {SymValue::Tensor({4, 3})}, {}, {}, out, env);
  DYNAMO_REQUIRE_OK(s);
  CHECK(s->is_static());
  CHECK(env.guards().empty());
  // Even an op without a rule is fine when nothing is symbolic.
  const OpEntry& stride = *DefaultRegistry().Find("Tensor.stride");
  Value st = *stride.Infer({x}, {});
  CHECK(InferSymbolic(stride, {x}, {}, {}, {}, st, env).ok());
}

TEST_CASE("sym_shapes: ops without a rule are Unimplemented; SpecializeAll", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr s0 = env.NewSymbol(6).expr();
  SymExpr s1 = env.NewSymbol(5).expr();
  Value x(TensorMeta::Contiguous(DType::kFloat32, {6, 5}));
  SymValue sx = SymValue::Tensor({s0, s1});
  for (const char* name : {"Tensor.stride", "torch.nonzero", "Tensor.is_contiguous"}) {
    INFO(name);
    const OpEntry& op = *DefaultRegistry().Find(name);
    CHECK_FALSE(HasSymbolicRule(op));
    absl::StatusOr<Value> out = op.Infer({x}, {});
    DYNAMO_REQUIRE_OK(out);
    absl::StatusOr<SymValue> s = InferSymbolic(op, {x}, {sx}, {}, {}, *out, env);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == absl::StatusCode::kUnimplemented);
  }
  CHECK(HasSymbolicRule(*DefaultRegistry().Find("torch.add")));
  CHECK(HasSymbolicRule(*DefaultRegistry().Find("torch.clip")));  // an alias, by its tag
  CHECK(HasSymbolicRule(*DefaultRegistry().Find("torch.concat")));
  // The caller's fallback: every symbol pinned to its hint.
  SpecializeAll({sx, SymValue::Int(s0 * 2)}, env);
  CHECK(GuardTexts(env) == std::vector<std::string>{"s0 == 6", "s1 == 5"});
  CHECK(Rejects(env, {{"s0", 7}, {"s1", 5}}));
  CHECK_FALSE(Rejects(env, {{"s0", 6}, {"s1", 5}}));
}

TEST_CASE("sym_shapes: every rule name is a registry op", "[ops][sym_shapes]") {
  for (const std::string& name : SymbolicRuleNames()) {
    INFO(name);
    CHECK(DefaultRegistry().Find(name) != nullptr);
  }
}

TEST_CASE("sym_shapes: a SymValue must be parallel to its Value", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr s0 = env.NewSymbol(6).expr();
  Value x(TensorMeta::Contiguous(DType::kFloat32, {6, 5}));
  const OpEntry& relu = *DefaultRegistry().Find("torch.relu");
  Value out = *relu.Infer({x}, {});
  absl::StatusOr<SymValue> s = InferSymbolic(relu, {x}, {SymValue::Tensor({s0})}, {}, {}, out, env);
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  // A wrong hint for the result is the rule checker's Internal error.
  Value wrong(TensorMeta::Contiguous(DType::kFloat32, {7, 5}));
  s = InferSymbolic(relu, {x}, {SymValue::Tensor({s0, 5})}, {}, {}, wrong, env);
  CHECK(s.status().code() == absl::StatusCode::kInternal);
}

// ---------------------------------------------------------------- pointwise
TEST_CASE("sym_shapes: pointwise broadcasting", "[ops][sym_shapes]") {
  SECTION("two symbols in one dim are guarded equal") {
    ShapeEnv env;
    SymExpr s0 = env.NewSymbol(4).expr(), s1 = env.NewSymbol(4).expr();
    Outcome o = Check(env, "torch.add", {Ten({s0, 3}), Ten({s1, 3})});
    CHECK(Sizes(o.sym) == "[s0, 3]");
    CHECK(GuardTexts(env) == std::vector<std::string>{"s0 == s1"});
    CHECK(Rejects(env, {{"s0", 4}, {"s1", 5}}));
  }
  SECTION("a 1 broadcasts without a guard") {
    ShapeEnv env;
    SymExpr s0 = env.NewSymbol(4).expr(), s1 = env.NewSymbol(7).expr();
    Outcome o = Check(env, "operator.mul", {Ten({s0, 1}), Ten({1, s1})});
    CHECK(Sizes(o.sym) == "[s0, s1]");
    CHECK(env.guards().empty());
    o = Check(env, "Tensor.sub", {Ten({s0, s1}), Ten({s1})});
    CHECK(Sizes(o.sym) == "[s0, s1]");
    o = Check(env, "torch.add", {Ten({s0}), Lit(Value(2.5))}, {{"alpha", Lit(Value(2))}});
    CHECK(Sizes(o.sym) == "[s0]");
    CHECK(env.guards().empty());
  }
  SECTION("a symbol against a constant is guarded to it") {
    ShapeEnv env;
    SymExpr s0 = env.NewSymbol(3).expr();
    Outcome o = Check(env, "torch.mul", {Ten({s0}), Ten({3})}, {}, 0);
    CHECK(o.sym.is_static());
    CHECK(GuardTexts(env) == std::vector<std::string>{"s0 == 3"});
  }
  SECTION("in-place, where, masked_fill, clamp, activations, unary") {
    ShapeEnv env;
    SymExpr s0 = env.NewSymbol(4).expr(), s1 = env.NewSymbol(6).expr();
    CHECK(Sizes(Check(env, "Tensor.add_", {Ten({s0, s1}), Ten({s1})}).sym) == "[s0, s1]");
    CHECK(Sizes(Check(env, "operator.iadd", {Ten({s0, s1}), Lit(Value(1))}).sym) == "[s0, s1]");
    CHECK(Sizes(Check(env, "torch.where",
                      {Ten({s0, 1}, DType::kBool), Ten({1, s1}), Lit(Value(0.0))})
                    .sym) == "[s0, s1]");
    CHECK(Sizes(Check(env, "Tensor.masked_fill",
                      {Ten({s0, s1}), Ten({1, s1}, DType::kBool), Lit(Value(-1.0))})
                    .sym) == "[s0, s1]");
    CHECK(Sizes(Check(env, "torch.clamp", {Ten({s0, s1})}, {{"min", Lit(Value(0.0))}}).sym) ==
          "[s0, s1]");
    CHECK(Sizes(Check(env, "torch.clip", {Ten({s0}), Lit(Value(0.0)), Lit(Value(1.0))}).sym) ==
          "[s0]");
    CHECK(Sizes(Check(env, "torch.nn.functional.relu", {Ten({s0, s1})}).sym) == "[s0, s1]");
    CHECK(Sizes(Check(env, "torch.nn.functional.gelu", {Ten({2, s1})}).sym) == "[2, s1]");
    CHECK(Sizes(Check(env, "Tensor.exp", {Ten({s1})}).sym) == "[s1]");
    CHECK(Sizes(Check(env, "torch.addcmul", {Ten({s0, 1}), Ten({s1}), Ten({s0, s1})}).sym) ==
          "[s0, s1]");
    CHECK(Sizes(Check(env, "Tensor.copy_", {Ten({s0, s1}), Ten({1, s1})}).sym) == "[s0, s1]");
    CHECK(env.guards().empty());
  }
}

// ---------------------------------------------------------------- views
TEST_CASE("sym_shapes: view and reshape", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr B = env.NewSymbol(2).expr(), T = env.NewSymbol(5).expr();
  SECTION("heads split from symbolic ints, and merged back with -1") {
    Outcome o =
        Check(env, "Tensor.view", {Ten({B, T, 768}), Int(B), Int(T), Lit(Value(12)), Lit(Value(64))});
    CHECK(Sizes(o.sym) == "[s0, s1, 12, 64]");
    o = Check(env, "Tensor.view", {Ten({B, T, 768}), Lit(Value(-1)), Lit(Value(768))});
    CHECK(Sizes(o.sym) == "[s0*s1, 768]");
    o = Check(env, "Tensor.view", {Ten({B * T, 768}), Seq({Int(B), Int(T), Lit(Value(-1))})});
    CHECK(Sizes(o.sym) == "[s0, s1, 768]");
    o = Check(env, "torch.reshape", {Ten({B, 6}), Lit(List({-1, 3}))});
    CHECK(Sizes(o.sym) == "[2*s0, 3]");
    CHECK(env.guards().empty());
  }
  SECTION("an inexact -1 is guarded divisible") {
    Outcome o = Check(env, "Tensor.reshape", {Ten({T, 3}), Lit(Value(-1)), Lit(Value(5))}, {}, 2);
    CHECK(Sizes(o.sym) == "[(3*s1)//5, 5]");
    CHECK(GuardTexts(env) == std::vector<std::string>{"(3*s1) % 5 == 0"});
    CHECK(Rejects(env, {{"s0", 2}, {"s1", 6}}));
    CHECK_FALSE(Rejects(env, {{"s0", 2}, {"s1", 10}}));
  }
  SECTION("view_as, flatten, unflatten") {
    CHECK(Sizes(Check(env, "Tensor.view_as", {Ten({B, T}), Ten({T, B})}).sym) == "[s1, s0]");
    CHECK(Sizes(Check(env, "torch.flatten", {Ten({B, 3, T, T}), Lit(Value(1))}).sym) ==
          "[s0, 3*s1**2]");
    CHECK(Sizes(Check(env, "Tensor.flatten", {Ten({B, T, 4})}).sym) == "[4*s0*s1]");
    CHECK(Sizes(Check(env, "Tensor.unflatten", {Ten({B, 4 * T}), Lit(Value(1)), Lit(List({4, -1}))})
                    .sym) == "[s0, 4, s1]");
    CHECK(env.guards().empty());
  }
}

TEST_CASE("sym_shapes: dims moved, added, dropped", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr s0 = env.NewSymbol(3).expr(), s1 = env.NewSymbol(5).expr();
  CHECK(Sizes(Check(env, "Tensor.unsqueeze", {Ten({s0, s1}), Lit(Value(1))}).sym) == "[s0, 1, s1]");
  CHECK(Sizes(Check(env, "torch.squeeze", {Ten({s0, 1, s1})}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, "Tensor.squeeze", {Ten({s0, 1, s1}), Lit(Value(0))}).sym) ==
        "[s0, 1, s1]");
  CHECK(Sizes(Check(env, "Tensor.transpose", {Ten({s0, 2, s1}), Lit(Value(0)), Lit(Value(-1))})
                  .sym) == "[s1, 2, s0]");
  CHECK(Sizes(Check(env, "torch.swapaxes", {Ten({s0, s1}), Lit(Value(0)), Lit(Value(1))}).sym) ==
        "[s1, s0]");
  CHECK(Sizes(Check(env, "Tensor.permute", {Ten({s0, 2, s1}), Lit(Value(2)), Lit(Value(0)),
                                            Lit(Value(1))})
                  .sym) == "[s1, s0, 2]");
  CHECK(Sizes(Check(env, "torch.permute", {Ten({s0, 2, s1}), Lit(List({1, 2, 0}))}).sym) ==
        "[2, s1, s0]");
  CHECK(Sizes(Check(env, "Tensor.t", {Ten({s0, s1})}).sym) == "[s1, s0]");
  CHECK(Sizes(Check(env, "Tensor.expand", {Ten({1, s1}), Int(s0), Lit(Value(-1))}).sym) ==
        "[s0, s1]");
  CHECK(Sizes(Check(env, "Tensor.expand_as", {Ten({s0, 1}), Ten({4, s0, s1})}).sym) ==
        "[4, s0, s1]");
  CHECK(Sizes(Check(env, "Tensor.repeat", {Ten({s0, 2}), Lit(Value(2)), Int(s1), Lit(Value(1))})
                  .sym) == "[2, s0*s1, 2]");
  CHECK(env.guards().empty());
}

TEST_CASE("sym_shapes: narrow, select, split, chunk, unbind, cat, stack", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr s0 = env.NewSymbol(10).expr(), s1 = env.NewSymbol(3).expr();
  SECTION("narrow and select guard their bounds") {
    Outcome o = Check(env, "Tensor.narrow", {Ten({s0, 4}), Lit(Value(0)), Lit(Value(1)), Int(s1)});
    CHECK(Sizes(o.sym) == "[s1, 4]");
    CHECK(Rejects(env, {{"s0", 4}, {"s1", 4}}));  // 1 + 4 > 4
    o = Check(env, "torch.select", {Ten({s0, s1}), Lit(Value(1)), Lit(Value(-1))});
    CHECK(Sizes(o.sym) == "[s0]");
  }
  SECTION("split by a size: the piece count is guarded") {
    Outcome o = Check(env, "Tensor.split", {Ten({s0, 2}), Lit(Value(4))}, {}, 2);
    REQUIRE(o.sym.items.size() == 3);
    CHECK(o.sym.items[0].is_static());
    CHECK(Sizes(o.sym.items[2]) == "[s0 - 8, 2]");
    CHECK(Rejects(env, {{"s0", 13}, {"s1", 3}}));
    CHECK_FALSE(Rejects(env, {{"s0", 12}, {"s1", 3}}));
  }
  SECTION("split with symbolic sections") {
    Outcome o = Check(env, "torch.split", {Ten({s0 + s1, 2}), Seq({Int(s0), Int(s1)}, false)});
    REQUIRE(o.sym.items.size() == 2);
    CHECK(Sizes(o.sym.items[0]) == "[s0, 2]");
    CHECK(Sizes(o.sym.items[1]) == "[s1, 2]");
  }
  SECTION("chunk") {
    Outcome o = Check(env, "Tensor.chunk", {Ten({4, s0}), Lit(Value(3)), Lit(Value(1))}, {}, 2);
    REQUIRE(o.sym.items.size() == 3);
    CHECK(Sizes(o.sym.items[0]) == "[4, (s0 + 2)//3]");
  }
  SECTION("unbind specialises the dim it unbinds") {
    Outcome o = Check(env, "torch.unbind", {Ten({s1, s0}), Lit(Value(0))}, {}, 2);
    REQUIRE(o.sym.items.size() == 3);
    CHECK(Sizes(o.sym.items[0]) == "[s0]");
    CHECK(GuardTexts(env) == std::vector<std::string>{"s1 == 3"});
  }
  SECTION("cat adds up, stack counts") {
    CHECK(Sizes(Check(env, "torch.cat", {Seq({Ten({s0, 2}), Ten({s1, 2}), Ten({3, 2})}, false)})
                    .sym) == "[s0 + s1 + 3, 2]");
    CHECK(Sizes(Check(env, "torch.concat", {Seq({Ten({2, s0}), Ten({2, s1})}, false)},
                      {{"dim", Lit(Value(-1))}})
                    .sym) == "[2, s0 + s1]");
    CHECK(Sizes(Check(env, "torch.stack", {Seq({Ten({s0, 2}), Ten({s0, 2})}, false)},
                      {{"dim", Lit(Value(1))}})
                    .sym) == "[s0, 2, 2]");
    CHECK(env.guards().empty());
  }
}

TEST_CASE("sym_shapes: size, numel, dim, new_*", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr s0 = env.NewSymbol(3).expr(), s1 = env.NewSymbol(5).expr();
  Outcome o = Check(env, "Tensor.size", {Ten({s0, 4, s1})});
  REQUIRE(o.sym.items.size() == 3);
  CHECK(o.sym.items[0].scalar->ToString() == "s0");
  CHECK(o.sym.items[1].is_static());
  o = Check(env, "Tensor.size", {Ten({s0, 4, s1}), Lit(Value(-1))});
  CHECK(o.sym.scalar->ToString() == "s1");
  o = Check(env, "Tensor.numel", {Ten({s0, 4, s1})});
  CHECK(o.sym.scalar->ToString() == "4*s0*s1");
  o = Check(env, "Tensor.dim", {Ten({s0, 4, s1})});
  CHECK(o.sym.is_static());
  o = Check(env, "Tensor.new_zeros", {Ten({s0}), Seq({Int(s1), Int(s0 * 2)}, false)});
  CHECK(Sizes(o.sym) == "[s1, 2*s0]");
}

// ---------------------------------------------------------------- same shape
TEST_CASE("sym_shapes: same-shape ops", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr B = env.NewSymbol(2).expr(), T = env.NewSymbol(7).expr();
  const std::string f = "torch.nn.functional.";
  CHECK(Sizes(Check(env, "torch.softmax", {Ten({B, T}), Lit(Value(-1))}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, f + "log_softmax", {Ten({B, T})}, {{"dim", Lit(Value(1))}}).sym) ==
        "[s0, s1]");
  CHECK(Sizes(Check(env, f + "dropout", {Ten({B, T})}, {{"p", Lit(Value(0.1))}}).sym) ==
        "[s0, s1]");
  CHECK(Sizes(Check(env, "Tensor.float", {Ten({B, T}, DType::kInt64)}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, "Tensor.to", {Ten({B, T}), Lit(Value(DType::kFloat16))}).sym) ==
        "[s0, s1]");
  CHECK(Sizes(Check(env, "torch.zeros_like", {Ten({B, T})}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, "torch.full_like", {Ten({B, T}), Lit(Value(1.0))}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, "Tensor.contiguous", {Ten({B, T})}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, "Tensor.detach", {Ten({B, T})}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, "torch.cumsum", {Ten({B, T}), Lit(Value(1))}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, "torch.tril", {Ten({T, T})}).sym) == "[s1, s1]");
  Outcome sorted = Check(env, "Tensor.sort", {Ten({B, T})});
  REQUIRE(sorted.sym.items.size() == 2);
  CHECK(Sizes(sorted.sym.items[1]) == "[s0, s1]");
  CHECK(Sizes(Check(env, f + "layer_norm",
                    {Ten({B, T, 64}), Lit(List({64})), Ten({64}), Ten({64})})
                  .sym) == "[s0, s1, 64]");
  CHECK(Sizes(Check(env, f + "batch_norm",
                    {Ten({B, 16, T, T}), Ten({16}), Ten({16}), Ten({16}), Ten({16})})
                  .sym) == "[s0, 16, s1, s1]");
  CHECK(env.guards().empty());
  SECTION("layer_norm over a symbolic dim guards it to the normalized shape") {
    Check(env, f + "layer_norm", {Ten({B, T}), Lit(List({7}))}, {}, 1);
    CHECK(GuardTexts(env) == std::vector<std::string>{"s1 == 7"});
  }
}

// ---------------------------------------------------------------- reductions
TEST_CASE("sym_shapes: reductions", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr s0 = env.NewSymbol(3).expr(), s1 = env.NewSymbol(5).expr();
  CHECK(Sizes(Check(env, "torch.sum", {Ten({s0, s1, 4}), Lit(Value(1))}).sym) == "[s0, 4]");
  CHECK(Sizes(Check(env, "Tensor.mean", {Ten({s0, s1, 4}), Lit(List({-1, 0}))},
                    {{"keepdim", Lit(Value(true))}})
                  .sym) == "[1, s1, 1]");
  CHECK(Check(env, "torch.sum", {Ten({s0, s1})}).sym.is_static());  // a full reduction: 0-d
  CHECK(Sizes(Check(env, "torch.amax", {Ten({s0, s1})}, {{"dim", Lit(Value(0))}}).sym) == "[s1]");
  CHECK(Sizes(Check(env, "torch.argmax", {Ten({s0, s1}), Lit(Value(1)), Lit(Value(true))}).sym) ==
        "[s0, 1]");
  CHECK(Check(env, "Tensor.argmax", {Ten({s0, s1})}).sym.is_static());
  CHECK(Sizes(Check(env, "torch.std", {Ten({s0, s1}), Lit(Value(1))}).sym) == "[s0]");
  CHECK(Sizes(Check(env, "torch.logsumexp", {Ten({s0, s1}), Lit(Value(1))}).sym) == "[s0]");
  CHECK(Sizes(Check(env, "Tensor.all", {Ten({s0, s1}, DType::kBool), Lit(Value(0))}).sym) ==
        "[s1]");
  Outcome mx = Check(env, "torch.max", {Ten({s0, s1}), Lit(Value(1))});
  REQUIRE(mx.sym.items.size() == 2);
  CHECK(Sizes(mx.sym.items[0]) == "[s0]");
  CHECK(Sizes(mx.sym.items[1]) == "[s0]");
  CHECK(Sizes(Check(env, "Tensor.max", {Ten({s0, 1}), Ten({s1})}).sym) == "[s0, s1]");
  Outcome top = Check(env, "torch.topk", {Ten({s0, s1}), Lit(Value(2))});
  CHECK(Sizes(top.sym.items[0]) == "[s0, 2]");
  CHECK(env.guards().empty());
}

// ---------------------------------------------------------------- linear algebra
TEST_CASE("sym_shapes: matmul over every rank case", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr B = env.NewSymbol(2).expr(), T = env.NewSymbol(5).expr(), K = env.NewSymbol(4).expr();
  CHECK(Check(env, "torch.matmul", {Ten({K}), Ten({K})}).sym.is_static());
  CHECK(Sizes(Check(env, "torch.matmul", {Ten({T, K}), Ten({K})}).sym) == "[s1]");
  CHECK(Check(env, "torch.matmul", {Ten({K}), Ten({K, 3})}).sym.is_static());
  CHECK(Sizes(Check(env, "Tensor.matmul", {Ten({T, K}), Ten({K, B})}).sym) == "[s1, s0]");
  CHECK(Sizes(Check(env, "operator.matmul", {Ten({B, T, K}), Ten({K, 8})}).sym) == "[s0, s1, 8]");
  CHECK(Sizes(Check(env, "torch.matmul", {Ten({T, K}), Ten({B, K, 8})}).sym) == "[s0, s1, 8]");
  CHECK(Sizes(Check(env, "torch.matmul", {Ten({B, 1, T, K}), Ten({3, K, T})}).sym) ==
        "[s0, 3, s1, s1]");
  CHECK(Sizes(Check(env, "torch.matmul", {Ten({K}), Ten({B, K, T})}).sym) == "[s0, s1]");
  CHECK(env.guards().empty());
  CHECK(Sizes(Check(env, "torch.mm", {Ten({T, K}), Ten({K, 3})}).sym) == "[s1, 3]");
  CHECK(Sizes(Check(env, "Tensor.bmm", {Ten({B, T, K}), Ten({B, K, T})}).sym) == "[s0, s1, s1]");
  CHECK(Sizes(Check(env, "torch.nn.functional.linear", {Ten({B, T, 16}), Ten({32, 16}), Ten({32})})
                  .sym) == "[s0, s1, 32]");
  CHECK(Sizes(Check(env, "torch.addmm", {Ten({3}), Ten({T, K}), Ten({K, 3})}).sym) == "[s1, 3]");
  CHECK(Sizes(Check(env, "torch.baddbmm", {Ten({1, T, T}), Ten({B, T, K}), Ten({B, K, T})}).sym) ==
        "[s0, s1, s1]");
  CHECK(env.guards().empty());
  SECTION("inner dims of two symbols are guarded equal") {
    ShapeEnv e2;
    SymExpr a = e2.NewSymbol(4).expr(), b = e2.NewSymbol(4).expr();
    CHECK(Check(e2, "torch.mm", {Ten({3, a}), Ten({b, 5})}).sym.is_static());
    CHECK(GuardTexts(e2) == std::vector<std::string>{"s0 == s1"});
  }
}

TEST_CASE("sym_shapes: scaled_dot_product_attention", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr B = env.NewSymbol(2).expr(), T = env.NewSymbol(6).expr();
  Outcome o = Check(env, "torch.nn.functional.scaled_dot_product_attention",
                    {Ten({B, 4, T, 16}), Ten({B, 4, T, 16}), Ten({B, 4, T, 16})},
                    {{"attn_mask", Ten({T, T}, DType::kBool)}});
  CHECK(Sizes(o.sym) == "[s0, 4, s1, 16]");
  CHECK(env.guards().empty());
}

// ---------------------------------------------------------------- nn
TEST_CASE("sym_shapes: conv2d and pooling", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr N = env.NewSymbol(2).expr(), H = env.NewSymbol(32).expr(), W = env.NewSymbol(29).expr();
  const std::string f = "torch.nn.functional.";
  SECTION("resnet's stem: stride 2, padding 3") {
    Outcome o = Check(env, f + "conv2d", {Ten({N, 3, H, W}), Ten({64, 3, 7, 7})},
                      {{"stride", Lit(Value(2))}, {"padding", Lit(Value(3))}});
    CHECK(Sizes(o.sym) == "[s0, 64, (s1 - 1)//2 + 1, (s2 - 1)//2 + 1]");
    o = Check(env, f + "max_pool2d", {Ten({N, 64, H, W}), Lit(Value(3)), Lit(Value(2)), Lit(Value(1))});
    CHECK(Sizes(o.sym) == "[s0, 64, (s1 - 1)//2 + 1, (s2 - 1)//2 + 1]");
  }
  SECTION("dilation, per-dim stride and padding, bias, groups") {
    Outcome o = Check(env, f + "conv2d",
                      {Ten({N, 4, H, W}), Ten({8, 2, 3, 3}), Ten({8})},
                      {{"stride", Lit(List({1, 3}))},
                       {"padding", Lit(List({2, 0}))},
                       {"dilation", Lit(Value(2))},
                       {"groups", Lit(Value(2))}});
    CHECK(Sizes(o.sym) == "[s0, 8, s1, (s2 - 5)//3 + 1]");
    // The kernel must fit: W + 0 >= 5.
    CHECK(Rejects(env, {{"s0", 2}, {"s1", 32}, {"s2", 4}}));
  }
  SECTION("unbatched input and padding='same'") {
    CHECK(Sizes(Check(env, f + "conv2d", {Ten({3, H, W}), Ten({5, 3, 3, 3})},
                      {{"padding", Lit(Value("same"))}})
                    .sym) == "[5, s1, s2]");
  }
  SECTION("pooling: ceil_mode, avg, indices, adaptive") {
    Outcome o = Check(env, f + "max_pool2d", {Ten({N, 4, H, W}), Lit(Value(2))},
                      {{"ceil_mode", Lit(Value(true))}});
    CHECK(Sizes(o.sym) == "[s0, 4, (s1 - 1)//2 + 1, (s2 - 1)//2 + 1]");
    o = Check(env, f + "avg_pool2d", {Ten({N, 4, H, W}), Lit(Value(3))});
    CHECK(Sizes(o.sym) == "[s0, 4, s1//3, s2//3]");
    o = Check(env, f + "max_pool2d", {Ten({N, 4, H, W}), Lit(Value(2))},
              {{"return_indices", Lit(Value(true))}});
    REQUIRE(o.sym.items.size() == 2);
    CHECK(Sizes(o.sym.items[1]) == "[s0, 4, s1//2, s2//2]");
    o = Check(env, f + "adaptive_avg_pool2d", {Ten({N, 4, H, W}), Lit(Value(1))});
    CHECK(Sizes(o.sym) == "[s0, 4, 1, 1]");
    o = Check(env, f + "adaptive_avg_pool2d", {Ten({N, 4, H, W}), Seq({Lit(Value()), Lit(Value(3))})});
    CHECK(Sizes(o.sym) == "[s0, 4, s1, 3]");
  }
}

TEST_CASE("sym_shapes: embedding and pad", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr B = env.NewSymbol(2).expr(), T = env.NewSymbol(9).expr();
  const std::string f = "torch.nn.functional.";
  CHECK(Sizes(Check(env, f + "embedding", {Ten({B, T}, DType::kInt64), Ten({100, 32})}).sym) ==
        "[s0, s1, 32]");
  CHECK(Sizes(Check(env, f + "pad", {Ten({B, T, T}), Lit(List({1, 2, 0, 3}))}).sym) ==
        "[s0, s1 + 3, s1 + 3]");
  CHECK(Sizes(Check(env, f + "pad", {Ten({B, T}), Seq({Lit(Value(0)), Int(T)}, false)}).sym) ==
        "[s0, 2*s1]");
  CHECK(Sizes(Check(env, f + "pad", {Ten({B, T}), Lit(List({-1, 0}))}).sym) == "[s0, s1 - 1]");
}

// ---------------------------------------------------------------- factories
TEST_CASE("sym_shapes: factories with symbolic sizes", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr s0 = env.NewSymbol(3).expr(), s1 = env.NewSymbol(8).expr();
  CHECK(Sizes(Check(env, "torch.zeros", {Int(s0), Lit(Value(4))}).sym) == "[s0, 4]");
  CHECK(Sizes(Check(env, "torch.ones", {Seq({Int(s0), Int(s1)})}).sym) == "[s0, s1]");
  CHECK(Sizes(Check(env, "torch.randn", {Int(s1)}).sym) == "[s1]");
  CHECK(Sizes(Check(env, "torch.full", {Seq({Int(s0), Int(s1)}, false), Lit(Value(1.5))}).sym) ==
        "[s0, s1]");
  CHECK(Sizes(Check(env, "torch.randint", {Lit(Value(10)), Seq({Int(s0)})}).sym) == "[s0]");
  CHECK(Sizes(Check(env, "torch.full", {},
                    {{"size", Seq({Int(s1), Lit(Value(2))}, false)}, {"fill_value", Lit(Value(0))}})
                  .sym) == "[s1, 2]");
  CHECK(Sizes(Check(env, "torch.eye", {Int(s0)}).sym) == "[s0, s0]");
  CHECK(Sizes(Check(env, "torch.arange", {Int(s1)}).sym) == "[s1]");
  CHECK(env.guards().empty());
  CHECK(Sizes(Check(env, "torch.arange", {Int(s0), Int(s1)}).sym) == "[-s0 + s1]");
  CHECK(GuardTexts(env) == std::vector<std::string>{"s0 <= s1"});
  CHECK(Rejects(env, {{"s0", 9}, {"s1", 8}}));
  CHECK(Sizes(Check(env, "torch.arange", {Lit(Value(0)), Int(s1), Lit(Value(3))}).sym) ==
        "[(s1 + 2)//3]");
  CHECK(Sizes(Check(env, "torch.arange", {Int(s1), Lit(Value(0)), Lit(Value(-2))}).sym) ==
        "[(s1 + 1)//2]");
}

// ---------------------------------------------------------------- indexing
TEST_CASE("sym_shapes: getitem with symbolic slices", "[ops][sym_shapes]") {
  ShapeEnv env;
  SymExpr B = env.NewSymbol(2).expr(), S = env.NewSymbol(16).expr(), T = env.NewSymbol(5).expr();
  SECTION("x[:, :T] with T another symbol guards T <= S") {
    Outcome o = Check(env, "operator.getitem",
                      {Ten({B, S}), Seq({Sl(std::nullopt, std::nullopt), Sl(std::nullopt, T)})});
    CHECK(Sizes(o.sym) == "[s0, s2]");
    CHECK(GuardTexts(env) == std::vector<std::string>{"s2 <= s1"});
    CHECK(Rejects(env, {{"s0", 2}, {"s1", 4}, {"s2", 5}}));
  }
  SECTION("static bounds on symbolic dims") {
    CHECK(Sizes(Check(env, "operator.getitem", {Ten({S, B}), Lit(Value(Slice{1, {}, {}}))}).sym) ==
          "[s1 - 1, s0]");
    Outcome o = Check(env, "operator.getitem", {Ten({S}), Lit(Value(Slice{-3, {}, {}}))});
    CHECK(o.sym.is_static());  // exactly 3, guarded S >= 3
    CHECK(Sizes(Check(env, "operator.getitem", {Ten({S}), Lit(Value(Slice{{}, {}, 2}))}).sym) ==
          "[(s1 + 1)//2]");
    CHECK(Sizes(Check(env, "operator.getitem", {Ten({S}), Lit(Value(Slice{2, -1, {}}))}).sym) ==
          "[s1 - 3]");
  }
  SECTION("ints, None, Ellipsis, symbolic starts") {
    CHECK(Sizes(Check(env, "operator.getitem",
                      {Ten({B, S, T}), Seq({Lit(Value(0)), Lit(Value(EllipsisValue{})),
                                            Lit(Value()), Sl(T, std::nullopt)})})
                    .sym) == "[s1, 1, 0]");
    CHECK(Sizes(Check(env, "operator.getitem",
                      {Ten({B, S}), Seq({Lit(Value(EllipsisValue{})), Sl(T, std::nullopt)})})
                    .sym) == "[s0, s1 - s2]");
    CHECK(Sizes(Check(env, "operator.getitem", {Ten({S, B}), Int(T)}).sym) == "[s0]");
  }
  SECTION("advanced indexing with integer tensors") {
    CHECK(Sizes(Check(env, "operator.getitem", {Ten({S, B}), Ten({T}, DType::kInt64)}).sym) ==
          "[s2, s0]");
    CHECK(Sizes(Check(env, "operator.getitem",
                      {Ten({B, S, 4}),
                       Seq({Sl(std::nullopt, std::nullopt), Ten({T, 1}, DType::kInt64),
                            Ten({3}, DType::kInt64)})})
                    .sym) == "[s0, s2, 3]");
    CHECK(Sizes(Check(env, "operator.getitem",
                      {Ten({B, S, 4}), Seq({Ten({T}, DType::kInt64), Sl(std::nullopt, std::nullopt),
                                           Ten({T}, DType::kInt64)})})
                    .sym) == "[s2, s1]");
    CHECK(Sizes(Check(env, "torch.index_select",
                      {Ten({S, B}), Lit(Value(0)), Ten({T}, DType::kInt64)})
                    .sym) == "[s2, s0]");
    CHECK(Sizes(Check(env, "torch.gather", {Ten({S, B}), Lit(Value(1)), Ten({S, 1}, DType::kInt64)})
                    .sym) == "[s1, 1]");
  }
  SECTION("setitem: the value must fit the indexed sizes") {
    Outcome o = Check(env, "operator.setitem",
                      {Ten({B, S}), Seq({Sl(std::nullopt, std::nullopt), Sl(std::nullopt, T)}),
                       Ten({1, B, T})});
    CHECK(o.sym.is_static());
    CHECK(GuardTexts(env) == std::vector<std::string>{"s2 <= s1"});
    Check(env, "operator.setitem", {Ten({B, S}), Lit(Value(0)), Ten({S})});
    Check(env, "operator.setitem", {Ten({B, S}), Int(T - 4), Lit(Value(1.0))}, {}, 1);
    CHECK(Rejects(env, {{"s0", 2}, {"s1", 16}, {"s2", 7}}));  // index s2 - 4 out of [-2, 2)
  }
  SECTION("a boolean mask is data-dependent") {
    const OpEntry& op = *DefaultRegistry().Find("operator.getitem");
    Value x(TensorMeta::Contiguous(DType::kFloat32, {2, 16}));
    Value m(TensorMeta::Contiguous(DType::kBool, {2, 16}));
    Value out = *op.Infer({x, m}, {});
    absl::StatusOr<SymValue> s = InferSymbolic(
        op, {x, m}, {SymValue::Tensor({B, S}), SymValue::Tensor({B, S})}, {}, {}, out, env);
    CHECK(s.status().code() == absl::StatusCode::kUnimplemented);
  }
}

// ---------------------------------------------------------------- a property
// Random programs of small shape ops over symbolic inputs: whatever the
// rules guard, the registry agrees at every admitted size.
TEST_CASE("sym_shapes: random broadcasts and views agree with the registry", "[ops][sym_shapes]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    ShapeEnv env;
    std::uniform_int_distribution<int64_t> hint(2, 6);
    std::vector<SymExpr> syms;
    for (int i = 0; i < 3; ++i) syms.push_back(env.NewSymbol(hint(rng)).expr());
    auto dim = [&]() -> SymExpr {
      const int k = static_cast<int>(rng() % 5);
      if (k == 0) return 1;
      if (k == 1) return 3;
      return syms[static_cast<size_t>(rng() % syms.size())];
    };
    std::vector<SymExpr> a = {dim(), dim(), dim()};
    std::vector<SymExpr> b = {dim(), dim()};
    // Only calls the registry accepts at the hints are checked.
    SymBindings hints = Hints(env);
    std::vector<int64_t> ha, hb;
    for (const SymExpr& e : a) ha.push_back(Eval(e, hints));
    for (const SymExpr& e : b) hb.push_back(Eval(e, hints));
    if (!BroadcastShapes(ha, hb).ok()) continue;
    INFO("round " << round);
    Check(env, "torch.add", {Ten(a), Ten(b)}, {}, 1, 60);
    Check(env, "Tensor.view", {Ten(a), Lit(Value(-1))}, {}, 1, 60);
    Check(env, "Tensor.reshape", {Ten(a), Int(a[0]), Lit(Value(-1))}, {}, 1, 60);
    Check(env, "torch.matmul", {Ten(a), Ten({a[2], b[1]})}, {}, 1, 60);
  }
}

}  // namespace
}  // namespace dynamo::ops
