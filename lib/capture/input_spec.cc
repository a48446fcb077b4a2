#include "lib/capture/input_spec.h"

#include <Python.h>

#include <cctype>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

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
    int64_t numel = 1;
    SkipSpace();
    while (!Done() && text_[pos_] != ']') {
      size_t num_start = pos_;
      while (!Done() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      int64_t n = 0;
      if (!absl::SimpleAtoi(text_.substr(num_start, pos_ - num_start), &n) || n > kMaxSize) {
        return Error(absl::StrCat("a size from 0 to 2^40"), num_start);
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
    return TraceInput::Tensor(std::move(meta));
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
  size_t pos_ = 0;
  int depth_ = 0;  // containers open at pos_
};

}  // namespace

absl::StatusOr<ParsedInput> ParseInputSpec(absl::string_view spec) {
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
  Parser p(body);
  absl::StatusOr<TraceInput> value = p.Value();
  if (!value.ok()) return value.status();
  p.SkipSpace();
  if (!p.Done()) return p.Error("the end of the spec");
  out.value = *std::move(value);
  return out;
}

}  // namespace dynamo::capture
