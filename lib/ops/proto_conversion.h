// Conversions between the registry's C++ metadata (meta.h, value.h) and the
// graph IR's messages (proto/dynamo_ir.proto), for the graph builder and the
// tools.
//
//   ir::TensorMeta pb = ToProto(TensorMeta::Contiguous(DType::kFloat32, {2, 3}));
//   absl::StatusOr<TensorMeta> back = FromProto(pb);   // equal to the original
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "lib/ops/sym.h"
#include "lib/ops/value.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::ops {

ir::DType ToProto(DType dtype);
absl::StatusOr<DType> FromProto(ir::DType dtype);
ir::TensorMeta ToProto(const TensorMeta& meta);
// Symbolic sizes are not representable yet in the registry: they read back
// as kDynamicSize with data_dependent set.
absl::StatusOr<TensorMeta> FromProto(const ir::TensorMeta& meta);
// Symbolic sizes or strides (dynamic shapes) into `dims`, one per
// expression: a constant as a size, a lone symbol as a symbol, anything else
// as an expression (ir::Dim.expr).
void SetSymDims(const std::vector<SymExpr>& exprs, google::protobuf::RepeatedPtrField<ir::Dim>* dims);
// A result of Registry::Infer as node metadata (tensors, tuples, constants).
absl::StatusOr<ir::ValueMeta> ToValueMeta(const Value& value);
// A constant Value as an IR argument (tensors are not constants: error).
absl::StatusOr<ir::Argument> ToArgument(const Value& value);

}  // namespace dynamo::ops
