#include "test/fuzz/fuzz_support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "lib/python/interpreter.h"

namespace dynamo::fuzz {

void EnsurePython() {
  static python::Interpreter* interpreter = [] {
    absl::StatusOr<std::unique_ptr<python::Interpreter>> py = python::Interpreter::Start();
    if (!py.ok()) {
      std::fprintf(stderr, "fuzz: cannot start Python: %s\n", std::string(py.status().message()).c_str());
      std::abort();
    }
    return py->release();  // lives until exit
  }();
  (void)interpreter;
}

void Fail(absl::string_view what, size_t input_size) {
  std::fprintf(stderr, "fuzz: property failed on a %zu-byte input: %.*s\n", input_size,
               static_cast<int>(what.size()), what.data());
  std::abort();
}

absl::string_view Bytes::Take(size_t n) {
  n = std::min(n, size_);
  absl::string_view out(reinterpret_cast<const char*>(data_), n);
  data_ += n;
  size_ -= n;
  return out;
}

}  // namespace dynamo::fuzz
