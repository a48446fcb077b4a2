#include "lib/capture/report.h"

#include <algorithm>
#include <functional>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "lib/capture/ir_text.h"
#include "lib/graph/checker.h"

namespace dynamo::capture {
namespace {

// A DOT string literal's contents.
std::string DotQuote(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// The nodes an argument reads (nested lists and dicts included).
void ReadNodes(const ir::Argument& a, std::vector<std::string>& out) {
  if (a.value_case() == ir::Argument::kNode) out.push_back(a.node());
  if (a.value_case() == ir::Argument::kList) {
    for (const ir::Argument& item : a.list().items()) ReadNodes(item, out);
  }
  if (a.value_case() == ir::Argument::kDict) {
    for (const ir::Argument& v : a.dict().values()) ReadNodes(v, out);
  }
  if (a.value_case() == ir::Argument::kSlice) {
    for (const std::string* n : {&a.slice().start_node(), &a.slice().stop_node(), &a.slice().step_node()}) {
      if (!n->empty()) out.push_back(*n);
    }
  }
}

// Columns padded to their widest cell, as print_tabular does.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < rows[r].size(); ++i) {
      line += rows[r][i];
      if (i + 1 < rows[r].size()) line += std::string(widths[i] - rows[r][i].size() + 2, ' ');
    }
    out += line + "\n";
    if (r == 0) {
      std::string rule;
      for (size_t i = 0; i < widths.size(); ++i) {
        rule += std::string(widths[i], '-') + (i + 1 < widths.size() ? "  " : "");
      }
      out += rule + "\n";
    }
  }
  return out;
}

std::string Listing(const ir::BytecodeListing& listing) {
  std::string out;
  for (const ir::BytecodeInstruction& in : listing.instructions()) {
    std::string line = in.line() > 0 ? absl::StrFormat("%4d", in.line()) : "    ";
    absl::StrAppend(&out, line, absl::StrFormat(" %6d %-20s", in.offset(), in.opname()));
    if (in.arg() != 0 || !in.argrepr().empty()) absl::StrAppend(&out, absl::StrFormat(" %5d", in.arg()));
    if (!in.argrepr().empty()) absl::StrAppend(&out, " (", in.argrepr(), ")");
    out += "\n";
  }
  return out;
}

}  // namespace

std::string FormatReport(const ir::Capture& c, const std::string& original_listing) {
  std::string out = absl::StrCat("CAPTURE ", c.function_name(), " (", c.source_file(), ":",
                                 c.first_line(), ") — Python ", c.python_version(), ", torch ",
                                 c.torch_version(), ", ", c.graphs_size(), " graph",
                                 c.graphs_size() == 1 ? "" : "s", ", ", c.graph_breaks_size(),
                                 " graph break", c.graph_breaks_size() == 1 ? "" : "s", "\n\n");
  absl::StrAppend(&out, "ORIGINAL BYTECODE\n\n",
                  original_listing.empty() ? Listing(c.original_bytecode()) : original_listing, "\n");
  if (c.rewritten_bytecode().instructions_size() > 0) {
    absl::StrAppend(&out, "MODIFIED BYTECODE",
                    c.graph_index() >= 0 && c.graph_index() < c.graphs_size()
                        ? absl::StrCat(" (calls ", c.graphs(c.graph_index()).name(), ")") : "",
                    "\n\n", Listing(c.rewritten_bytecode()), "\n");
  }
  for (const ir::ResumeFunction& r : c.resume_functions()) {
    absl::StrAppend(&out, "RESUME FUNCTION ", r.name(), " (continues at offset ", r.offset(),
                    r.caller().empty() ? "" : absl::StrCat(", called by ", r.caller()), ")",
                    r.captured() ? "" : " — runs as plain Python", "\n\n", Listing(r.bytecode()), "\n");
    if (r.traced()) {
      absl::StrAppend(&out, "MODIFIED BYTECODE of ", r.name(),
                      r.graph_index() >= 0 && r.graph_index() < c.graphs_size()
                          ? absl::StrCat(" (calls ", c.graphs(r.graph_index()).name(), ")") : "",
                      "\n\n", Listing(r.rewritten_bytecode()), "\n");
    } else if (!r.note().empty()) {
      absl::StrAppend(&out, "  (", r.note(), ")\n\n");
    }
  }
  if (c.inputs_size() > 0) {
    out += "INPUTS\n";
    for (const ir::InputSpec& in : c.inputs()) {
      absl::StrAppend(&out, "  ", in.name(), ": ",
                      in.has_tensor() ? TensorText(in.tensor()) : ArgText(in.constant()), "\n");
    }
    out += "\n";
  }
  // A graph, then the subgraphs its higher-order ops call (torch.cond's
  // branches), named by their path ("graph_0.cond_true_0").
  std::function<void(const ir::Graph&, const std::string&)> print_graph = [&](const ir::Graph& g,
                                                                               const std::string& path) {
    std::vector<std::vector<std::string>> rows = {{"opcode", "name", "target", "args", "kwargs", "meta"}};
    std::vector<std::string> on_meta;  // targets the op registry has no entry for
    int calls = 0;
    for (const ir::Node& n : g.nodes()) {
      calls += n.kind() == ir::Node::CALL_FUNCTION || n.kind() == ir::Node::CALL_METHOD;
      if (n.inferred_on_meta() && std::find(on_meta.begin(), on_meta.end(), n.target()) == on_meta.end()) {
        on_meta.push_back(n.target());
      }
      std::vector<std::string> args, kwargs;
      for (const ir::Argument& a : n.args()) args.push_back(ArgText(a));
      for (const ir::KeywordArgument& k : n.kwargs()) kwargs.push_back(absl::StrCat(k.name(), ": ", ArgText(k.value())));
      rows.push_back({KindText(n.kind()), n.name(), n.inferred_on_meta() ? absl::StrCat(n.target(), " [meta]") : n.target(),
                      absl::StrCat("(", absl::StrJoin(args, ", "), args.size() == 1 ? ",)" : ")"),
                      absl::StrCat("{", absl::StrJoin(kwargs, ", "), "}"), MetaText(n.meta())});
    }
    absl::StrAppend(&out, "GRAPH ", path, " (", g.nodes_size(), " nodes)\n\n", Table(rows), "\n");
    if (!on_meta.empty()) {
      int inferred = 0;
      for (const ir::Node& n : g.nodes()) inferred += n.inferred_on_meta();
      absl::StrAppend(&out, "[meta]: ", inferred, " of ", calls,
                      " call nodes inferred by torch's meta kernels (no op-registry entry): ",
                      absl::StrJoin(on_meta, ", "), "\n\n");
    }
    for (const ir::Graph& sub : g.subgraphs()) print_graph(sub, absl::StrCat(path, ".", sub.name()));
  };
  for (const ir::Graph& g : c.graphs()) print_graph(g, g.name());
  absl::StrAppend(&out, "GUARDS (", c.guards_size(), ")\n\n");
  std::vector<std::vector<std::string>> guard_rows = {{"kind", "source", "expected"}};
  for (const ir::Guard& g : c.guards()) {
    guard_rows.push_back({ir::Guard::Kind_Name(g.kind()), g.source(), GuardValue(g)});
  }
  if (c.guards_size() > 0) out += Table(guard_rows);
  absl::StrAppend(&out, "\nGRAPH BREAKS (", c.graph_breaks_size(), ")\n");
  int i = 0;
  for (const ir::GraphBreak& b : c.graph_breaks()) {
    absl::StrAppend(&out, "\n  ", ++i, ". ", b.location().file(), ":", b.location().line(), "  ",
                    ir::GraphBreak::Reason_Name(b.reason()), " at ", b.opcode(), " (offset ",
                    b.offset(), ")\n");
    if (!b.location().text().empty()) absl::StrAppend(&out, "     ", b.location().text(), "\n");
    absl::StrAppend(&out, "     ", b.message(), "\n");
    if (!b.hint().empty()) absl::StrAppend(&out, "     hint: ", b.hint(), "\n");
  }
  return out;
}

namespace {

// A parser's message as part of one error line: newlines and tabs become
// spaces, and a very long message (a JSON parser may quote its input) is cut.
std::string OneLine(absl::string_view message) {
  constexpr size_t kMax = 300;
  std::string out(message.substr(0, kMax));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (message.size() > kMax) out += "...";
  return out;
}

// Keeps the text parser's complaints out of stderr: the caller reports one
// line of its own.
class QuietErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (first.empty()) first = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  std::string first;
};

// Routes protobuf's log lines (the binary parser's "invalid UTF-8" among
// them) into `first_` while it lives, instead of stderr. The handler is
// process-wide, so the parse that installs it holds a lock.
class ProtobufLogCapture {
 public:
  ProtobufLogCapture() : lock_(&mutex_) {
    first_.clear();
    previous_ = google::protobuf::SetLogHandler(&Record);
  }
  ~ProtobufLogCapture() { google::protobuf::SetLogHandler(previous_); }
  ProtobufLogCapture(const ProtobufLogCapture&) = delete;
  ProtobufLogCapture& operator=(const ProtobufLogCapture&) = delete;
  const std::string& first() const { return first_; }

 private:
  static void Record(google::protobuf::LogLevel, const char*, int, const std::string& message) {
    if (first_.empty()) first_ = message;
  }
  static inline absl::Mutex mutex_;
  static inline std::string first_;
  absl::MutexLock lock_;
  google::protobuf::LogHandler* previous_ = nullptr;
};

}  // namespace

CaptureFormat CaptureFormatOf(absl::string_view path) {
  if (absl::EndsWith(path, ".pbtxt")) return CaptureFormat::kText;
  if (absl::EndsWith(path, ".json")) return CaptureFormat::kJson;
  return CaptureFormat::kBinary;
}

absl::StatusOr<ir::Capture> ParseCapture(absl::string_view data, CaptureFormat format,
                                         absl::string_view name) {
  ir::Capture c;
  std::string why;
  {
    ProtobufLogCapture log;
    bool ok = false;
    switch (format) {
      case CaptureFormat::kText: {
        // The text parser recurses per nested message with no limit of its
        // own; the binary and JSON parsers stop at 100, and so does this one.
        google::protobuf::TextFormat::Parser parser;
        QuietErrors quiet;
        parser.RecordErrorsTo(&quiet);
        parser.SetRecursionLimit(100);
        ok = parser.ParseFromString(std::string(data), &c);
        why = quiet.first;
        break;
      }
      case CaptureFormat::kJson: {
        const auto s = google::protobuf::util::JsonStringToMessage(std::string(data), &c);
        ok = s.ok();
        if (!ok) why = std::string(s.message().data(), s.message().size());
        break;
      }
      case CaptureFormat::kBinary:
        ok = c.ParseFromArray(data.data(), static_cast<int>(data.size()));
        break;
    }
    if (ok && format != CaptureFormat::kBinary) {
      // The text and JSON parsers take strings that are not UTF-8, which
      // the binary format and every writer refuse: serialising finds them
      // (protobuf logs them).
      std::string bytes;
      ok = c.SerializeToString(&bytes) && log.first().empty();
    }
    if (why.empty()) why = log.first();
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a libdynamo capture",
                                                     why.empty() ? "" : ": ", OneLine(why)));
    }
  }
  // Fields this build does not know carry nothing it could use (a newer IR
  // is refused below), and the text printer would write them as numbers no
  // reader accepts: they go.
  c.DiscardUnknownFields();
  // Every writer sets the version; an empty file (or a directory, which
  // reads as one) parses as a capture without it.
  if (c.ir_version() == ir::IR_VERSION_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a libdynamo capture (no IR version)"));
  }
  if (c.ir_version() > ir::IR_VERSION_CURRENT) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' has IR version ", c.ir_version(),
                                                   "; this build reads up to ",
                                                   static_cast<int>(ir::IR_VERSION_CURRENT)));
  }
  if (absl::Status s = graph::CheckCapture(c); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a valid libdynamo capture: ", OneLine(s.message())));
  }
  return c;
}

absl::StatusOr<ir::Capture> ReadCapture(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseCapture(buffer.str(), CaptureFormatOf(path), path);
}

std::string FormatDot(const ir::Capture& c) {
  std::string out = "digraph capture {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  absl::StrAppend(&out, "  label=\"", DotQuote(absl::StrCat(c.function_name(), " (", c.source_file(), ":",
                                                            c.first_line(), ")")),
                  "\";\n  labelloc=t;\n");
  // Graphs and breaks in program order: graph i, then break i before graph i + 1.
  std::vector<std::pair<std::string, std::string>> chain;  // (entered at, left from)
  for (int g = 0; g < c.graphs_size(); ++g) {
    const ir::Graph& graph = c.graphs(g);
    const std::string prefix = absl::StrCat("g", g, "_");
    absl::StrAppend(&out, "  subgraph cluster_", g, " {\n    label=\"", DotQuote(graph.name()), "\";\n");
    for (const ir::Node& n : graph.nodes()) {
      std::string label, shape = "box", fill = "white";
      switch (n.kind()) {
        case ir::Node::PLACEHOLDER:
          label = absl::StrCat("input ", n.name(), "\n", MetaText(n.meta()));
          shape = "ellipse";
          fill = "#dbeafe";
          break;
        case ir::Node::GET_ATTR:
          label = absl::StrCat(n.target(), "\n", MetaText(n.meta()));
          shape = "ellipse";
          fill = "#fef3c7";
          break;
        case ir::Node::OUTPUT:
          label = "output";
          shape = "oval";
          fill = "#e5e7eb";
          break;
        default:
          label = absl::StrCat(n.name(), ": ", n.target(), "\n", MetaText(n.meta()));
      }
      absl::StrAppend(&out, "    \"", prefix, DotQuote(n.name()), "\" [label=\"", DotQuote(label), "\", shape=", shape,
                      ", style=filled, fillcolor=\"", fill, "\"];\n");
    }
    for (const ir::Node& n : graph.nodes()) {
      std::vector<std::string> reads;
      for (const ir::Argument& a : n.args()) ReadNodes(a, reads);
      for (const ir::KeywordArgument& k : n.kwargs()) ReadNodes(k.value(), reads);
      for (const std::string& r : reads) {
        absl::StrAppend(&out, "    \"", prefix, DotQuote(r), "\" -> \"", prefix, DotQuote(n.name()), "\";\n");
      }
    }
    absl::StrAppend(&out, "  }\n");
    // The chain enters a graph at its first node and leaves from its last.
    if (graph.nodes_size() > 0) {
      chain.push_back({absl::StrCat(prefix, graph.nodes(0).name()),
                       absl::StrCat(prefix, graph.nodes(graph.nodes_size() - 1).name())});
    }
    if (g < c.graph_breaks_size()) chain.push_back({absl::StrCat("break_", g), absl::StrCat("break_", g)});
  }
  for (int b = 0; b < c.graph_breaks_size(); ++b) {
    const ir::GraphBreak& gb = c.graph_breaks(b);
    if (b >= c.graphs_size()) chain.push_back({absl::StrCat("break_", b), absl::StrCat("break_", b)});
    std::string label = absl::StrCat("graph break: ", gb.message(), "\n", gb.location().file(), ":",
                                     gb.location().line());
    if (!gb.location().text().empty()) absl::StrAppend(&label, "\n", gb.location().text());
    absl::StrAppend(&out, "  \"break_", b, "\" [label=\"", DotQuote(label),
                    "\", shape=note, color=\"#b91c1c\", fontcolor=\"#b91c1c\"];\n");
  }
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    absl::StrAppend(&out, "  \"", DotQuote(chain[i].second), "\" -> \"", DotQuote(chain[i + 1].first),
                    "\" [style=dashed, color=\"#6b7280\"];\n");
  }
  out += "}\n";
  return out;
}

}  // namespace dynamo::capture
