#include "tools/inspect/inspect.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <Python.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/bytecode/decoder.h"
#include "lib/bytecode/disassemble.h"
#include "lib/capture/capture.h"
#include "lib/capture/diff.h"
#include "lib/capture/report.h"
#include "lib/python/interpreter.h"
#include "lib/python/script.h"
#include "tools/common/supervise.h"

namespace dynamo::tools {
namespace {

// The function's bytecode as dis lists it, nested code objects included.
absl::StatusOr<std::string> Listing(const InspectOptions& options, bytecode::DecodedCode* keep) {
  absl::StatusOr<python::Object> module =
      python::ImportScript(options.script, {.as_main = options.as_main});
  if (!module.ok()) return module.status();
  absl::StatusOr<python::Target> target = python::ResolveTarget(*module, options.function);
  if (!target.ok()) return target.status();
  absl::StatusOr<bytecode::DecodedCode> decoded =
      bytecode::Decode(target->code, {.nested = options.nested});
  if (!decoded.ok()) return decoded.status();
  std::string text = bytecode::Disassemble(*decoded, {.nested = options.nested});
  if (keep != nullptr) *keep = *std::move(decoded);
  return text;
}

// The report with every control character but newline and tab shown as an
// escape: a capture's strings (or a script's) could otherwise drive the
// terminal that prints them (retitle it, clear it, fake lines).
std::string Printable(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      // A C1 control (U+0080..U+009F) in UTF-8.
      absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(text[++i]), absl::kZeroPad2));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// Everything the tool does for a script, in this process.
absl::StatusOr<InspectReport> InspectScript(const InspectOptions& options) {
  InspectReport report;
  absl::StatusOr<std::unique_ptr<python::Interpreter>> py = python::Interpreter::Start();
  if (!py.ok()) return py.status();
  if (options.inputs.empty() && options.example_inputs.empty()) {
    absl::StatusOr<std::string> listing = Listing(options, nullptr);
    if (!listing.ok()) return listing.status();
    report.text = absl::StrCat("ORIGINAL BYTECODE\n=================\n\n", *listing);
    return report;
  }

  capture::CaptureOptions capture_options;
  capture_options.script = options.script;
  capture_options.function = options.function;
  capture_options.as_main = options.as_main;
  capture_options.inputs = options.inputs;
  capture_options.example_inputs = options.example_inputs;
  // The report shows everything: graphs past breaks and the rewritten code.
  capture_options.allow_breaks = true;
  absl::StatusOr<capture::Captured> captured = capture::CaptureFunction(capture_options);
  std::optional<ir::GraphBreak> graph_break;
  if (!captured.ok()) {
    graph_break = capture::GraphBreakOf(captured.status());
    if (!graph_break) return captured.status();
  }
  // One decode serves the listing and, after a break, the capture's header.
  bytecode::DecodedCode decoded;
  absl::StatusOr<std::string> listing = Listing(options, &decoded);
  if (!listing.ok()) return listing.status();
  ir::Capture c;
  if (captured.ok()) {
    c = std::move(captured->capture);
  } else {
    // The capture stopped at a break: report what is known, and the break.
    c.set_ir_version(ir::IR_VERSION_CURRENT);
    c.set_python_version(absl::StrCat(PY_MAJOR_VERSION, ".", PY_MINOR_VERSION, ".", PY_MICRO_VERSION));
    c.set_source_file(decoded.filename);
    c.set_function_name(decoded.qualname);
    c.set_first_line(decoded.first_line);
    *c.add_graph_breaks() = *graph_break;
  }
  report.breaks = c.graph_breaks_size();
  if (options.picture) report.dot = capture::FormatDot(c);
  if (options.json) {
    absl::StatusOr<std::string> json = capture::Serialize(c, "json");
    if (!json.ok()) return json.status();
    report.text = *json;
    return report;
  }
  report.text = capture::FormatReport(c, *listing);
  return report;
}

// A saved capture: protobuf parsing only, no Python, nothing to supervise.
absl::StatusOr<InspectReport> InspectCaptureFile(const InspectOptions& options) {
  InspectReport report;
  absl::StatusOr<ir::Capture> c = capture::ReadCapture(options.script);
  if (!c.ok()) return c.status();
  report.breaks = c->graph_breaks_size();
  if (options.picture) report.dot = capture::FormatDot(*c);
  if (options.json) {
    absl::StatusOr<std::string> json = capture::Serialize(*c, "json");
    if (!json.ok()) return json.status();
    report.text = *json;
  } else {
    report.text = capture::FormatReport(*c);
  }
  return report;
}

}  // namespace

bool IsCaptureFile(const std::string& path) {
  return absl::EndsWith(path, ".pb") || absl::EndsWith(path, ".pbtxt") ||
         absl::EndsWith(path, ".json");
}

absl::StatusOr<InspectReport> RunInspect(const InspectOptions& options) {
  if (!(options.timeout_seconds >= 0)) {
    return absl::InvalidArgumentError("the timeout must be a number of seconds, 0 for none");
  }
  absl::StatusOr<InspectReport> report;
  if (IsCaptureFile(options.script)) {
    report = InspectCaptureFile(options);
  } else if (options.function.empty()) {
    return absl::InvalidArgumentError("--fn is required for a script");
  } else {
    // The script runs in a child process: it can end or hang that one only.
    absl::StatusOr<std::vector<std::string>> out = RunSupervised(
        [&]() -> absl::StatusOr<std::vector<std::string>> {
          absl::StatusOr<InspectReport> r = InspectScript(options);
          if (!r.ok()) return r.status();
          return std::vector<std::string>{r->text, absl::StrCat(r->breaks), r->dot};
        },
        {.timeout_seconds = options.timeout_seconds, .what = "the inspection"});
    if (!out.ok()) return out.status();
    if (out->size() != 3) return absl::InternalError("the inspection sent back an unexpected result");
    report = InspectReport{.text = std::move((*out)[0]), .breaks = 0, .dot = std::move((*out)[2])};
    if (!absl::SimpleAtoi((*out)[1], &report->breaks)) return absl::InternalError("bad break count");
  }
  if (!report.ok()) return report.status();
  report->text = Printable(report->text);
  return report;
}

absl::StatusOr<DiffReport> RunDiff(const DiffOptions& options) {
  std::vector<ir::Capture> captures;
  for (const std::string& path : {options.a, options.b}) {
    // A script would otherwise be parsed as a binary capture and refused for
    // a reason that does not help; say what --diff takes instead.
    if (!IsCaptureFile(path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--diff compares saved captures (.pb, .pbtxt or .json), not '", path,
                       "': save one with dynamo-export first"));
    }
    absl::StatusOr<ir::Capture> c = capture::ReadCapture(path);
    if (!c.ok()) return c.status();
    captures.push_back(*std::move(c));
  }
  const capture::CaptureDiff diff = capture::DiffCaptures(captures[0], captures[1]);
  DiffReport report{.text = "", .equal = diff.equal()};
  report.text = Printable(options.json ? capture::FormatDiffJson(diff, options.a, options.b)
                                       : capture::FormatDiff(diff, options.a, options.b));
  return report;
}

absl::StatusOr<std::string> RenderSvg(const std::string& dot) {
  // The DOT goes through a private temporary file; the command line holds
  // only that name, which mkstemp made.
  std::string temp = (std::filesystem::temp_directory_path() / "dynamo_inspect_XXXXXX").string();
  int fd = mkstemp(temp.data());
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot make a temporary file: ", std::strerror(errno)));
  const bool wrote = write(fd, dot.data(), dot.size()) == static_cast<ssize_t>(dot.size());
  close(fd);
  struct Unlink {
    std::string path;
    ~Unlink() { unlink(path.c_str()); }
  } remove_temp{temp};
  if (!wrote) return absl::InternalError("cannot write the temporary DOT file");
  FILE* pipe = popen(absl::StrCat("dot -Tsvg '", temp, "' 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run Graphviz's dot: ", std::strerror(errno)));
  std::string svg;
  char buffer[65536];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) svg.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0 && WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::FailedPreconditionError(
        "--svg needs Graphviz's dot on PATH (Debian: apt install graphviz); --dot FILE writes the DOT source");
  }
  if (status != 0 || svg.empty()) return absl::InternalError("Graphviz's dot failed to draw the capture");
  return svg;
}

}  // namespace dynamo::tools
