// Helpers shared by the Catch2 tests.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "lib/python/object.h"

namespace dynamo::testing {

// The project's source tree (for test data and the Python helpers in test/).
std::string SourceDir();

// Imports a module from test/python/ (put on sys.path on first use).
python::Object ImportTestModule(absl::string_view name);

// Defines `source` as a module named `name` and returns it.
python::Object ModuleFromSource(absl::string_view name, absl::string_view source);

// Fails the current test with the status message (and Python traceback).
#define DYNAMO_REQUIRE_OK(expr)                                          \
  do {                                                                   \
    const auto& _s = (expr);                                             \
    INFO(::dynamo::testing::Describe(::dynamo::testing::StatusOf(_s)));  \
    REQUIRE(::dynamo::testing::StatusOf(_s).ok());                       \
  } while (0)

std::string Describe(const absl::Status& status);
inline const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& s) { return s.status(); }

}  // namespace dynamo::testing
