#include "lib/ops/registry.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dynamo::ops {
namespace {

absl::StatusOr<Value> ParseDefault(absl::string_view text) {
  if (text == "None") return Value();
  if (text == "True") return Value(true);
  if (text == "False") return Value(false);
  if (text == "[]") return Value::List({});
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    return Value(std::string(text.substr(1, text.size() - 2)));
  }
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    std::vector<Value> items;
    for (absl::string_view part : absl::StrSplit(text.substr(1, text.size() - 2), ',')) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v)) {
        return absl::InvalidArgumentError(absl::StrCat("bad list default '", text, "'"));
      }
      items.emplace_back(v);
    }
    return Value::List(std::move(items));
  }
  int64_t i = 0;
  if (absl::SimpleAtoi(text, &i)) return Value(i);
  double d = 0;
  if (absl::SimpleAtod(text, &d)) return Value(d);
  return absl::InvalidArgumentError(absl::StrCat("bad default '", text, "'"));
}

absl::StatusOr<Param::Type> ParseType(absl::string_view t, int* list_size) {
  struct Named {
    absl::string_view name;
    Param::Type type;
  };
  static constexpr Named kTypes[] = {
      {"Tensor", Param::Type::kTensor},
      {"Number", Param::Type::kNumber},
      {"Tensor|Number", Param::Type::kTensorOrNumber},
      {"int", Param::Type::kInt},
      {"float", Param::Type::kFloat},
      {"bool", Param::Type::kBool},
      {"str", Param::Type::kString},
      {"Tensor[]", Param::Type::kTensorList},
      {"dtype", Param::Type::kDType},
      {"device", Param::Type::kDevice},
      {"layout", Param::Type::kLayout},
      {"memory_format", Param::Type::kMemoryFormat},
      {"Any", Param::Type::kAny},
  };
  for (const Named& n : kTypes) {
    if (n.name == t) return n.type;
  }
  if (absl::ConsumePrefix(&t, "int[")) {
    absl::ConsumeSuffix(&t, "]");
    if (!t.empty() && !absl::SimpleAtoi(t, list_size)) {
      return absl::InvalidArgumentError(absl::StrCat("bad list size in int[", t, "]"));
    }
    return Param::Type::kIntList;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown parameter type '", t, "'"));
}

absl::StatusOr<Signature> ParseSignature(absl::string_view text) {
  Signature sig;
  sig.text = std::string(text);
  bool keyword_only = false;
  if (absl::StripAsciiWhitespace(text).empty()) return sig;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part == "*") {
      keyword_only = true;
      continue;
    }
    Param p;
    p.keyword_only = keyword_only;
    if (absl::ConsumePrefix(&part, "*")) p.varargs = true;
    std::vector<absl::string_view> eq = absl::StrSplit(part, absl::MaxSplits('=', 1));
    if (eq.size() == 2) {
      absl::StatusOr<Value> d = ParseDefault(absl::StripAsciiWhitespace(eq[1]));
      if (!d.ok()) return d.status();
      p.has_default = true;
      p.default_value = *std::move(d);
    }
    std::vector<absl::string_view> words =
        absl::StrSplit(absl::StripAsciiWhitespace(eq[0]), ' ', absl::SkipEmpty());
    if (words.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("bad parameter '", part, "' in '", text, "'"));
    }
    absl::string_view type = words[0];
    if (absl::ConsumeSuffix(&type, "?")) {
      p.optional = true;
      if (!p.has_default) {
        p.has_default = true;  // an optional parameter defaults to None
      }
    }
    absl::StatusOr<Param::Type> t = ParseType(type, &p.list_size);
    if (!t.ok()) return t.status();
    p.type = *t;
    p.name = std::string(words[1]);
    sig.params.push_back(std::move(p));
  }
  return sig;
}

bool IsIntValue(const Value& v) { return v.is_int(); }

// torch's argument parser, reduced to the types the registry declares.
bool Accepts(const Param& p, const Value& v) {
  if (v.is_none()) return p.optional || p.type == Param::Type::kAny;
  switch (p.type) {
    case Param::Type::kTensor:
      return v.is_tensor();
    case Param::Type::kNumber:
      return v.is_number();
    case Param::Type::kTensorOrNumber:
      return v.is_tensor() || v.is_number();
    case Param::Type::kInt:
      return v.is_int();
    case Param::Type::kFloat:
      return v.is_int() || v.is_float() || v.is_bool();
    case Param::Type::kBool:
      return v.is_bool();
    case Param::Type::kString:
      return v.is_string();
    case Param::Type::kIntList:
      if (p.list_size > 0 && v.is_int()) return true;
      return v.is_list() && std::all_of(v.items().begin(), v.items().end(), IsIntValue);
    case Param::Type::kTensorList:
      return v.is_list() && std::all_of(v.items().begin(), v.items().end(),
                                        [](const Value& x) { return x.is_tensor(); });
    case Param::Type::kDType:
      return v.is_dtype();
    case Param::Type::kDevice:
      return v.is_device() || v.is_string();
    case Param::Type::kLayout:
      return v.is_string();
    case Param::Type::kMemoryFormat:
      return v.is_memory_format();
    case Param::Type::kAny:
      return true;
  }
  return false;
}

absl::Status BindOne(const std::string& op, const Signature& sig, absl::Span<const Value> args,
                     absl::Span<const Kwarg> kwargs, std::vector<const Value*>& values,
                     std::vector<Value>& owned) {
  const size_t n = sig.params.size();
  values.assign(n, nullptr);
  std::vector<bool> filled(n, false);
  size_t next = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    while (next < n && sig.params[next].keyword_only) ++next;
    if (next >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, "() takes at most ", next, " positional arguments but ", args.size(), " were given"));
    }
    const Param& p = sig.params[next];
    if (p.varargs) {
      // view(2, 3), view((2, 3)) and view([2, 3]) all mean the same.
      if (args.size() - i == 1 && args[i].is_list()) {
        values[next] = &args[i];
      } else {
        owned.push_back(
            Value::List(std::vector<Value>(args.begin() + static_cast<ptrdiff_t>(i), args.end())));
        values[next] = &owned.back();
      }
      filled[next] = true;
      ++next;
      break;
    }
    values[next] = &args[i];
    filled[next] = true;
    ++next;
  }
  for (const Kwarg& kw : kwargs) {
    auto it = std::find_if(sig.params.begin(), sig.params.end(),
                           [&](const Param& p) { return p.name == kw.name; });
    if (it == sig.params.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, "() got an unexpected keyword argument '", kw.name, "'"));
    }
    size_t idx = static_cast<size_t>(it - sig.params.begin());
    if (filled[idx]) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, "() got multiple values for argument '", kw.name, "'"));
    }
    values[idx] = &kw.value;
    filled[idx] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    const Param& p = sig.params[i];
    if (!filled[i]) {
      if (!p.has_default) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, "() missing required argument '", p.name, "'"));
      }
      values[i] = &p.default_value;
      continue;
    }
    if (!Accepts(p, *values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, "(): argument '", p.name, "' must be ", sig.text.empty() ? "" : "as in (", sig.text,
          "), not ", TypeName(*values[i]), " ", ToString(*values[i])));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string TagsToString(uint32_t tags) {
  static constexpr std::pair<uint32_t, absl::string_view> kNames[] = {
      {kPointwise, "pointwise"},
      {kReduction, "reduction"},
      {kView, "view"},
      {kInplace, "inplace"},
      {kFactory, "factory"},
      {kRandom, "random"},
      {kDataDependent, "data_dependent"},
      {kNoTensorOutput, "no_tensor_output"}};
  std::vector<absl::string_view> out;
  for (const auto& [bit, name] : kNames) {
    if (tags & bit) out.push_back(name);
  }
  return absl::StrJoin(out, ",");
}

Args::Args(const OpEntry& op, int overload, std::vector<const Value*> values,
           std::vector<Value> owned)
    : op_(&op), overload_(overload), values_(std::move(values)), owned_(std::move(owned)) {}

const Value& Args::Get(absl::string_view name) const {
  const std::vector<Param>& params = op_->signatures()[static_cast<size_t>(overload_)].params;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return *values_[i];
  }
  // A programming error in an entry (its function reads a parameter its
  // signature lacks); answered with None so the function reports it.
  static const Value* const kNone = new Value();
  return *kNone;
}

double Args::Number(absl::string_view name) const {
  const Value& v = Get(name);
  if (v.is_bool()) return v.as_bool() ? 1.0 : 0.0;
  if (v.is_int()) return static_cast<double>(v.as_int());
  return v.as_float();
}

std::vector<int64_t> Args::IntList(absl::string_view name) const {
  const Value& v = Get(name);
  if (v.is_int()) {
    const std::vector<Param>& params = op_->signatures()[static_cast<size_t>(overload_)].params;
    int size = 1;
    for (const Param& p : params) {
      if (p.name == name) size = std::max(p.list_size, 1);
    }
    return std::vector<int64_t>(static_cast<size_t>(size), v.as_int());
  }
  std::vector<int64_t> out;
  if (!v.is_list()) return out;
  out.reserve(v.items().size());
  for (const Value& item : v.items()) out.push_back(item.as_int());
  return out;
}

std::vector<TensorMeta> Args::TensorList(absl::string_view name) const {
  std::vector<TensorMeta> out;
  for (const Value& item : Get(name).items()) out.push_back(item.as_tensor());
  return out;
}

std::optional<DType> Args::OptDType(absl::string_view name) const {
  const Value& v = Get(name);
  if (v.is_dtype()) return v.as_dtype();
  return std::nullopt;
}

absl::StatusOr<Args> OpEntry::Bind(absl::Span<const Value> args,
                                   absl::Span<const Kwarg> kwargs) const {
  std::vector<std::string> errors;
  for (size_t i = 0; i < signatures_.size(); ++i) {
    std::vector<const Value*> values;
    std::vector<Value> owned;
    absl::Status s = BindOne(name_, signatures_[i], args, kwargs, values, owned);
    if (s.ok()) return Args(*this, static_cast<int>(i), std::move(values), std::move(owned));
    errors.emplace_back(s.message());
  }
  if (errors.size() == 1) return absl::InvalidArgumentError(errors[0]);
  return absl::InvalidArgumentError(absl::StrCat(
      name_, "() received an invalid combination of arguments: ", absl::StrJoin(errors, "; ")));
}

absl::StatusOr<Value> OpEntry::Infer(absl::Span<const Value> args,
                                     absl::Span<const Kwarg> kwargs) const {
  absl::StatusOr<Args> bound = Bind(args, kwargs);
  if (!bound.ok()) return bound.status();
  return infer_(*bound);
}

void Registry::Add(absl::string_view name, std::vector<absl::string_view> signatures, uint32_t tags,
                   InferFn infer) {
  auto entry = std::make_shared<OpEntry>();
  entry->name_ = std::string(name);
  entry->tags_ = tags;
  entry->infer_ = std::move(infer);
  for (absl::string_view text : signatures) {
    absl::StatusOr<Signature> sig = ParseSignature(text);
    if (!sig.ok()) {
      if (status_.ok())
        status_ = absl::InternalError(absl::StrCat(name, ": ", sig.status().message()));
      return;
    }
    entry->signatures_.push_back(*std::move(sig));
  }
  if (!entries_.emplace(std::string(name), std::move(entry)).second && status_.ok()) {
    status_ = absl::InternalError(absl::StrCat("op '", name, "' registered twice"));
  }
}

void Registry::Alias(absl::string_view alias, absl::string_view name) {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    if (status_.ok())
      status_ = absl::InternalError(absl::StrCat("alias of unknown op '", name, "'"));
    return;
  }
  auto entry = std::make_shared<OpEntry>(*it->second);
  entry->name_ = std::string(alias);
  if (!entries_.emplace(std::string(alias), std::move(entry)).second && status_.ok()) {
    status_ = absl::InternalError(absl::StrCat("op '", alias, "' registered twice"));
  }
}

const OpEntry* Registry::Find(absl::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.get();
}

absl::StatusOr<Value> Registry::Infer(absl::string_view name, absl::Span<const Value> args,
                                      absl::Span<const Kwarg> kwargs) const {
  const OpEntry* op = Find(name);
  if (op == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown op '", name, "': no registry entry, so its output is not guessed"));
  }
  return op->Infer(args, kwargs);
}

std::vector<std::string> Registry::Names() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status RegisterAllOps(Registry& registry) {
  RegisterPointwiseOps(registry);
  RegisterReductionOps(registry);
  RegisterShapeOps(registry);
  RegisterNnOps(registry);
  RegisterFactoryOps(registry);
  RegisterIndexingOps(registry);
  return registry.status();
}

const Registry& DefaultRegistry() {
  static const Registry* const kRegistry = [] {
    auto* r = new Registry();
    absl::Status s = RegisterAllOps(*r);
    (void)s;  // surfaced through r->status()
    return r;
  }();
  return *kRegistry;
}

}  // namespace dynamo::ops
