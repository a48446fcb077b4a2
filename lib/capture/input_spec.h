// The offline input syntax of dynamo-export's --input: what each argument of
// the captured function is, without a real value for tensors.
//
//   f32[8,3,224,224]       a float32 tensor of that shape (contiguous, cpu)
//   i64[1,128]@cuda:0      an int64 tensor on a device
//   f32[16]:grad           one that requires grad
//   f32[]                  a 0-d tensor
//   int:3  3  float:0.5  0.5  bool:true  True  str:relu  None
//   [f32[3],f32[3]]  (f32[3],int:2)  {a:f32[2],b:None}   nested containers
//   x=f32[4]               by parameter name (otherwise positional, in order)
//
// Dtypes: f16 bf16 f32 f64 c64 c128 i8 i16 i32 i64 u8 b8|bool.
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/trace/translator.h"

namespace dynamo::capture {

// One --input: its parameter name ("" for positional) and its value.
struct ParsedInput {
  std::string name;
  trace::TraceInput value;
};

// Parses one spec; errors name the offending character position.
[[nodiscard]] absl::StatusOr<ParsedInput> ParseInputSpec(absl::string_view spec);

}  // namespace dynamo::capture
