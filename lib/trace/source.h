// Where a traced value came from, as a path from the frame: the guards are
// written against these paths, and the capture records them for parameters.
//
//   SourcePtr x = Source::Local("x");                 // L['x']
//   SourcePtr w = Source::Attr(Source::Attr(Source::Local("self"), "fc1"), "weight");
//   w->ToString();                                    // L['self'].fc1.weight
//   Source::Item(Source::Local("xs"), 0)->ToString(); // L['xs'][0]
//   Source::DictValue(Source::Global("d"), 2)->ToString(); // G['d'].values()[2]
//   Source::Call(Source::Local("cls"), "__subclasses__");   // L['cls'].__subclasses__()
//
// Sources are immutable and shared; a value with no source (made during the
// trace) has a null SourcePtr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

namespace dynamo::trace {

class Source;
using SourcePtr = std::shared_ptr<const Source>;

class Source {
 public:
  // kDictEntry: the i-th key or value of a dict in its iteration order
  // (list(d.keys())[i]), for items whose key a path cannot spell (a class,
  // an enum member, a module, a tensor).
  // kCall: a method of the base called with no arguments, for the pure
  // queries the trace answers at trace time (cls.__subclasses__(),
  // t.untyped_storage().nbytes()): guards call it again.
  enum class Kind { kLocal, kGlobal, kModule, kAttr, kItem, kDictEntry, kCall };

  static SourcePtr Local(std::string name);
  static SourcePtr Global(std::string name);
  // A module by import name: the globals of a function from another module
  // are reached through it (sys.modules['torch.nn.functional'].relu).
  static SourcePtr Module(std::string import_name);
  static SourcePtr Attr(SourcePtr base, std::string name);
  static SourcePtr Item(SourcePtr base, int64_t index);
  static SourcePtr Item(SourcePtr base, std::string key);
  static SourcePtr DictKey(SourcePtr base, int64_t index);
  static SourcePtr DictValue(SourcePtr base, int64_t index);
  static SourcePtr Call(SourcePtr base, std::string method);

  Kind kind() const { return kind_; }
  const SourcePtr& base() const { return base_; }
  // Local/global/attribute name, the string key of an item, "keys" /
  // "values" for a dict entry, or the method a call source calls.
  const std::string& name() const { return name_; }
  bool is_index() const { return kind_ == Kind::kItem && is_index_; }
  int64_t index() const { return index_; }  // an item's index, a dict entry's position

  // Dynamo's notation: L['x'], G['torch'].sin, L['self'].layers[0].weight.
  // Made once, when the source is: every guard on a path and every path
  // under it needs it, and a path's text is its base's plus one step.
  const std::string& ToString() const { return text_; }

  // Only the factories above make sources (the key says so); public for
  // std::make_shared, which allocates the count and the source together.
  class Key {
    friend class Source;
    Key() = default;
  };
  Source(Key, Kind kind, SourcePtr base, std::string name, bool is_index, int64_t index);

 private:
  Kind kind_;
  SourcePtr base_;
  std::string name_;
  bool is_index_ = false;
  int64_t index_ = 0;
  std::string text_;
};

}  // namespace dynamo::trace
