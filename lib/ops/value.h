// The values op inference works on: what a Python argument or result of a
// torch call is, with tensors replaced by their metadata.
//
//   std::vector<Value> args = {Value(TensorMeta::Contiguous(DType::kFloat32, {2, 3})),
//                              Value(int64_t{1})};
//   args[1].is_int();          // true
//   Value::Tuple({args[0]});   // a Python tuple of one tensor
//
// Python's bool is kept apart from int (torch's argument parser tells them
// apart too), and a float is a double. Lists and tuples nest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lib/ops/meta.h"

namespace dynamo::ops {

struct NoneValue {
  bool operator==(const NoneValue&) const = default;
};
struct EllipsisValue {
  bool operator==(const EllipsisValue&) const = default;
};
struct Slice {
  std::optional<int64_t> start, stop, step;
  bool operator==(const Slice&) const = default;
};
enum class MemoryFormat { kContiguous, kChannelsLast, kChannelsLast3d, kPreserve };

class Value;
struct ValueList {
  std::vector<Value> items;
  bool is_tuple = false;
  bool operator==(const ValueList&) const;
};

class Value {
 public:
  using Variant = std::variant<NoneValue, bool, int64_t, double, std::string, DType, Device, Slice,
                               EllipsisValue, MemoryFormat, TensorMeta, ValueList>;

  Value() = default;  // None
  Value(NoneValue v) : v_(v) {}
  Value(bool v) : v_(v) {}
  Value(int64_t v) : v_(v) {}
  Value(int v) : v_(int64_t{v}) {}
  Value(double v) : v_(v) {}
  Value(std::string v) : v_(std::move(v)) {}
  Value(const char* v) : v_(std::string(v)) {}
  Value(DType v) : v_(v) {}
  Value(Device v) : v_(std::move(v)) {}
  Value(Slice v) : v_(v) {}
  Value(EllipsisValue v) : v_(v) {}
  Value(MemoryFormat v) : v_(v) {}
  Value(TensorMeta v) : v_(std::move(v)) {}
  Value(ValueList v) : v_(std::move(v)) {}

  static Value List(std::vector<Value> items) { return Value(ValueList{std::move(items), false}); }
  static Value Tuple(std::vector<Value> items) { return Value(ValueList{std::move(items), true}); }
  static Value IntList(const std::vector<int64_t>& ints, bool is_tuple = false);

  bool is_none() const { return std::holds_alternative<NoneValue>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  // A Python number: bool, int or float.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_dtype() const { return std::holds_alternative<DType>(v_); }
  bool is_device() const { return std::holds_alternative<Device>(v_); }
  bool is_slice() const { return std::holds_alternative<Slice>(v_); }
  bool is_ellipsis() const { return std::holds_alternative<EllipsisValue>(v_); }
  bool is_memory_format() const { return std::holds_alternative<MemoryFormat>(v_); }
  bool is_tensor() const { return std::holds_alternative<TensorMeta>(v_); }
  bool is_list() const { return std::holds_alternative<ValueList>(v_); }  // list or tuple

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  DType as_dtype() const { return std::get<DType>(v_); }
  const Device& as_device() const { return std::get<Device>(v_); }
  const Slice& as_slice() const { return std::get<Slice>(v_); }
  MemoryFormat as_memory_format() const { return std::get<MemoryFormat>(v_); }
  const TensorMeta& as_tensor() const { return std::get<TensorMeta>(v_); }
  TensorMeta& as_tensor() { return std::get<TensorMeta>(v_); }
  const ValueList& as_list() const { return std::get<ValueList>(v_); }
  const std::vector<Value>& items() const { return std::get<ValueList>(v_).items; }

  const Variant& variant() const { return v_; }
  bool operator==(const Value& other) const { return v_ == other.v_; }

 private:
  Variant v_;
};

inline bool ValueList::operator==(const ValueList& o) const {
  return is_tuple == o.is_tuple && items == o.items;
}

struct Kwarg {
  std::string name;
  Value value;
};

// Python-like rendering for messages: "float32[2, 3]", "(1, None)", "slice(0, 2, None)".
std::string ToString(const Value& value);
// The Python type name of the value, as torch's argument errors print it.
std::string TypeName(const Value& value);

}  // namespace dynamo::ops
