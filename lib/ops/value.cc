#include "lib/ops/value.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dynamo::ops {
namespace {

std::string OptInt(const std::optional<int64_t>& v) {
  return v.has_value() ? absl::StrCat(*v) : "None";
}

absl::string_view MemoryFormatName(MemoryFormat f) {
  switch (f) {
    case MemoryFormat::kContiguous:
      return "torch.contiguous_format";
    case MemoryFormat::kChannelsLast:
      return "torch.channels_last";
    case MemoryFormat::kChannelsLast3d:
      return "torch.channels_last_3d";
    case MemoryFormat::kPreserve:
      return "torch.preserve_format";
  }
  return "?";
}

struct Printer {
  std::string operator()(const NoneValue&) const { return "None"; }
  std::string operator()(bool v) const { return v ? "True" : "False"; }
  std::string operator()(int64_t v) const { return absl::StrCat(v); }
  std::string operator()(double v) const { return absl::StrCat(v); }
  std::string operator()(const std::string& v) const { return absl::StrCat("'", v, "'"); }
  std::string operator()(DType v) const { return absl::StrCat("torch.", DTypeName(v)); }
  std::string operator()(const Device& v) const {
    return absl::StrCat("device('", DeviceName(v), "')");
  }
  std::string operator()(const Slice& v) const {
    return absl::StrCat("slice(", OptInt(v.start), ", ", OptInt(v.stop), ", ", OptInt(v.step), ")");
  }
  std::string operator()(const EllipsisValue&) const { return "Ellipsis"; }
  std::string operator()(MemoryFormat v) const { return std::string(MemoryFormatName(v)); }
  std::string operator()(const TensorMeta& v) const { return ToString(v); }
  std::string operator()(const ValueList& v) const {
    std::string inner = absl::StrJoin(
        v.items, ", ", [](std::string* out, const Value& item) { out->append(ToString(item)); });
    if (v.is_tuple) return absl::StrCat("(", inner, v.items.size() == 1 ? ",)" : ")");
    return absl::StrCat("[", inner, "]");
  }
};

struct Typer {
  std::string operator()(const NoneValue&) const { return "NoneType"; }
  std::string operator()(bool) const { return "bool"; }
  std::string operator()(int64_t) const { return "int"; }
  std::string operator()(double) const { return "float"; }
  std::string operator()(const std::string&) const { return "str"; }
  std::string operator()(DType) const { return "torch.dtype"; }
  std::string operator()(const Device&) const { return "torch.device"; }
  std::string operator()(const Slice&) const { return "slice"; }
  std::string operator()(const EllipsisValue&) const { return "ellipsis"; }
  std::string operator()(MemoryFormat) const { return "torch.memory_format"; }
  std::string operator()(const TensorMeta&) const { return "Tensor"; }
  std::string operator()(const ValueList& v) const { return v.is_tuple ? "tuple" : "list"; }
};

}  // namespace

Value Value::IntList(const std::vector<int64_t>& ints, bool is_tuple) {
  std::vector<Value> items(ints.begin(), ints.end());
  return Value(ValueList{std::move(items), is_tuple});
}

std::string ToString(const Value& value) { return std::visit(Printer{}, value.variant()); }
std::string TypeName(const Value& value) { return std::visit(Typer{}, value.variant()); }

}  // namespace dynamo::ops
