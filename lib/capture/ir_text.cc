#include "lib/capture/ir_text.h"

#include <algorithm>
#include <cctype>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/ops/proto_conversion.h"

namespace dynamo::capture {

std::string DTypeText(ir::DType d) {
  absl::StatusOr<ops::DType> dtype = ops::FromProto(d);
  return dtype.ok() ? std::string(ops::DTypeName(*dtype)) : ir::DType_Name(d);
}

std::string DimsText(const google::protobuf::RepeatedPtrField<ir::Dim>& dims) {
  std::vector<std::string> parts;
  for (const ir::Dim& d : dims) {
    parts.push_back(d.has_symbol() ? d.symbol() : d.has_expr() ? d.expr() : absl::StrCat(d.size()));
  }
  return absl::StrJoin(parts, ", ");
}

std::string DeviceText(const ir::Device& d) {
  return d.index() >= 0 && d.type() != "cpu" ? absl::StrCat(d.type(), ":", d.index())
                                             : (d.type().empty() ? "cpu" : d.type());
}

std::string TensorText(const ir::TensorMeta& m) {
  std::string out = absl::StrCat(DTypeText(m.dtype()), "[", DimsText(m.sizes()), "]");
  if (m.device().type() != "cpu" && !m.device().type().empty()) absl::StrAppend(&out, "@", DeviceText(m.device()));
  if (m.requires_grad()) absl::StrAppend(&out, " grad");
  return out;
}

std::string ArgText(const ir::Argument& a) {
  switch (a.value_case()) {
    case ir::Argument::kNode: return a.node();
    case ir::Argument::kIntValue: return absl::StrCat(a.int_value());
    case ir::Argument::kFloatValue: return absl::StrFormat("%g", a.float_value());
    case ir::Argument::kBoolValue: return a.bool_value() ? "True" : "False";
    case ir::Argument::kStringValue: return absl::StrCat("'", a.string_value(), "'");
    case ir::Argument::kNone: return "None";
    case ir::Argument::kList: {
      std::vector<std::string> items;
      for (const ir::Argument& item : a.list().items()) items.push_back(ArgText(item));
      if (a.list().is_tuple()) {
        return absl::StrCat("(", absl::StrJoin(items, ", "), items.size() == 1 ? ",)" : ")");
      }
      return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
    }
    case ir::Argument::kDict: {
      std::vector<std::string> items;
      for (int i = 0; i < a.dict().keys_size(); ++i) {
        items.push_back(absl::StrCat("'", a.dict().keys(i), "': ", ArgText(a.dict().values(i))));
      }
      return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
    }
    case ir::Argument::kDtype: return absl::StrCat("torch.", DTypeText(a.dtype()));
    case ir::Argument::kDevice: return absl::StrCat("device('", DeviceText(a.device()), "')");
    case ir::Argument::kSlice: {
      const ir::Slice& s = a.slice();
      auto part = [](bool has, int64_t v, const std::string& node) {
        return !node.empty() ? node : has ? absl::StrCat(v) : std::string("None");
      };
      return absl::StrCat("slice(", part(s.has_start(), s.start(), s.start_node()), ", ",
                          part(s.has_stop(), s.stop(), s.stop_node()), ", ", part(s.has_step(), s.step(), s.step_node()),
                          ")");
    }
    case ir::Argument::kEllipsis: return "...";
    case ir::Argument::kMemoryFormat: return ir::MemoryFormat_Name(a.memory_format());
    case ir::Argument::kLayout: return absl::StrCat("torch.", a.layout());
    case ir::Argument::VALUE_NOT_SET: return "?";
  }
  return "?";
}

std::string MetaText(const ir::ValueMeta& m) {
  switch (m.kind_case()) {
    case ir::ValueMeta::kTensor: return TensorText(m.tensor());
    case ir::ValueMeta::kTuple: {
      std::vector<std::string> items;
      for (const ir::ValueMeta& item : m.tuple().items()) items.push_back(MetaText(item));
      return absl::StrCat("(", absl::StrJoin(items, ", "), ")");
    }
    case ir::ValueMeta::kConstant: return ArgText(m.constant());
    case ir::ValueMeta::kScalar: {  // "int (at run time)": the value is the graph's
      std::string type = ir::ScalarMeta::Type_Name(m.scalar().type());
      std::transform(type.begin(), type.end(), type.begin(), ::tolower);
      return absl::StrCat(type, " (at run time)");
    }
    case ir::ValueMeta::kGraph: return absl::StrCat("graph ", m.graph());
    case ir::ValueMeta::KIND_NOT_SET: return "";
  }
  return "";
}

std::string KindText(ir::Node::Kind k) {
  std::string name = ir::Node::Kind_Name(k);
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  return name;
}

std::string GuardValue(const ir::Guard& g) {
  if (g.has_tensor()) {
    return absl::StrCat(TensorText(g.tensor()), " strides [", DimsText(g.tensor().strides()), "] ",
                        DeviceText(g.tensor().device()));
  }
  if (g.kind() == ir::Guard::SHAPE_ENV) {
    // "s0 = L['x'].size(0) in [2, inf]; s0 == s1; s1 <= 64"
    std::vector<std::string> parts;
    for (const ir::SizeSymbol& s : g.shape_env().symbols()) {
      parts.push_back(absl::StrCat(s.name(), " = ", s.source(), ".size(", s.dim(), ") in [", s.min(), ", ",
                                   s.max() != 0 ? absl::StrCat(s.max()) : "inf", "] (", s.hint(), " seen)"));
    }
    for (const std::string& r : g.shape_env().relations()) parts.push_back(r);
    for (const std::string& why : g.shape_env().specialized()) parts.push_back(absl::StrCat("specialized by ", why));
    return absl::StrJoin(parts, "; ");
  }
  if (g.kind() == ir::Guard::OBJECT_ALIASING) {  // "L['x'] L['y'] | 0 1": equal groups, same object
    return absl::StrCat(absl::StrJoin(g.sources(), " "), " | ", absl::StrJoin(g.groups(), " "));
  }
  return g.has_value() ? ArgText(g.value()) : "";
}

}  // namespace dynamo::capture
