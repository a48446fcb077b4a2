#include "tools/inspect/inspect.h"

#include "absl/strings/str_cat.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/disassemble.h"
#include "lib/python/interpreter.h"
#include "lib/python/script.h"

namespace dynamo::tools {

absl::Status RunInspect(const InspectOptions& options, std::string& out) {
  absl::StatusOr<std::unique_ptr<python::Interpreter>> py = python::Interpreter::Start();
  if (!py.ok()) return py.status();
  absl::StatusOr<python::Object> module =
      python::ImportScript(options.script, {.as_main = options.as_main});
  if (!module.ok()) return module.status();
  absl::StatusOr<python::Target> target = python::ResolveTarget(*module, options.function);
  if (!target.ok()) return target.status();
  absl::StatusOr<bytecode::DecodedCode> decoded =
      bytecode::Decode(target->code, {.nested = options.nested});
  if (!decoded.ok()) return decoded.status();

  std::string report = absl::StrCat("ORIGINAL BYTECODE\n=================\n\n");
  report += bytecode::Disassemble(*decoded, {.nested = options.nested});
  out = std::move(report);
  return absl::OkStatus();
}

}  // namespace dynamo::tools
