// Fuzzes the capture readers (lib/capture/report.h's ParseCapture: binary,
// text and JSON) and everything dynamo-inspect does with what they accept.
// Input: one byte choosing the format, then the file's bytes. Properties of
// an accepted capture: the report, the DOT picture and a diff with itself
// are made without a crash, the diff is empty, and the capture written back
// in each format is accepted again and equal to it.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "lib/capture/capture.h"
#include "lib/capture/diff.h"
#include "lib/capture/report.h"
#include "test/fuzz/fuzz_support.h"

namespace {

using dynamo::capture::CaptureFormat;

struct Encoding {
  CaptureFormat format;
  const char* name;  // Serialize's name for it
};
constexpr Encoding kEncodings[] = {
    {CaptureFormat::kBinary, "pb"}, {CaptureFormat::kText, "pbtxt"}, {CaptureFormat::kJson, "json"}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dynamo::fuzz::Bytes bytes(data, size);
  const Encoding& encoding = kEncodings[bytes.TakeByte() % 3];
  absl::StatusOr<dynamo::ir::Capture> c =
      dynamo::capture::ParseCapture(bytes.Rest(), encoding.format, "input");
  if (!c.ok()) {
    FUZZ_CHECK(c.status().message().find('\n') == absl::string_view::npos,
               "a reader's error spans several lines", size);
    return 0;
  }
  const std::string report = dynamo::capture::FormatReport(*c);
  const std::string dot = dynamo::capture::FormatDot(*c);
  FUZZ_CHECK(!report.empty() && !dot.empty(), "an accepted capture printed as nothing", size);
  const dynamo::capture::CaptureDiff diff = dynamo::capture::DiffCaptures(*c, *c);
  FUZZ_CHECK(diff.equal(), "a capture differs from itself", size);
  (void)dynamo::capture::FormatDiff(diff, "a", "b");
  for (const Encoding& out : kEncodings) {
    absl::StatusOr<std::string> written = dynamo::capture::Serialize(*c, out.name);
    FUZZ_CHECK(written.ok(), absl::StrCat("an accepted capture cannot be written as ", out.name), size);
    absl::StatusOr<dynamo::ir::Capture> back = dynamo::capture::ParseCapture(*written, out.format, "written");
    FUZZ_CHECK(back.ok(), absl::StrCat("a capture written as ", out.name, " is refused: ",
                                       back.ok() ? "" : back.status().message()),
               size);
    FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*c, *back),
               absl::StrCat("a capture changes when written as ", out.name), size);
  }
  return 0;
}
