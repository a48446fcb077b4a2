// The registry's contract, beyond what the differential test proves against
// torch: unknown ops are reported, never guessed; registration is clean;
// tags are declared.
#include "lib/ops/registry.h"

#include <catch2/catch.hpp>

#include "test/test_support.h"

namespace dynamo::ops {
namespace {

TEST_CASE("all ops register without error", "[ops]") {
  Registry r;
  DYNAMO_REQUIRE_OK(RegisterAllOps(r));
  CHECK(r.size() >= 150);
  CHECK(r.Find("torch.add") != nullptr);
}

TEST_CASE("an op with no entry is reported as unknown", "[ops]") {
  absl::StatusOr<Value> out = DefaultRegistry().Infer(
      "torch.frobnicate", {Value(TensorMeta::Contiguous(DType::kFloat32, {2}))});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(out.status().message()).find("unknown op 'torch.frobnicate'") !=
        std::string::npos);
}

TEST_CASE("binding reports unexpected, missing and repeated arguments", "[ops]") {
  const Value x(TensorMeta::Contiguous(DType::kFloat32, {2, 3}));
  const Registry& r = DefaultRegistry();
  CHECK_FALSE(r.Infer("torch.add", {x}).ok());
  CHECK_FALSE(r.Infer("torch.add", {x, x}, {{"bogus", Value(1)}}).ok());
  CHECK_FALSE(r.Infer("torch.add", {x, x}, {{"other", x}}).ok());
  CHECK(r.Infer("torch.add", {x}, {{"other", x}}).ok());
}

TEST_CASE("a simple inference", "[ops]") {
  const Value x(TensorMeta::Contiguous(DType::kInt32, {2, 3}));
  absl::StatusOr<Value> out = DefaultRegistry().Infer("torch.add", {x, Value(2.5)});
  DYNAMO_REQUIRE_OK(out);
  CHECK(out->as_tensor().dtype == DType::kFloat32);
  CHECK(out->as_tensor().sizes == std::vector<int64_t>{2, 3});
}

}  // namespace
}  // namespace dynamo::ops

namespace dynamo::ops {
namespace {

TEST_CASE("entries carry their tags", "[ops]") {
  const Registry& r = DefaultRegistry();
  auto tags = [&](const char* name) {
    const OpEntry* op = r.Find(name);
    REQUIRE(op != nullptr);
    return op->tags();
  };
  CHECK((tags("torch.add") & kPointwise) != 0);
  CHECK((tags("Tensor.add_") & kInplace) != 0);
  CHECK((tags("operator.iadd") & kInplace) != 0);
  CHECK((tags("Tensor.sum") & kReduction) != 0);
  CHECK((tags("Tensor.view") & kView) != 0);
  CHECK((tags("torch.zeros") & kFactory) != 0);
  CHECK((tags("torch.randn") & kRandom) != 0);
  CHECK((tags("torch.nn.functional.dropout") & kRandom) != 0);
  CHECK((tags("torch.nonzero") & kDataDependent) != 0);
  CHECK((tags("Tensor.size") & kNoTensorOutput) != 0);
  CHECK(TagsToString(kView | kInplace) == "view,inplace");
}

TEST_CASE("boolean-mask indexing is marked data-dependent", "[ops]") {
  const Value x(TensorMeta::Contiguous(DType::kFloat32, {4, 5}));
  const Value mask(TensorMeta::Contiguous(DType::kBool, {4}));
  absl::StatusOr<Value> out = DefaultRegistry().Infer("operator.getitem", {x, mask});
  DYNAMO_REQUIRE_OK(out);
  CHECK(out->as_tensor().data_dependent);
  CHECK(out->as_tensor().sizes == std::vector<int64_t>{kDynamicSize, 5});
  // Asking a size of it is refused rather than answered with a guess.
  CHECK_FALSE(DefaultRegistry().Infer("Tensor.size", {*out}).ok());
}

TEST_CASE("views of tensors with unknown strides are refused, not guessed", "[ops]") {
  TensorMeta t = TensorMeta::Contiguous(DType::kFloat32, {2, 3});
  t.strides.clear();
  absl::StatusOr<Value> out = DefaultRegistry().Infer("Tensor.view", {Value(t), Value(6)});
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().code() == absl::StatusCode::kUnimplemented);
  // reshape may copy, so it still knows the sizes.
  DYNAMO_REQUIRE_OK(DefaultRegistry().Infer("Tensor.reshape", {Value(t), Value(6)}));
}

TEST_CASE("results convert to graph IR metadata", "[ops]") {
  const Value x(TensorMeta::Contiguous(DType::kFloat32, {4, 6}));
  absl::StatusOr<Value> parts =
      DefaultRegistry().Infer("Tensor.split", {x, Value(4)}, {{"dim", Value(1)}});
  DYNAMO_REQUIRE_OK(parts);
  REQUIRE(parts->items().size() == 2);
  CHECK(parts->items()[1].as_tensor().sizes == std::vector<int64_t>{4, 2});
  CHECK(parts->items()[1].as_tensor().strides == std::vector<int64_t>{6, 1});
  absl::StatusOr<Value> dim = DefaultRegistry().Infer("Tensor.dim", {x});
  DYNAMO_REQUIRE_OK(dim);
  CHECK(dim->as_int() == 2);
}

}  // namespace
}  // namespace dynamo::ops
