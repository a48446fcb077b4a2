// Symbolic sizes: the canonical form, each simplification rule (and the
// tempting ones that are wrong), a randomized proof of the simplifier
// against a direct evaluation of unsimplified trees, printing/parsing round
// trips, and the ShapeEnv's guards.
#include "lib/ops/sym.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "test/test_support.h"

namespace dynamo::ops {
namespace {

SymExpr S(const char* name) { return SymExpr::Symbol(name); }

SymExpr Parse(const std::string& text) {
  absl::StatusOr<SymExpr> e = ParseSymExpr(text);
  INFO(text);
  DYNAMO_REQUIRE_OK(e);
  return *e;
}

SymExpr Ok(const absl::StatusOr<SymExpr>& e) {
  DYNAMO_REQUIRE_OK(e);
  return *e;
}

std::string Text(const absl::StatusOr<SymExpr>& e) { return Ok(e).ToString(); }

template <typename T>
std::string ErrorOf(const absl::StatusOr<T>& value) {
  REQUIRE_FALSE(value.ok());
  return std::string(value.status().message());
}

TEST_CASE("sym: the header's example", "[ops][sym]") {
  ShapeEnv env;
  SymInt n = env.NewSymbol(8);
  SymInt m = n * 2 + 1;
  CHECK(m.hint() == 17);
  CHECK(m.expr().ToString() == "2*s0 + 1");
  SymExpr rem = *Mod(n.expr(), 8);
  CHECK(*env.Decide(RelKind::kEq, rem, 0));
  REQUIRE(env.guards().size() == 1);
  CHECK(env.guards()[0].ToString() == "s0 % 8 == 0");
  CHECK(env.CheckGuards({{"s0", 12}})->message == "s0 % 8 == 0 failed: s0 = 12");
}

// ---------------------------------------------------------------------------
// Canonical form.

TEST_CASE("sym: algebraically equal constructions are identical", "[ops][sym]") {
  const SymExpr s0 = S("s0"), s1 = S("s1");
  CHECK(s1 + s0 == s0 + s1);
  CHECK((s1 + s0).ToString() == "s0 + s1");
  CHECK(((s0 + 1) * 2 - s0).ToString() == "s0 + 2");
  CHECK((s0 * s1 - s1 * s0).ToString() == "0");
  CHECK((s0 * s1 - s1 * s0).constant() == 0);
  CHECK((s0 + s1) * (s0 - s1) == s0 * s0 - s1 * s1);
  CHECK(((s0 + s1) * (s0 - s1)).ToString() == "s0**2 - s1**2");
  CHECK(((s0 + 1) * (s0 + 1)).ToString() == "s0**2 + 2*s0 + 1");
  CHECK(((s1 + 1) * (s0 + 1)).ToString() == "s0*s1 + s0 + s1 + 1");
  CHECK((s0 * s0 * s1 + s1 * s0).ToString() == "s0**2*s1 + s0*s1");
  CHECK((3 - s0).ToString() == "-s0 + 3");
  CHECK((s0 - 1).ToString() == "s0 - 1");
  CHECK((-s0 * 2 - 5).ToString() == "-2*s0 - 5");
  CHECK((S("s10") + S("s2") + s1).ToString() == "s1 + s2 + s10");
  CHECK((S("T") + S("B") * 2).ToString() == "2*B + T");

  // Different routes to one expression give equal hashes and one text.
  const SymExpr a = (s0 + 2) * (s1 - 1) - s0 * s1;
  const SymExpr b = Parse("2*s1 - s0 - 2");
  const SymExpr c = Parse("-(s0 + 2) + 2*s1");
  CHECK(a == b);
  CHECK(b == c);
  CHECK(absl::Hash<SymExpr>{}(a) == absl::Hash<SymExpr>{}(c));
  CHECK(a.ToString() == "-s0 + 2*s1 - 2");
  CHECK(Max(s1, Max(S("s2"), s0)) == Max(Max(s0, s1), S("s2")));
  CHECK(Max(s1, Max(S("s2"), s0)).ToString() == "max(s0, s1, s2)");
  CHECK_FALSE(s0 == s1);
  CHECK_FALSE(s0 == s0 + 1);
}

TEST_CASE("sym: the order is total and deterministic", "[ops][sym]") {
  std::vector<SymExpr> items = {Parse("s1"), Parse("s0"), Parse("3"), Parse("s0**2"), Parse("s0*s1"),
                                Parse("s0//2"), Parse("s0 % 3"), Parse("max(s0, s1)"), Parse("min(s0, s1)"),
                                Parse("s10"), Parse("s2"), Parse("-s0"), Parse("0")};
  auto sorted = [](std::vector<SymExpr> v) {
    std::sort(v.begin(), v.end(), [](const SymExpr& x, const SymExpr& y) { return Compare(x, y) < 0; });
    std::vector<std::string> out;
    for (const SymExpr& e : v) out.push_back(e.ToString());
    return out;
  };
  const std::vector<std::string> first = sorted(items);
  std::mt19937 rng(7);
  for (int i = 0; i < 5; ++i) {
    std::shuffle(items.begin(), items.end(), rng);
    CHECK(sorted(items) == first);
  }
  // Symbols (numbers as numbers), then //, %, max, min; a constant last.
  CHECK(first == std::vector<std::string>{"s0**2", "s0*s1", "-s0", "s0", "s1", "s2", "s10", "s0//2",
                                          "s0 % 3", "max(s0, s1)", "min(s0, s1)", "0", "3"});
  for (const SymExpr& x : items) {
    for (const SymExpr& y : items) CHECK(Compare(x, y) == -Compare(y, x));
  }
}

TEST_CASE("sym: constants, symbols and their queries", "[ops][sym]") {
  CHECK(SymExpr().constant() == 0);
  CHECK(SymExpr(5).is_constant());
  CHECK(SymExpr(5).ToString() == "5");
  CHECK(SymExpr(-5).ToString() == "-5");
  CHECK_FALSE(S("s0").is_constant());
  CHECK(S("s0").symbol_name() == "s0");
  CHECK_FALSE((S("s0") * 2).symbol_name().has_value());
  CHECK(Parse("s10 + s2*(s0 % s1) + max(B, s2)").Symbols() ==
        std::vector<std::string>{"B", "s0", "s1", "s2", "s10"});
  CHECK(SymExpr(7).Symbols().empty());
}

// ---------------------------------------------------------------------------
// Printing and parsing.

TEST_CASE("sym: printing is canonical and parses back", "[ops][sym]") {
  const std::pair<const char*, const char*> cases[] = {
      {"s0+1", "s0 + 1"},
      {"(s0+1)//2", "(s0 + 1)//2"},
      {"s0 % 8", "s0 % 8"},
      {"s0//2*2", "2*(s0//2)"},
      {"(s0 % 8) * s1", "s1*(s0 % 8)"},
      {"s1 - s0//2", "s1 - s0//2"},
      {"-(s0//2)", "-(s0//2)"},
      {"-s0//2", "(-s0)//2"},  // unary minus binds tighter than //
      {"s0 % (s1 + 1)", "s0 % (s1 + 1)"},
      {"(-3)//s0", "(-3)//s0"},
      {"(s0//2)**2", "(s0//2)**2"},
      {"3 * s0 ** 2", "3*s0**2"},
      {"-s0**2", "-s0**2"},  // ** binds tighter than unary minus
      {"2**3**2", "512"},
      {"(s0 + 1)**2", "s0**2 + 2*s0 + 1"},
      {"Max(s1, s0)", "max(s0, s1)"},
      {"min(s0, 3, s1)", "min(s0, s1, 3)"},
      {"2*max(s0, 4)", "2*max(s0, 4)"},
      {"FloorDiv(s0, 4)", "s0//4"},
      {"Mod(s0 + 1, 4)", "(s0 + 1) % 4"},
      {"B*2 + T", "2*B + T"},
      {"  ( ( s0 ) )  ", "s0"},
      {"+s0 - -1", "s0 + 1"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"9223372036854775807", "9223372036854775807"},
  };
  for (const auto& [input, printed] : cases) {
    INFO(input);
    const SymExpr e = Parse(input);
    CHECK(e.ToString() == printed);
    CHECK(Parse(printed) == e);
  }
  // The printed form evaluates as Python would evaluate it.
  CHECK(*Parse("-s0//2").Evaluate({{"s0", 3}}) == -2);
  CHECK(*Parse("-(s0//2)").Evaluate({{"s0", 3}}) == -1);
}

TEST_CASE("sym: parse errors are one clear line", "[ops][sym]") {
  const std::pair<const char*, const char*> cases[] = {
      {"", "cannot parse '': expected a number, a name or '(' at the end"},
      {"s0 +", "cannot parse 's0 +': expected a number, a name or '(' at the end"},
      {"s0 / 2", "cannot parse 's0 / 2': '/' is true division; sizes use '//' at column 4"},
      {"s0 $ 1", "cannot parse 's0 $ 1': unexpected character '$' at column 4"},
      {"(s0 + 1", "cannot parse '(s0 + 1': expected ')' at the end"},
      {"s0 s1", "cannot parse 's0 s1': unexpected 's1' at column 4"},
      {"s0 // 0", "cannot parse 's0 // 0': division by zero: s0 // 0 at column 4"},
      {"(s0 + 1) % (2 - 2)", "cannot parse '(s0 + 1) % (2 - 2)': division by zero: (s0 + 1) % 0 at column 10"},
      {"foo(s0)", "cannot parse 'foo(s0)': unknown function 'foo' at column 1"},
      {"max(s0)", "cannot parse 'max(s0)': max() takes at least 2 arguments, got 1 at column 1"},
      {"Mod(s0, 2, 3)", "cannot parse 'Mod(s0, 2, 3)': Mod() takes 2 arguments, got 3 at column 1"},
      {"s0 ** s1", "cannot parse 's0 ** s1': the exponent must be a non-negative integer constant at column 4"},
      {"99999999999999999999", "cannot parse '99999999999999999999': integer literal out of int64 range at column 1"},
      {"9223372036854775808", "cannot parse '9223372036854775808': integer literal out of int64 range at column 1"},
      {"s0 < 1", "cannot parse 's0 < 1': unexpected '<' at column 4"},
      {"s0\n+ 1", "cannot parse 's0\\n+ 1': unexpected character '\\n' at column 3"},
      {"9223372036854775807 + 1", "cannot parse '9223372036854775807 + 1': "
                                  "symbolic expression: a coefficient overflows int64 at column 21"},
  };
  for (const auto& [input, message] : cases) {
    INFO(input);
    absl::StatusOr<SymExpr> e = ParseSymExpr(input);
    REQUIRE_FALSE(e.ok());
    CHECK(e.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(e.status().message() == message);
    CHECK(std::string(e.status().message()).find('\n') == std::string::npos);
  }
  CHECK(ErrorOf(ParseSymRelation("s0 + 1")) ==
        "cannot parse 's0 + 1': expected a comparison (==, !=, <, <=, >, >=) at the end");
  CHECK(ErrorOf(ParseSymRelation("s0 = 1")) ==
        "cannot parse 's0 = 1': expected a comparison (==, !=, <, <=, >, >=), found '=' at column 4");
  CHECK(ErrorOf(ParseSymRelation("s0 < 1 < 2")) == "cannot parse 's0 < 1 < 2': unexpected '<' at column 8");
}

// ---------------------------------------------------------------------------
// Evaluation.

TEST_CASE("sym: evaluation follows Python's int semantics", "[ops][sym]") {
  const SymBindings b = {{"s0", 0}, {"s1", 3}, {"s2", -7}};
  CHECK(*Parse("(s0 - 10)//3").Evaluate(b) == -4);
  CHECK(*Parse("(s0 - 10) % 3").Evaluate(b) == 2);
  CHECK(*Parse("s2 // s1").Evaluate(b) == -3);
  CHECK(*Parse("s2 % s1").Evaluate(b) == 2);
  CHECK(*Parse("s1 % -2").Evaluate(b) == -1);
  CHECK(*Parse("s1 // -2").Evaluate(b) == -2);
  CHECK(*Parse("max(s0, s1, s2) * min(s0, s1, s2)").Evaluate(b) == -21);
  CHECK(*Parse("s1**3 + s2**2").Evaluate(b) == 76);

  CHECK(ErrorOf(Parse("s0 + s9").Evaluate(b)) == "unbound symbol 's9'");
  absl::StatusOr<int64_t> zero = Parse("s1 // s0").Evaluate(b);
  CHECK(zero.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ErrorOf(zero) == "division by zero: 3 // 0");
  absl::StatusOr<int64_t> big = Parse("s0 * s0").Evaluate({{"s0", int64_t{1} << 32}});
  CHECK(big.status().code() == absl::StatusCode::kOutOfRange);
  CHECK(*Parse("s0 // -1").Evaluate({{"s0", kNegInf + 1}}) == kInf);
  CHECK_FALSE(Parse("s0 // s1").Evaluate({{"s0", kNegInf}, {"s1", -1}}).ok());
}

// ---------------------------------------------------------------------------
// Simplification rules, one by one.

TEST_CASE("sym: constants fold with Python semantics", "[ops][sym]") {
  CHECK(Text(FloorDiv(SymExpr(7), 2)) == "3");
  CHECK(Text(FloorDiv(SymExpr(-7), 2)) == "-4");
  CHECK(Text(FloorDiv(SymExpr(7), -2)) == "-4");
  CHECK(Text(Mod(SymExpr(-7), 2)) == "1");
  CHECK(Text(Mod(SymExpr(7), -2)) == "-1");
  CHECK(Max(SymExpr(3), 5).ToString() == "5");
  CHECK(Min(SymExpr(3), 5).ToString() == "3");
  CHECK((SymExpr(6) * 7 - 2).ToString() == "40");
  CHECK(FloorDiv(SymExpr(kNegInf), -1).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(Apply(SymOp::kMul, S("s0") * kInf, 2).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(Apply(SymOp::kAdd, S("s0"), kNegInf).status().code() == absl::StatusCode::kOutOfRange);
}

TEST_CASE("sym: division by a constant zero is an error at construction", "[ops][sym]") {
  absl::StatusOr<SymExpr> d = FloorDiv(S("s0") + 1, 0);
  CHECK(d.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ErrorOf(d) == "division by zero: (s0 + 1) // 0");
  CHECK(ErrorOf(Mod(S("s0"), S("s1") - S("s1"))) == "division by zero: s0 % 0");
  CHECK(ErrorOf(FloorDiv(SymExpr(4), 0)) == "division by zero: 4 // 0");
}

TEST_CASE("sym: floor division rules", "[ops][sym]") {
  const SymExpr s0 = S("s0"), s1 = S("s1");
  CHECK(Ok(FloorDiv(s0 * s1 + 3, 1)) == s0 * s1 + 3);                       // a // 1 = a
  CHECK(Text(FloorDiv(s0, -1)) == "-s0");                                    // a // -1 = -a
  CHECK(Text(FloorDiv(4 * s0 + 8 * s1 + 12, 4)) == "s0 + 2*s1 + 3");         // every term divisible
  CHECK(Text(FloorDiv(4 * s0 + 3, 4)) == "s0");                              // (k*a + c)//k = a + c//k
  CHECK(Text(FloorDiv(4 * s0 - 1, 4)) == "s0 - 1");
  CHECK(Text(FloorDiv(4 * s0 + 9, 4)) == "s0 + 2");
  CHECK(Text(FloorDiv(2 * s0 + s1, 2)) == "s0 + s1//2");                     // divisible terms leave
  CHECK(Text(FloorDiv(2 * s0 + 2, 4)) == "(s0 + 1)//2");                     // common factor cancels
  CHECK(Text(FloorDiv(Ok(FloorDiv(s0, 2)), 3)) == "s0//6");                  // (a//b)//c = a//(b*c)
  CHECK(Text(FloorDiv(Ok(FloorDiv(s0 + 1, 2)) + 2 * s1, 2)) == "s1 + (s0 + 1)//4");
  CHECK(Text(FloorDiv(s0, -2)) == "(-s0)//2");                               // a // -k = (-a) // k
  CHECK(Text(FloorDiv(SymExpr(0), s0)) == "0");
  CHECK(Text(FloorDiv(s0 + 1, s0 + 1)) == "1");
  CHECK(Text(FloorDiv(s0, s1)) == "s0//s1");
  // Not valid for negative divisors nor reorderable: left alone.
  CHECK(Text(FloorDiv(Ok(FloorDiv(s0, s1)), 2)) == "(s0//s1)//2");
  CHECK(Text(FloorDiv(Ok(FloorDiv(s0, -2)), 3)) == "(-s0)//6");
}

TEST_CASE("sym: modulo rules", "[ops][sym]") {
  const SymExpr s0 = S("s0"), s1 = S("s1");
  CHECK(Text(Mod(s0 * s1, 1)) == "0");                                 // a % 1 = 0
  CHECK(Text(Mod(8 * s0, 8)) == "0");                                  // (k*a) % k = 0
  CHECK(Text(Mod(8 * s0 + 3, 8)) == "3");                              // (k*a + c) % k = c % k
  CHECK(Text(Mod(8 * s0 - 3, 8)) == "5");
  CHECK(Text(Mod(8 * s0 + s1, 8)) == "s1 % 8");
  CHECK(Text(Mod(s0 - 1, 8)) == "(s0 + 7) % 8");                       // coefficients reduce into [0, k)
  CHECK(Text(Mod(9 * s0, 8)) == "s0 % 8");
  CHECK(Text(Mod(2 * s0, 4)) == "2*(s0 % 2)");                         // (g*x) % (g*m) = g*(x % m)
  CHECK(Text(Mod(Ok(Mod(s0, 8)), 4)) == "s0 % 4");                     // (x % 8) % 4 = x % 4
  CHECK(Text(Mod(Ok(Mod(s0, 4)), 8)) == "s0 % 4");                     // (x % 4) % 8 = x % 4
  CHECK(Text(Mod(Ok(Mod(s0, 6)), 4)) == "(s0 % 6) % 4");               // 4 does not divide 6
  CHECK(Text(Mod(SymExpr(0), s0)) == "0");
  CHECK(Text(Mod(s0 + s1, s1 + s0)) == "0");
  CHECK(Text(Mod(s0, s1)) == "s0 % s1");
  const SymExpr negative = Ok(Mod(s0, -3));  // the divisor's sign
  const std::pair<int64_t, int64_t> python[] = {{-7, -1}, {-3, 0}, {-1, -1}, {0, 0}, {1, -2}, {4, -2}, {5, -1}};
  for (const auto& [v, remainder] : python) CHECK(*negative.Evaluate({{"s0", v}}) == remainder);
}

TEST_CASE("sym: max and min rules", "[ops][sym]") {
  const SymExpr s0 = S("s0"), s1 = S("s1"), s2 = S("s2");
  CHECK(Max(s0, s0) == s0);
  CHECK(Min(s0 + 1, s0 + 1) == s0 + 1);
  CHECK(Max(s0, s0 + 1).ToString() == "s0 + 1");  // a constant apart: decided
  CHECK(Min(s0, s0 - 1).ToString() == "s0 - 1");
  CHECK(Max(Max(s0, 3), 5).ToString() == "max(s0, 5)");
  CHECK(Min(Min(s2, s0), Min(s1, s0)).ToString() == "min(s0, s1, s2)");
  CHECK(Max(Min(s0, s1), s2).ToString() == "max(s2, min(s0, s1))");  // different kinds do not flatten
  CHECK(Max(s0, 3).ToString() == "max(s0, 3)");  // no ranges here: undecided
  CHECK(Max(s0, s1) == Max(s1, s0));
}

TEST_CASE("sym: unsafe simplifications are not applied", "[ops][sym]") {
  const SymExpr s0 = S("s0"), s1 = S("s1");
  const SymExpr rounded = Ok(FloorDiv(s0 + 1, 2)) * 2;
  CHECK(rounded.ToString() == "2*((s0 + 1)//2)");
  CHECK_FALSE(rounded == s0 + 1);
  CHECK((Ok(FloorDiv(s0, 2)) * 2).ToString() == "2*(s0//2)");
  CHECK_FALSE(Ok(FloorDiv(s0, 2)) * 2 == s0);
  CHECK((Ok(Mod(s0, 2)) + Ok(Mod(s0, 2))).ToString() == "2*(s0 % 2)");
  CHECK(Text(FloorDiv(s0 * s1, s1)) == "(s0*s1)//s1");       // s1 may be 0 or negative
  CHECK(Text(FloorDiv(Ok(Mod(s0, 8)), 8)) == "(s0 % 8)//8");  // 0 only under a range
  CHECK(Text(FloorDiv(3 * s0, 2)) == "(3*s0)//2");
  CHECK(Text(Mod(s0 * s0, s0)) == "(s0**2) % s0");
}

TEST_CASE("sym: expansion is bounded", "[ops][sym]") {
  CHECK(Parse("(s0 + 1)**3").ToString() == "s0**3 + 3*s0**2 + 3*s0 + 1");
  CHECK(Parse("s0**1000000").ToString() == "s0**1000000");
  absl::StatusOr<SymExpr> huge = ParseSymExpr("(s0 + s1 + s2 + s3 + 1)**40");
  REQUIRE_FALSE(huge.ok());
  CHECK(std::string(huge.status().message()).find("expands past 4096 terms") != std::string::npos);
}

TEST_CASE("sym: substitution re-simplifies", "[ops][sym]") {
  const SymExpr e = Parse("(s0 + s1)//2 + max(s1, 4)");
  CHECK(Text(e.Substitute({{"s1", S("s0")}})) == "s0 + max(s0, 4)");
  CHECK(Text(e.Substitute({{"s1", 2 * S("s2")}})) == "s2 + s0//2 + max(2*s2, 4)");
  CHECK(Text(e.Substitute({{"s0", 3}, {"s1", 5}})) == "9");
  CHECK(ErrorOf(Parse("s0 // s1").Substitute({{"s1", 0}})) == "division by zero: s0 // 0");
  CHECK(Text(e.Substitute({})) == e.ToString());
}

// ---------------------------------------------------------------------------
// The randomized proof: random construction trees, evaluated directly with
// Python's semantics, against the canonical expression built from them.

struct Tree {
  enum class Kind { kConstant, kSymbol, kOp } kind = Kind::kConstant;
  int64_t value = 0;
  std::string name;
  SymOp op = SymOp::kAdd;
  std::shared_ptr<Tree> a, b;
};
using TreePtr = std::shared_ptr<Tree>;

TreePtr NewTree(Tree::Kind kind) {
  auto t = std::make_shared<Tree>();
  t->kind = kind;
  return t;
}

// A reference evaluator written without the library: nullopt where Python
// would raise (division by zero) or the value leaves int64.
std::optional<int64_t> Reference(const Tree& t, const SymBindings& values) {
  if (t.kind == Tree::Kind::kConstant) return t.value;
  if (t.kind == Tree::Kind::kSymbol) return values.at(t.name);
  std::optional<int64_t> x = Reference(*t.a, values);
  std::optional<int64_t> y = Reference(*t.b, values);
  if (!x || !y) return std::nullopt;
  int64_t r = 0;
  switch (t.op) {
    case SymOp::kAdd: if (__builtin_add_overflow(*x, *y, &r)) return std::nullopt; return r;
    case SymOp::kSub: if (__builtin_sub_overflow(*x, *y, &r)) return std::nullopt; return r;
    case SymOp::kMul: if (__builtin_mul_overflow(*x, *y, &r)) return std::nullopt; return r;
    case SymOp::kMax: return std::max(*x, *y);
    case SymOp::kMin: return std::min(*x, *y);
    case SymOp::kFloorDiv:
    case SymOp::kMod: {
      if (*y == 0 || (*x == kNegInf && *y == -1)) return std::nullopt;
      int64_t q = *x / *y;
      int64_t m = *x % *y;
      if (m != 0 && ((m < 0) != (*y < 0))) {
        q -= 1;
        m += *y;
      }
      return t.op == SymOp::kFloorDiv ? q : m;
    }
  }
  return std::nullopt;
}

class TreeMaker {
 public:
  explicit TreeMaker(uint32_t seed) : rng_(seed) {}

  TreePtr Make(int depth) {
    if (depth == 0 || Roll(5) == 0) return Leaf();
    static constexpr SymOp kOps[] = {SymOp::kAdd, SymOp::kAdd, SymOp::kSub, SymOp::kSub, SymOp::kMul,
                                     SymOp::kFloorDiv, SymOp::kFloorDiv, SymOp::kMod, SymOp::kMod,
                                     SymOp::kMax, SymOp::kMin};
    TreePtr t = NewTree(Tree::Kind::kOp);
    t->op = kOps[Roll(std::size(kOps))];
    t->a = Make(depth - 1);
    const bool division = t->op == SymOp::kFloorDiv || t->op == SymOp::kMod;
    // Mostly constant divisors (where the rules live), never a constant 0.
    t->b = division && Roll(3) != 0 ? NonZeroConstant() : Make(depth - 1);
    return t;
  }

  SymBindings Values(int64_t lo, int64_t hi) {
    SymBindings values;
    for (const char* name : {"s0", "s1", "s2"}) values[name] = lo + static_cast<int64_t>(Roll(hi - lo + 1));
    return values;
  }

  uint64_t Roll(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

 private:
  TreePtr Leaf() {
    TreePtr t = NewTree(Tree::Kind::kSymbol);
    if (Roll(5) < 3) {
      t->name = std::string("s") + static_cast<char>('0' + Roll(3));
    } else {
      t->kind = Tree::Kind::kConstant;
      t->value = static_cast<int64_t>(Roll(13)) - 6;
    }
    return t;
  }
  TreePtr NonZeroConstant() {
    TreePtr t = NewTree(Tree::Kind::kConstant);
    const int64_t magnitude = 1 + static_cast<int64_t>(Roll(8));
    t->value = Roll(4) == 0 ? -magnitude : magnitude;
    return t;
  }

  std::mt19937 rng_;
};

// Builds through the library; `mirror` swaps the operands of commutative
// operations, which must not change the canonical result.
absl::StatusOr<SymExpr> Build(const Tree& t, bool mirror) {
  if (t.kind == Tree::Kind::kConstant) return SymExpr(t.value);
  if (t.kind == Tree::Kind::kSymbol) return SymExpr::Symbol(t.name);
  absl::StatusOr<SymExpr> x = Build(*t.a, mirror);
  absl::StatusOr<SymExpr> y = Build(*t.b, mirror);
  if (!x.ok()) return x;
  if (!y.ok()) return y;
  const bool commutative = t.op == SymOp::kAdd || t.op == SymOp::kMul || t.op == SymOp::kMax || t.op == SymOp::kMin;
  return mirror && commutative ? Apply(t.op, *y, *x) : Apply(t.op, *x, *y);
}

std::string Describe(const Tree& t) {
  if (t.kind == Tree::Kind::kConstant) return "(" + std::to_string(t.value) + ")";
  if (t.kind == Tree::Kind::kSymbol) return t.name;
  return "(" + Describe(*t.a) + " " + std::string(SymOpName(t.op)) + " " + Describe(*t.b) + ")";
}

TEST_CASE("sym: the simplifier agrees with direct evaluation on random trees", "[ops][sym]") {
  TreeMaker maker(20240611);
  int trees = 0, compared = 0, substituted = 0, overflowed = 0, skipped_trees = 0;
  for (int i = 0; i < 10000; ++i) {
    const TreePtr tree = maker.Make(4);
    const absl::StatusOr<SymExpr> built = Build(*tree, /*mirror=*/false);
    if (!built.ok()) {
      // Only a constant divisor that folded to 0, or int64 overflow of a
      // coefficient, may refuse a tree.
      INFO(Describe(*tree) << ": " << built.status());
      CHECK((built.status().code() == absl::StatusCode::kInvalidArgument ||
             built.status().code() == absl::StatusCode::kOutOfRange));
      // A divisor that is 0 whatever the symbols: Python raises too.
      if (built.status().code() == absl::StatusCode::kInvalidArgument) {
        CHECK_FALSE(Reference(*tree, maker.Values(-50, 50)).has_value());
      }
      ++skipped_trees;
      continue;
    }
    ++trees;
    const SymExpr& e = *built;
    INFO(Describe(*tree) << "  =>  " << e.ToString());

    // One canonical structure whatever the operand order, and its text
    // parses back to it.
    const absl::StatusOr<SymExpr> mirrored = Build(*tree, /*mirror=*/true);
    if (!mirrored.ok() || !(*mirrored == e)) {
      FAIL_CHECK("mirrored: " << (mirrored.ok() ? mirrored->ToString() : mirrored.status().ToString()));
    }
    const absl::StatusOr<SymExpr> parsed = ParseSymExpr(e.ToString());
    if (!parsed.ok() || !(*parsed == e) || parsed->hash() != e.hash()) {
      FAIL_CHECK("round trip: " << parsed.status() << " " << (parsed.ok() ? parsed->ToString() : ""));
    }

    for (int j = 0; j < 12; ++j) {
      const SymBindings values = j < 6 ? maker.Values(0, 50) : maker.Values(-50, 50);
      const std::optional<int64_t> expected = Reference(*tree, values);
      if (!expected) continue;  // Python would raise: nothing to agree with
      const absl::StatusOr<int64_t> got = e.Evaluate(values);
      if (!got.ok()) {
        // The expanded form may overflow int64 where the factored one does
        // not; it must say so, never answer wrong.
        if (got.status().code() != absl::StatusCode::kOutOfRange) FAIL_CHECK(got.status());
        ++overflowed;
        continue;
      }
      if (*got != *expected) {
        FAIL_CHECK("s0=" << values.at("s0") << " s1=" << values.at("s1") << " s2=" << values.at("s2")
                         << ": got " << *got << ", expected " << *expected);
        break;
      }
      ++compared;
    }

    // Substituting s2 by another random tree agrees with binding s2 to
    // that tree's value.
    const TreePtr other = maker.Make(2);
    const absl::StatusOr<SymExpr> other_built = Build(*other, false);
    if (!other_built.ok()) continue;
    const absl::StatusOr<SymExpr> replaced = e.Substitute({{"s2", *other_built}});
    const SymBindings values = maker.Values(-20, 20);
    const std::optional<int64_t> s2 = Reference(*other, values);
    if (!s2) continue;
    SymBindings rebound = values;
    rebound["s2"] = *s2;
    const std::optional<int64_t> expected = Reference(*tree, rebound);
    if (!expected || !replaced.ok()) continue;  // a divisor became 0 or overflow
    const absl::StatusOr<int64_t> got = replaced->Evaluate(values);
    if (got.ok()) {
      if (*got != *expected) FAIL_CHECK("substitute s2 := " << other_built->ToString() << ": got " << *got);
      ++substituted;
    }
  }
  INFO("trees " << trees << ", skipped " << skipped_trees << ", compared " << compared << ", overflowed "
                << overflowed << ", substituted " << substituted);
  CHECK(trees > 9500);
  CHECK(compared > 100000);
  CHECK(overflowed < compared / 100);
  CHECK(substituted > 5000);
}

// The same trees under an env's ranges: what Simplify and RangeOf claim
// must hold for every value inside the ranges, and a relation StaticallyKnown
// answers must have that answer at every such value.
TEST_CASE("sym: range-based simplification agrees with direct evaluation", "[ops][sym]") {
  ShapeEnv env;
  env.NewSymbol(9, Range{2, 50});
  env.NewSymbol(3, Range{2, 9});
  env.NewSymbol(7, Range{5, 40});
  TreeMaker maker(777);
  int compared = 0, known = 0, simplified = 0;
  for (int i = 0; i < 3000; ++i) {
    const TreePtr tree = maker.Make(3);
    const absl::StatusOr<SymExpr> built = Build(*tree, false);
    if (!built.ok()) continue;
    const absl::StatusOr<SymExpr> simple = env.Simplify(*built);
    if (!simple.ok()) {
      // Only a divisor the ranges pin to 0 may fail here.
      CHECK(simple.status().code() == absl::StatusCode::kInvalidArgument);
      continue;
    }
    if (!(*simple == *built)) ++simplified;
    INFO(Describe(*tree) << "  =>  " << built->ToString() << "  =>  " << simple->ToString());
    const Range range = env.RangeOf(*built);
    const int64_t c = static_cast<int64_t>(maker.Roll(21)) - 10;
    const RelKind kinds[] = {RelKind::kEq, RelKind::kNe, RelKind::kLt, RelKind::kLe, RelKind::kGt, RelKind::kGe};
    const SymRelation relation = SymRelation::Make(kinds[maker.Roll(6)], *built, c);
    const std::optional<bool> answer = env.StaticallyKnown(relation);
    if (answer) ++known;
    for (int j = 0; j < 10; ++j) {
      SymBindings values;
      for (const SymbolInfo& symbol : env.symbols()) {
        values[symbol.name] = symbol.range.lo + static_cast<int64_t>(maker.Roll(symbol.range.hi - symbol.range.lo + 1));
      }
      const std::optional<int64_t> expected = Reference(*tree, values);
      if (!expected) continue;
      const absl::StatusOr<int64_t> got = simple->Evaluate(values);
      if (!got.ok() || *got != *expected) {
        FAIL_CHECK("values " << values.at("s0") << ", " << values.at("s1") << ", " << values.at("s2") << ": got "
                             << (got.ok() ? std::to_string(*got) : got.status().ToString()) << ", expected "
                             << *expected);
        break;
      }
      if (!range.contains(*expected)) FAIL_CHECK(*expected << " outside " << range);
      if (answer && *relation.Evaluate(values) != *answer) FAIL_CHECK(relation << " is not always " << *answer);
      ++compared;
    }
  }
  INFO("compared " << compared << ", simplified " << simplified << ", known " << known);
  CHECK(compared > 20000);
  CHECK(simplified > 100);
  CHECK(known > 300);
}

// ---------------------------------------------------------------------------
// SymInt.

TEST_CASE("sym: SymInt keeps hint and expression in step", "[ops][sym]") {
  ShapeEnv env;
  const SymInt n = env.NewSymbol(8);
  CHECK_FALSE(n.is_static());
  CHECK(n.hint() == 8);
  CHECK(n.ToString() == "s0");

  const SymInt m = n * 2 + 1;
  CHECK(m.hint() == 17);
  CHECK(m.expr().ToString() == "2*s0 + 1");
  CHECK(*m.expr().Evaluate({{"s0", 8}}) == m.hint());

  const SymInt half = *FloorDiv(m, 2);
  CHECK(half.hint() == 8);
  CHECK(half.ToString() == "s0");
  const SymInt odd = *Mod(m, 2);  // (2*s0 + 1) % 2 folds: static
  CHECK(odd.is_static());
  CHECK(odd.hint() == 1);
  CHECK((n - n).is_static());
  CHECK(Max(n, 3).ToString() == "max(s0, 3)");
  CHECK(Max(n, 3).hint() == 8);
  CHECK(Min(n, 3).hint() == 3);

  const SymInt four = SymInt::Static(4);
  CHECK(four.is_static());
  CHECK(four.expr() == SymExpr(4));
  CHECK((four * 3).is_static());
  CHECK((four * 3).hint() == 12);
  CHECK(SymInt::Symbolic(5, SymExpr(5)).is_static());

  CHECK(FloorDiv(n, 0).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Apply(SymOp::kMul, SymInt(kInf), 2).status().code() == absl::StatusCode::kOutOfRange);
  CHECK(Apply(SymOp::kMul, n, kInf).status().code() == absl::StatusCode::kOutOfRange);  // the hint overflows
}

// ---------------------------------------------------------------------------
// Relations.

TEST_CASE("sym: relations have a canonical form", "[ops][sym]") {
  const SymExpr s0 = S("s0"), s1 = S("s1");
  CHECK(SymRelation::Make(RelKind::kGt, s0, 5).ToString() == "5 < s0");
  CHECK(SymRelation::Make(RelKind::kGt, s0, 5) == SymRelation::Make(RelKind::kLt, 5, s0));
  CHECK(SymRelation::Make(RelKind::kGt, s0 + 3, 8) == SymRelation::Make(RelKind::kLt, 5, s0));
  CHECK(SymRelation::Make(RelKind::kEq, s1, s0) == SymRelation::Make(RelKind::kEq, s0, s1));
  CHECK(SymRelation::Make(RelKind::kEq, s1, s0).ToString() == "s0 == s1");
  CHECK(SymRelation::Make(RelKind::kLe, 2 * s0, s1 + 3).ToString() == "2*s0 <= s1 + 3");
  CHECK(SymRelation::Make(RelKind::kGe, s0, 2).ToString() == "2 <= s0");
  CHECK(SymRelation::Make(RelKind::kEq, 2 * s0, 8).ToString() == "s0 == 4");
  CHECK(SymRelation::Make(RelKind::kLt, 4 * s0 + 2, 6 * s1).ToString() == "2*s0 + 1 < 3*s1");
  CHECK(SymRelation::Make(RelKind::kNe, 8 - s0, 0).ToString() == "s0 != 8");
  CHECK(SymRelation::Make(RelKind::kEq, *Mod(s0, 8), 0).ToString() == "s0 % 8 == 0");

  CHECK(SymRelation::Make(RelKind::kLt, s0, s1).Negated().ToString() == "s1 <= s0");
  CHECK(SymRelation::Make(RelKind::kLe, s0, s1).Negated().ToString() == "s1 < s0");
  CHECK(SymRelation::Make(RelKind::kEq, s0, s1).Negated().ToString() == "s0 != s1");
  CHECK(SymRelation::Make(RelKind::kNe, s0, s1).Negated().Negated() == SymRelation::Make(RelKind::kNe, s1, s0));

  for (const char* text : {"s0 == s1", "2*s0 <= s1 + 3", "5 < s0", "s0 % 8 == 0", "s0*s1 != 12",
                           "max(s0, 4) <= s1//2"}) {
    INFO(text);
    absl::StatusOr<SymRelation> r = ParseSymRelation(text);
    DYNAMO_REQUIRE_OK(r);
    CHECK(r->ToString() == text);
  }
  CHECK(*ParseSymRelation("s0 >= 2") == SymRelation::Make(RelKind::kGe, s0, 2));
  CHECK(*ParseSymRelation("s1 + 1 > s0 * 2") == SymRelation::Make(RelKind::kLt, 2 * s0, s1 + 1));
  CHECK(*SymRelation::Make(RelKind::kLe, 2 * s0, s1 + 3).Evaluate({{"s0", 4}, {"s1", 5}}));
  CHECK_FALSE(*SymRelation::Make(RelKind::kLe, 2 * s0, s1 + 3).Evaluate({{"s0", 5}, {"s1", 5}}));
}

// ---------------------------------------------------------------------------
// ShapeEnv.

TEST_CASE("sym: the env names symbols and keeps their hints", "[ops][sym]") {
  ShapeEnv env;
  CHECK(env.NewSymbol(8).ToString() == "s0");
  CHECK(env.NewSymbol(3, Range{2, 100}).ToString() == "s1");
  CHECK(env.hint("s0") == 8);
  CHECK(env.range("s0") == Range{2, kInf});
  CHECK(env.range("s1") == Range{2, 100});
  CHECK_FALSE(env.hint("s7").has_value());

  absl::StatusOr<SymInt> b = env.NewNamedSymbol("B", 4);
  DYNAMO_REQUIRE_OK(b);
  CHECK(b->ToString() == "B");
  CHECK(env.NewNamedSymbol("B", 4).status().code() == absl::StatusCode::kAlreadyExists);
  CHECK(env.NewNamedSymbol("1x", 4).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(env.NewNamedSymbol("max", 4).status().code() == absl::StatusCode::kInvalidArgument);
  DYNAMO_REQUIRE_OK(env.NewNamedSymbol("s2", 5));
  CHECK(env.NewSymbol(6).ToString() == "s3");  // s2 is taken

  // A hint the range contradicts widens the range.
  CHECK(env.NewSymbol(1).ToString() == "s4");
  CHECK(env.range("s4") == Range{1, kInf});

  const std::vector<SymbolInfo> symbols = env.symbols();
  REQUIRE(symbols.size() == 6);
  CHECK(symbols[2].name == "B");
  CHECK(symbols[2].hint == 4);
  CHECK(Range{2, kInf}.ToString() == "[2, inf]");
  CHECK(Range{}.ToString() == "[-inf, inf]");
}

TEST_CASE("sym: ranges by interval arithmetic", "[ops][sym]") {
  ShapeEnv env;
  const SymExpr s0 = env.NewSymbol(8).expr();
  const SymExpr s1 = env.NewSymbol(4, Range{3, 10}).expr();
  CHECK(env.RangeOf(s0 - 3) == Range{-1, kInf});
  CHECK(env.RangeOf(-s0) == Range{kNegInf, -2});
  CHECK(env.RangeOf(s0 * s1) == Range{6, kInf});
  CHECK(env.RangeOf(s1 * s1 - 2 * s1) == Range{-11, 94});  // conservative: terms are independent
  CHECK(env.RangeOf(*Mod(s0, 8)) == Range{0, 7});
  CHECK(env.RangeOf(*Mod(s1, 16)) == Range{3, 10});
  CHECK(env.RangeOf(*FloorDiv(s0, 2)) == Range{1, kInf});
  CHECK(env.RangeOf(*FloorDiv(s1 + 5, 4)) == Range{2, 3});
  CHECK(env.RangeOf(*FloorDiv(s1, s0)) == Range{0, 5});
  CHECK(env.RangeOf(*Mod(s0, s1)) == Range{0, 9});
  CHECK(env.RangeOf(Max(s0, 10)) == Range{10, kInf});
  CHECK(env.RangeOf(Min(s0, s1)) == Range{2, 10});
  CHECK(env.RangeOf(S("unknown")) == Range{0, kInf});
  CHECK(env.RangeOf(s0 * kInf) == Range{kInf, kInf});  // rounds outward: at least that
  CHECK(env.RangeOf(s1 * 4611686018427387904) == Range{kInf, kInf});
  CHECK(env.RangeOf(-s1 * 4611686018427387904) == Range{kNegInf, kNegInf});
}

TEST_CASE("sym: statically known relations need no guard", "[ops][sym]") {
  ShapeEnv env;
  const SymExpr s0 = env.NewSymbol(8).expr();
  const SymExpr s1 = env.NewSymbol(5).expr();
  auto known = [&](const char* text) {
    absl::StatusOr<SymRelation> r = ParseSymRelation(text);
    REQUIRE(r.ok());
    return env.StaticallyKnown(*r);
  };
  CHECK(known("s0 >= 2") == true);
  CHECK(known("s0 == s0") == true);
  CHECK(known("s0 + 1 > s0") == true);
  CHECK(known("s0 < 2") == false);
  CHECK(known("s0 == 1") == false);
  CHECK(known("s0 != 0") == true);
  CHECK(known("s0 * s1 >= 4") == true);
  CHECK(known("s0 % 8 < 8") == true);
  CHECK(known("s0 % 8 >= 0") == true);
  CHECK(known("s0 // 2 >= 1") == true);
  CHECK(known("max(s0, 10) >= 10") == true);
  CHECK_FALSE(known("s0 > 5").has_value());
  CHECK_FALSE(known("s0 == s1").has_value());
  CHECK_FALSE(known("s0 % 8 == 0").has_value());
  CHECK(env.guards().empty());
}

TEST_CASE("sym: Decide guards on the hint's outcome", "[ops][sym]") {
  ShapeEnv env;
  const SymExpr s0 = env.NewSymbol(8).expr();

  // True: the relation itself is the guard, and the bound narrows s0.
  CHECK(*env.Decide(RelKind::kGt, s0, 5));
  REQUIRE(env.guards().size() == 1);
  CHECK(env.guards()[0].ToString() == "5 < s0");
  CHECK(env.range("s0") == Range{6, kInf});
  // Asked again, or in other words: known, no second guard.
  CHECK(*env.Decide(RelKind::kGt, s0, 5));
  CHECK(*env.Decide(RelKind::kGe, s0, 6));
  CHECK(*env.Decide(RelKind::kLt, 5, s0));
  CHECK(env.guards().size() == 1);

  // False: the negation is the guard.
  CHECK_FALSE(*env.Decide(RelKind::kLt, s0, 7));
  REQUIRE(env.guards().size() == 2);
  CHECK(env.guards()[1].ToString() == "7 <= s0");
  CHECK(env.range("s0") == Range{7, kInf});
  CHECK_FALSE(*env.Decide(RelKind::kLe, s0, 6));
  CHECK(env.guards().size() == 2);

  // Upper bounds too.
  CHECK(*env.Decide(RelKind::kLe, 2 * s0, 20));
  CHECK(env.guards()[2].ToString() == "s0 <= 10");
  CHECK(env.range("s0") == Range{7, 10});

  // Relations that teach no range are deduplicated.
  CHECK(*env.Decide(RelKind::kEq, *Mod(s0, 8), 0));
  CHECK(*env.Decide(RelKind::kEq, 0, *Mod(s0, 8)));
  CHECK(*env.Decide(RelKind::kEq, *Mod(s0 + 16, 8), 0));
  CHECK(env.guards().size() == 4);
  CHECK(env.guards()[3].ToString() == "s0 % 8 == 0");
}

TEST_CASE("sym: an equality replaces a symbol from then on", "[ops][sym]") {
  ShapeEnv env;
  const SymExpr s0 = env.NewSymbol(8).expr();
  const SymExpr s1 = env.NewSymbol(8).expr();
  const SymExpr s2 = env.NewSymbol(16, Range{4, 64}).expr();
  CHECK(*env.Decide(RelKind::kEq, s1, s0));
  REQUIRE(env.guards().size() == 1);
  CHECK(env.guards()[0].ToString() == "s0 == s1");
  REQUIRE(env.replacements().contains("s1"));
  CHECK(env.replacements().at("s1") == s0);
  CHECK(Text(env.Simplify(s1 + s0)) == "2*s0");
  CHECK(env.StaticallyKnown(SymRelation::Make(RelKind::kEq, s0, s1)) == true);
  CHECK(*env.Decide(RelKind::kEq, s1 - s0, 0));
  CHECK(env.guards().size() == 1);

  // s2 == 2*s1 replaces s2 (the newer symbol), in terms of s0.
  CHECK(*env.Decide(RelKind::kEq, s2, 2 * s1));
  CHECK(env.guards()[1].ToString() == "2*s0 == s2");
  CHECK(env.replacements().at("s2") == 2 * s0);

  // Equal to a constant: a specialisation, and earlier replacements follow.
  CHECK(*env.Decide(RelKind::kEq, s0, 8));
  CHECK(env.guards()[2].ToString() == "s0 == 8");
  CHECK(env.range("s0") == Range{8, 8});
  CHECK(env.replacements().at("s1") == SymExpr(8));
  CHECK(env.replacements().at("s2") == SymExpr(16));
  CHECK(Text(env.Simplify(s0 * s1 + s2)) == "80");
  CHECK(*env.Decide(RelKind::kGt, s2, 10));
  CHECK(env.guards().size() == 3);
}

TEST_CASE("sym: a false equality and disequalities", "[ops][sym]") {
  ShapeEnv env;
  const SymExpr s0 = env.NewSymbol(3).expr();
  const SymExpr s1 = env.NewSymbol(9).expr();
  CHECK_FALSE(*env.Decide(RelKind::kNe, s0, 3));  // guard s0 == 3: specialised
  CHECK(env.guards()[0].ToString() == "s0 == 3");
  CHECK(env.replacements().at("s0") == SymExpr(3));
  CHECK(*env.Decide(RelKind::kNe, s1, 2));  // at the range's end: narrows
  CHECK(env.guards()[1].ToString() == "s1 != 2");
  CHECK(env.range("s1") == Range{3, kInf});
  CHECK(*env.Decide(RelKind::kNe, s1, 5));  // inside: only a guard
  CHECK(env.range("s1") == Range{3, kInf});
  CHECK(env.guards().size() == 3);
}

TEST_CASE("sym: the env simplifies with its ranges", "[ops][sym]") {
  ShapeEnv env;
  const SymExpr s0 = env.NewSymbol(8).expr();
  const SymExpr s1 = env.NewSymbol(5, Range{2, 7}).expr();
  CHECK(Text(env.Simplify(Max(s0, 2))) == "s0");
  CHECK(Text(env.Simplify(Min(s0, 1))) == "1");
  CHECK(Text(env.Simplify(Max(s0, 5))) == "max(s0, 5)");
  CHECK(Text(env.Simplify(*Mod(s1, 8))) == "s1");
  CHECK(Text(env.Simplify(*FloorDiv(s1, 8))) == "0");
  CHECK(Text(env.Simplify(*FloorDiv(s1 + 8, 8))) == "1");
  CHECK(Text(env.Simplify(*Mod(s1 + 8, 16))) == "s1 + 8");
  CHECK(Text(env.Simplify(*Mod(s1 + 10, 8))) == "(s1 + 2) % 8");  // spans two periods
  CHECK(Text(env.Simplify(*Mod(s1, s1 + s0))) == "s1");
  CHECK(Text(env.Simplify(*FloorDiv(s1, s1 + s0))) == "0");
  CHECK(Text(env.Simplify(Max(*Mod(s0, 4), 3) + Min(s0 + s1, s1))) == "s1 + 3");
}

TEST_CASE("sym: Specialize guards the hint", "[ops][sym]") {
  ShapeEnv env;
  const SymInt n = env.NewSymbol(8);
  const SymInt m = n * 2 + 1;
  const SymInt fixed = env.Specialize(m);
  CHECK(fixed.is_static());
  CHECK(fixed.hint() == 17);
  REQUIRE(env.guards().size() == 1);
  CHECK(env.guards()[0].ToString() == "s0 == 8");  // 2*s0 + 1 == 17, divided out
  CHECK(env.replacements().at("s0") == SymExpr(8));
  CHECK(env.Specialize(n).hint() == 8);  // known now: no second guard
  CHECK(env.Specialize(SymInt(4)).hint() == 4);
  CHECK(env.guards().size() == 1);
}

TEST_CASE("sym: CheckGuards explains the first failure", "[ops][sym]") {
  ShapeEnv env;
  const SymExpr s0 = env.NewSymbol(16).expr();
  const SymExpr s1 = env.NewSymbol(16).expr();
  REQUIRE(*env.Decide(RelKind::kEq, *Mod(s0, 8), 0));
  REQUIRE(*env.Decide(RelKind::kEq, s0, s1));
  REQUIRE(env.guards().size() == 2);

  absl::StatusOr<GuardCheck> ok = env.CheckGuards({{"s0", 24}, {"s1", 24}});
  DYNAMO_REQUIRE_OK(ok);
  CHECK(ok->passed);
  CHECK(ok->message.empty());

  absl::StatusOr<GuardCheck> mod = env.CheckGuards({{"s0", 12}, {"s1", 12}});
  DYNAMO_REQUIRE_OK(mod);
  CHECK_FALSE(mod->passed);
  CHECK(mod->failed_guard == 0);
  CHECK(mod->message == "s0 % 8 == 0 failed: s0 = 12");

  absl::StatusOr<GuardCheck> eq = env.CheckGuards({{"s0", 8}, {"s1", 16}});
  DYNAMO_REQUIRE_OK(eq);
  CHECK(eq->failed_guard == 1);
  CHECK(eq->message == "s0 == s1 failed: s0 = 8, s1 = 16");

  absl::StatusOr<GuardCheck> small = env.CheckGuards({{"s0", 1}, {"s1", 1}});
  DYNAMO_REQUIRE_OK(small);
  CHECK(small->failed_guard == -1);
  CHECK(small->message == "s0 >= 2 failed: s0 = 1");

  CHECK(ErrorOf(env.CheckGuards({{"s0", 8}})) == "no value for symbol 's1'");

  ShapeEnv bounded;
  bounded.NewSymbol(4, Range{2, 8});
  CHECK(bounded.CheckGuards({{"s0", 9}})->message == "s0 <= 8 failed: s0 = 9");
}

TEST_CASE("sym: Decide needs hints for every symbol", "[ops][sym]") {
  ShapeEnv env;
  env.NewSymbol(8);
  absl::StatusOr<bool> d = env.Decide(RelKind::kGt, S("B") + S("s0"), 20);
  CHECK(ErrorOf(d) == "unbound symbol 'B'");
  CHECK(env.guards().empty());
}

}  // namespace
}  // namespace dynamo::ops

namespace dynamo::ops {
namespace {

// DivideExact: the polynomial quotient view(-1) needs.
TEST_CASE("sym: exact polynomial division", "[ops][sym]") {
  auto q = [](const char* a, const char* b) -> std::string {
    absl::StatusOr<std::optional<SymExpr>> r = DivideExact(*ParseSymExpr(a), *ParseSymExpr(b));
    REQUIRE(r.ok());
    return *r ? (*r)->ToString() : "none";
  };
  CHECK(q("768*s0*s1", "s0*s1") == "768");
  CHECK(q("768*s0*s1", "768") == "s0*s1");
  CHECK(q("2*s0 + 2", "2") == "s0 + 1");
  CHECK(q("s0**2 - 1", "s0 + 1") == "s0 - 1");
  CHECK(q("s0*s1 + s0*s2", "s1 + s2") == "s0");
  CHECK(q("6*s0*(s1//2)", "3*(s1//2)") == "2*s0");
  CHECK(q("0", "s0") == "0");
  CHECK(q("s0 + 1", "2") == "none");
  CHECK(q("s0", "s1") == "none");
  CHECK(q("3*s0", "2*s0") == "none");
  CHECK(q("s0**2 + 1", "s0 + 1") == "none");
  CHECK(DivideExact(*ParseSymExpr("s0"), 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dynamo::ops
