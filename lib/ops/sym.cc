// Symbolic sizes: the canonical form and its simplification rules, printing
// and parsing, evaluation, interval arithmetic, relations and the ShapeEnv.
//
// Every rule that rewrites an expression says under which assumption it is
// exact. Rules in the first half hold for all integer values of the symbols
// (where the original expression is defined); only ShapeEnv::Simplify uses
// the env's ranges. test/ops/sym_test.cc checks the rules against a direct
// evaluation of the unsimplified expressions.
#include "lib/ops/sym.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <ostream>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

// Binds `lhs` (a declaration or a variable) to a StatusOr's value, or returns
// its error.
#define SYM_CONCAT_INNER(a, b) a##b
#define SYM_CONCAT(a, b) SYM_CONCAT_INNER(a, b)
#define SYM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = *std::move(tmp)
#define SYM_ASSIGN_OR_RETURN(lhs, expr) \
  SYM_ASSIGN_OR_RETURN_IMPL(SYM_CONCAT(sym_or_, __LINE__), lhs, expr)

namespace dynamo::ops {

// ---------------------------------------------------------------------------
// The nodes.

namespace sym_internal {

// Symbols sort first, then the non-polynomial nodes in this order.
enum class AtomKind { kSymbol, kFloorDiv, kMod, kMax, kMin };

// A factor a polynomial cannot take apart. Its operands are canonical.
struct Atom {
  AtomKind kind;
  std::string name;           // kSymbol
  std::vector<SymExpr> args;  // kFloorDiv, kMod: {numerator, divisor}; kMax, kMin: operands
  size_t hash;
};
using AtomPtr = std::shared_ptr<const Atom>;

struct Factor {
  AtomPtr atom;
  int64_t exponent;  // >= 1
};
using Monomial = std::vector<Factor>;  // distinct atoms in atom order; empty: 1

struct Term {
  int64_t coeff;  // never 0
  Monomial mono;
};
using Terms = std::vector<Term>;  // distinct monomials in monomial order

struct ExprNode {
  Terms terms;
  size_t hash;
};

struct Access {
  static const Terms& terms(const SymExpr& e) { return e.node_->terms; }
  static SymExpr Wrap(std::shared_ptr<const ExprNode> node) { return SymExpr(std::move(node)); }
};

}  // namespace sym_internal

namespace {

using sym_internal::Access;
using sym_internal::Atom;
using sym_internal::AtomKind;
using sym_internal::AtomPtr;
using sym_internal::ExprNode;
using sym_internal::Factor;
using sym_internal::Monomial;
using sym_internal::Term;
using sym_internal::Terms;

const Terms& TermsOf(const SymExpr& e) { return Access::terms(e); }

// ---------------------------------------------------------------------------
// int64 arithmetic with Python's semantics; nullopt on overflow.

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> CheckedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// a // b, rounding toward negative infinity; b != 0.
std::optional<int64_t> PyFloorDiv(int64_t a, int64_t b) {
  if (b == -1) return CheckedSub(0, a);  // the one quotient past int64
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}
// a % b, with the divisor's sign; b != 0.
int64_t PyMod(int64_t a, int64_t b) {
  if (b == -1) return 0;  // INT64_MIN % -1 traps in C++
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
std::optional<int64_t> CheckedPow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) {
      std::optional<int64_t> r = CheckedMul(result, base);
      if (!r) return std::nullopt;
      result = *r;
    }
    exponent >>= 1;
    if (exponent > 0) {
      std::optional<int64_t> sq = CheckedMul(base, base);
      if (!sq) return std::nullopt;
      base = *sq;
    }
  }
  return result;
}

absl::Status CoefficientOverflow() {
  return absl::OutOfRangeError("symbolic expression: a coefficient overflows int64");
}

absl::StatusOr<int64_t> EvalOp(SymOp op, int64_t a, int64_t b) {
  std::optional<int64_t> r;
  switch (op) {
    case SymOp::kAdd: r = CheckedAdd(a, b); break;
    case SymOp::kSub: r = CheckedSub(a, b); break;
    case SymOp::kMul: r = CheckedMul(a, b); break;
    case SymOp::kFloorDiv:
    case SymOp::kMod:
      if (b == 0) {
        return absl::InvalidArgumentError(absl::StrCat("division by zero: ", a, " ", SymOpName(op), " 0"));
      }
      if (op == SymOp::kMod) return PyMod(a, b);
      r = PyFloorDiv(a, b);
      break;
    case SymOp::kMax: return std::max(a, b);
    case SymOp::kMin: return std::min(a, b);
  }
  if (!r) {
    return absl::OutOfRangeError(absl::StrCat("integer overflow: ", a, " ", SymOpName(op), " ", b));
  }
  return *r;
}

template <typename T>
T OrDie(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "dynamo::ops symbolic arithmetic: %s\n", value.status().ToString().c_str());
    std::abort();
  }
  return *std::move(value);
}

int Cmp(int64_t a, int64_t b) { return (a > b) - (a < b); }
int Cmp(size_t a, size_t b) { return (a > b) - (a < b); }

// ---------------------------------------------------------------------------
// The canonical order.

// By name, a trailing number compared as a number, so s2 < s10 < t0.
int CompareNames(absl::string_view a, absl::string_view b) {
  auto split = [](absl::string_view s) {
    size_t digits = s.size();
    while (digits > 0 && absl::ascii_isdigit(static_cast<unsigned char>(s[digits - 1]))) --digits;
    absl::string_view number = s.substr(digits);
    while (number.size() > 1 && number[0] == '0') number.remove_prefix(1);
    return std::pair(s.substr(0, digits), number);
  };
  auto [prefix_a, number_a] = split(a);
  auto [prefix_b, number_b] = split(b);
  if (int c = prefix_a.compare(prefix_b)) return c < 0 ? -1 : 1;
  if (number_a.size() != number_b.size()) return Cmp(number_a.size(), number_b.size());
  if (int c = number_a.compare(number_b)) return c < 0 ? -1 : 1;
  int c = a.compare(b);  // "s01" vs "s1"
  return (c > 0) - (c < 0);
}

int CompareTerms(const Terms& a, const Terms& b);

int CompareAtoms(const Atom& a, const Atom& b) {
  if (&a == &b) return 0;
  if (a.kind != b.kind) return a.kind < b.kind ? -1 : 1;
  if (a.kind == AtomKind::kSymbol) return CompareNames(a.name, b.name);
  if (a.args.size() != b.args.size()) return Cmp(a.args.size(), b.args.size());
  for (size_t i = 0; i < a.args.size(); ++i) {
    if (int c = CompareTerms(TermsOf(a.args[i]), TermsOf(b.args[i]))) return c;
  }
  return 0;
}

// Factor by factor: the lower atom first, then the higher power first; a
// monomial that is a prefix of another sorts after it, so the constant comes
// last: s0**2, s0*s1, s0, s1, 1.
int CompareMonomials(const Monomial& a, const Monomial& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (int c = CompareAtoms(*a[i].atom, *b[i].atom)) return c;
    if (a[i].exponent != b[i].exponent) return a[i].exponent > b[i].exponent ? -1 : 1;
  }
  return Cmp(b.size(), a.size());
}

// Term by term, monomial then coefficient; a sum that ends compares as if
// it went on with "+ 0", so 0 sorts among the constants, after s0.
int CompareTerms(const Terms& a, const Terms& b) {
  static const Term kZero{0, {}};
  for (size_t i = 0; i < a.size() || i < b.size(); ++i) {
    const Term& x = i < a.size() ? a[i] : kZero;
    const Term& y = i < b.size() ? b[i] : kZero;
    if (int c = CompareMonomials(x.mono, y.mono)) return c;
    if (int c = Cmp(x.coeff, y.coeff)) return c;
  }
  return 0;
}

bool SymLess(const SymExpr& a, const SymExpr& b) { return Compare(a, b) < 0; }

// ---------------------------------------------------------------------------
// Building nodes.

size_t HashTerms(const Terms& terms) {
  size_t h = absl::HashOf(terms.size());
  for (const Term& t : terms) {
    h = absl::HashOf(h, t.coeff, t.mono.size());
    for (const Factor& f : t.mono) h = absl::HashOf(h, f.atom->hash, f.exponent);
  }
  return h;
}

SymExpr MakeExpr(Terms terms) {
  const size_t hash = HashTerms(terms);
  return Access::Wrap(std::make_shared<const ExprNode>(ExprNode{std::move(terms), hash}));
}

// Terms already in canonical order. Only a lone constant may be INT64_MIN,
// so that every other coefficient can be negated and printed with a sign.
absl::StatusOr<SymExpr> FromTerms(Terms terms) {
  if (terms.size() > kMaxSymTerms) {
    return absl::ResourceExhaustedError(
        absl::StrCat("symbolic expression: more than ", kMaxSymTerms, " terms"));
  }
  const bool lone_constant = terms.size() == 1 && terms[0].mono.empty();
  for (const Term& t : terms) {
    if (t.coeff == kNegInf && !lone_constant) return CoefficientOverflow();
  }
  return MakeExpr(std::move(terms));
}

AtomPtr NewAtom(AtomKind kind, std::string name, std::vector<SymExpr> args) {
  const size_t hash = absl::HashOf(static_cast<int>(kind), name, args);
  return std::make_shared<const Atom>(Atom{kind, std::move(name), std::move(args), hash});
}

SymExpr AtomExpr(AtomPtr atom) { return MakeExpr({Term{1, {Factor{std::move(atom), 1}}}}); }
SymExpr AtomExpr(AtomKind kind, std::vector<SymExpr> args) {
  return AtomExpr(NewAtom(kind, "", std::move(args)));
}

// The atom when `e` is exactly that atom (coefficient 1, first power).
const Atom* SoleAtom(const SymExpr& e) {
  const Terms& t = TermsOf(e);
  if (t.size() != 1 || t[0].coeff != 1 || t[0].mono.size() != 1 || t[0].mono[0].exponent != 1) {
    return nullptr;
  }
  return t[0].mono[0].atom.get();
}

// ---------------------------------------------------------------------------
// Polynomial arithmetic: sums merge sorted term lists, products expand.

absl::StatusOr<SymExpr> AddScaled(const SymExpr& a, const SymExpr& b, int64_t scale) {
  const Terms& x = TermsOf(a);
  const Terms& y = TermsOf(b);
  Terms out;
  out.reserve(x.size() + y.size());
  size_t i = 0, j = 0;
  while (i < x.size() || j < y.size()) {
    const int c = i == x.size() ? 1 : j == y.size() ? -1 : CompareMonomials(x[i].mono, y[j].mono);
    if (c < 0) {
      out.push_back(x[i++]);
      continue;
    }
    std::optional<int64_t> scaled = CheckedMul(y[j].coeff, scale);
    if (!scaled) return CoefficientOverflow();
    if (c > 0) {
      if (*scaled != 0) out.push_back(Term{*scaled, y[j].mono});
      ++j;
      continue;
    }
    std::optional<int64_t> sum = CheckedAdd(x[i].coeff, *scaled);
    if (!sum) return CoefficientOverflow();
    if (*sum != 0) out.push_back(Term{*sum, x[i].mono});
    ++i;
    ++j;
  }
  return FromTerms(std::move(out));
}

absl::StatusOr<SymExpr> Add(const SymExpr& a, const SymExpr& b) { return AddScaled(a, b, 1); }
absl::StatusOr<SymExpr> Sub(const SymExpr& a, const SymExpr& b) { return AddScaled(a, b, -1); }
absl::StatusOr<SymExpr> Negate(const SymExpr& a) { return AddScaled(SymExpr(), a, -1); }

absl::StatusOr<Monomial> MultiplyMonomials(const Monomial& a, const Monomial& b) {
  Monomial out;
  out.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const int c = i == a.size() ? 1 : j == b.size() ? -1 : CompareAtoms(*a[i].atom, *b[j].atom);
    if (c < 0) {
      out.push_back(a[i++]);
    } else if (c > 0) {
      out.push_back(b[j++]);
    } else {
      std::optional<int64_t> exponent = CheckedAdd(a[i].exponent, b[j].exponent);
      if (!exponent) return absl::OutOfRangeError("symbolic expression: an exponent overflows int64");
      out.push_back(Factor{a[i].atom, *exponent});
      ++i;
      ++j;
    }
  }
  return out;
}

// Sorts expanded terms and merges equal monomials.
absl::StatusOr<SymExpr> Collect(Terms terms) {
  std::sort(terms.begin(), terms.end(), [](const Term& x, const Term& y) {
    return CompareMonomials(x.mono, y.mono) < 0;
  });
  Terms out;
  for (Term& t : terms) {
    if (!out.empty() && CompareMonomials(out.back().mono, t.mono) == 0) {
      std::optional<int64_t> sum = CheckedAdd(out.back().coeff, t.coeff);
      if (!sum) return CoefficientOverflow();
      out.back().coeff = *sum;
    } else {
      if (!out.empty() && out.back().coeff == 0) out.pop_back();
      out.push_back(std::move(t));
    }
  }
  if (!out.empty() && out.back().coeff == 0) out.pop_back();
  return FromTerms(std::move(out));
}

absl::StatusOr<SymExpr> Multiply(const SymExpr& a, const SymExpr& b) {
  if (std::optional<int64_t> c = a.constant()) return *c == 0 ? SymExpr() : AddScaled(SymExpr(), b, *c);
  if (std::optional<int64_t> c = b.constant()) return *c == 0 ? SymExpr() : AddScaled(SymExpr(), a, *c);
  const Terms& x = TermsOf(a);
  const Terms& y = TermsOf(b);
  if (x.size() * y.size() > 4 * kMaxSymTerms) {
    return absl::ResourceExhaustedError(
        absl::StrCat("symbolic expression: a product expands past ", kMaxSymTerms, " terms"));
  }
  Terms products;
  products.reserve(x.size() * y.size());
  for (const Term& s : x) {
    for (const Term& t : y) {
      std::optional<int64_t> coeff = CheckedMul(s.coeff, t.coeff);
      if (!coeff) return CoefficientOverflow();
      SYM_ASSIGN_OR_RETURN(Monomial mono, MultiplyMonomials(s.mono, t.mono));
      products.push_back(Term{*coeff, std::move(mono)});
    }
  }
  return Collect(std::move(products));
}

absl::StatusOr<SymExpr> Pow(SymExpr base, int64_t exponent) {
  SymExpr result(1);
  while (exponent > 0) {
    if (exponent & 1) {
      SYM_ASSIGN_OR_RETURN(result, Multiply(result, base));
    }
    exponent >>= 1;
    if (exponent > 0) {
      SYM_ASSIGN_OR_RETURN(base, Multiply(base, base));
    }
  }
  return result;
}

// The gcd of k and every coefficient of e (> 0 when k > 0).
int64_t ContentGcd(const SymExpr& e, int64_t k) {
  int64_t g = k;
  for (const Term& t : TermsOf(e)) g = std::gcd(g, t.coeff);
  return g;
}

// e / g where g divides every coefficient; the order is unchanged.
SymExpr DivideExactly(const SymExpr& e, int64_t g) {
  Terms out = TermsOf(e);
  for (Term& t : out) t.coeff /= g;
  return MakeExpr(std::move(out));
}

// ---------------------------------------------------------------------------
// Floor division.

absl::StatusOr<SymExpr> FloorDivByPositive(const SymExpr& a, int64_t k);

// r has no term whose coefficient k divides.
absl::StatusOr<SymExpr> FloorDivRemainder(const SymExpr& r, int64_t k) {
  if (std::optional<int64_t> c = r.constant()) return SymExpr(*PyFloorDiv(*c, k));
  // floor(g*x / (g*m)) == floor(x / m): a factor common to k and every
  // coefficient cancels.
  if (const int64_t g = ContentGcd(r, k); g > 1) return FloorDivByPositive(DivideExactly(r, g), k / g);
  // floor(floor(x / m) / k) == floor(x / (m*k)) for positive m and k.
  if (const Atom* inner = SoleAtom(r); inner != nullptr && inner->kind == AtomKind::kFloorDiv) {
    std::optional<int64_t> m = inner->args[1].constant();
    if (m && *m > 0) {
      if (std::optional<int64_t> mk = CheckedMul(*m, k)) return FloorDivByPositive(inner->args[0], *mk);
    }
  }
  return AtomExpr(AtomKind::kFloorDiv, {r, SymExpr(k)});
}

// floor((k*q + r) / k) == q + floor(r / k) for any integer q: the terms
// whose coefficient k divides leave the division.
absl::StatusOr<SymExpr> FloorDivByPositive(const SymExpr& a, int64_t k) {
  Terms quotient, rest;
  for (const Term& t : TermsOf(a)) {
    if (t.coeff % k == 0) {
      quotient.push_back(Term{t.coeff / k, t.mono});
    } else {
      rest.push_back(t);
    }
  }
  SYM_ASSIGN_OR_RETURN(SymExpr inner, FloorDivRemainder(MakeExpr(std::move(rest)), k));
  return Add(MakeExpr(std::move(quotient)), inner);
}

std::string Operand(const SymExpr& e);

absl::Status DivisionByZero(const SymExpr& a, absl::string_view op) {
  return absl::InvalidArgumentError(absl::StrCat("division by zero: ", Operand(a), " ", op, " 0"));
}

absl::StatusOr<SymExpr> MakeFloorDiv(const SymExpr& a, const SymExpr& b) {
  std::optional<int64_t> k = b.constant();
  if (!k) {
    // Both hold wherever a // b is defined (b != 0).
    if (a.constant() == 0) return SymExpr();
    if (a == b) return SymExpr(1);
    return AtomExpr(AtomKind::kFloorDiv, {a, b});
  }
  if (*k == 0) return DivisionByZero(a, "//");
  if (std::optional<int64_t> c = a.constant()) {
    std::optional<int64_t> q = PyFloorDiv(*c, *k);
    if (!q) return CoefficientOverflow();
    return SymExpr(*q);
  }
  if (*k > 0) return FloorDivByPositive(a, *k);
  if (*k == kNegInf) return AtomExpr(AtomKind::kFloorDiv, {a, b});
  // a // k == (-a) // (-k): the same rational quotient, floored.
  SYM_ASSIGN_OR_RETURN(SymExpr negated, Negate(a));
  return FloorDivByPositive(negated, -*k);
}

// ---------------------------------------------------------------------------
// Modulo.

absl::StatusOr<SymExpr> ModByPositive(const SymExpr& a, int64_t k) {
  // (k*q + r) % k == r % k for any integer q, so a coefficient only counts
  // modulo k: reduce each into [0, k).
  Terms reduced;
  for (const Term& t : TermsOf(a)) {
    if (const int64_t c = PyMod(t.coeff, k); c != 0) reduced.push_back(Term{c, t.mono});
  }
  SymExpr r = MakeExpr(std::move(reduced));
  if (r.is_constant()) return r;
  // (g*x) % (g*m) == g * (x % m) for positive g.
  if (const int64_t g = ContentGcd(r, k); g > 1) {
    SYM_ASSIGN_OR_RETURN(SymExpr inner, ModByPositive(DivideExactly(r, g), k / g));
    return Multiply(inner, SymExpr(g));
  }
  if (const Atom* inner = SoleAtom(r); inner != nullptr && inner->kind == AtomKind::kMod) {
    std::optional<int64_t> m = inner->args[1].constant();
    // x % m lies in [0, m): a modulus k >= m leaves it alone, and one that
    // divides m sees through it: (x % m) % k == x % k.
    if (m && *m > 0 && *m <= k) return r;
    if (m && *m > 0 && *m % k == 0) return ModByPositive(inner->args[0], k);
  }
  return AtomExpr(AtomKind::kMod, {r, SymExpr(k)});
}

absl::StatusOr<SymExpr> MakeMod(const SymExpr& a, const SymExpr& b) {
  std::optional<int64_t> k = b.constant();
  if (!k) {
    // Both hold wherever a % b is defined (b != 0).
    if (a.constant() == 0 || a == b) return SymExpr();
    return AtomExpr(AtomKind::kMod, {a, b});
  }
  if (*k == 0) return DivisionByZero(a, "%");
  if (std::optional<int64_t> c = a.constant()) return SymExpr(PyMod(*c, *k));
  if (*k == 1 || *k == -1) return SymExpr();
  if (*k > 0) return ModByPositive(a, *k);
  if (*k == kNegInf) return AtomExpr(AtomKind::kMod, {a, b});
  // Python's remainder takes the divisor's sign: a % k == -((-a) % -k).
  SYM_ASSIGN_OR_RETURN(SymExpr negated, Negate(a));
  SYM_ASSIGN_OR_RETURN(SymExpr positive, ModByPositive(negated, -*k));
  return Negate(positive);
}

// ---------------------------------------------------------------------------
// Exact division.

// a / b for monomials, when every atom of b is in a with at least b's power.
std::optional<Monomial> DivideMonomial(const Monomial& a, const Monomial& b) {
  Monomial out;
  size_t j = 0;
  for (const Factor& f : a) {
    const int c = j == b.size() ? -1 : CompareAtoms(*f.atom, *b[j].atom);
    if (c < 0) {
      out.push_back(f);
      continue;
    }
    if (c > 0 || f.exponent < b[j].exponent) return std::nullopt;  // b[j] is missing or higher
    if (f.exponent > b[j].exponent) out.push_back(Factor{f.atom, f.exponent - b[j].exponent});
    ++j;
  }
  if (j != b.size()) return std::nullopt;
  return out;
}

// Polynomial long division by the leading term. The canonical order is
// lexicographic, a monomial order, so the first term of a product is the
// product of the first terms: when b divides a, b's first term divides the
// remainder's first term at every step, and a step that cannot divide
// proves that b does not divide a.
absl::StatusOr<std::optional<SymExpr>> MakeExactDivision(const SymExpr& a, const SymExpr& b) {
  if (b.constant() == 0) return DivisionByZero(a, "/");
  const Term lead = TermsOf(b)[0];
  SymExpr rest = a;
  Terms quotient;
  while (!TermsOf(rest).empty()) {
    // Each step removes the remainder's first term; a sum far longer than
    // the cap has no exact quotient worth building.
    if (quotient.size() > kMaxSymTerms) return std::optional<SymExpr>();
    const Term& top = TermsOf(rest)[0];
    if (lead.coeff == -1 && top.coeff == kNegInf) return std::optional<SymExpr>();
    if (top.coeff % lead.coeff != 0) return std::optional<SymExpr>();
    std::optional<Monomial> mono = DivideMonomial(top.mono, lead.mono);
    if (!mono) return std::optional<SymExpr>();
    Term step{top.coeff / lead.coeff, *std::move(mono)};
    quotient.push_back(step);
    SYM_ASSIGN_OR_RETURN(SymExpr scaled, Multiply(MakeExpr({std::move(step)}), b));
    SYM_ASSIGN_OR_RETURN(rest, Sub(rest, scaled));
  }
  SYM_ASSIGN_OR_RETURN(SymExpr q, Collect(std::move(quotient)));
  return std::optional<SymExpr>(std::move(q));
}

// ---------------------------------------------------------------------------
// Max and min.

bool IsMax(AtomKind kind) { return kind == AtomKind::kMax; }

void AppendFlattened(AtomKind kind, const SymExpr& e, std::vector<SymExpr>& out) {
  // max(max(a, b), c) == max(a, b, c).
  if (const Atom* atom = SoleAtom(e); atom != nullptr && atom->kind == kind) {
    out.insert(out.end(), atom->args.begin(), atom->args.end());
  } else {
    out.push_back(e);
  }
}

// Drops every operand another one dominates (is >= for max, <= for min);
// of two that dominate each other the later stays.
std::vector<SymExpr> DropDominated(
    std::vector<SymExpr> operands,
    absl::FunctionRef<bool(const SymExpr& x, const SymExpr& y)> dominates) {
  std::vector<bool> dropped(operands.size(), false);
  for (size_t i = 0; i < operands.size(); ++i) {
    for (size_t j = 0; j < operands.size() && !dropped[i]; ++j) {
      if (j != i && !dropped[j] && dominates(operands[j], operands[i])) dropped[i] = true;
    }
  }
  std::vector<SymExpr> kept;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!dropped[i]) kept.push_back(std::move(operands[i]));
  }
  return kept;
}

SymExpr MakeExtremum(AtomKind kind, const std::vector<SymExpr>& operands) {
  std::vector<SymExpr> flat;
  for (const SymExpr& e : operands) AppendFlattened(kind, e, flat);
  std::sort(flat.begin(), flat.end(), SymLess);
  flat.erase(std::unique(flat.begin(), flat.end()), flat.end());
  // Operands a constant apart are decided for every value of the symbols:
  // max(s0, s0 + 1) is s0 + 1, max(3, 5) is 5.
  flat = DropDominated(std::move(flat), [kind](const SymExpr& x, const SymExpr& y) {
    absl::StatusOr<SymExpr> d = Sub(x, y);
    std::optional<int64_t> c = d.ok() ? d->constant() : std::nullopt;
    return c.has_value() && (IsMax(kind) ? *c >= 0 : *c <= 0);
  });
  if (flat.size() == 1) return flat[0];
  return AtomExpr(kind, std::move(flat));
}

// The constructor of a non-symbol atom from (new) operands.
absl::StatusOr<SymExpr> BuildAtom(AtomKind kind, const std::vector<SymExpr>& args) {
  switch (kind) {
    case AtomKind::kFloorDiv: return MakeFloorDiv(args[0], args[1]);
    case AtomKind::kMod: return MakeMod(args[0], args[1]);
    case AtomKind::kMax:
    case AtomKind::kMin: return MakeExtremum(kind, args);
    case AtomKind::kSymbol: break;
  }
  return absl::InternalError("a symbol has no operands to build from");
}

// Rebuilds e with each atom replaced by rewrite(atom); sums and products are
// recombined, so the result is canonical again. Recursing into an atom's
// operands is the rewrite's business.
using AtomRewrite = absl::FunctionRef<absl::StatusOr<SymExpr>(const AtomPtr& atom)>;
absl::StatusOr<SymExpr> MapAtoms(const SymExpr& e, AtomRewrite rewrite) {
  SymExpr sum;
  for (const Term& t : TermsOf(e)) {
    SymExpr product(t.coeff);
    for (const Factor& f : t.mono) {
      SYM_ASSIGN_OR_RETURN(SymExpr value, rewrite(f.atom));
      SYM_ASSIGN_OR_RETURN(SymExpr power, Pow(value, f.exponent));
      SYM_ASSIGN_OR_RETURN(product, Multiply(product, power));
    }
    SYM_ASSIGN_OR_RETURN(sum, Add(sum, product));
  }
  return sum;
}

// The atom again from its operands mapped by `rewrite`.
absl::StatusOr<SymExpr> RebuildAtom(const Atom& atom, AtomRewrite rewrite) {
  std::vector<SymExpr> args;
  for (const SymExpr& arg : atom.args) {
    SYM_ASSIGN_OR_RETURN(SymExpr mapped, MapAtoms(arg, rewrite));
    args.push_back(std::move(mapped));
  }
  return BuildAtom(atom.kind, args);
}

// ---------------------------------------------------------------------------
// Printing (the format is in sym.h).

std::string Print(const SymExpr& e);

// Whether e needs no parentheses as an operand of // or %.
bool IsPrimary(const SymExpr& e) {
  if (std::optional<int64_t> c = e.constant()) return *c >= 0;
  const Atom* atom = SoleAtom(e);
  return atom != nullptr && atom->kind != AtomKind::kFloorDiv && atom->kind != AtomKind::kMod;
}

std::string Operand(const SymExpr& e) {
  return IsPrimary(e) ? Print(e) : absl::StrCat("(", Print(e), ")");
}

std::string PrintAtom(const Atom& atom) {
  auto join = [&](absl::string_view function) {
    return absl::StrCat(function, "(", absl::StrJoin(atom.args, ", ", [](std::string* out, const SymExpr& a) {
      out->append(Print(a));
    }), ")");
  };
  switch (atom.kind) {
    case AtomKind::kSymbol: return atom.name;
    case AtomKind::kFloorDiv: return absl::StrCat(Operand(atom.args[0]), "//", Operand(atom.args[1]));
    case AtomKind::kMod: return absl::StrCat(Operand(atom.args[0]), " % ", Operand(atom.args[1]));
    case AtomKind::kMax: return join("max");
    case AtomKind::kMin: return join("min");
  }
  return "";
}

uint64_t Magnitude(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

// The term without its sign. A // or % binds like *, so it is parenthesised
// unless it stands alone (a leading minus would bind tighter still).
std::string PrintUnsignedTerm(const Term& t, bool first) {
  const uint64_t magnitude = Magnitude(t.coeff);
  if (t.mono.empty()) return absl::StrCat(magnitude);
  const bool alone = magnitude == 1 && t.mono.size() == 1 && t.mono[0].exponent == 1 &&
                     !(first && t.coeff < 0);
  std::vector<std::string> parts;
  if (magnitude != 1) parts.push_back(absl::StrCat(magnitude));
  for (const Factor& f : t.mono) {
    std::string text = PrintAtom(*f.atom);
    const bool infix = f.atom->kind == AtomKind::kFloorDiv || f.atom->kind == AtomKind::kMod;
    if (infix && !alone) text = absl::StrCat("(", text, ")");
    if (f.exponent > 1) absl::StrAppend(&text, "**", f.exponent);
    parts.push_back(std::move(text));
  }
  return absl::StrJoin(parts, "*");
}

std::string Print(const SymExpr& e) {
  const Terms& terms = TermsOf(e);
  if (terms.empty()) return "0";
  std::string out;
  for (size_t i = 0; i < terms.size(); ++i) {
    const bool negative = terms[i].coeff < 0;
    if (i == 0) {
      if (negative) out += "-";
    } else {
      out += negative ? " - " : " + ";
    }
    out += PrintUnsignedTerm(terms[i], i == 0);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Parsing.

struct Token {
  enum class Kind { kInt, kName, kOp, kEnd };
  Kind kind;
  std::string text;
  size_t column;        // 1-based
  uint64_t value = 0;   // kInt, up to 2^63
  bool too_big = false;  // kInt past 2^63
};

// Longest first, so "**" is not read as two "*".
constexpr absl::string_view kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                            "%",  "(",  ")",  ",",  "<",  ">",  "/", "="};
constexpr uint64_t kTwoTo63 = uint64_t{1} << 63;

absl::Status ParseError(absl::string_view text, size_t column, absl::string_view what) {
  const std::string where = column > text.size() ? "at the end" : absl::StrCat("at column ", column);
  return absl::InvalidArgumentError(
      absl::StrCat("cannot parse '", absl::CHexEscape(text), "': ", what, " ", where));
}

bool IsNameStart(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

Token ReadInteger(absl::string_view text, size_t& i) {
  Token token{Token::Kind::kInt, "", i + 1};
  while (i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (token.value > (kTwoTo63 - digit) / 10) token.too_big = true;
    if (!token.too_big) token.value = token.value * 10 + digit;
    token.text += text[i++];
  }
  return token;
}

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t') {
      ++i;
    } else if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      tokens.push_back(ReadInteger(text, i));
    } else if (IsNameStart(c)) {
      const size_t start = i;
      while (i < text.size() && IsNameChar(text[i])) ++i;
      tokens.push_back(Token{Token::Kind::kName, std::string(text.substr(start, i - start)), start + 1});
    } else {
      const auto op = std::find_if(std::begin(kOperators), std::end(kOperators),
                                   [&](absl::string_view o) { return absl::StartsWith(text.substr(i), o); });
      if (op == std::end(kOperators)) {
        return ParseError(text, i + 1,
                          absl::StrCat("unexpected character '", absl::CHexEscape(text.substr(i, 1)), "'"));
      }
      tokens.push_back(Token{Token::Kind::kOp, std::string(*op), i + 1});
      i += op->size();
    }
  }
  tokens.push_back(Token{Token::Kind::kEnd, "", text.size() + 1});
  return tokens;
}

// Python's grammar for the operators sizes use:
//   sum     := product (('+' | '-') product)*
//   product := unary (('*' | '//' | '%') unary)*
//   unary   := ('-' | '+') unary | power
//   power   := primary ['**' unary]
//   primary := integer | name | name '(' sum (',' sum)* ')' | '(' sum ')'
class Parser {
 public:
  Parser(absl::string_view text, std::vector<Token> tokens) : text_(text), tokens_(std::move(tokens)) {}

  absl::StatusOr<SymExpr> WholeExpression() {
    SYM_ASSIGN_OR_RETURN(SymExpr e, Sum());
    if (Peek().kind != Token::Kind::kEnd) return Unexpected();
    return e;
  }

  absl::StatusOr<SymRelation> WholeRelation() {
    SYM_ASSIGN_OR_RETURN(SymExpr lhs, Sum());
    std::optional<RelKind> kind = RelationOperator();
    if (!kind) {
      return Error(Peek(), Peek().kind == Token::Kind::kEnd
                               ? "expected a comparison (==, !=, <, <=, >, >=)"
                               : absl::StrCat("expected a comparison (==, !=, <, <=, >, >=), found '",
                                              Peek().text, "'"));
    }
    ++pos_;
    SYM_ASSIGN_OR_RETURN(SymExpr rhs, Sum());
    if (Peek().kind != Token::Kind::kEnd) return Unexpected();
    return SymRelation::Make(*kind, lhs, rhs);
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool IsOp(absl::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kOp && Peek(ahead).text == op;
  }
  bool Accept(absl::string_view op) {
    if (!IsOp(op)) return false;
    ++pos_;
    return true;
  }

  absl::Status Error(const Token& at, absl::string_view what) const {
    return ParseError(text_, at.column, what);
  }
  absl::Status Unexpected() const {
    if (Peek().kind == Token::Kind::kEnd) return Error(Peek(), "unexpected end");
    return Error(Peek(), absl::StrCat("unexpected '", Peek().text, "'"));
  }
  // An arithmetic error (a division by a constant 0, an overflow) names
  // the operator's column.
  absl::StatusOr<SymExpr> Combine(SymOp op, const SymExpr& a, const SymExpr& b, const Token& at) const {
    absl::StatusOr<SymExpr> e = Apply(op, a, b);
    if (!e.ok()) return Error(at, e.status().message());
    return e;
  }

  std::optional<RelKind> RelationOperator() const {
    static constexpr std::pair<absl::string_view, RelKind> kRelations[] = {
        {"==", RelKind::kEq}, {"!=", RelKind::kNe}, {"<", RelKind::kLt},
        {"<=", RelKind::kLe}, {">", RelKind::kGt},  {">=", RelKind::kGe}};
    for (const auto& [text, kind] : kRelations) {
      if (IsOp(text)) return kind;
    }
    return std::nullopt;
  }

  absl::StatusOr<SymExpr> Sum() {
    SYM_ASSIGN_OR_RETURN(SymExpr left, Product());
    while (IsOp("+") || IsOp("-")) {
      const Token& op = tokens_[pos_++];
      SYM_ASSIGN_OR_RETURN(SymExpr right, Product());
      SYM_ASSIGN_OR_RETURN(left, Combine(op.text == "+" ? SymOp::kAdd : SymOp::kSub, left, right, op));
    }
    return left;
  }

  absl::StatusOr<SymExpr> Product() {
    SYM_ASSIGN_OR_RETURN(SymExpr left, Unary());
    while (true) {
      if (IsOp("/")) return Error(Peek(), "'/' is true division; sizes use '//'");
      if (!IsOp("*") && !IsOp("//") && !IsOp("%")) return left;
      const Token& op = tokens_[pos_++];
      const SymOp kind = op.text == "*" ? SymOp::kMul : op.text == "//" ? SymOp::kFloorDiv : SymOp::kMod;
      SYM_ASSIGN_OR_RETURN(SymExpr right, Unary());
      SYM_ASSIGN_OR_RETURN(left, Combine(kind, left, right, op));
    }
  }

  absl::StatusOr<SymExpr> Unary() {
    if (Accept("+")) return Unary();
    if (!IsOp("-")) return Power();
    const Token& minus = tokens_[pos_++];
    // -9223372036854775808 is the one literal past INT64_MAX (printed for
    // a constant INT64_MIN).
    if (Peek().kind == Token::Kind::kInt && !Peek().too_big && Peek().value == kTwoTo63 && !IsOp("**", 1)) {
      ++pos_;
      return SymExpr(kNegInf);
    }
    SYM_ASSIGN_OR_RETURN(SymExpr operand, Unary());
    return Combine(SymOp::kSub, SymExpr(), operand, minus);
  }

  absl::StatusOr<SymExpr> Power() {
    SYM_ASSIGN_OR_RETURN(SymExpr base, Primary());
    if (!IsOp("**")) return base;
    const Token& op = tokens_[pos_++];
    SYM_ASSIGN_OR_RETURN(SymExpr exponent, Unary());
    std::optional<int64_t> n = exponent.constant();
    if (!n || *n < 0) return Error(op, "the exponent must be a non-negative integer constant");
    absl::StatusOr<SymExpr> power = Pow(base, *n);
    if (!power.ok()) return Error(op, power.status().message());
    return power;
  }

  absl::StatusOr<SymExpr> Primary() {
    const Token& token = Peek();
    switch (token.kind) {
      case Token::Kind::kInt:
        if (token.too_big || token.value > static_cast<uint64_t>(kInf)) {
          return Error(token, "integer literal out of int64 range");
        }
        ++pos_;
        return SymExpr(static_cast<int64_t>(token.value));
      case Token::Kind::kName:
        ++pos_;
        if (IsOp("(")) return Call(token);
        return SymExpr::Symbol(token.text);
      case Token::Kind::kOp:
        if (token.text != "(") break;
        ++pos_;
        {
          SYM_ASSIGN_OR_RETURN(SymExpr inner, Sum());
          if (!Accept(")")) return Error(Peek(), "expected ')'");
          return inner;
        }
      case Token::Kind::kEnd: break;
    }
    if (token.kind == Token::Kind::kEnd) return Error(token, "expected a number, a name or '('");
    return Error(token, absl::StrCat("expected a number, a name or '(', found '", token.text, "'"));
  }

  // max(...) and min(...) as Python spells them, and FloorDiv(a, b) and
  // Mod(a, b) as sympy prints them.
  absl::StatusOr<SymExpr> Call(const Token& name) {
    static constexpr std::pair<absl::string_view, SymOp> kFunctions[] = {
        {"max", SymOp::kMax}, {"Max", SymOp::kMax}, {"min", SymOp::kMin}, {"Min", SymOp::kMin},
        {"FloorDiv", SymOp::kFloorDiv}, {"Mod", SymOp::kMod}};
    const auto* function = std::find_if(std::begin(kFunctions), std::end(kFunctions),
                                        [&](const auto& f) { return f.first == name.text; });
    if (function == std::end(kFunctions)) return Error(name, absl::StrCat("unknown function '", name.text, "'"));
    ++pos_;  // '('
    std::vector<SymExpr> args;
    do {
      SYM_ASSIGN_OR_RETURN(SymExpr arg, Sum());
      args.push_back(std::move(arg));
    } while (Accept(","));
    if (!Accept(")")) return Error(Peek(), "expected ',' or ')'");
    const bool variadic = function->second == SymOp::kMax || function->second == SymOp::kMin;
    if (variadic ? args.size() < 2 : args.size() != 2) {
      return Error(name, absl::StrCat(name.text, "() takes ", variadic ? "at least 2" : "2", " arguments, got ",
                                      args.size()));
    }
    SymExpr result = args[0];
    for (size_t i = 1; i < args.size(); ++i) {
      SYM_ASSIGN_OR_RETURN(result, Combine(function->second, result, args[i], name));
    }
    return result;
  }

  absl::string_view text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------
// Evaluation and symbols.

absl::StatusOr<int64_t> EvaluateAtom(const Atom& atom, const SymBindings& bindings) {
  if (atom.kind == AtomKind::kSymbol) {
    auto it = bindings.find(atom.name);
    if (it == bindings.end()) return absl::InvalidArgumentError(absl::StrCat("unbound symbol '", atom.name, "'"));
    return it->second;
  }
  std::vector<int64_t> values;
  for (const SymExpr& arg : atom.args) {
    SYM_ASSIGN_OR_RETURN(int64_t v, arg.Evaluate(bindings));
    values.push_back(v);
  }
  switch (atom.kind) {
    case AtomKind::kFloorDiv: return EvalOp(SymOp::kFloorDiv, values[0], values[1]);
    case AtomKind::kMod: return EvalOp(SymOp::kMod, values[0], values[1]);
    case AtomKind::kMax: return *std::max_element(values.begin(), values.end());
    case AtomKind::kMin: return *std::min_element(values.begin(), values.end());
    case AtomKind::kSymbol: break;
  }
  return absl::InternalError("unreachable");
}

void CollectSymbols(const Term& t, std::vector<std::string>& out);
void CollectSymbols(const SymExpr& e, std::vector<std::string>& out) {
  for (const Term& t : TermsOf(e)) CollectSymbols(t, out);
}
void CollectSymbols(const Term& t, std::vector<std::string>& out) {
  for (const Factor& f : t.mono) {
    if (f.atom->kind == AtomKind::kSymbol) out.push_back(f.atom->name);
    for (const SymExpr& arg : f.atom->args) CollectSymbols(arg, out);
  }
}
void SortSymbols(std::vector<std::string>& names) {
  std::sort(names.begin(), names.end(),
            [](const std::string& a, const std::string& b) { return CompareNames(a, b) < 0; });
  names.erase(std::unique(names.begin(), names.end()), names.end());
}

}  // namespace

// ---------------------------------------------------------------------------
// SymExpr.

SymExpr::SymExpr(std::shared_ptr<const sym_internal::ExprNode> node) : node_(std::move(node)) {}

SymExpr::SymExpr() {
  // One zero for every default-constructed expression (leaked on purpose:
  // no destructor runs at exit).
  static const auto* const kZero = new std::shared_ptr<const ExprNode>(MakeExpr({}).node_);
  node_ = *kZero;
}

SymExpr::SymExpr(int64_t value) : SymExpr() {
  if (value != 0) node_ = MakeExpr({Term{value, {}}}).node_;
}

SymExpr SymExpr::Symbol(absl::string_view name) {
  return AtomExpr(NewAtom(AtomKind::kSymbol, std::string(name), {}));
}

bool SymExpr::is_constant() const { return constant().has_value(); }

std::optional<int64_t> SymExpr::constant() const {
  const Terms& t = node_->terms;
  if (t.empty()) return 0;
  if (t.size() == 1 && t[0].mono.empty()) return t[0].coeff;
  return std::nullopt;
}

std::optional<std::string> SymExpr::symbol_name() const {
  const Atom* atom = SoleAtom(*this);
  if (atom == nullptr || atom->kind != AtomKind::kSymbol) return std::nullopt;
  return atom->name;
}

std::vector<std::string> SymExpr::Symbols() const {
  std::vector<std::string> names;
  CollectSymbols(*this, names);
  SortSymbols(names);
  return names;
}

std::string SymExpr::ToString() const { return Print(*this); }

absl::StatusOr<int64_t> SymExpr::Evaluate(const SymBindings& bindings) const {
  int64_t sum = 0;
  for (const Term& t : node_->terms) {
    int64_t product = t.coeff;
    for (const Factor& f : t.mono) {
      SYM_ASSIGN_OR_RETURN(int64_t base, EvaluateAtom(*f.atom, bindings));
      std::optional<int64_t> power = CheckedPow(base, f.exponent);
      std::optional<int64_t> next = power ? CheckedMul(product, *power) : std::nullopt;
      if (!next) return absl::OutOfRangeError(absl::StrCat("integer overflow evaluating ", ToString()));
      product = *next;
    }
    std::optional<int64_t> next = CheckedAdd(sum, product);
    if (!next) return absl::OutOfRangeError(absl::StrCat("integer overflow evaluating ", ToString()));
    sum = *next;
  }
  return sum;
}

absl::StatusOr<SymExpr> SymExpr::Substitute(
    const absl::flat_hash_map<std::string, SymExpr>& replacements) const {
  // Re-entered for the operands of each atom, whose constructor then
  // re-simplifies them.
  std::function<absl::StatusOr<SymExpr>(const AtomPtr&)> rewrite =
      [&](const AtomPtr& atom) -> absl::StatusOr<SymExpr> {
    if (atom->kind != AtomKind::kSymbol) return RebuildAtom(*atom, rewrite);
    auto it = replacements.find(atom->name);
    return it != replacements.end() ? it->second : AtomExpr(atom);
  };
  return MapAtoms(*this, rewrite);
}

size_t SymExpr::hash() const { return node_->hash; }

bool operator==(const SymExpr& a, const SymExpr& b) {
  if (a.node_ == b.node_) return true;
  if (a.node_->hash != b.node_->hash) return false;
  return CompareTerms(a.node_->terms, b.node_->terms) == 0;
}

int Compare(const SymExpr& a, const SymExpr& b) {
  if (a.node_ == b.node_) return 0;
  return CompareTerms(a.node_->terms, b.node_->terms);
}

std::ostream& operator<<(std::ostream& os, const SymExpr& e) { return os << e.ToString(); }

absl::string_view SymOpName(SymOp op) {
  switch (op) {
    case SymOp::kAdd: return "+";
    case SymOp::kSub: return "-";
    case SymOp::kMul: return "*";
    case SymOp::kFloorDiv: return "//";
    case SymOp::kMod: return "%";
    case SymOp::kMax: return "max";
    case SymOp::kMin: return "min";
  }
  return "?";
}

absl::StatusOr<SymExpr> Apply(SymOp op, const SymExpr& a, const SymExpr& b) {
  switch (op) {
    case SymOp::kAdd: return Add(a, b);
    case SymOp::kSub: return Sub(a, b);
    case SymOp::kMul: return Multiply(a, b);
    case SymOp::kFloorDiv: return MakeFloorDiv(a, b);
    case SymOp::kMod: return MakeMod(a, b);
    case SymOp::kMax: return MakeExtremum(AtomKind::kMax, {a, b});
    case SymOp::kMin: return MakeExtremum(AtomKind::kMin, {a, b});
  }
  return absl::InternalError("unknown SymOp");
}

SymExpr operator+(const SymExpr& a, const SymExpr& b) { return OrDie(Add(a, b)); }
SymExpr operator-(const SymExpr& a, const SymExpr& b) { return OrDie(Sub(a, b)); }
SymExpr operator*(const SymExpr& a, const SymExpr& b) { return OrDie(Multiply(a, b)); }
SymExpr operator-(const SymExpr& a) { return OrDie(Negate(a)); }
absl::StatusOr<SymExpr> FloorDiv(const SymExpr& a, const SymExpr& b) { return MakeFloorDiv(a, b); }
absl::StatusOr<SymExpr> Mod(const SymExpr& a, const SymExpr& b) { return MakeMod(a, b); }
absl::StatusOr<std::optional<SymExpr>> DivideExact(const SymExpr& a, const SymExpr& b) {
  return MakeExactDivision(a, b);
}
SymExpr Max(const SymExpr& a, const SymExpr& b) { return MakeExtremum(AtomKind::kMax, {a, b}); }
SymExpr Min(const SymExpr& a, const SymExpr& b) { return MakeExtremum(AtomKind::kMin, {a, b}); }

absl::StatusOr<SymExpr> ParseSymExpr(absl::string_view text) {
  SYM_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(text));
  return Parser(text, std::move(tokens)).WholeExpression();
}

// ---------------------------------------------------------------------------
// SymInt.

SymInt::SymInt(int64_t value) : hint_(value) {}

SymInt SymInt::Symbolic(int64_t hint, SymExpr expr) {
  if (std::optional<int64_t> c = expr.constant()) return SymInt(*c);
  SymInt s(hint);
  s.expr_ = std::move(expr);
  return s;
}

std::string SymInt::ToString() const { return expr().ToString(); }

std::ostream& operator<<(std::ostream& os, const SymInt& s) { return os << s.ToString(); }

absl::StatusOr<SymInt> Apply(SymOp op, const SymInt& a, const SymInt& b) {
  SYM_ASSIGN_OR_RETURN(int64_t hint, EvalOp(op, a.hint(), b.hint()));
  if (a.is_static() && b.is_static()) return SymInt(hint);
  SYM_ASSIGN_OR_RETURN(SymExpr expr, Apply(op, a.expr(), b.expr()));
  return SymInt::Symbolic(hint, std::move(expr));
}

SymInt operator+(const SymInt& a, const SymInt& b) { return OrDie(Apply(SymOp::kAdd, a, b)); }
SymInt operator-(const SymInt& a, const SymInt& b) { return OrDie(Apply(SymOp::kSub, a, b)); }
SymInt operator*(const SymInt& a, const SymInt& b) { return OrDie(Apply(SymOp::kMul, a, b)); }
absl::StatusOr<SymInt> FloorDiv(const SymInt& a, const SymInt& b) { return Apply(SymOp::kFloorDiv, a, b); }
absl::StatusOr<SymInt> Mod(const SymInt& a, const SymInt& b) { return Apply(SymOp::kMod, a, b); }
SymInt Max(const SymInt& a, const SymInt& b) { return OrDie(Apply(SymOp::kMax, a, b)); }
SymInt Min(const SymInt& a, const SymInt& b) { return OrDie(Apply(SymOp::kMin, a, b)); }

// ---------------------------------------------------------------------------
// Ranges.

std::string Range::ToString() const {
  return absl::StrCat("[", lo == kNegInf ? "-inf" : absl::StrCat(lo), ", ",
                      hi == kInf ? "inf" : absl::StrCat(hi), "]");
}

std::ostream& operator<<(std::ostream& os, const Range& r) { return os << r.ToString(); }

namespace {

// Interval arithmetic with explicit infinities. A finite result past int64
// rounds outward: a lower end to the nearest int64 below it (INT64_MAX when
// it is above, else -inf), an upper end to the nearest above it (+inf, or
// INT64_MIN when it is below), so every interval computed contains every
// value the expression can take.
struct End {
  int64_t value = 0;
  int infinite = 0;  // -1, 0 or +1
};
struct Interval {
  End lo, hi;
};
constexpr int kDown = -1;
constexpr int kUp = 1;

int SignOf(End e) { return e.infinite != 0 ? e.infinite : (e.value > 0) - (e.value < 0); }
bool Less(End a, End b) {
  if (a.infinite != b.infinite) return a.infinite < b.infinite;
  return a.infinite == 0 && a.value < b.value;
}
End MinEnd(End a, End b) { return Less(b, a) ? b : a; }
End MaxEnd(End a, End b) { return Less(a, b) ? b : a; }
End Finite(int64_t v) { return End{v, 0}; }
bool IsFinite(Interval r) { return r.lo.infinite == 0 && r.hi.infinite == 0; }

Interval FromRange(const Range& r) {
  return Interval{r.lo == kNegInf ? End{0, -1} : Finite(r.lo), r.hi == kInf ? End{0, 1} : Finite(r.hi)};
}
Range ToRange(Interval r) {
  auto clamp = [](End e) { return e.infinite < 0 ? kNegInf : e.infinite > 0 ? kInf : e.value; };
  return Range{clamp(r.lo), clamp(r.hi)};
}
Interval Point(int64_t v) { return Interval{Finite(v), Finite(v)}; }
Interval Everything() { return Interval{End{0, -1}, End{0, 1}}; }

// A finite value past int64 with the given sign, as a lower (round down)
// or upper (round up) end.
End Overflowed(int sign, int round) {
  if (sign > 0) return round == kDown ? Finite(kInf) : End{0, 1};
  return round == kUp ? Finite(kNegInf) : End{0, -1};
}
// Infinities of opposite signs never meet: lower ends add to lower ends.
End AddEnds(End a, End b, int round) {
  if (a.infinite != 0 || b.infinite != 0) return End{0, a.infinite != 0 ? a.infinite : b.infinite};
  if (std::optional<int64_t> s = CheckedAdd(a.value, b.value)) return Finite(*s);
  return Overflowed(a.value > 0 ? 1 : -1, round);  // only same signs overflow
}
// A finite 0 times an unbounded end is 0: each value is finite.
End MulEnds(End a, End b, int round) {
  const int sign = SignOf(a) * SignOf(b);
  if (sign == 0) return Finite(0);
  if (a.infinite != 0 || b.infinite != 0) return End{0, sign};
  if (std::optional<int64_t> p = CheckedMul(a.value, b.value)) return Finite(*p);
  return Overflowed(sign, round);
}

Interval AddIntervals(Interval a, Interval b) {
  return Interval{AddEnds(a.lo, b.lo, kDown), AddEnds(a.hi, b.hi, kUp)};
}
Interval MulIntervals(Interval a, Interval b) {
  const End ends_a[] = {a.lo, a.hi};
  const End ends_b[] = {b.lo, b.hi};
  Interval out{End{0, 1}, End{0, -1}};
  for (End x : ends_a) {
    for (End y : ends_b) {
      out.lo = MinEnd(out.lo, MulEnds(x, y, kDown));
      out.hi = MaxEnd(out.hi, MulEnds(x, y, kUp));
    }
  }
  return out;
}
Interval PowInterval(Interval base, int64_t exponent) {
  Interval result = Point(1);
  for (int64_t i = 0; i < exponent && i < 64; ++i) result = MulIntervals(result, base);
  if (exponent >= 64) result = Everything();
  if (exponent % 2 == 0) result.lo = MaxEnd(result.lo, Finite(0));  // an even power is >= 0
  return result;
}

End FloorDivEnd(End a, int64_t k) { return a.infinite != 0 ? a : Finite(*PyFloorDiv(a.value, k)); }

Interval FloorDivInterval(Interval a, Interval b) {
  if (b.lo.infinite != 0 || b.lo.value < 1) return Everything();
  // floor(x / d) is monotone in x for a fixed positive d ...
  if (IsFinite(b) && b.lo.value == b.hi.value) {
    return Interval{FloorDivEnd(a.lo, b.lo.value), FloorDivEnd(a.hi, b.lo.value)};
  }
  // ... and, for x >= 0, falls as d grows.
  if (SignOf(a.lo) < 0) return Everything();
  return Interval{b.hi.infinite != 0 ? Finite(0) : FloorDivEnd(a.lo, b.hi.value), FloorDivEnd(a.hi, b.lo.value)};
}

Interval ModInterval(Interval a, Interval b) {
  if (IsFinite(b) && b.lo.value == b.hi.value && b.lo.value > 0) {
    const int64_t k = b.lo.value;
    // Within one period x % k is x shifted.
    if (IsFinite(a) && *PyFloorDiv(a.lo.value, k) == *PyFloorDiv(a.hi.value, k)) {
      const int64_t shift = *PyFloorDiv(a.lo.value, k) * k;
      return Interval{Finite(a.lo.value - shift), Finite(a.hi.value - shift)};
    }
  }
  if (b.lo.infinite == 0 && b.lo.value >= 1) {  // [0, d - 1], and no more than x when x >= 0
    End hi = b.hi.infinite != 0 ? b.hi : Finite(b.hi.value - 1);
    if (SignOf(a.lo) >= 0) hi = MinEnd(hi, a.hi);
    return Interval{Finite(0), hi};
  }
  if (b.hi.infinite == 0 && b.hi.value <= -1) {  // [d + 1, 0]
    End lo = b.lo.infinite != 0 ? b.lo : Finite(b.lo.value + 1);
    if (SignOf(a.hi) <= 0) lo = MaxEnd(lo, a.lo);
    return Interval{lo, Finite(0)};
  }
  return Everything();
}

using SymbolRange = absl::FunctionRef<Range(const std::string& name)>;

Interval IntervalOf(const SymExpr& e, SymbolRange symbol_range);

Interval AtomInterval(const Atom& atom, SymbolRange symbol_range) {
  if (atom.kind == AtomKind::kSymbol) return FromRange(symbol_range(atom.name));
  std::vector<Interval> args;
  for (const SymExpr& arg : atom.args) args.push_back(IntervalOf(arg, symbol_range));
  switch (atom.kind) {
    case AtomKind::kFloorDiv: return FloorDivInterval(args[0], args[1]);
    case AtomKind::kMod: return ModInterval(args[0], args[1]);
    case AtomKind::kMax:
    case AtomKind::kMin: {
      Interval out = args[0];
      for (const Interval& r : args) {
        out.lo = IsMax(atom.kind) ? MaxEnd(out.lo, r.lo) : MinEnd(out.lo, r.lo);
        out.hi = IsMax(atom.kind) ? MaxEnd(out.hi, r.hi) : MinEnd(out.hi, r.hi);
      }
      return out;
    }
    case AtomKind::kSymbol: break;
  }
  return Everything();
}

Interval IntervalOf(const SymExpr& e, SymbolRange symbol_range) {
  Interval sum = Point(0);
  for (const Term& t : TermsOf(e)) {
    Interval product = Point(t.coeff);
    for (const Factor& f : t.mono) {
      product = MulIntervals(product, PowInterval(AtomInterval(*f.atom, symbol_range), f.exponent));
    }
    sum = AddIntervals(sum, product);
  }
  return sum;
}

// ---------------------------------------------------------------------------
// Relations.

absl::StatusOr<SymExpr> NegateIf(bool negate, const SymExpr& e) {
  if (!negate) return e;
  return Negate(e);
}

// d REL 0 (REL one of == != < <=) as positive terms REL negated negative
// terms.
absl::StatusOr<SymRelation> Split(RelKind kind, const SymExpr& d) {
  Terms positive, negative;
  for (const Term& t : TermsOf(d)) {
    if (t.coeff > 0) {
      positive.push_back(t);
      continue;
    }
    if (t.coeff == kNegInf) return CoefficientOverflow();
    negative.push_back(Term{-t.coeff, t.mono});
  }
  return SymRelation{kind, MakeExpr(std::move(positive)), MakeExpr(std::move(negative))};
}

absl::StatusOr<SymRelation> Canonical(RelKind kind, const SymExpr& lhs, const SymExpr& rhs) {
  SYM_ASSIGN_OR_RETURN(SymExpr d, Sub(lhs, rhs));
  // a > b is b < a: -d < 0.
  const bool flip = kind == RelKind::kGt || kind == RelKind::kGe;
  if (kind == RelKind::kGt) kind = RelKind::kLt;
  if (kind == RelKind::kGe) kind = RelKind::kLe;
  SYM_ASSIGN_OR_RETURN(d, NegateIf(flip, d));
  // g*x REL 0 is x REL 0 for g > 0 (a constant keeps its value: 4 == 0
  // reads better than 1 == 0).
  if (!d.is_constant()) {
    if (const int64_t g = ContentGcd(d, 0); g > 1) d = DivideExactly(d, g);
  }
  // == and != read the same either way round: the first term positive.
  const bool symmetric = kind == RelKind::kEq || kind == RelKind::kNe;
  SYM_ASSIGN_OR_RETURN(d, NegateIf(symmetric && !TermsOf(d).empty() && TermsOf(d)[0].coeff < 0, d));
  return Split(kind, d);
}

}  // namespace

absl::string_view RelKindOperator(RelKind kind) {
  switch (kind) {
    case RelKind::kEq: return "==";
    case RelKind::kNe: return "!=";
    case RelKind::kLt: return "<";
    case RelKind::kLe: return "<=";
    case RelKind::kGt: return ">";
    case RelKind::kGe: return ">=";
  }
  return "?";
}

SymRelation SymRelation::Make(RelKind kind, const SymExpr& lhs, const SymExpr& rhs) {
  absl::StatusOr<SymRelation> canonical = Canonical(kind, lhs, rhs);
  if (canonical.ok()) return *std::move(canonical);
  // Past int64 the sides stay as given, turned round to < or <=.
  if (kind == RelKind::kGt) return SymRelation{RelKind::kLt, rhs, lhs};
  if (kind == RelKind::kGe) return SymRelation{RelKind::kLe, rhs, lhs};
  return SymRelation{kind, lhs, rhs};
}

SymRelation SymRelation::Negated() const {
  switch (kind) {
    case RelKind::kEq: return Make(RelKind::kNe, lhs, rhs);
    case RelKind::kNe: return Make(RelKind::kEq, lhs, rhs);
    case RelKind::kLt: return Make(RelKind::kLe, rhs, lhs);
    case RelKind::kLe: return Make(RelKind::kLt, rhs, lhs);
    case RelKind::kGt: return Make(RelKind::kLe, lhs, rhs);
    case RelKind::kGe: return Make(RelKind::kLt, lhs, rhs);
  }
  return *this;
}

std::string SymRelation::ToString() const {
  return absl::StrCat(lhs.ToString(), " ", RelKindOperator(kind), " ", rhs.ToString());
}

absl::StatusOr<bool> SymRelation::Evaluate(const SymBindings& bindings) const {
  SYM_ASSIGN_OR_RETURN(int64_t a, lhs.Evaluate(bindings));
  SYM_ASSIGN_OR_RETURN(int64_t b, rhs.Evaluate(bindings));
  switch (kind) {
    case RelKind::kEq: return a == b;
    case RelKind::kNe: return a != b;
    case RelKind::kLt: return a < b;
    case RelKind::kLe: return a <= b;
    case RelKind::kGt: return a > b;
    case RelKind::kGe: return a >= b;
  }
  return absl::InternalError("unknown RelKind");
}

std::ostream& operator<<(std::ostream& os, const SymRelation& r) { return os << r.ToString(); }

absl::StatusOr<SymRelation> ParseSymRelation(absl::string_view text) {
  SYM_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(text));
  return Parser(text, std::move(tokens)).WholeRelation();
}

// ---------------------------------------------------------------------------
// ShapeEnv.

namespace {

// What a range says of d REL 0; nullopt when it straddles the answer.
std::optional<bool> KnownFromRange(RelKind kind, const Range& r) {
  const bool above0 = r.lo != kNegInf && r.lo > 0;  // every value > 0
  const bool atleast0 = r.lo != kNegInf && r.lo >= 0;
  const bool below0 = r.hi != kInf && r.hi < 0;
  const bool atmost0 = r.hi != kInf && r.hi <= 0;
  switch (kind) {
    case RelKind::kEq:
    case RelKind::kNe: {
      std::optional<bool> eq;
      if (above0 || below0) eq = false;
      if (r.lo == 0 && r.hi == 0) eq = true;
      if (!eq) return std::nullopt;
      return kind == RelKind::kEq ? *eq : !*eq;
    }
    case RelKind::kLt: return below0 ? std::optional(true) : atleast0 ? std::optional(false) : std::nullopt;
    case RelKind::kLe: return atmost0 ? std::optional(true) : above0 ? std::optional(false) : std::nullopt;
    case RelKind::kGt: return above0 ? std::optional(true) : atmost0 ? std::optional(false) : std::nullopt;
    case RelKind::kGe: return atleast0 ? std::optional(true) : below0 ? std::optional(false) : std::nullopt;
  }
  return std::nullopt;
}

// d == a*s + c for a symbol s.
struct Linear {
  std::string symbol;
  int64_t a;
  int64_t c;
};
std::optional<Linear> AsLinear(const SymExpr& d) {
  const Terms& t = TermsOf(d);
  if (t.empty() || t.size() > 2) return std::nullopt;
  const Monomial& mono = t[0].mono;
  if (mono.size() != 1 || mono[0].exponent != 1 || mono[0].atom->kind != AtomKind::kSymbol) return std::nullopt;
  if (t.size() == 2 && !t[1].mono.empty()) return std::nullopt;
  return Linear{mono[0].atom->name, t[0].coeff, t.size() == 2 ? t[1].coeff : 0};
}

// Solves d == 0 for one symbol: one that stands alone in a term with
// coefficient +-1 and appears nowhere else. Of several, the latest in symbol
// order goes, so a newer symbol is replaced by an older one (s1 := s0).
std::optional<std::pair<std::string, SymExpr>> SolveForSymbol(const SymExpr& d) {
  if (std::optional<Linear> lin = AsLinear(d); lin && lin->c % lin->a == 0) {
    return std::pair(lin->symbol, SymExpr(-(lin->c / lin->a)));
  }
  const Terms& terms = TermsOf(d);
  std::optional<size_t> best;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Monomial& mono = terms[i].mono;
    if ((terms[i].coeff != 1 && terms[i].coeff != -1) || mono.size() != 1 || mono[0].exponent != 1 ||
        mono[0].atom->kind != AtomKind::kSymbol) {
      continue;
    }
    const std::string& name = mono[0].atom->name;
    std::vector<std::string> elsewhere;
    for (size_t j = 0; j < terms.size(); ++j) {
      if (j != i) CollectSymbols(terms[j], elsewhere);
    }
    if (std::find(elsewhere.begin(), elsewhere.end(), name) != elsewhere.end()) continue;
    if (!best || CompareNames(name, terms[*best].mono[0].atom->name) > 0) best = i;
  }
  if (!best) return std::nullopt;
  // coeff*s + rest == 0  =>  s == -coeff*rest (coeff is +-1).
  const Term& term = terms[*best];
  absl::StatusOr<SymExpr> rest = Sub(d, MakeExpr({term}));
  absl::StatusOr<SymExpr> value = rest.ok() ? Multiply(*rest, SymExpr(-term.coeff)) : rest;
  if (!value.ok()) return std::nullopt;
  return std::pair(term.mono[0].atom->name, *std::move(value));
}

// "s0 = 12, s1 = 3" for the symbols of a relation.
std::string DescribeValues(const SymRelation& r, const SymBindings& values) {
  std::vector<std::string> names;
  CollectSymbols(r.lhs, names);
  CollectSymbols(r.rhs, names);
  SortSymbols(names);
  return absl::StrJoin(names, ", ", [&](std::string* out, const std::string& name) {
    auto it = values.find(name);
    absl::StrAppend(out, name, " = ", it == values.end() ? "?" : absl::StrCat(it->second));
  });
}

bool IsIdentifier(absl::string_view name) {
  return !name.empty() && IsNameStart(name[0]) && std::all_of(name.begin(), name.end(), IsNameChar);
}

}  // namespace

SymInt ShapeEnv::NewSymbol(int64_t hint, Range range) {
  std::string name;
  do {
    name = absl::StrCat("s", next_symbol_++);
  } while (index_.contains(name));
  return AddSymbol(std::move(name), hint, range);
}

absl::StatusOr<SymInt> ShapeEnv::NewNamedSymbol(absl::string_view name, int64_t hint, Range range) {
  static constexpr absl::string_view kFunctionNames[] = {"max", "min", "Max", "Min", "FloorDiv", "Mod"};
  if (!IsIdentifier(name) ||
      std::find(std::begin(kFunctionNames), std::end(kFunctionNames), name) != std::end(kFunctionNames)) {
    return absl::InvalidArgumentError(absl::StrCat("'", absl::CHexEscape(name), "' cannot name a symbol"));
  }
  if (index_.contains(name)) return absl::AlreadyExistsError(absl::StrCat("symbol '", name, "' already exists"));
  return AddSymbol(std::string(name), hint, range);
}

SymInt ShapeEnv::AddSymbol(std::string name, int64_t hint, Range range) {
  // A range its own example contradicts would make the env prove falsehoods.
  range = Range{std::min(range.lo, hint), std::max(range.hi, hint)};
  index_[name] = symbols_.size();
  hints_[name] = hint;
  symbols_.push_back(SymbolInfo{name, hint, range, range});
  return SymInt::Symbolic(hint, SymExpr::Symbol(name));
}

SymbolInfo* ShapeEnv::Find(absl::string_view symbol) {
  auto it = index_.find(symbol);
  return it == index_.end() ? nullptr : &symbols_[it->second];
}
const SymbolInfo* ShapeEnv::Find(absl::string_view symbol) const {
  auto it = index_.find(symbol);
  return it == index_.end() ? nullptr : &symbols_[it->second];
}

std::optional<int64_t> ShapeEnv::hint(absl::string_view symbol) const {
  const SymbolInfo* s = Find(symbol);
  return s != nullptr ? std::optional(s->hint) : std::nullopt;
}

std::optional<Range> ShapeEnv::range(absl::string_view symbol) const {
  const SymbolInfo* s = Find(symbol);
  return s != nullptr ? std::optional(s->range) : std::nullopt;
}

Range ShapeEnv::RangeOf(const SymExpr& e) const {
  return ToRange(IntervalOf(e, [this](const std::string& name) {
    const SymbolInfo* s = Find(name);
    return s != nullptr ? s->range : Range{0, kInf};
  }));
}

namespace {

bool AtLeast(const Range& r, int64_t v) { return r.lo != kNegInf && r.lo >= v; }
bool AtMost(const Range& r, int64_t v) { return r.hi != kInf && r.hi <= v; }

// max/min without the operands the ranges show another one dominates.
absl::StatusOr<SymExpr> ExtremumByRanges(const ShapeEnv& env, const Atom& atom) {
  std::vector<SymExpr> kept = DropDominated(atom.args, [&](const SymExpr& x, const SymExpr& y) {
    absl::StatusOr<SymExpr> d = Sub(x, y);
    if (!d.ok()) return false;
    return IsMax(atom.kind) ? AtLeast(env.RangeOf(*d), 0) : AtMost(env.RangeOf(*d), 0);
  });
  return BuildAtom(atom.kind, kept);
}

// a // b and a % b where the ranges pin the quotient.
absl::StatusOr<SymExpr> DivisionByRanges(const ShapeEnv& env, const AtomPtr& atom) {
  const bool floor_div = atom->kind == AtomKind::kFloorDiv;
  const SymExpr& a = atom->args[0];
  const Range numerator = env.RangeOf(a);
  // 0 <= a < b: the quotient is 0.
  absl::StatusOr<SymExpr> room = Sub(atom->args[1], a);
  if (AtLeast(numerator, 0) && room.ok() && AtLeast(env.RangeOf(*room), 1)) return floor_div ? SymExpr() : a;
  // Within one period of a constant k: the quotient is q, the remainder a - q*k.
  const Range divisor = env.RangeOf(atom->args[1]);
  if (divisor.is_point() && divisor.lo > 0 && numerator.lo != kNegInf && numerator.hi != kInf) {
    const int64_t q = *PyFloorDiv(numerator.lo, divisor.lo);
    if (q == *PyFloorDiv(numerator.hi, divisor.lo)) {
      if (floor_div) return SymExpr(q);
      if (std::optional<int64_t> shift = CheckedMul(q, divisor.lo)) return Sub(a, SymExpr(*shift));
    }
  }
  return AtomExpr(atom);
}

// What the ranges decide of an atom whose operands are simplified already.
absl::StatusOr<SymExpr> AtomByRanges(const ShapeEnv& env, const AtomPtr& atom) {
  switch (atom->kind) {
    case AtomKind::kSymbol: return AtomExpr(atom);
    case AtomKind::kMax:
    case AtomKind::kMin: return ExtremumByRanges(env, *atom);
    case AtomKind::kFloorDiv:
    case AtomKind::kMod: return DivisionByRanges(env, atom);
  }
  return AtomExpr(atom);
}

}  // namespace

absl::StatusOr<SymExpr> ShapeEnv::Simplify(const SymExpr& e) const {
  // Bottom up: a symbol becomes its replacement; an atom is rebuilt from
  // its simplified operands, then the ranges have their say on the result.
  std::function<absl::StatusOr<SymExpr>(const AtomPtr&)> rewrite =
      [&](const AtomPtr& atom) -> absl::StatusOr<SymExpr> {
    if (atom->kind == AtomKind::kSymbol) {
      auto it = replacements_.find(atom->name);
      return it != replacements_.end() ? it->second : AtomExpr(atom);
    }
    SYM_ASSIGN_OR_RETURN(SymExpr rebuilt, RebuildAtom(*atom, rewrite));
    return MapAtoms(rebuilt, [this](const AtomPtr& a) { return AtomByRanges(*this, a); });
  };
  return MapAtoms(e, rewrite);
}

absl::StatusOr<SymRelation> ShapeEnv::SimplifyRelation(const SymRelation& relation) const {
  SYM_ASSIGN_OR_RETURN(SymExpr lhs, Simplify(relation.lhs));
  SYM_ASSIGN_OR_RETURN(SymExpr rhs, Simplify(relation.rhs));
  return SymRelation::Make(relation.kind, lhs, rhs);
}

std::optional<bool> ShapeEnv::StaticallyKnown(const SymRelation& relation) const {
  absl::StatusOr<SymRelation> r = SimplifyRelation(relation);
  if (!r.ok()) return std::nullopt;
  absl::StatusOr<SymExpr> d = Sub(r->lhs, r->rhs);
  if (!d.ok()) return std::nullopt;
  return KnownFromRange(r->kind, RangeOf(*d));
}

absl::StatusOr<bool> ShapeEnv::Decide(const SymRelation& relation) {
  SYM_ASSIGN_OR_RETURN(SymRelation r, SimplifyRelation(relation));
  if (std::optional<bool> known = StaticallyKnown(r)) return *known;
  SYM_ASSIGN_OR_RETURN(bool holds, r.Evaluate(hints_));
  RecordGuard(holds ? r : r.Negated());
  return holds;
}

SymInt ShapeEnv::Specialize(const SymInt& value) {
  if (value.is_static()) return value;
  SymRelation guard = SymRelation::Make(RelKind::kEq, value.expr(), SymExpr(value.hint()));
  if (absl::StatusOr<SymRelation> simplified = SimplifyRelation(guard); simplified.ok()) guard = *simplified;
  if (StaticallyKnown(guard) != true) RecordGuard(guard);
  return SymInt::Static(value.hint());
}

void ShapeEnv::RecordGuard(const SymRelation& guard) {
  if (!guard_set_.insert(guard).second) return;
  guards_.push_back(guard);
  Learn(guard);
}

void ShapeEnv::Learn(const SymRelation& guard) {
  absl::StatusOr<SymExpr> d = Sub(guard.lhs, guard.rhs);
  if (!d.ok()) return;
  switch (guard.kind) {
    case RelKind::kEq: LearnEquality(*d); break;
    case RelKind::kNe: LearnDisequality(*d); break;
    case RelKind::kLt: LearnBound(*d, /*strict=*/true); break;
    case RelKind::kLe: LearnBound(*d, /*strict=*/false); break;
    case RelKind::kGt:
    case RelKind::kGe: break;  // canonical relations have none
  }
}

void ShapeEnv::LearnEquality(const SymExpr& difference) {
  if (std::optional<std::pair<std::string, SymExpr>> solved = SolveForSymbol(difference)) {
    AddReplacement(solved->first, solved->second);
  }
}

// a*s + c < 0 is a*s + c + 1 <= 0 over the integers; then s <= floor(-c / a)
// for a > 0 and s >= ceil(c / -a) for a < 0.
void ShapeEnv::LearnBound(const SymExpr& difference, bool strict) {
  std::optional<Linear> lin = AsLinear(difference);
  if (!lin) return;
  std::optional<int64_t> c = strict ? CheckedAdd(lin->c, 1) : std::optional(lin->c);
  std::optional<int64_t> minus_c = c ? CheckedSub(0, *c) : std::nullopt;
  if (!minus_c) return;
  if (lin->a > 0) {
    NarrowRange(lin->symbol, Range{kNegInf, *PyFloorDiv(*minus_c, lin->a)});
  } else if (std::optional<int64_t> q = PyFloorDiv(*minus_c, -lin->a)) {  // ceil(c/b) == -floor(-c/b)
    NarrowRange(lin->symbol, Range{-*q, kInf});
  }
}

// s != v only narrows a range that ends at v.
void ShapeEnv::LearnDisequality(const SymExpr& difference) {
  std::optional<Linear> lin = AsLinear(difference);
  if (!lin || (lin->a != 1 && lin->a != -1)) return;
  const SymbolInfo* s = Find(lin->symbol);
  if (s == nullptr || s->range.is_point()) return;
  const int64_t v = -lin->c * lin->a;
  if (v == s->range.lo && v != kInf) NarrowRange(lin->symbol, Range{v + 1, kInf});
  if (v == s->range.hi && v != kNegInf) NarrowRange(lin->symbol, Range{kNegInf, v - 1});
}

void ShapeEnv::AddReplacement(const std::string& symbol, const SymExpr& value) {
  // Every value stays in terms of symbols that are not replaced.
  for (auto& [name, replaced] : replacements_) {
    if (absl::StatusOr<SymExpr> updated = replaced.Substitute({{symbol, value}}); updated.ok()) {
      replaced = *std::move(updated);
    }
  }
  replacements_[symbol] = value;
  // What was known of the symbol now constrains what replaces it.
  const SymbolInfo* s = Find(symbol);
  if (std::optional<std::string> other = value.symbol_name(); other && s != nullptr) {
    NarrowRange(*other, s->range);
  }
  if (std::optional<int64_t> c = value.constant()) NarrowRange(symbol, Range{*c, *c});
}

void ShapeEnv::NarrowRange(const std::string& symbol, Range narrower) {
  SymbolInfo* s = Find(symbol);
  if (s == nullptr) return;
  const Range r{std::max(s->range.lo, narrower.lo), std::min(s->range.hi, narrower.hi)};
  if (r.lo > r.hi) return;  // cannot happen for guards that hold at the hints
  s->range = r;
  if (r.is_point() && !replacements_.contains(symbol)) AddReplacement(symbol, SymExpr(r.lo));
}

absl::StatusOr<GuardCheck> ShapeEnv::CheckGuards(const SymBindings& values) const {
  for (const SymbolInfo& s : symbols_) {
    auto it = values.find(s.name);
    if (it == values.end()) return absl::InvalidArgumentError(absl::StrCat("no value for symbol '", s.name, "'"));
    const int64_t v = it->second;
    if (!s.declared.contains(v)) {
      const std::string bound = v < s.declared.lo ? absl::StrCat(" >= ", s.declared.lo)
                                                  : absl::StrCat(" <= ", s.declared.hi);
      return GuardCheck{false, -1, absl::StrCat(s.name, bound, " failed: ", s.name, " = ", v)};
    }
  }
  for (size_t i = 0; i < guards_.size(); ++i) {
    absl::StatusOr<bool> holds = guards_[i].Evaluate(values);
    if (holds.ok() && *holds) continue;
    // A guard that cannot be evaluated (a division by zero) does not hold.
    const std::string why = holds.ok() ? "" : absl::StrCat(" (", holds.status().message(), ")");
    return GuardCheck{false, static_cast<int>(i),
                      absl::StrCat(guards_[i].ToString(), " failed", why, ": ", DescribeValues(guards_[i], values))};
  }
  return GuardCheck{};
}

}  // namespace dynamo::ops

#undef SYM_ASSIGN_OR_RETURN
#undef SYM_ASSIGN_OR_RETURN_IMPL
#undef SYM_CONCAT
#undef SYM_CONCAT_INNER
