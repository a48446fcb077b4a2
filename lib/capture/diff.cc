#include "lib/capture/diff.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/capture/ir_text.h"

namespace dynamo::capture {
namespace {

using Kind = DiffLine::Kind;

// Unchanged lines shown around each change of a listing.
constexpr int kContext = 2;
// The largest middle (after the common head and tail are set aside) aligned
// by the quadratic LCS table: 16 MB. Past it the middle is shown as removed
// then added — still a true diff, only not the shortest.
constexpr size_t kMaxTableCells = size_t{4} << 20;

// One entry of a side: `key` says which entries correspond, `detail` is what
// may change between two that do ("a node's operation" vs "its shape").
struct Entry {
  std::string key;
  std::string detail;
};

std::string Joined(const Entry& e) { return e.detail.empty() ? e.key : absl::StrCat(e.key, ": ", e.detail); }

// The pairs (i, j) of a longest common subsequence of a and b, with (i, -1)
// for a line only in a and (-1, j) for one only in b, in reading order
// (within a gap, removals first, as a unified diff shows them).
std::vector<std::pair<int, int>> Align(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());
  int head = 0;
  while (head < n && head < m && a[head] == b[head]) ++head;
  int tail = 0;
  while (tail < n - head && tail < m - head && a[n - 1 - tail] == b[m - 1 - tail]) ++tail;
  const int rows = n - head - tail, cols = m - head - tail;

  std::vector<std::pair<int, int>> out;
  for (int k = 0; k < head; ++k) out.emplace_back(k, k);
  if (static_cast<size_t>(rows) * static_cast<size_t>(cols) > kMaxTableCells) {
    for (int i = 0; i < rows; ++i) out.emplace_back(head + i, -1);
    for (int j = 0; j < cols; ++j) out.emplace_back(-1, head + j);
  } else {
    // lcs[i][j]: the length of an LCS of the middles' suffixes from i and j.
    std::vector<uint32_t> lcs(static_cast<size_t>(rows + 1) * (cols + 1), 0);
    auto at = [&](int i, int j) -> uint32_t& { return lcs[static_cast<size_t>(i) * (cols + 1) + j]; };
    for (int i = rows - 1; i >= 0; --i) {
      for (int j = cols - 1; j >= 0; --j) {
        at(i, j) = a[head + i] == b[head + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
      }
    }
    int i = 0, j = 0;
    while (i < rows || j < cols) {
      if (i < rows && j < cols && a[head + i] == b[head + j]) {
        out.emplace_back(head + i++, head + j++);
      } else if (j == cols || (i < rows && at(i + 1, j) >= at(i, j + 1))) {
        out.emplace_back(head + i++, -1);
      } else {
        out.emplace_back(-1, head + j++);
      }
    }
  }
  for (int k = tail; k > 0; --k) out.emplace_back(n - k, m - k);
  return out;
}

// Two sides aligned by key: a pair whose details agree is kSame (kept only
// for a listing's context), one whose details differ is kChanged.
std::vector<DiffLine> DiffEntries(const std::vector<Entry>& a, const std::vector<Entry>& b, bool keep_same) {
  std::vector<std::string> keys_a, keys_b;
  for (const Entry& e : a) keys_a.push_back(e.key);
  for (const Entry& e : b) keys_b.push_back(e.key);
  std::vector<DiffLine> out;
  for (auto [i, j] : Align(keys_a, keys_b)) {
    if (j < 0) {
      out.push_back({Kind::kRemoved, Joined(a[i]), "", ""});
    } else if (i < 0) {
      out.push_back({Kind::kAdded, Joined(b[j]), "", ""});
    } else if (a[i].detail != b[j].detail) {
      out.push_back({Kind::kChanged, a[i].key, a[i].detail, b[j].detail});
    } else if (keep_same) {
      out.push_back({Kind::kSame, Joined(a[i]), "", ""});
    }
  }
  return out;
}

template <typename T>
std::vector<Entry> Entries(const google::protobuf::RepeatedPtrField<T>& items,
                           const std::function<Entry(const T&)>& entry) {
  std::vector<Entry> out;
  out.reserve(items.size());
  for (const T& item : items) out.push_back(entry(item));
  return out;
}

// A section of two repeated fields, each item made an entry the same way.
template <typename T>
DiffSection Section(std::string title, const google::protobuf::RepeatedPtrField<T>& a,
                    const google::protobuf::RepeatedPtrField<T>& b, const std::function<Entry(const T&)>& entry,
                    bool keep_same = false) {
  return {std::move(title), DiffEntries(Entries(a, entry), Entries(b, entry), keep_same)};
}

// ---------------------------------------------------------------- paths

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string BaseName(const std::string& path) { return path.substr(Directory(path).size()); }

// A location's file relative to the captured function's directory, so that
// the same script exported from two checkouts gives the same text.
std::string LocationText(const ir::SourceLocation& loc, const std::string& directory) {
  std::string file = loc.file();
  if (!directory.empty() && absl::StartsWith(file, directory)) file = file.substr(directory.size());
  return absl::StrCat(file, ":", loc.line());
}

// ---------------------------------------------------------------- entries

std::vector<Entry> MetadataEntries(const ir::Capture& c) {
  return {{"function", c.function_name()},
          {"source file", BaseName(c.source_file())},
          {"first line", absl::StrCat(c.first_line())},
          {"Python", c.python_version()},
          {"torch", c.torch_version()},
          {"IR version", absl::StrCat(static_cast<int>(c.ir_version()))},
          {"graphs", absl::StrCat(c.graphs_size())},
          {"graph called", absl::StrCat(c.graph_index())}};
}

Entry InputEntry(const ir::InputSpec& in) {
  return {in.name(), in.has_tensor() ? TensorText(in.tensor()) : ArgText(in.constant())};
}

std::string CallText(const ir::Node& n) {
  std::vector<std::string> args;
  for (const ir::Argument& a : n.args()) args.push_back(ArgText(a));
  for (const ir::KeywordArgument& k : n.kwargs()) args.push_back(absl::StrCat(k.name(), "=", ArgText(k.value())));
  return absl::StrCat("(", absl::StrJoin(args, ", "), ")");
}

// A node's operation as a line (its name, target and arguments) and its
// result's metadata as the detail: a new input shape changes details only.
// Source locations are left out: any edit above a node would move them.
Entry NodeEntry(const ir::Node& n) {
  std::string op;
  switch (n.kind()) {
    case ir::Node::PLACEHOLDER:
      op = n.target() == n.name() ? n.name() : absl::StrCat(n.name(), " = ", n.target());
      break;
    case ir::Node::GET_ATTR: op = absl::StrCat(n.name(), " = ", n.target()); break;
    case ir::Node::OUTPUT: {
      std::vector<std::string> returned;
      for (const ir::Argument& a : n.args()) returned.push_back(ArgText(a));
      op = absl::StrJoin(returned, ", ");
      break;
    }
    default:
      op = absl::StrCat(n.name(), " = ", n.target(), n.inferred_on_meta() ? " [meta]" : "", CallText(n));
  }
  return {absl::StrCat(KindText(n.kind()), " ", op), MetaText(n.meta())};
}

Entry ParameterEntry(const ir::GraphAttribute& p) {
  std::string detail = absl::StrCat(TensorText(p.meta()), " from ", p.source());
  if (p.has_data()) {
    // FNV-1a: equal values give equal text without printing megabytes.
    uint64_t hash = 14695981039346656037ull;
    for (unsigned char byte : p.data()) hash = (hash ^ byte) * 1099511628211ull;
    absl::StrAppend(&detail, ", values #", absl::Hex(hash, absl::kZeroPad16));
  } else if (p.has_external()) {
    absl::StrAppend(&detail, ", values in ", p.external().path());
  }
  return {p.target(), detail};
}

// Guards correspond by kind and source; the reason (the operation that made
// one) is explanation, not a condition, and is left out.
Entry GuardEntry(const ir::Guard& g) {
  return {absl::StrCat(ir::Guard::Kind_Name(g.kind()), " ", g.source()), GuardValue(g)};
}

std::function<Entry(const ir::GraphBreak&)> BreakEntry(const std::string& directory) {
  return [directory](const ir::GraphBreak& b) {
    return Entry{absl::StrCat(LocationText(b.location(), directory), " ", ir::GraphBreak::Reason_Name(b.reason()),
                              " at ", b.opcode()),
                 b.message()};
  };
}

Entry ResumeEntry(const ir::ResumeFunction& r) {
  std::string detail = absl::StrCat("continues at offset ", r.offset());
  if (!r.caller().empty()) absl::StrAppend(&detail, ", called by ", r.caller());
  if (!r.captured()) absl::StrAppend(&detail, ", runs as plain Python");
  if (r.traced()) absl::StrAppend(&detail, ", traced (graph ", r.graph_index(), ")");
  return {r.name(), detail};
}

// Instructions without offsets and line numbers: an edit elsewhere in the
// file moves those, and the graph breaks section already names the lines.
Entry InstructionEntry(const ir::BytecodeInstruction& in) {
  std::string arg = !in.argrepr().empty() ? in.argrepr() : (in.arg() != 0 ? absl::StrCat(in.arg()) : "");
  return {arg.empty() ? in.opname() : absl::StrCat(in.opname(), " ", arg), ""};
}

// ---------------------------------------------------------------- graphs

// What a graph takes and returns, as its callers see it.
std::string InputsText(const ir::Graph& g) {
  std::vector<std::string> parts;
  for (const ir::Node& n : g.nodes()) {
    if (n.kind() == ir::Node::PLACEHOLDER) parts.push_back(absl::StrCat(n.name(), ": ", MetaText(n.meta())));
  }
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

// A returned value with each node it names replaced by that node's metadata:
// "(float32[4], float32[])" for a graph that returns a tuple.
std::string ResultText(const ir::Argument& a, const ir::Graph& g) {
  if (a.value_case() == ir::Argument::kNode) {
    for (const ir::Node& n : g.nodes()) {
      if (n.name() == a.node()) return MetaText(n.meta());
    }
  }
  if (a.value_case() != ir::Argument::kList) return ArgText(a);
  std::vector<std::string> items;
  for (const ir::Argument& item : a.list().items()) items.push_back(ResultText(item, g));
  if (!a.list().is_tuple()) return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  return absl::StrCat("(", absl::StrJoin(items, ", "), items.size() == 1 ? ",)" : ")");
}

std::string OutputsText(const ir::Graph& g) {
  std::vector<std::string> parts;
  for (const ir::Argument& out : g.outputs()) parts.push_back(ResultText(out, g));
  return absl::StrJoin(parts, ", ");
}

std::vector<Entry> SignatureEntries(const ir::Graph& g) {
  return {{"name", g.name()},
          {"nodes", absl::StrCat(g.nodes_size())},
          {"inputs", InputsText(g)},
          {"outputs", OutputsText(g)}};
}

// A graph in one capture only: all of it, marked as such.
DiffSection OneSidedGraph(const ir::Graph& g, Kind kind) {
  DiffSection s{g.name(), {{kind, absl::StrCat("graph ", g.name(), " (", g.nodes_size(), " nodes)"), "", ""}}};
  for (const ir::Node& n : g.nodes()) s.lines.push_back({kind, Joined(NodeEntry(n)), "", ""});
  return s;
}

DiffSection DiffGraph(const ir::Graph& a, const ir::Graph& b) {
  DiffSection s{a.name() == b.name() ? a.name() : absl::StrCat(a.name(), " -> ", b.name()),
                DiffEntries(SignatureEntries(a), SignatureEntries(b), /*keep_same=*/false)};
  DiffSection nodes = Section<ir::Node>("", a.nodes(), b.nodes(), NodeEntry, /*keep_same=*/true);
  s.lines.insert(s.lines.end(), nodes.lines.begin(), nodes.lines.end());
  return s;
}

void Add(CaptureDiff& diff, DiffSection section) {
  if (section.changes() > 0) diff.sections.push_back(std::move(section));
}

char Marker(Kind kind) {
  switch (kind) {
    case Kind::kSame: return ' ';
    case Kind::kRemoved: return '-';
    case Kind::kAdded: return '+';
    case Kind::kChanged: return '~';
  }
  return '?';
}

std::string KindName(Kind kind) {
  switch (kind) {
    case Kind::kSame: return "same";
    case Kind::kRemoved: return "removed";
    case Kind::kAdded: return "added";
    case Kind::kChanged: return "changed";
  }
  return "?";
}

// A section's lines, unchanged ones only within kContext of a change and
// each run left out shown as one "...".
void AppendSection(std::string& out, const DiffSection& s) {
  absl::StrAppend(&out, s.title, "\n");
  const int n = static_cast<int>(s.lines.size());
  std::vector<bool> shown(n, false);
  for (int i = 0; i < n; ++i) {
    if (s.lines[i].kind == Kind::kSame) continue;
    for (int k = std::max(0, i - kContext); k <= std::min(n - 1, i + kContext); ++k) shown[k] = true;
  }
  bool skipped = false;
  for (int i = 0; i < n; ++i) {
    if (!shown[i]) {
      if (!skipped) absl::StrAppend(&out, "    ...\n");
      skipped = true;
      continue;
    }
    skipped = false;
    const DiffLine& line = s.lines[i];
    absl::StrAppend(&out, "  ", std::string(1, Marker(line.kind)), " ", line.text);
    if (line.kind == Kind::kChanged) absl::StrAppend(&out, ": ", line.before, " -> ", line.after);
    out += "\n";
  }
}

// A JSON string literal. The text is UTF-8 already (proto3 strings are
// checked when parsed), so only quotes, backslashes and controls need escapes
// (DEL too: the tool's Printable() would turn a raw one into "\x7f", not JSON).
std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

}  // namespace

int DiffSection::changes() const {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(),
                                        [](const DiffLine& l) { return l.kind != Kind::kSame; }));
}

// The sections in the order a reader checks them: what was captured, with
// what, into which graphs, under which conditions, and where it stopped.
CaptureDiff DiffCaptures(const ir::Capture& a, const ir::Capture& b) {
  CaptureDiff diff;
  const std::string dir_a = Directory(a.source_file()), dir_b = Directory(b.source_file());
  Add(diff, {"metadata", DiffEntries(MetadataEntries(a), MetadataEntries(b), /*keep_same=*/false)});
  Add(diff, Section<ir::InputSpec>("inputs", a.inputs(), b.inputs(), InputEntry));
  for (int g = 0; g < std::max(a.graphs_size(), b.graphs_size()); ++g) {
    if (g >= b.graphs_size()) {
      Add(diff, OneSidedGraph(a.graphs(g), Kind::kRemoved));
    } else if (g >= a.graphs_size()) {
      Add(diff, OneSidedGraph(b.graphs(g), Kind::kAdded));
    } else {
      Add(diff, DiffGraph(a.graphs(g), b.graphs(g)));
    }
  }
  Add(diff, Section<ir::GraphAttribute>("parameters", a.attributes(), b.attributes(), ParameterEntry));
  Add(diff, Section<ir::Guard>("guards", a.guards(), b.guards(), GuardEntry));
  // Each side's break locations are relative to its own function's directory.
  Add(diff, {"graph breaks", DiffEntries(Entries<ir::GraphBreak>(a.graph_breaks(), BreakEntry(dir_a)),
                                         Entries<ir::GraphBreak>(b.graph_breaks(), BreakEntry(dir_b)), false)});
  Add(diff, Section<ir::ResumeFunction>("resume functions", a.resume_functions(), b.resume_functions(), ResumeEntry));
  Add(diff, Section<ir::BytecodeInstruction>("original bytecode", a.original_bytecode().instructions(),
                                             b.original_bytecode().instructions(), InstructionEntry,
                                             /*keep_same=*/true));
  return diff;
}

std::string FormatDiff(const CaptureDiff& diff, absl::string_view name_a, absl::string_view name_b) {
  if (diff.equal()) return "captures are equal\n";
  std::string out = absl::StrCat("--- ", name_a, "\n+++ ", name_b, "\n");
  std::vector<std::string> counts;
  int total = 0;
  for (const DiffSection& s : diff.sections) {
    AppendSection(out, s);
    counts.push_back(absl::StrCat(s.title, " ", s.changes()));
    total += s.changes();
  }
  absl::StrAppend(&out, "captures differ: ", total, " change", total == 1 ? "" : "s", " (",
                  absl::StrJoin(counts, ", "), ")\n");
  return out;
}

std::string FormatDiffJson(const CaptureDiff& diff, absl::string_view name_a, absl::string_view name_b) {
  std::string out = absl::StrCat("{\n  \"a\": ", JsonString(name_a), ",\n  \"b\": ", JsonString(name_b),
                                 ",\n  \"equal\": ", diff.equal() ? "true" : "false", ",\n  \"sections\": [");
  for (size_t i = 0; i < diff.sections.size(); ++i) {
    const DiffSection& s = diff.sections[i];
    absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "    {\"title\": ", JsonString(s.title), ", \"changes\": [");
    bool first = true;
    for (const DiffLine& line : s.lines) {
      if (line.kind == Kind::kSame) continue;
      absl::StrAppend(&out, first ? "\n" : ",\n", "      {\"kind\": \"", KindName(line.kind), "\", \"text\": ",
                      JsonString(line.text));
      if (line.kind == Kind::kChanged) {
        absl::StrAppend(&out, ", \"before\": ", JsonString(line.before), ", \"after\": ", JsonString(line.after));
      }
      out += "}";
      first = false;
    }
    out += "\n    ]}";
  }
  absl::StrAppend(&out, diff.sections.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out;
}

}  // namespace dynamo::capture
