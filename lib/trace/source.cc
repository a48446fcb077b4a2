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
  return SourcePtr(new Source(Kind::kLocal, nullptr, std::move(name), false, 0));
}
SourcePtr Source::Global(std::string name) {
  return SourcePtr(new Source(Kind::kGlobal, nullptr, std::move(name), false, 0));
}
SourcePtr Source::Module(std::string import_name) {
  return SourcePtr(new Source(Kind::kModule, nullptr, std::move(import_name), false, 0));
}
SourcePtr Source::Attr(SourcePtr base, std::string name) {
  return SourcePtr(new Source(Kind::kAttr, std::move(base), std::move(name), false, 0));
}
SourcePtr Source::Item(SourcePtr base, int64_t index) {
  return SourcePtr(new Source(Kind::kItem, std::move(base), "", true, index));
}
SourcePtr Source::Item(SourcePtr base, std::string key) {
  return SourcePtr(new Source(Kind::kItem, std::move(base), std::move(key), false, 0));
}
SourcePtr Source::DictKey(SourcePtr base, int64_t index) {
  return SourcePtr(new Source(Kind::kDictEntry, std::move(base), "keys", false, index));
}
SourcePtr Source::DictValue(SourcePtr base, int64_t index) {
  return SourcePtr(new Source(Kind::kDictEntry, std::move(base), "values", false, index));
}
SourcePtr Source::Call(SourcePtr base, std::string method) {
  return SourcePtr(new Source(Kind::kCall, std::move(base), std::move(method), false, 0));
}

std::string Source::ToString() const {
  switch (kind_) {
    case Kind::kLocal:
      return absl::StrCat("L[", QuoteKey(name_), "]");
    case Kind::kGlobal:
      return absl::StrCat("G[", QuoteKey(name_), "]");
    case Kind::kModule:
      return absl::StrCat("sys.modules[", QuoteKey(name_), "]");
    case Kind::kAttr:
      return absl::StrCat(base_->ToString(), ".", name_);
    case Kind::kItem:
      return absl::StrCat(base_->ToString(), "[",
                          is_index_ ? absl::StrCat(index_) : QuoteKey(name_), "]");
    case Kind::kDictEntry:
      return absl::StrCat(base_->ToString(), ".", name_, "()[", index_, "]");
    case Kind::kCall:
      return absl::StrCat(base_->ToString(), ".", name_, "()");
  }
  return "?";
}

}  // namespace dynamo::trace
