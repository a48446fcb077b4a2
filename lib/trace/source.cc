#include "lib/trace/source.h"

#include "absl/strings/str_cat.h"

namespace dynamo::trace {
namespace {

// Python's repr of a str key, enough for the identifiers and keys we emit.
std::string QuoteKey(const std::string& key) {
  std::string out = "'";
  for (char c : key) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

SourcePtr Source::Local(std::string name) {
  return std::make_shared<const Source>(Key(), Kind::kLocal, nullptr, std::move(name), false, 0);
}
SourcePtr Source::Global(std::string name) {
  return std::make_shared<const Source>(Key(), Kind::kGlobal, nullptr, std::move(name), false, 0);
}
SourcePtr Source::Module(std::string import_name) {
  return std::make_shared<const Source>(Key(), Kind::kModule, nullptr, std::move(import_name), false, 0);
}
SourcePtr Source::Attr(SourcePtr base, std::string name) {
  return std::make_shared<const Source>(Key(), Kind::kAttr, std::move(base), std::move(name), false, 0);
}
SourcePtr Source::Item(SourcePtr base, int64_t index) {
  return std::make_shared<const Source>(Key(), Kind::kItem, std::move(base), "", true, index);
}
SourcePtr Source::Item(SourcePtr base, std::string key) {
  return std::make_shared<const Source>(Key(), Kind::kItem, std::move(base), std::move(key), false, 0);
}
SourcePtr Source::DictKey(SourcePtr base, int64_t index) {
  return std::make_shared<const Source>(Key(), Kind::kDictEntry, std::move(base), "keys", false, index);
}
SourcePtr Source::DictValue(SourcePtr base, int64_t index) {
  return std::make_shared<const Source>(Key(), Kind::kDictEntry, std::move(base), "values", false, index);
}
SourcePtr Source::Call(SourcePtr base, std::string method) {
  return std::make_shared<const Source>(Key(), Kind::kCall, std::move(base), std::move(method), false, 0);
}

Source::Source(Key, Kind kind, SourcePtr base, std::string name, bool is_index, int64_t index)
    : kind_(kind), base_(std::move(base)), name_(std::move(name)), is_index_(is_index), index_(index) {
  switch (kind_) {
    case Kind::kLocal:
      text_ = absl::StrCat("L[", QuoteKey(name_), "]");
      break;
    case Kind::kGlobal:
      text_ = absl::StrCat("G[", QuoteKey(name_), "]");
      break;
    case Kind::kModule:
      text_ = absl::StrCat("sys.modules[", QuoteKey(name_), "]");
      break;
    case Kind::kAttr:
      text_ = absl::StrCat(base_->text_, ".", name_);
      break;
    case Kind::kItem:
      text_ = is_index_ ? absl::StrCat(base_->text_, "[", index_, "]")
                        : absl::StrCat(base_->text_, "[", QuoteKey(name_), "]");
      break;
    case Kind::kDictEntry:
      text_ = absl::StrCat(base_->text_, ".", name_, "()[", index_, "]");
      break;
    case Kind::kCall:
      text_ = absl::StrCat(base_->text_, ".", name_, "()");
      break;
  }
}

}  // namespace dynamo::trace
