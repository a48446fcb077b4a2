// Fuzzes dynamo-export's --input parser (lib/capture/input_spec.h). On
// success the parsed value must be one the rest of the pipeline can take
// without overflow: a tensor has at most 64 dims, no negative size, an
// element count that fits in 62 bits, and metadata graph::CheckTensorMeta
// accepts once written as IR; its symbolic sizes name identifiers, one per
// dim. The same bytes go to the --dim parser: an accepted constraint has an
// example value inside its range and a multiple of its modulus.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/capture/input_spec.h"
#include "lib/graph/checker.h"
#include "lib/ops/proto_conversion.h"
#include "test/fuzz/fuzz_support.h"

namespace {

using dynamo::trace::TraceInput;

void CheckValue(const TraceInput& value, size_t size, int depth) {
  FUZZ_CHECK(depth <= 64, "containers nested deeper than the parser allows", size);
  if (value.kind == TraceInput::Kind::kTensor) {
    const auto& meta = value.tensor;
    FUZZ_CHECK(meta.sizes.size() <= 64, "more than 64 dims accepted", size);
    int64_t numel = 1;
    for (int64_t d : meta.sizes) {
      FUZZ_CHECK(d >= 0, "a negative size accepted", size);
      const int64_t extent = d > 1 ? d : 1;  // as strides multiply
      FUZZ_CHECK(numel <= (int64_t{1} << 62) / extent, "an element count past 2^62 accepted", size);
      numel *= extent;
    }
    dynamo::ir::TensorMeta ir = dynamo::ops::ToProto(meta);
    absl::StatusOr<dynamo::ops::TensorMeta> back = dynamo::ops::FromProto(ir);
    FUZZ_CHECK(back.ok() && *back == meta, "a parsed tensor does not survive the IR round trip", size);
    absl::Status s = dynamo::graph::CheckTensorMeta(ir);
    FUZZ_CHECK(s.ok(), absl::StrCat("a parsed tensor fails the IR checker: ", s.message()), size);
  }
  if (value.kind == TraceInput::Kind::kDict) {
    FUZZ_CHECK(value.keys.size() == value.items.size(), "dict keys and values differ in number", size);
  }
  for (const TraceInput& item : value.items) CheckValue(item, size, depth + 1);
}

// The --dim half, run on every input too.
void CheckDimSpec(const std::string& text, size_t size) {
  absl::StatusOr<dynamo::capture::DimSpec> d = dynamo::capture::ParseDimSpec(text);
  if (!d.ok()) {
    FUZZ_CHECK(d.status().message().find('\n') == absl::string_view::npos, "a --dim error spans several lines", size);
    return;
  }
  FUZZ_CHECK(d->min >= 1 && d->multiple >= 1, "a --dim range below 1 or a modulus below 1 accepted", size);
  FUZZ_CHECK(d->example >= 2 && d->example >= d->min && (d->max == 0 || d->example <= d->max),
             "a --dim example value outside its range", size);
  FUZZ_CHECK(d->example % d->multiple == 0, "a --dim example value that is no multiple", size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dynamo::fuzz::EnsurePython();
  const std::string spec(reinterpret_cast<const char*>(data), size);
  CheckDimSpec(spec, size);
  absl::StatusOr<dynamo::capture::ParsedInput> parsed = dynamo::capture::ParseInputSpec(spec);
  if (!parsed.ok()) {
    // One line, as the CLIs print it.
    FUZZ_CHECK(parsed.status().message().find('\n') == absl::string_view::npos,
               "an error message spans several lines", size);
    return 0;
  }
  CheckValue(parsed->value, size, 0);
  if (!parsed->value.dim_symbols.empty()) {
    FUZZ_CHECK(parsed->value.dim_symbols.size() == parsed->value.tensor.sizes.size(),
               "symbolic sizes not one per dim", size);
  }
  return 0;
}
