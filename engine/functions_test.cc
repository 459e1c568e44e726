#include "engine/functions.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;

absl::StatusOr<Element> Call(std::string_view name, Element in,
                             const FunctionRegistry& registry = FunctionRegistry::Builtins()) {
  const FunctionRegistry::Function* fn = registry.Find(name);
  if (fn == nullptr) return absl::NotFoundError("no such function");
  Element out;
  absl::Status s = (*fn)(std::move(in), &out);
  if (!s.ok()) return s;
  return out;
}

TEST(FunctionRegistryTest, BuiltinsAreTheDocumentedSet) {
  EXPECT_THAT(
      FunctionRegistry::Builtins().Names(),
      ElementsAre("cast_float32", "cast_float64", "cast_int32", "cast_int64", "decode_raw_float32",
                  "decode_raw_uint8", "identity", "increment", "is_even", "is_odd", "negate",
                  "non_empty", "normalize_uint8", "split_whitespace", "square", "string_length",
                  "string_to_float32", "string_to_int64", "with_square"));
  EXPECT_EQ(FunctionRegistry::Builtins().Find("cube"), nullptr);
}

TEST(FunctionRegistryTest, ArithmeticBuiltinsAreElementWiseOnEveryComponent) {
  Element in = {Tensor::FromVector<int64_t>({3}, std::vector<int64_t>{-2, 0, 3}),
                Tensor::FromVector<float>({2}, std::vector<float>{1.5f, -0.5f})};
  absl::StatusOr<Element> sq = Call("square", in);
  ASSERT_TRUE(sq.ok()) << sq.status();
  ASSERT_EQ(sq->size(), 2u);
  EXPECT_THAT((*sq)[0].values<int64_t>(), ElementsAre(4, 0, 9));
  EXPECT_THAT((*sq)[1].values<float>(), ElementsAre(2.25f, 0.25f));
  EXPECT_THAT((*sq)[0].shape(), ElementsAre(3));

  absl::StatusOr<Element> neg = Call("negate", in);
  ASSERT_TRUE(neg.ok());
  EXPECT_THAT((*neg)[0].values<int64_t>(), ElementsAre(2, 0, -3));
  EXPECT_THAT((*neg)[1].values<float>(), ElementsAre(-1.5f, 0.5f));

  absl::StatusOr<Element> inc = Call("increment", in);
  ASSERT_TRUE(inc.ok());
  EXPECT_THAT((*inc)[0].values<int64_t>(), ElementsAre(-1, 1, 4));
  EXPECT_THAT((*inc)[1].values<float>(), ElementsAre(2.5f, 0.5f));

  absl::StatusOr<Element> id = Call("identity", in);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, in);
}

TEST(FunctionRegistryTest, IntegerOverflowWraps) {
  absl::StatusOr<Element> inc = Call("increment", {Tensor::Scalar<uint8_t>(255)});
  ASSERT_TRUE(inc.ok());
  EXPECT_THAT((*inc)[0].values<uint8_t>(), ElementsAre(0));
  absl::StatusOr<Element> sq = Call("square", {Tensor::Scalar<uint8_t>(20)});
  ASSERT_TRUE(sq.ok());
  EXPECT_THAT((*sq)[0].values<uint8_t>(), ElementsAre(400 % 256));
}

TEST(FunctionRegistryTest, CastsChangeDtypeAndKeepShape) {
  Element in = {Tensor::FromVector<int32_t>({2, 1}, std::vector<int32_t>{7, -3})};
  absl::StatusOr<Element> f32 = Call("cast_float32", in);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ((*f32)[0].dtype(), DType::kFloat32);
  EXPECT_THAT((*f32)[0].shape(), ElementsAre(2, 1));
  EXPECT_THAT((*f32)[0].values<float>(), ElementsAre(7.0f, -3.0f));

  absl::StatusOr<Element> f64 = Call("cast_float64", {Tensor::Scalar<float>(0.25f)});
  ASSERT_TRUE(f64.ok());
  EXPECT_EQ((*f64)[0].dtype(), DType::kFloat64);
  EXPECT_THAT((*f64)[0].values<double>(), ElementsAre(0.25));
}

TEST(FunctionRegistryTest, WithSquareAppendsSquaresOfEveryComponent) {
  absl::StatusOr<Element> one = Call("with_square", {Tensor::Scalar<int64_t>(5)});
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 2u);
  EXPECT_THAT((*one)[0].values<int64_t>(), ElementsAre(5));
  EXPECT_THAT((*one)[1].values<int64_t>(), ElementsAre(25));

  absl::StatusOr<Element> two =
      Call("with_square", {Tensor::Scalar<int64_t>(2), Tensor::Scalar<double>(1.5)});
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 4u);
  EXPECT_THAT((*two)[2].values<int64_t>(), ElementsAre(4));
  EXPECT_THAT((*two)[3].values<double>(), ElementsAre(2.25));
}

TEST(FunctionRegistryTest, NumericBuiltinsRejectStringsNamingTheFunction) {
  for (const char* fn : {"square", "negate", "increment", "cast_float32", "with_square"}) {
    absl::StatusOr<Element> out = Call(fn, {Tensor::StringScalar("x")});
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << fn;
    EXPECT_EQ(out.status().message(), absl::StrCat(fn, " expects numeric tensors, got string[]"));
  }
}

TEST(FunctionRegistryTest, PredicatesAndNormalize) {
  auto keep = [](std::string_view fn, Element in) {
    absl::StatusOr<Element> out = Call(fn, std::move(in));
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? static_cast<int>((*out)[0].values<uint8_t>()[0]) : -1;
  };
  EXPECT_EQ(keep("is_even", {Tensor::Scalar<int64_t>(4)}), 1);
  EXPECT_EQ(keep("is_even", {Tensor::Scalar<int32_t>(-3)}), 0);
  EXPECT_EQ(keep("is_odd", {Tensor::Scalar<int64_t>(-3)}), 1);
  EXPECT_EQ(keep("non_empty", {Tensor::StringScalar("")}), 0);
  EXPECT_EQ(keep("non_empty", {Tensor::StringScalar("a")}), 1);
  EXPECT_EQ(keep("non_empty", {Tensor::FromVector<int64_t>({0}, std::vector<int64_t>{})}), 0);
  absl::StatusOr<Element> bad = Call("is_even", {Tensor::Scalar<float>(2)});
  EXPECT_EQ(bad.status().message(),
            "is_even expects an integer scalar as component 0, got float32[]{2}");

  absl::StatusOr<Element> norm =
      Call("normalize_uint8", {Tensor::FromVector<uint8_t>({3}, std::vector<uint8_t>{0, 51, 255})});
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_THAT((*norm)[0].values<float>(), ElementsAre(0.0f, 0.2f, 1.0f));
}

TEST(FunctionRegistryTest, GlobalFunctionsStartAsTheBuiltinsAndAcceptRegistrations) {
  FunctionRegistry& global = GlobalFunctions();
  EXPECT_NE(global.Find("square"), nullptr);
  ASSERT_TRUE(global
                  .Register("global_test_fn",
                            [](Element in, Element* out) {
                              *out = std::move(in);
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_NE(GlobalFunctions().Find("global_test_fn"), nullptr);
  EXPECT_EQ(FunctionRegistry::Builtins().Find("global_test_fn"), nullptr);
}

TEST(FunctionRegistryTest, RegisterRejectsDuplicatesAndEmptyNames) {
  FunctionRegistry registry = FunctionRegistry::Builtins();
  auto twice = [](Element in, Element* out) {
    *out = std::move(in);
    for (Tensor& t : *out) {
      for (int64_t& v : t.mutable_values<int64_t>()) v *= 2;
    }
    return absl::OkStatus();
  };
  ASSERT_TRUE(registry.Register("twice", twice).ok());
  absl::StatusOr<Element> out = Call("twice", {Tensor::Scalar<int64_t>(21)}, registry);
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0].values<int64_t>(), ElementsAre(42));
  // The copy is independent of the built-ins.
  EXPECT_EQ(FunctionRegistry::Builtins().Find("twice"), nullptr);

  absl::Status dup = registry.Register("square", twice);
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.message(), "function 'square' is already registered");

  EXPECT_EQ(registry.Register("", twice).code(), absl::StatusCode::kInvalidArgument);
  absl::Status empty_fn = registry.Register("nothing", nullptr);
  EXPECT_EQ(empty_fn.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty_fn.message(), "function 'nothing' is empty");
}

TEST(FunctionRegistryTest, FindPointersSurviveLaterRegistrations) {
  FunctionRegistry registry;
  ASSERT_TRUE(registry.Register("a", [](Element, Element*) { return absl::OkStatus(); }).ok());
  const FunctionRegistry::Function* a = registry.Find("a");
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(
        registry
            .Register("f" + std::to_string(i), [](Element, Element*) { return absl::OkStatus(); })
            .ok());
  }
  EXPECT_EQ(registry.Find("a"), a);
}

}  // namespace
}  // namespace sluice::engine
