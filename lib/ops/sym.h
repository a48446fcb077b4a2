// Symbolic integer sizes for dynamic shapes: expressions over size symbols
// (s0, s1, ... or any name, like B or T) kept in one canonical form, the
// SymInt a traced size is (example value plus expression), and the ShapeEnv
// that owns a trace's symbols and records the guards under which the trace
// stays valid. Pure C++: no Python, no torch.
//
//   ShapeEnv env;
//   SymInt n = env.NewSymbol(8);                  // s0: hint 8, range [2, inf]
//   SymInt m = n * 2 + 1;                         // hint 17, expr 2*s0 + 1
//   m.expr().ToString();                          // "2*s0 + 1"
//   SymExpr rem = *Mod(n.expr(), 8);              // s0 % 8
//   *env.Decide(RelKind::kEq, rem, 0);            // true; guard "s0 % 8 == 0"
//   env.CheckGuards({{"s0", 12}})->message;       // "s0 % 8 == 0 failed: s0 = 12"
//
// Printed form (what ToString writes and ParseSymExpr reads back, Python
// syntax and precedence, evaluating like Python ints):
//   - a sum of terms in canonical order, the constant last: "s0*s1 + 2*s0 + 1";
//     a negative coefficient is a " - " between terms and a leading "-" on
//     the first: "-s0 + 4", "s0 - 1"; powers are "s0**2".
//   - floor division "s0//2", modulo "s0 % 8", "max(s0, 4)", "min(s0, s1)";
//     an operand of // or % is parenthesised unless it is a symbol, a
//     non-negative integer or a max/min: "(s0 + 1)//2", "s0 % (s1 + 1)";
//     a // or % inside a product, a power or under a leading minus is
//     parenthesised: "2*(s0//2)", "(s0 % 8)*s1", "-(s0//2) + s1".
//   - a relation is "lhs OP rhs" with OP one of == != < <=: all terms of
//     lhs - rhs with a positive coefficient on the left, the others on the
//     right: "2*s0 <= s1 + 3", "s0 == s1", "5 < s0".
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dynamo::ops {

// Concrete values for symbols, by name.
using SymBindings = absl::flat_hash_map<std::string, int64_t>;

namespace sym_internal {
struct ExprNode;  // the canonical sum of monomials (sym.cc)
struct Access;    // sym.cc's view of a SymExpr's node
}  // namespace sym_internal

// An immutable integer expression in canonical form: a sum of monomials with
// int64 coefficients, a monomial being a product of atoms (symbols, and the
// floor divisions, modulos, maxima and minima that polynomials cannot
// express) raised to positive powers. Expressions equal by algebra are built
// into the same structure whatever the order of construction, so == and the
// hash compare meaning for everything polynomial. A handle: copying shares
// the nodes.
//
// Coefficients stay within +-(2^63 - 1) (only a lone constant may be
// -2^63): Apply reports an overflow as OutOfRange; the operators, meant for
// code whose constants are sizes, abort on it.
class SymExpr {
 public:
  SymExpr();                       // 0
  SymExpr(int64_t value);          // NOLINT: a constant converts implicitly
  static SymExpr Symbol(absl::string_view name);

  bool is_constant() const;
  std::optional<int64_t> constant() const;
  // The name, when the expression is exactly one symbol.
  std::optional<std::string> symbol_name() const;
  // Every symbol it mentions, in symbol order (s2 before s10), once each.
  std::vector<std::string> Symbols() const;

  std::string ToString() const;
  // Python's int semantics; an unbound symbol, a division by zero and an
  // int64 overflow are errors.
  absl::StatusOr<int64_t> Evaluate(const SymBindings& bindings) const;
  // Replaces symbols and re-simplifies (a divisor may become 0: an error).
  absl::StatusOr<SymExpr> Substitute(
      const absl::flat_hash_map<std::string, SymExpr>& replacements) const;

  size_t hash() const;
  friend bool operator==(const SymExpr& a, const SymExpr& b);
  // The canonical total order (negative, 0, positive), deterministic across
  // runs: sums compare term by term; symbols by name with numeric suffixes
  // compared as numbers.
  friend int Compare(const SymExpr& a, const SymExpr& b);
  template <typename H>
  friend H AbslHashValue(H h, const SymExpr& e) {
    return H::combine(std::move(h), e.hash());
  }

 private:
  friend struct sym_internal::Access;
  explicit SymExpr(std::shared_ptr<const sym_internal::ExprNode> node);
  std::shared_ptr<const sym_internal::ExprNode> node_;
};
std::ostream& operator<<(std::ostream& os, const SymExpr& e);

// Python's binary operators on ints, plus max and min.
enum class SymOp { kAdd, kSub, kMul, kFloorDiv, kMod, kMax, kMin };
absl::string_view SymOpName(SymOp op);  // "+", "//", "max", ...

// The checked constructor behind every operation: a division by a constant 0
// is InvalidArgument, a coefficient overflow OutOfRange, an expansion past
// kMaxSymTerms terms ResourceExhausted.
inline constexpr size_t kMaxSymTerms = 4096;
[[nodiscard]] absl::StatusOr<SymExpr> Apply(SymOp op, const SymExpr& a, const SymExpr& b);
SymExpr operator+(const SymExpr& a, const SymExpr& b);
SymExpr operator-(const SymExpr& a, const SymExpr& b);
SymExpr operator*(const SymExpr& a, const SymExpr& b);
SymExpr operator-(const SymExpr& a);
[[nodiscard]] absl::StatusOr<SymExpr> FloorDiv(const SymExpr& a, const SymExpr& b);  // a // b
[[nodiscard]] absl::StatusOr<SymExpr> Mod(const SymExpr& a, const SymExpr& b);       // a % b
// a / b when b divides a as polynomials with integer coefficients (floor
// divisions, modulos, maxima and minima counting as variables):
// (768*s0*s1) / (s0*s1) is 768, (2*s0 + 2) / 2 is s0 + 1, (s0**2 - 1) /
// (s0 + 1) is s0 - 1; nullopt when it does not ((s0 + 1) / 2, s0 / s1),
// though a // b may still be exact for the values at hand. b == 0 is
// InvalidArgument. What view(-1) needs: the inferred size as a polynomial.
[[nodiscard]] absl::StatusOr<std::optional<SymExpr>> DivideExact(const SymExpr& a,
                                                                 const SymExpr& b);
SymExpr Max(const SymExpr& a, const SymExpr& b);
SymExpr Min(const SymExpr& a, const SymExpr& b);

// Reads the printed form and natural variants: spaces, redundant
// parentheses, unary +/-, **, max/min (also Max/Min/FloorDiv/Mod calls), any
// identifier as a symbol name. An error is one line naming the column.
[[nodiscard]] absl::StatusOr<SymExpr> ParseSymExpr(absl::string_view text);

// A size while tracing: the example value the trace runs with (the hint)
// and, when the size is symbolic, its expression. Arithmetic keeps both in
// step; a result whose expression folds to a constant becomes static.
class SymInt {
 public:
  SymInt(int64_t value = 0);  // NOLINT: a static size converts implicitly
  static SymInt Static(int64_t value) { return SymInt(value); }
  // `expr` decides: a constant expression makes a static SymInt of it.
  static SymInt Symbolic(int64_t hint, SymExpr expr);

  int64_t hint() const { return hint_; }
  bool is_static() const { return !expr_.has_value(); }
  SymExpr expr() const { return expr_ ? *expr_ : SymExpr(hint_); }
  std::string ToString() const;  // the expression, or the value when static
  bool operator==(const SymInt&) const = default;

 private:
  int64_t hint_;
  std::optional<SymExpr> expr_;
};
std::ostream& operator<<(std::ostream& os, const SymInt& s);

// As for SymExpr; the hints follow Python's semantics, and an overflow or
// division by zero of the hints is an error too.
[[nodiscard]] absl::StatusOr<SymInt> Apply(SymOp op, const SymInt& a, const SymInt& b);
SymInt operator+(const SymInt& a, const SymInt& b);
SymInt operator-(const SymInt& a, const SymInt& b);
SymInt operator*(const SymInt& a, const SymInt& b);
[[nodiscard]] absl::StatusOr<SymInt> FloorDiv(const SymInt& a, const SymInt& b);
[[nodiscard]] absl::StatusOr<SymInt> Mod(const SymInt& a, const SymInt& b);
SymInt Max(const SymInt& a, const SymInt& b);
SymInt Min(const SymInt& a, const SymInt& b);

// A closed interval of integers; lo == kNegInf and hi == kInf are unbounded.
inline constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
struct Range {
  int64_t lo = kNegInf;
  int64_t hi = kInf;
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
  bool is_point() const { return lo == hi; }
  std::string ToString() const;  // "[2, inf]", "[-inf, 5]"
  bool operator==(const Range&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Range& r);

enum class RelKind { kEq, kNe, kLt, kLe, kGt, kGe };
absl::string_view RelKindOperator(RelKind kind);  // "==", "<=", ...

// lhs REL rhs. Make builds the canonical form (lhs - rhs REL 0 simplified,
// > and >= turned into < and <= by swapping sides, a common factor of all
// coefficients divided out, == and != oriented so their first term is
// positive, then split into positive terms REL negated negative terms), so
// that equal questions asked differently compare equal.
struct SymRelation {
  RelKind kind = RelKind::kEq;
  SymExpr lhs;
  SymExpr rhs;

  static SymRelation Make(RelKind kind, const SymExpr& lhs, const SymExpr& rhs);
  SymRelation Negated() const;  // canonical too: not(a < b) is b <= a
  std::string ToString() const;
  absl::StatusOr<bool> Evaluate(const SymBindings& bindings) const;

  bool operator==(const SymRelation&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const SymRelation& r) {
    return H::combine(std::move(h), r.kind, r.lhs, r.rhs);
  }
};
std::ostream& operator<<(std::ostream& os, const SymRelation& r);

// "expr OP expr" with OP one of == != < <= > >=; the result is canonical.
[[nodiscard]] absl::StatusOr<SymRelation> ParseSymRelation(absl::string_view text);

// What the env knows of one symbol.
struct SymbolInfo {
  std::string name;
  int64_t hint = 0;
  Range declared;  // as created: CheckGuards checks it
  Range range;     // declared, narrowed by the guards recorded since
};

// The outcome of CheckGuards: on failure, the first violated condition and
// the values that violate it.
struct GuardCheck {
  bool passed = true;
  int failed_guard = -1;  // index into guards(); -1 with a range failure
  std::string message;    // "s0 % 8 == 0 failed: s0 = 12"
};

// The symbols of one trace and the guards its decisions took. A question
// about sizes is answered from the symbols' ranges when they settle it (no
// guard), else from the hints, and then the answer is recorded as a guard
// and learnt: an equality with a symbol alone on one side replaces that
// symbol from then on, a bound on one symbol narrows its range, so asking
// again is free.
class ShapeEnv {
 public:
  // "s0", "s1", ... in order of creation (skipping names already taken).
  // torch specialises sizes 0 and 1, so callers ask only for larger sizes;
  // a hint outside `range` widens the range to include it.
  SymInt NewSymbol(int64_t hint, Range range = {2, kInf});
  // A symbol with a chosen name ("B"); the name must be an identifier not
  // yet in use.
  absl::StatusOr<SymInt> NewNamedSymbol(absl::string_view name, int64_t hint,
                                        Range range = {2, kInf});

  // Interval arithmetic over the symbols' current ranges (a symbol the env
  // did not create counts as a size, [0, inf]). Conservative: the expression
  // is inside, not necessarily tight.
  Range RangeOf(const SymExpr& e) const;
  // Applies the replacements learnt, then what the ranges decide
  // (max(s0, 2) is s0 when s0 >= 2; s0 % 8 is s0 when s0 < 8). Valid only
  // under this env's ranges and guards.
  absl::StatusOr<SymExpr> Simplify(const SymExpr& e) const;

  // True or false when Simplify and the ranges settle it for every value
  // the guards allow; nullopt when the answer depends on the values.
  std::optional<bool> StaticallyKnown(const SymRelation& relation) const;
  // The answer for the hints, guarded unless statically known. Errors: a
  // symbol without a hint, or a hint evaluation that fails.
  absl::StatusOr<bool> Decide(const SymRelation& relation);
  absl::StatusOr<bool> Decide(RelKind kind, const SymExpr& lhs, const SymExpr& rhs) {
    return Decide(SymRelation::Make(kind, lhs, rhs));
  }
  // For consumers that need a concrete int: guards expr == hint (unless
  // already known) and returns the hint as a static SymInt.
  SymInt Specialize(const SymInt& value);

  const std::vector<SymRelation>& guards() const { return guards_; }
  std::optional<int64_t> hint(absl::string_view symbol) const;
  // Every symbol's example value, for evaluating expressions at the hints.
  const SymBindings& hints() const { return hints_; }
  std::optional<Range> range(absl::string_view symbol) const;
  const std::vector<SymbolInfo>& symbols() const { return symbols_; }  // in creation order
  // symbol -> what it equals, learnt from guards; values mention only
  // symbols that are not replaced.
  const absl::flat_hash_map<std::string, SymExpr>& replacements() const {
    return replacements_;
  }

  // Whether concrete sizes satisfy the declared ranges and every guard; the
  // first failure is explained. A symbol without a value is InvalidArgument.
  absl::StatusOr<GuardCheck> CheckGuards(const SymBindings& values) const;

 private:
  SymInt AddSymbol(std::string name, int64_t hint, Range range);
  absl::StatusOr<SymRelation> SimplifyRelation(const SymRelation& relation) const;
  void RecordGuard(const SymRelation& guard);
  void Learn(const SymRelation& guard);
  void LearnEquality(const SymExpr& difference);
  void LearnBound(const SymExpr& difference, bool strict);
  void LearnDisequality(const SymExpr& difference);
  void AddReplacement(const std::string& symbol, const SymExpr& value);
  void NarrowRange(const std::string& symbol, Range narrower);
  SymbolInfo* Find(absl::string_view symbol);
  const SymbolInfo* Find(absl::string_view symbol) const;

  std::vector<SymbolInfo> symbols_;
  absl::flat_hash_map<std::string, size_t> index_;
  SymBindings hints_;
  absl::flat_hash_map<std::string, SymExpr> replacements_;
  std::vector<SymRelation> guards_;
  absl::flat_hash_set<SymRelation> guard_set_;
  int next_symbol_ = 0;
};

}  // namespace dynamo::ops
