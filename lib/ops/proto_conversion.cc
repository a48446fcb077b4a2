#include "lib/ops/proto_conversion.h"

#include "absl/strings/str_cat.h"

namespace dynamo::ops {

// ir::DType numbers are DType's order plus one (0 is UNSPECIFIED).
ir::DType ToProto(DType dtype) { return static_cast<ir::DType>(static_cast<int>(dtype) + 1); }

absl::StatusOr<DType> FromProto(ir::DType dtype) {
  const int v = static_cast<int>(dtype);
  if (v < 1 || v > kNumDTypes) return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", v));
  return static_cast<DType>(v - 1);
}

ir::TensorMeta ToProto(const TensorMeta& meta) {
  ir::TensorMeta pb;
  pb.set_dtype(ToProto(meta.dtype));
  int symbol = 0;
  for (int64_t s : meta.sizes) {
    ir::Dim* d = pb.add_sizes();
    if (s == kDynamicSize) {
      d->set_symbol(absl::StrCat("u", symbol++));  // an unbacked, data-dependent size
    } else {
      d->set_size(s);
    }
  }
  for (int64_t s : meta.strides) pb.add_strides()->set_size(s);
  pb.mutable_device()->set_type(meta.device.type);
  pb.mutable_device()->set_index(meta.device.index);
  pb.set_requires_grad(meta.requires_grad);
  pb.set_data_dependent(meta.data_dependent);
  return pb;
}

void SetSymDims(const std::vector<SymExpr>& exprs, google::protobuf::RepeatedPtrField<ir::Dim>* dims) {
  dims->Clear();
  for (const SymExpr& e : exprs) {
    ir::Dim* d = dims->Add();
    if (std::optional<int64_t> c = e.constant()) {
      d->set_size(*c);
    } else if (std::optional<std::string> name = e.symbol_name()) {
      d->set_symbol(*name);
    } else {
      d->set_expr(e.ToString());
    }
  }
}

absl::StatusOr<TensorMeta> FromProto(const ir::TensorMeta& pb) {
  TensorMeta meta;
  absl::StatusOr<DType> dtype = FromProto(pb.dtype());
  if (!dtype.ok()) return dtype.status();
  meta.dtype = *dtype;
  for (const ir::Dim& d : pb.sizes()) {
    meta.sizes.push_back(d.value_case() == ir::Dim::kSize ? d.size() : kDynamicSize);
  }
  for (const ir::Dim& d : pb.strides()) {
    if (d.value_case() != ir::Dim::kSize) {
      return absl::UnimplementedError("symbolic strides are not supported by the op registry");
    }
    meta.strides.push_back(d.size());
  }
  meta.device.type = pb.device().type();
  meta.device.index = pb.device().index();
  meta.requires_grad = pb.requires_grad();
  meta.data_dependent = pb.data_dependent();
  return meta;
}

absl::StatusOr<ir::Argument> ToArgument(const Value& value) {
  ir::Argument arg;
  if (value.is_none()) {
    arg.mutable_none();
  } else if (value.is_bool()) {
    arg.set_bool_value(value.as_bool());
  } else if (value.is_int()) {
    arg.set_int_value(value.as_int());
  } else if (value.is_float()) {
    arg.set_float_value(value.as_float());
  } else if (value.is_string()) {
    arg.set_string_value(value.as_string());
  } else if (value.is_dtype()) {
    arg.set_dtype(ToProto(value.as_dtype()));
  } else if (value.is_device()) {
    arg.mutable_device()->set_type(value.as_device().type);
    arg.mutable_device()->set_index(value.as_device().index);
  } else if (value.is_slice()) {
    const Slice& s = value.as_slice();
    ir::Slice* pb = arg.mutable_slice();
    if (s.start) pb->set_start(*s.start);
    if (s.stop) pb->set_stop(*s.stop);
    if (s.step) pb->set_step(*s.step);
  } else if (value.is_ellipsis()) {
    arg.mutable_ellipsis();
  } else if (value.is_memory_format()) {
    arg.set_memory_format(
        static_cast<ir::MemoryFormat>(static_cast<int>(value.as_memory_format()) + 1));
  } else if (value.is_list()) {
    ir::ArgumentList* list = arg.mutable_list();
    list->set_is_tuple(value.as_list().is_tuple);
    for (const Value& item : value.items()) {
      absl::StatusOr<ir::Argument> a = ToArgument(item);
      if (!a.ok()) return a.status();
      *list->add_items() = *std::move(a);
    }
  } else {
    return absl::InvalidArgumentError("a tensor is not a constant argument");
  }
  return arg;
}

absl::StatusOr<ir::ValueMeta> ToValueMeta(const Value& value) {
  ir::ValueMeta meta;
  if (value.is_tensor()) {
    *meta.mutable_tensor() = ToProto(value.as_tensor());
  } else if (value.is_list() && !value.items().empty() && value.items()[0].is_tensor()) {
    for (const Value& item : value.items()) {
      absl::StatusOr<ir::ValueMeta> m = ToValueMeta(item);
      if (!m.ok()) return m.status();
      *meta.mutable_tuple()->add_items() = *std::move(m);
    }
  } else {
    absl::StatusOr<ir::Argument> a = ToArgument(value);
    if (!a.ok()) return a.status();
    *meta.mutable_constant() = *std::move(a);
  }
  return meta;
}

}  // namespace dynamo::ops
