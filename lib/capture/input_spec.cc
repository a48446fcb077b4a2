#include "lib/capture/input_spec.h"

#include <Python.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dynamo::capture {
namespace {

using trace::TraceInput;

struct DTypeCode {
  const char* code;
  ops::DType dtype;
};
constexpr DTypeCode kDTypes[] = {
    {"bf16", ops::DType::kBFloat16}, {"f16", ops::DType::kFloat16}, {"f32", ops::DType::kFloat32},
    {"f64", ops::DType::kFloat64},   {"c64", ops::DType::kComplex64}, {"c128", ops::DType::kComplex128},
    {"i8", ops::DType::kInt8},       {"i16", ops::DType::kInt16},   {"i32", ops::DType::kInt32},
    {"i64", ops::DType::kInt64},     {"u8", ops::DType::kUInt8},    {"b8", ops::DType::kBool},
    {"bool", ops::DType::kBool},
};

// Bounds on a spec: far past any real signature, and they keep the
// recursive parser's stack and the shapes' arithmetic bounded whatever the
// command line holds.
constexpr size_t kMaxSpecLength = 64 * 1024;
constexpr int kMaxDepth = 32;       // nested [..], (..) and {..}
constexpr size_t kMaxDims = 64;     // torch's own limit on a tensor's rank
constexpr int64_t kMaxSize = int64_t{1} << 40;
constexpr int64_t kMaxNumel = int64_t{1} << 62;

// The spec as a message quotes it: cut short, so an error stays one
// readable line however long the spec.
// The spec as an error message quotes it: cut at 80 characters, control
// characters escaped (\x0a) so that the message stays one line.
std::string Shown(absl::string_view text) {
  constexpr size_t kShown = 80;
  std::string out;
  for (char c : text.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  if (text.size() > kShown) absl::StrAppend(&out, "... (", text.size(), " characters)");
  return out;
}

bool IsIdentifier(absl::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// The example value of a symbol: `wanted` (8 when unset) moved into the
// range and up to the next multiple, else the largest multiple in range.
absl::StatusOr<int64_t> ResolveExample(const DimSpec& d, int64_t wanted) {
  const int64_t hi = d.max == 0 ? kMaxSize : d.max;
  auto up = [&d](int64_t v) { return (v + d.multiple - 1) / d.multiple * d.multiple; };
  int64_t v = up(std::clamp<int64_t>(wanted, d.min, hi));
  if (v > hi) v = hi / d.multiple * d.multiple;
  if (v < d.min || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat("--dim ", d.name, ": no multiple of ", d.multiple, " in [", d.min,
                                                   ", ", d.max == 0 ? "inf" : absl::StrCat(d.max), "]"));
  }
  return v;
}

class Parser {
 public:
  Parser(absl::string_view text, const DimSpecs& dims) : text_(text), dims_(dims) {}

  absl::StatusOr<TraceInput> Value() {
    SkipSpace();
    if (Done()) return Error("a value");
    char c = text_[pos_];
    if (c == '[' || c == '(' || c == '{') {
      if (depth_ >= kMaxDepth) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input spec '", Shown(text_), "': containers nested more than ", kMaxDepth,
            " deep at position ", pos_ + 1));
      }
      ++depth_;
      absl::StatusOr<TraceInput> v = c == '{' ? Dict() : Sequence(c == '[' ? ']' : ')');
      --depth_;
      return v;
    }
    size_t start = pos_;
    while (!Done() && text_[pos_] != ',' && text_[pos_] != ']' && text_[pos_] != ')' &&
           text_[pos_] != '}' && text_[pos_] != '[') {
      ++pos_;
    }
    std::string word(absl::StripAsciiWhitespace(text_.substr(start, pos_ - start)));
    if (!Done() && text_[pos_] == '[') return Tensor(word, start);
    return Scalar(word, start);
  }

  bool Done() const { return pos_ >= text_.size(); }
  size_t pos() const { return pos_; }
  void SkipSpace() {
    while (!Done() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  absl::Status Error(absl::string_view expected, size_t at = std::string::npos) const {
    size_t where = at == std::string::npos ? pos_ : at;
    return absl::InvalidArgumentError(absl::StrCat("input spec '", Shown(text_), "': expected ", expected,
                                                   " at position ", where + 1));
  }

 private:
  absl::StatusOr<TraceInput> Tensor(const std::string& code, size_t start) {
    const DTypeCode* dtype = nullptr;
    for (const DTypeCode& d : kDTypes) {
      if (code == d.code) dtype = &d;
    }
    if (dtype == nullptr) return Error("a dtype (f32, i64, bool, ...)", start);
    ++pos_;  // '['
    std::vector<int64_t> sizes;
    std::vector<std::string> symbols;  // parallel to sizes: "" for a number
    int64_t numel = 1;
    SkipSpace();
    while (!Done() && text_[pos_] != ']') {
      size_t num_start = pos_;
      int64_t n = 0;
      if (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_') {
        // A symbolic size: its example value stands in for it.
        while (!Done() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
        std::string name(text_.substr(num_start, pos_ - num_start));
        auto it = dims_.find(name);
        DimSpec spec = it != dims_.end() ? it->second : DimSpec{name};
        absl::StatusOr<int64_t> example = ResolveExample(spec, spec.example != 0 ? spec.example : 8);
        if (!example.ok()) return example.status();
        n = *example;
        symbols.resize(sizes.size());
        symbols.push_back(std::move(name));
      } else {
        while (!Done() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
        if (!absl::SimpleAtoi(text_.substr(num_start, pos_ - num_start), &n) || n > kMaxSize) {
          return Error(absl::StrCat("a size from 0 to 2^40, or a symbol name"), num_start);
        }
      }
      if (sizes.size() == kMaxDims) return Error(absl::StrCat("at most ", kMaxDims, " dimensions"), num_start);
      // Bounded over max(size, 1), as strides multiply: a 0 does not make
      // the other sizes free.
      const int64_t extent = n > 1 ? n : 1;
      if (numel > kMaxNumel / extent) return Error("a tensor of at most 2^62 elements (zero sizes counted as 1)", num_start);
      numel *= extent;
      sizes.push_back(n);
      SkipSpace();
      if (!Done() && text_[pos_] == ',') {
        ++pos_;
        SkipSpace();
      } else if (Done() || text_[pos_] != ']') {
        return Error("',' or ']'");
      }
    }
    if (Done()) return Error("']'");
    ++pos_;  // ']'
    if (!symbols.empty()) symbols.resize(sizes.size());
    ops::TensorMeta meta = ops::TensorMeta::Contiguous(dtype->dtype, sizes);
    // Suffixes: @device and :grad, in that order.
    if (!Done() && text_[pos_] == '@') {
      size_t dev_start = ++pos_;
      while (!Done() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                         (text_[pos_] == ':' && pos_ + 1 < text_.size() &&
                          std::isdigit(static_cast<unsigned char>(text_[pos_ + 1]))))) {
        ++pos_;
      }
      absl::StatusOr<ops::Device> device = ops::ParseDevice(text_.substr(dev_start, pos_ - dev_start));
      if (!device.ok()) {
        return Error(absl::StrCat("a device (cpu, cuda or meta, optionally :N): ", Shown(device.status().message())),
                     dev_start);
      }
      meta.device = *std::move(device);
    }
    if (absl::StartsWith(text_.substr(pos_), ":grad")) {
      pos_ += 5;
      meta.requires_grad = true;
      if (!ops::IsFloating(meta.dtype) && !ops::IsComplex(meta.dtype)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input spec '", Shown(text_), "': only floating point tensors can require grad"));
      }
    }
    TraceInput in = TraceInput::Tensor(std::move(meta));
    in.dim_symbols = std::move(symbols);
    return in;
  }

  absl::StatusOr<TraceInput> Scalar(const std::string& word, size_t start) {
    if (word.empty()) return Error("a value", start);
    auto prefixed = [&](absl::string_view prefix, std::string& rest) {
      if (!absl::StartsWith(word, prefix)) return false;
      rest = word.substr(prefix.size());
      return true;
    };
    std::string rest;
    if (word == "None") return TraceInput::Object(python::None());
    if (word == "True" || word == "true") return TraceInput::Object(python::FromBool(true));
    if (word == "False" || word == "false") return TraceInput::Object(python::FromBool(false));
    if (prefixed("str:", rest)) return TraceInput::Object(python::FromString(rest));
    if (prefixed("bool:", rest)) {
      if (rest == "true" || rest == "True" || rest == "1") return TraceInput::Object(python::FromBool(true));
      if (rest == "false" || rest == "False" || rest == "0") return TraceInput::Object(python::FromBool(false));
      return Error("true or false", start + 5);
    }
    bool want_int = prefixed("int:", rest);
    bool want_float = !want_int && prefixed("float:", rest);
    std::string number = want_int || want_float ? rest : word;
    int64_t i = 0;
    double d = 0;
    if (!want_float && absl::SimpleAtoi(number, &i)) return TraceInput::Object(python::FromLong(i));
    if (!want_int && absl::SimpleAtod(number, &d)) {
      return TraceInput::Object(python::Object::Steal(PyFloat_FromDouble(d)));
    }
    return Error(want_int ? "an int" : want_float ? "a float"
                                     : "a tensor (f32[2,3]), a number, None, True/False or str:text",
                 start);
  }

  absl::StatusOr<TraceInput> Sequence(char close) {
    ++pos_;
    std::vector<TraceInput> items;
    SkipSpace();
    while (!Done() && text_[pos_] != close) {
      absl::StatusOr<TraceInput> item = Value();
      if (!item.ok()) return item.status();
      items.push_back(*std::move(item));
      SkipSpace();
      if (!Done() && text_[pos_] == ',') {
        ++pos_;
        SkipSpace();
        if (Done()) return Error(absl::StrCat("a value or '", std::string(1, close), "'"));
      } else if (Done() || text_[pos_] != close) {
        return Error(absl::StrCat("',' or '", std::string(1, close), "'"));
      }
    }
    if (Done()) return Error(absl::StrCat("'", std::string(1, close), "'"));
    ++pos_;
    return close == ']' ? TraceInput::List(std::move(items)) : TraceInput::Tuple(std::move(items));
  }

  absl::StatusOr<TraceInput> Dict() {
    ++pos_;
    std::vector<std::string> keys;
    std::vector<TraceInput> items;
    SkipSpace();
    while (!Done() && text_[pos_] != '}') {
      size_t key_start = pos_;
      while (!Done() && text_[pos_] != ':') ++pos_;
      std::string key(absl::StripAsciiWhitespace(text_.substr(key_start, pos_ - key_start)));
      if (Done() || key.empty()) return Error("a key followed by ':'", key_start);
      ++pos_;
      absl::StatusOr<TraceInput> item = Value();
      if (!item.ok()) return item.status();
      keys.push_back(key);
      items.push_back(*std::move(item));
      SkipSpace();
      if (!Done() && text_[pos_] == ',') {
        ++pos_;
        SkipSpace();
      } else if (Done() || text_[pos_] != '}') {
        return Error("',' or '}'");
      }
    }
    if (Done()) return Error("'}'");
    ++pos_;
    return TraceInput::Dict(std::move(keys), std::move(items));
  }

  absl::string_view text_;
  const DimSpecs& dims_;
  size_t pos_ = 0;
  int depth_ = 0;  // containers open at pos_
};

}  // namespace

absl::StatusOr<DimSpec> ParseDimSpec(absl::string_view text) {
  auto error = [&text](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("--dim '", Shown(text), "': ", what));
  };
  if (text.size() > 256) return error("longer than 256 characters");
  size_t eq = text.find('=');
  if (eq == absl::string_view::npos) return error("expected NAME=CONSTRAINTS (B=1..64, T=%8, T=8..512,%8,ex=64)");
  DimSpec d;
  d.name = std::string(absl::StripAsciiWhitespace(text.substr(0, eq)));
  if (!IsIdentifier(d.name)) return error("the name must be an identifier");
  int64_t wanted = 8;
  for (absl::string_view part : absl::StrSplit(text.substr(eq + 1), ',')) {
    part = absl::StripAsciiWhitespace(part);
    auto number = [&](absl::string_view digits, int64_t* out) {
      return absl::SimpleAtoi(digits, out) && *out >= 0 && *out <= kMaxSize;
    };
    if (absl::StartsWith(part, "%")) {
      if (!number(part.substr(1), &d.multiple) || d.multiple < 1) return error("a multiple is %N with N >= 1");
    } else if (absl::StartsWith(part, "ex=")) {
      if (!number(part.substr(3), &wanted) || wanted < 1) return error("an example value is ex=N with N >= 1");
      d.example = wanted;
    } else if (size_t dots = part.find(".."); dots != absl::string_view::npos) {
      absl::string_view lo = part.substr(0, dots), hi = part.substr(dots + 2);
      if (!lo.empty() && !number(lo, &d.min)) return error("a range is LO..HI with sizes from 0 to 2^40");
      if (!hi.empty() && !number(hi, &d.max)) return error("a range is LO..HI with sizes from 0 to 2^40");
      // Sizes 0 and 1 are specialised wherever a trace sees them (as in
      // torch): a symbol is a size of at least 1, and traced at >= 2.
      if (d.min < 1) return error("a symbolic size is at least 1 (0-sized inputs are their own capture)");
      if (!hi.empty() && d.max < std::max<int64_t>(d.min, 2)) return error("the range holds no size >= 2 to trace with");
    } else {
      return error(absl::StrCat("unknown constraint '", Shown(part), "' (LO..HI, %N or ex=N)"));
    }
  }
  absl::StatusOr<int64_t> example = ResolveExample(d, std::max<int64_t>(wanted, 2));
  if (!example.ok()) return example.status();
  if (d.example != 0 && *example != d.example) {
    return error(absl::StrCat("the example value ", d.example, " is outside the constraints"));
  }
  d.example = *example;
  return d;
}

absl::StatusOr<ParsedInput> ParseInputSpec(absl::string_view spec, const DimSpecs& dims) {
  if (spec.size() > kMaxSpecLength) {
    return absl::InvalidArgumentError(absl::StrCat("input spec of ", spec.size(),
                                                   " characters: at most ", kMaxSpecLength));
  }
  ParsedInput out;
  absl::string_view body = spec;
  // "name=value", where name is a Python identifier.
  size_t eq = spec.find('=');
  if (eq != absl::string_view::npos && eq > 0) {
    absl::string_view name = spec.substr(0, eq);
    bool identifier = !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) identifier &= std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (identifier) {
      out.name = std::string(name);
      body = spec.substr(eq + 1);
    }
  }
  Parser p(body, dims);
  absl::StatusOr<TraceInput> value = p.Value();
  if (!value.ok()) return value.status();
  p.SkipSpace();
  if (!p.Done()) return p.Error("the end of the spec");
  out.value = *std::move(value);
  return out;
}

}  // namespace dynamo::capture
