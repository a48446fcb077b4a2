// What changed between two captures: the engine of `dynamo-inspect --diff`,
// for people reviewing a change and for CI jobs that watch a model's graphs
// across commits.
//
//   CaptureDiff d = DiffCaptures(before, after);
//   if (!d.equal()) std::cout << FormatDiff(d, "before.pb", "after.pb");
//
// A diff is a list of sections (metadata, inputs, one per graph, parameters,
// guards, graph breaks, resume functions, bytecode), each a list of changes.
// Graphs are paired by index and their nodes aligned like the lines of a
// unified diff (a longest common subsequence of the nodes' operations), so an
// inserted op reads as one added line and a new batch size as the same
// operations with changed shapes.
//
// What is compared is what a capture means, not its bytes: a source file is
// compared by its name, locations by their path relative to the function's
// directory (exports made in different checkouts or temporary directories
// agree); marshalled code (it holds absolute paths), the source lines of
// nodes and the reasons attached to guards are left out. Two captures are
// equal when no section has a change.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/dynamo_ir.pb.h"

namespace dynamo::capture {

// One entry of a section, in the order of the captures.
struct DiffLine {
  enum class Kind {
    kSame,     // in both, unchanged: kept in listings as context only
    kRemoved,  // only in the first capture
    kAdded,    // only in the second
    kChanged,  // in both, `text` the part they share, before/after the rest
  };
  Kind kind = Kind::kSame;
  std::string text;
  std::string before;
  std::string after;
};

struct DiffSection {
  std::string title;  // "metadata", "graph_0", "guards", ...
  // A listing (a graph's nodes, a bytecode) keeps its unchanged lines for
  // context; other sections hold changes only.
  std::vector<DiffLine> lines;
  // The number of lines that are not kSame.
  [[nodiscard]] int changes() const;
};

struct CaptureDiff {
  std::vector<DiffSection> sections;  // only sections with at least one change
  [[nodiscard]] bool equal() const { return sections.empty(); }
};

[[nodiscard]] CaptureDiff DiffCaptures(const ir::Capture& a, const ir::Capture& b);

// The diff for people: "--- a" / "+++ b", then each section with its lines
// marked "-", "+", "~" (changed: "text: before -> after") or " " (context, at
// most a few lines around each change), and a last line that counts the
// changes per section; "captures are equal" alone when there are none.
[[nodiscard]] std::string FormatDiff(const CaptureDiff& diff, absl::string_view name_a,
                                     absl::string_view name_b);

// The diff as JSON for programs, keys in this order: {"a", "b", "equal",
// "sections": [{"title", "changes": [{"kind": "removed|added|changed", "text",
// and for "changed" "before", "after"}]}]} (context lines left out).
[[nodiscard]] std::string FormatDiffJson(const CaptureDiff& diff, absl::string_view name_a,
                                         absl::string_view name_b);

}  // namespace dynamo::capture
