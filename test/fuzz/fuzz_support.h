// Shared by the fuzz harnesses (test/fuzz/*_fuzz.cc). Each harness defines
// libFuzzer's entry point, LLVMFuzzerTestOneInput, and is linked twice:
//
//   - with libFuzzer (clang, -DDYNAMO_FUZZ=ON; scripts/fuzz.sh): mutation,
//     under AddressSanitizer and UndefinedBehaviorSanitizer;
//   - with replay_main.cc (any compiler, the default build): replays the
//     seed corpus and every input a fuzzer once crashed on, as a CTest test.
//
// A harness reports a broken property with FUZZ_CHECK, which aborts: to
// libFuzzer an abort is a crash, so the input is saved and minimised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace dynamo::fuzz {

// Starts the embedded interpreter once per process (never finalized: the
// harness runs until the process exits).
void EnsurePython();

// Prints `what` (with the input's size) and aborts.
[[noreturn]] void Fail(absl::string_view what, size_t input_size);

// A cursor over the fuzzer's bytes: takes small integers and slices off the
// front, and answers 0 / empty once the bytes run out.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t TakeByte() { return size_ ? (--size_, *data_++) : 0; }
  uint16_t TakeU16() { return static_cast<uint16_t>(TakeByte() | (TakeByte() << 8)); }
  absl::string_view Take(size_t n);
  absl::string_view Rest() { return Take(size_); }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace dynamo::fuzz

#define FUZZ_CHECK(cond, what, size)                  \
  do {                                                \
    if (!(cond)) ::dynamo::fuzz::Fail((what), (size)); \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
