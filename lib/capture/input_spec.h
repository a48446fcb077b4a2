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
//   f32[B,3,224,224]       a symbolic size (dynamic shapes): any identifier;
//                          the same name in several inputs is one size
//
// Dtypes: f16 bf16 f32 f64 c64 c128 i8 i16 i32 i64 u8 b8|bool.
//
// A symbolic size's constraints come from --dim (ParseDimSpec):
//   B=1..64        a range, inclusive (either end may be left out: 8.., ..512)
//   T=%8           a multiple of 8
//   T=8..512,%8    both
//   B=..64,ex=4    the example value the trace runs with (default: 8, moved
//                  into the range and up to the multiple)
// A symbol without --dim ranges over [2, inf] with example 8.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/trace/translator.h"

namespace dynamo::capture {

// One --input: its parameter name ("" for positional) and its value.
struct ParsedInput {
  std::string name;
  trace::TraceInput value;
};

// One --dim: a symbolic size's range, modulus and example value.
struct DimSpec {
  std::string name;
  int64_t min = 2;
  int64_t max = 0;       // 0: unbounded
  int64_t multiple = 1;  // the size is a multiple of it
  int64_t example = 0;   // the value traced with; 0: chosen (see above)
};
using DimSpecs = absl::flat_hash_map<std::string, DimSpec>;

// Parses one --dim ("B=1..64", "T=8..512,%8,ex=64"); the example value is
// resolved (in range, a multiple). An empty range, or none that holds a
// multiple, is an error.
[[nodiscard]] absl::StatusOr<DimSpec> ParseDimSpec(absl::string_view text);

// Parses one spec; errors name the offending character position. A
// symbolic size takes its example value from `dims` (the default DimSpec
// when the name is not there).
[[nodiscard]] absl::StatusOr<ParsedInput> ParseInputSpec(absl::string_view spec, const DimSpecs& dims = {});

}  // namespace dynamo::capture
