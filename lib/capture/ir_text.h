// IR values as the tools print them, Python-flavoured: one spelling shared
// by the report, the DOT picture and the capture diff, so that a shape in a
// diff reads exactly as it does in the report.
//
//   TensorText(meta)  -> "float32[1, 3, 224, 224]"
//   ArgText(arg)      -> "(2, 2)", "None", "torch.float32", "x"
//   GuardValue(guard) -> "float32[5, 4] strides [4, 1] cpu"
#pragma once

#include <string>

#include "proto/dynamo_ir.pb.h"

namespace dynamo::capture {

// torch's name for the dtype ("float32"); the enum's name when unknown.
[[nodiscard]] std::string DTypeText(ir::DType d);
// "1, 3, s0": sizes or strides, symbols by name.
[[nodiscard]] std::string DimsText(const google::protobuf::RepeatedPtrField<ir::Dim>& dims);
// "cpu", "cuda:0".
[[nodiscard]] std::string DeviceText(const ir::Device& d);
// "float32[4, 16]", with "@cuda:0" off the CPU and " grad" when it requires grad.
[[nodiscard]] std::string TensorText(const ir::TensorMeta& m);
// An argument as Python would write it (a node by its name).
[[nodiscard]] std::string ArgText(const ir::Argument& a);
// A node's result: a tensor, a tuple of results or a constant; "" when unset.
[[nodiscard]] std::string MetaText(const ir::ValueMeta& m);
// FX's spelling of a node kind ("call_function").
[[nodiscard]] std::string KindText(ir::Node::Kind k);
// What a guard expects (a tensor's full metadata, an aliasing's groups, a value).
[[nodiscard]] std::string GuardValue(const ir::Guard& g);

}  // namespace dynamo::capture
