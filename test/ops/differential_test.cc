// The op registry against real torch. test/python/ops_cases.py generates
// argument combinations for every registry entry (shapes with broadcasting,
// size-1 and zero-size dims, six dtypes, negative dims, keyword forms), runs
// the project's torch (2.14) on small CPU tensors and hands back the arguments' and results'
// metadata (or torch's exception). Here each case's arguments go through
// Registry::Infer, and the inferred metadata must equal torch's: sizes,
// dtype, device and requires_grad always, strides whenever the registry
// claims them (always for views). Where torch raises, the registry must
// return an error. Counts per op and in total are printed.
#include <catch2/catch.hpp>
#include <iostream>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/ops/registry.h"
#include "lib/python/error.h"
#include "lib/trace/meta_fallback.h"
#include "test/test_support.h"

namespace dynamo::ops {
namespace {

using python::Object;

struct Decoded {
  Value value;
  bool is_error = false;
  std::string error;
};

// The items of a Python sequence the helper module built (never fails for
// them; an empty vector otherwise).
std::vector<Object> Items(const Object& seq) {
  absl::StatusOr<std::vector<Object>> items = python::AsVector(seq);
  if (!items.ok()) return {};
  return *std::move(items);
}

std::string Str(const Object& o) {
  absl::StatusOr<std::string> s = python::AsString(o);
  return s.ok() ? *s : std::string("<not a str>");
}

// Decodes one ops_cases.encode() tuple.
absl::StatusOr<Value> Decode(const Object& enc) {
  absl::StatusOr<std::vector<Object>> parts = python::AsVector(enc);
  if (!parts.ok()) return parts.status();
  const std::vector<Object>& p = *parts;
  absl::StatusOr<std::string> tag = python::AsString(p.at(0));
  if (!tag.ok()) return tag.status();
  auto ints = [](const Object& o) -> absl::StatusOr<std::vector<int64_t>> {
    absl::StatusOr<std::vector<Object>> items = python::AsVector(o);
    if (!items.ok()) return items.status();
    std::vector<int64_t> out;
    for (const Object& i : *items) {
      absl::StatusOr<long long> v = python::AsLong(i);
      if (!v.ok()) return v.status();
      out.push_back(*v);
    }
    return out;
  };
  auto opt_int = [](const Object& o) -> std::optional<int64_t> {
    if (o.get() == Py_None) return std::nullopt;
    return static_cast<int64_t>(python::AsLong(o).value_or(0));
  };
  if (*tag == "tensor") {
    TensorMeta m;
    absl::StatusOr<std::vector<int64_t>> sizes = ints(p[1]);
    absl::StatusOr<std::vector<int64_t>> strides = ints(p[2]);
    if (!sizes.ok() || !strides.ok()) return absl::InternalError("bad tensor encoding");
    m.sizes = *sizes;
    m.strides = *strides;
    std::optional<DType> dtype = DTypeFromName(Str(p[3]));
    if (!dtype) return absl::InternalError(absl::StrCat("unknown dtype ", Str(p[3])));
    m.dtype = *dtype;
    m.device.type = Str(p[4]);
    m.requires_grad = PyObject_IsTrue(p[5].get()) == 1;
    return Value(std::move(m));
  }
  if (*tag == "none") return Value();
  if (*tag == "bool") return Value(PyObject_IsTrue(p[1].get()) == 1);
  if (*tag == "int") return Value(static_cast<int64_t>(python::AsLong(p[1]).value_or(0)));
  if (*tag == "float") return Value(PyFloat_AsDouble(p[1].get()));
  if (*tag == "str") return Value(Str(p[1]));
  if (*tag == "dtype") {
    std::optional<DType> d = DTypeFromName(Str(p[1]));
    if (!d) return absl::InternalError("unknown dtype");
    return Value(*d);
  }
  if (*tag == "device") return Value(Device{Str(p[1]), -1});
  if (*tag == "memory_format") {
    const std::string name = Str(p[1]);
    if (name == "contiguous_format") return Value(MemoryFormat::kContiguous);
    if (name == "channels_last") return Value(MemoryFormat::kChannelsLast);
    if (name == "preserve_format") return Value(MemoryFormat::kPreserve);
    return Value(MemoryFormat::kChannelsLast3d);
  }
  if (*tag == "slice") return Value(Slice{opt_int(p[1]), opt_int(p[2]), opt_int(p[3])});
  if (*tag == "ellipsis") return Value(EllipsisValue{});
  if (*tag == "list" || *tag == "tuple") {
    absl::StatusOr<std::vector<Object>> items = python::AsVector(p[1]);
    if (!items.ok()) return items.status();
    std::vector<Value> out;
    for (const Object& i : *items) {
      absl::StatusOr<Value> v = Decode(i);
      if (!v.ok()) return v.status();
      out.push_back(*std::move(v));
    }
    return *tag == "tuple" ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  return absl::InternalError(absl::StrCat("unknown encoding tag ", *tag));
}

// Empty when they agree; otherwise what differs.
struct StrideCount {
  int tensors = 0;   // tensor results compared
  int compared = 0;  // of which the registry claimed (and so proved) strides
};

std::string Compare(const Value& inferred, const Value& real, bool is_view, StrideCount& count,
                    bool empty_strides_free = false) {
  if (real.is_tensor()) {
    if (!inferred.is_tensor())
      return absl::StrCat("expected a tensor, inferred ", ToString(inferred));
    const TensorMeta& a = inferred.as_tensor();
    const TensorMeta& b = real.as_tensor();
    std::string diff;
    if (a.dtype != b.dtype)
      absl::StrAppend(&diff, " dtype ", DTypeName(a.dtype), " vs ", DTypeName(b.dtype), ";");
    bool sizes_ok = a.sizes.size() == b.sizes.size();
    for (size_t i = 0; sizes_ok && i < a.sizes.size(); ++i) {
      sizes_ok = a.sizes[i] == b.sizes[i] || a.sizes[i] == kDynamicSize;
    }
    if (!sizes_ok) {
      absl::StrAppend(&diff, " sizes [", absl::StrJoin(a.sizes, ","), "] vs [",
                      absl::StrJoin(b.sizes, ","), "];");
    }
    if (!(a.device == b.device))
      absl::StrAppend(&diff, " device ", DeviceName(a.device), " vs ", DeviceName(b.device), ";");
    if (a.requires_grad != b.requires_grad)
      absl::StrAppend(&diff, " requires_grad ", a.requires_grad, " vs ", b.requires_grad, ";");
    if (is_view && !a.has_strides()) absl::StrAppend(&diff, " a view without strides;");
    ++count.tensors;
    if (a.has_strides() && !a.data_dependent) ++count.compared;
    // torch's own meta and CPU kernels disagree on the strides of some empty
    // results (aminmax), which address no element.
    const bool free = empty_strides_free && b.numel() == 0;
    if (a.has_strides() && !a.data_dependent && a.strides != b.strides && !free) {
      absl::StrAppend(&diff, " strides [", absl::StrJoin(a.strides, ","), "] vs [",
                      absl::StrJoin(b.strides, ","), "];");
    }
    return diff;
  }
  if (real.is_list()) {
    if (!inferred.is_list() || inferred.items().size() != real.items().size()) {
      return absl::StrCat("expected ", ToString(real), ", inferred ", ToString(inferred));
    }
    for (size_t i = 0; i < real.items().size(); ++i) {
      std::string d = Compare(inferred.items()[i], real.items()[i], is_view, count, empty_strides_free);
      if (!d.empty()) return absl::StrCat("item ", i, ":", d);
    }
    return "";
  }
  if (!(inferred == real))
    return absl::StrCat("expected ", ToString(real), ", inferred ", ToString(inferred));
  return "";
}

struct Outcome {
  std::map<std::string, int> per_op;
  std::map<std::string, int> rejected_per_op;
  std::vector<std::string> failures;
  // Fallback only: torch's real kernel raised where its meta kernel did not
  // (a dtype the CPU kernel lacks, a check only the CPU kernel makes). The
  // graph runs the real kernel, so the call raises there as in eager.
  std::vector<std::string> lenient;
  int total = 0;
  StrideCount strides;
};

using Infer = std::function<absl::StatusOr<Value>(const std::string&, const std::vector<Value>&,
                                                  const std::vector<Kwarg>&)>;

// Runs every encoded case (op, args, kwargs, torch's result) through the
// registry (or `infer`) and records disagreements.
Outcome CheckCases(const Registry& registry, const std::vector<Object>& cases, const Infer& infer = nullptr) {
  Outcome o;
  for (const Object& c : cases) {
    std::vector<Object> parts = Items(c);
    const std::string name = Str(parts[0]);
    std::vector<Value> args;
    std::string failure;
    const std::vector<Object> arg_objects = Items(parts[1]);
    for (const Object& a : arg_objects) {
      absl::StatusOr<Value> v = Decode(a);
      if (!v.ok()) failure = absl::StrCat(name, ": undecodable argument: ", v.status().message());
      args.push_back(v.ok() ? *std::move(v) : Value());
    }
    std::vector<Kwarg> kwargs;
    const std::vector<Object> kwarg_objects = Items(parts[2]);
    for (const Object& kw : kwarg_objects) {
      std::vector<Object> kv = Items(kw);
      absl::StatusOr<Value> v = Decode(kv[1]);
      if (!v.ok())
        failure = absl::StrCat(name, ": undecodable keyword argument: ", v.status().message());
      kwargs.push_back({Str(kv[0]), v.ok() ? *std::move(v) : Value()});
    }
    std::vector<Object> expected = Items(parts[3]);
    const bool torch_raised = Str(expected[0]) == "error";
    absl::StatusOr<Value> inferred = infer ? infer(name, args, kwargs) : registry.Infer(name, args, kwargs);
    ++o.total;
    ++o.per_op[name];
    const std::string call = absl::StrCat(
        name, "(",
        absl::StrJoin(args, ", ",
                      [](std::string* out, const Value& v) { out->append(ToString(v)); }),
        kwargs.empty() ? "" : ", ",
        absl::StrJoin(kwargs, ", ",
                      [](std::string* out, const Kwarg& k) {
                        absl::StrAppend(out, k.name, "=", ToString(k.value));
                      }),
        ")");
    if (!failure.empty()) {
      // already failed decoding
    } else if (torch_raised) {
      ++o.rejected_per_op[name];
      if (inferred.ok() && infer) {
        o.lenient.push_back(absl::StrCat(call, ": ", Str(expected[1]), ": ", Str(expected[2])));
      } else if (inferred.ok()) {
        failure = absl::StrCat(call, ": torch raised ", Str(expected[1]), ": ", Str(expected[2]),
                               " but the registry inferred ", ToString(*inferred));
      } else if (inferred.status().message().empty()) {
        failure = absl::StrCat(call, ": rejected without a message");
      }
    } else if (!inferred.ok()) {
      failure = absl::StrCat(
          call, ": torch succeeded but the registry said: ", inferred.status().message());
    } else {
      absl::StatusOr<Value> real = Decode(parts[3]);
      if (!real.ok()) {
        failure = absl::StrCat(call, ": undecodable torch result: ", real.status().message());
      } else {
        const bool is_view = !infer && (registry.Find(name)->tags() & kView) != 0;
        std::string diff = Compare(*inferred, *real, is_view, o.strides, /*empty_strides_free=*/infer != nullptr);
        if (!diff.empty()) failure = absl::StrCat(call, ":", diff);
      }
    }
    if (!failure.empty()) o.failures.push_back(failure);
  }
  return o;
}

void Report(const Outcome& o, absl::string_view title, size_t entries) {
  std::cout << title << " (combinations compared per op, of which torch rejected):\n";
  for (const auto& [name, count] : o.per_op) {
    auto it = o.rejected_per_op.find(name);
    std::cout << "  " << name << ": " << count << " ("
              << (it == o.rejected_per_op.end() ? 0 : it->second) << ")\n";
  }
  std::cout << "entries: " << entries << ", combinations: " << o.total
            << ", disagreements: " << o.failures.size() << ", agreement: "
            << (o.total ? 100.0 * (o.total - static_cast<int>(o.failures.size())) / o.total : 0)
            << "%\n";
  std::cout << "tensor results: " << o.strides.tensors << ", with strides claimed and compared: "
            << o.strides.compared << "\n";
  for (size_t i = 0; i < o.failures.size() && i < 300; ++i)
    std::cout << "  MISMATCH " << o.failures[i] << "\n";
  if (!o.lenient.empty()) {
    std::cout << "raised by torch's real kernel only (the graph runs it, so it raises there too): "
              << o.lenient.size() << "\n";
    for (size_t i = 0; i < o.lenient.size() && i < 20; ++i) std::cout << "  REAL-ONLY " << o.lenient[i] << "\n";
  }
}

std::vector<Object> RegistryNames(const Registry& registry, const char* only) {
  std::vector<Object> names;
  for (const std::string& n : registry.Names()) {
    if (only != nullptr &&
        absl::StrCat(",", only, ",").find(absl::StrCat(",", n, ",")) == std::string::npos) {
      continue;
    }
    names.push_back(python::FromString(n));
  }
  return names;
}

TEST_CASE("every registry entry agrees with torch", "[ops][torch]") {
  const Registry& registry = DefaultRegistry();
  DYNAMO_REQUIRE_OK(registry.status());
  Object module = testing::ImportTestModule("ops_cases");
  REQUIRE(module);
  const char* only = std::getenv("DYNAMO_OPS_ONLY");  // a comma-separated subset, for debugging
  std::vector<Object> names = RegistryNames(registry, only);
  absl::StatusOr<Object> cases = python::CallMethod(module, "generate", {python::MakeList(names)});
  DYNAMO_REQUIRE_OK(cases);
  const Outcome o = CheckCases(registry, Items(*cases));
  Report(o, "op registry vs torch, generated combinations", names.size());

  std::vector<std::string> untested;
  for (const Object& n : names) {
    if (o.per_op.find(Str(n)) == o.per_op.end()) untested.push_back(Str(n));
  }
  INFO("untested entries: " << absl::StrJoin(untested, ", "));
  CHECK(untested.empty());
  INFO("first disagreement: " << (o.failures.empty() ? "" : o.failures[0]));
  CHECK(o.failures.empty());
  if (only == nullptr) {
    CHECK(o.total >= 5000);
    CHECK(names.size() >= 150);
  }
}

// Ops the registry has no entry for, through the translator's fallback:
// each name resolves by the operator rule (meta_fallback.h) to the object
// ops_cases calls, runs on meta tensors, and the metadata read back (sizes,
// dtype, strides always, device, requires_grad) must equal torch's real
// result on the generated arguments; where torch raises, so must meta.
TEST_CASE("ops without a registry entry agree with torch through the meta fallback", "[ops][torch]") {
  const Registry& registry = DefaultRegistry();
  Object module = testing::ImportTestModule("ops_cases");
  REQUIRE(module);
  absl::StatusOr<Object> cases = python::CallMethod(module, "generate_fallback");
  DYNAMO_REQUIRE_OK(cases);
  std::vector<std::string> misnamed;
  Infer on_meta = [&](const std::string& name, const std::vector<Value>& args,
                      const std::vector<Kwarg>& kwargs) -> absl::StatusOr<Value> {
    Object op = trace::TorchOperator(name);
    absl::StatusOr<Object> same = python::CallMethod(module, "resolve_operator", {python::FromString(name)});
    if (registry.Find(name) != nullptr || !op || !same.ok() || same->get() != op.get() ||
        trace::TorchOperatorName(op.get()) != name) {
      misnamed.push_back(name);
    }
    if (!op) return absl::NotFoundError("no torch operator");
    absl::StatusOr<trace::MetaCall> call = trace::InferOnMeta(op, args, kwargs, {});
    if (!call.ok()) return call.status();
    return call->result;
  };
  const Outcome o = CheckCases(registry, Items(*cases), on_meta);
  Report(o, "meta fallback vs torch, generated combinations", o.per_op.size());
  INFO("names that are registry entries or do not resolve to the operator: " << absl::StrJoin(misnamed, ", "));
  CHECK(misnamed.empty());
  INFO("first disagreement: " << (o.failures.empty() ? "" : o.failures[0]));
  CHECK(o.failures.empty());
  CHECK(o.per_op.size() >= 30);
  CHECK(o.total >= 300);
}

// Every call the programs make (seed-like functions, resnet18 and
// mobilenet_v2 in eval and train mode, a transformer block) has an entry, and
// the entry agrees with what torch computed during the real forward pass.
TEST_CASE("every op real programs reach is covered and agrees with torch", "[ops][torch]") {
  const Registry& registry = DefaultRegistry();
  Object module = testing::ImportTestModule("ops_cases");
  REQUIRE(module);
  std::vector<Object> names = RegistryNames(registry, nullptr);
  absl::StatusOr<Object> recorded =
      python::CallMethod(module, "record_program_calls", {python::MakeList(names)});
  DYNAMO_REQUIRE_OK(recorded);
  std::vector<Object> parts = Items(*recorded);
  REQUIRE(parts.size() == 2);
  std::vector<std::string> unknown;
  for (const Object& n : Items(parts[1])) unknown.push_back(Str(n));
  const Outcome o = CheckCases(registry, Items(parts[0]));
  Report(o, "op registry vs torch, calls recorded from real programs", o.per_op.size());
  INFO("ops reached without a registry entry: " << absl::StrJoin(unknown, ", "));
  CHECK(unknown.empty());
  INFO("first disagreement: " << (o.failures.empty() ? "" : o.failures[0]));
  CHECK(o.failures.empty());
  CHECK(o.total > 0);
}

}  // namespace
}  // namespace dynamo::ops
