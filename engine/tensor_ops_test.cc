#include "engine/tensor_ops.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;

TEST(TensorOpsTest, SliceRowTakesDim0Rows) {
  Tensor m = Tensor::FromVector<int32_t>({3, 2}, std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(SliceRow(m, 1), Tensor::FromVector<int32_t>({2}, std::vector<int32_t>{3, 4}));
  Tensor v = Tensor::FromVector<double>({2}, std::vector<double>{0.5, 1.5});
  EXPECT_EQ(SliceRow(v, 1), Tensor::Scalar<double>(1.5));
  Tensor s = Tensor::FromStrings({2, 2}, std::vector<std::string>{"a", "b", "c", "d"});
  EXPECT_THAT(SliceRow(s, 1).string_values(), ElementsAre("c", "d"));
  EXPECT_THAT(SliceRow(s, 1).shape(), ElementsAre(2));
}

TEST(TensorOpsTest, PadToRefusesAPaddingOutsideTheComponentsDtype) {
  const Tensor bytes = Tensor::FromVector<uint8_t>({1}, std::vector<uint8_t>{7});
  EXPECT_EQ(PadTo(bytes, std::vector<int64_t>{2}, IntScalarValue(-1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PadTo(bytes, std::vector<int64_t>{2}, IntScalarValue(256)).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Tensor> top = PadTo(bytes, std::vector<int64_t>{2}, IntScalarValue(255));
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_THAT(top->values<uint8_t>(), ElementsAre(7, 255));
  const Tensor floats = Tensor::FromVector<float>({1}, std::vector<float>{1});
  EXPECT_EQ(PadTo(floats, std::vector<int64_t>{2}, FloatScalarValue(1e300)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorOpsTest, PadToFillsTheRestWithThePaddingValue) {
  Tensor m = Tensor::FromVector<int64_t>({2, 2}, std::vector<int64_t>{1, 2, 3, 4});
  absl::StatusOr<Tensor> p = PadTo(m, std::vector<int64_t>{3, 3}, IntScalarValue(-1));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->values<int64_t>(), ElementsAre(1, 2, -1, 3, 4, -1, -1, -1, -1));
  absl::StatusOr<Tensor> f = PadTo(Tensor::FromVector<float>({1}, std::vector<float>{2}),
                                   std::vector<int64_t>{3}, FloatScalarValue(0.5));
  EXPECT_THAT(f->values<float>(), ElementsAre(2.0f, 0.5f, 0.5f));
  absl::StatusOr<Tensor> s = PadTo(Tensor::FromStrings({1}, std::vector<std::string>{"x"}),
                                   std::vector<int64_t>{2}, proto::ScalarValue());
  EXPECT_THAT(s->string_values(), ElementsAre("x", ""));
  EXPECT_EQ(PadTo(m, std::vector<int64_t>{1, 3}, IntScalarValue(0)).status().message(),
            "cannot pad [2, 2] to [1, 3]: dim 0 would shrink");
  EXPECT_EQ(PadTo(m, std::vector<int64_t>{4}, IntScalarValue(0)).status().message(),
            "cannot pad [2, 2] to [4]: ranks differ");
  EXPECT_EQ(PadTo(m, std::vector<int64_t>{2, 3}, StringScalarValue("p")).status().message(),
            "padding value 'p' does not match the component's dtype int64");
}

}  // namespace
}  // namespace sluice::engine
