// Python exceptions become absl::Status at every boundary of libdynamo.
//
//   Object mod = Object::Steal(PyImport_ImportModule(name));
//   if (!mod) return FetchError(absl::StrCat("importing ", name));
//   // -> "importing foo: ModuleNotFoundError: No module named 'foo'"
//
// The status message is one line ("<context>: <Type>: <message>"); the full
// Python traceback rides along as a payload for whoever wants to show it.
#pragma once

#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace dynamo::python {

// Takes the pending Python exception (clearing it) and returns it as a Status.
// Must be called with an exception set; without one it returns an internal
// error that says so rather than pretending success.
[[nodiscard]] absl::Status FetchError(absl::string_view context);

// The Python traceback text attached by FetchError, if any.
std::optional<std::string> PythonTraceback(const absl::Status& status);

// The exception's type name (e.g. "SyntaxError") attached by FetchError.
std::optional<std::string> PythonExceptionType(const absl::Status& status);

// "file.py:12": where the exception was raised (the innermost frame that is
// not importlib's frozen machinery), attached by FetchError when known.
std::optional<std::string> PythonRaiseSite(const absl::Status& status);

// KeyboardInterrupt and SystemExit are not libdynamo's to handle. Where
// libdynamo clears a Python exception it handles itself (a missing
// attribute, a probe that failed, an error turned into a Status by
// FetchError), these two are set aside for the thread instead, and the
// boundary the call came in through (dynamo._C's functions, the frame
// evaluator) raises them again, so Ctrl-C during a capture or a guard check
// stops the program as it would eagerly, and no capture, guard or "runs
// eagerly from now on" decision is made from a probe the interrupt cut short.

// PyErr_Clear, except that a pending KeyboardInterrupt or SystemExit is set
// aside (the first one wins) rather than dropped.
void ClearError();
// Whether this thread has an interrupt set aside.
bool InterruptPending();
// Makes the interrupt set aside the pending Python exception again and
// returns true (also when an interrupt is still the pending exception); false
// (nothing changed) when there is none.
bool RaisePendingInterrupt();

}  // namespace dynamo::python
