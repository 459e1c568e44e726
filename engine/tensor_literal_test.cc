#include "engine/tensor_literal.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ArgValue Ints(std::vector<int64_t> v) {
  std::vector<ArgValue> items;
  for (int64_t x : v) items.push_back(ArgValue::Integer(x));
  return ArgValue::List(std::move(items));
}

TEST(TensorLiteralTest, NestedListsInferShapeAndDtype) {
  absl::StatusOr<proto::TensorLiteral> lit =
      LiteralFromArg(ArgValue::List({Ints({1, 2}), Ints({3, 4}), Ints({5, 6})}), {}, "v");
  ASSERT_TRUE(lit.ok()) << lit.status();
  EXPECT_THAT(lit->shape(), ElementsAre(3, 2));
  EXPECT_EQ(lit->dtype(), static_cast<uint32_t>(DType::kInt64));
  absl::StatusOr<Tensor> t = TensorFromLiteral(*lit);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, Tensor::FromVector<int64_t>({3, 2}, std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(LiteralToArg(*lit).ToText(), "[[1, 2], [3, 4], [5, 6]]");
  EXPECT_EQ(LiteralDefaultDType(*lit), DType::kInt64);
}

TEST(TensorLiteralTest, TensorsRoundTripThroughLiterals) {
  for (const Tensor& t : {Tensor::FromVector<uint8_t>({2}, std::vector<uint8_t>{0, 255}),
                          Tensor::FromVector<double>({1, 2}, std::vector<double>{0.1, -2.5}),
                          Tensor::FromStrings({2}, std::vector<std::string>{"", "x y"})}) {
    absl::StatusOr<Tensor> back = TensorFromLiteral(LiteralFromTensor(t));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, t);
  }
}

TEST(TensorLiteralTest, MalformedLiteralsAreRejected) {
  proto::TensorLiteral lit;
  lit.set_dtype(static_cast<uint32_t>(DType::kInt32));
  lit.add_shape(2);
  lit.add_int_values(1);
  EXPECT_THAT(TensorFromLiteral(lit).status().message(),
              HasSubstr("a int32[2] literal needs 2 values in int_values and no others; got 1 "
                        "int, 0 float and 0 string values"));
  lit.add_int_values(int64_t{1} << 40);
  EXPECT_THAT(TensorFromLiteral(lit).status().message(),
              HasSubstr("value 1099511627776 at index 1 does not fit in int32"));
  lit.set_dtype(9);
  EXPECT_THAT(TensorFromLiteral(lit).status().message(), HasSubstr("expected a dtype in [1, 6]"));
  proto::TensorLiteral nan = LiteralFromTensor(Tensor::Scalar<float>(NAN));
  EXPECT_THAT(CheckLiteralIsWritable(nan).message(), HasSubstr("use finite values"));
}

}  // namespace
}  // namespace sluice::engine
