#include "engine/ops/batch_op.h"

#include <string>
#include <vector>

#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::FlatInt64s;
using ::testing::ElementsAre;

TEST(StackElementsTest, StacksEachComponentAlongANewLeadingDim) {
  std::vector<Element> rows = {
      {Tensor::FromVector<float>({2}, std::vector<float>{1, 2}), Tensor::Scalar<int32_t>(7)},
      {Tensor::FromVector<float>({2}, std::vector<float>{3, 4}), Tensor::Scalar<int32_t>(8)},
      {Tensor::FromVector<float>({2}, std::vector<float>{5, 6}), Tensor::Scalar<int32_t>(9)},
  };
  absl::StatusOr<Element> out = StackElements(rows);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat32);
  EXPECT_THAT((*out)[0].shape(), ElementsAre(3, 2));
  EXPECT_THAT((*out)[0].values<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT((*out)[1].shape(), ElementsAre(3));
  EXPECT_THAT((*out)[1].values<int32_t>(), ElementsAre(7, 8, 9));
}

TEST(StackElementsTest, StacksStringComponents) {
  std::vector<Element> rows = {
      {Tensor::FromStrings({2}, std::vector<std::string>{"a", "bc"})},
      {Tensor::FromStrings({2}, std::vector<std::string>{"", "def"})},
  };
  absl::StatusOr<Element> out = StackElements(rows);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kString);
  EXPECT_THAT((*out)[0].shape(), ElementsAre(2, 2));
  EXPECT_THAT((*out)[0].string_values(), ElementsAre("a", "bc", "", "def"));
}

TEST(StackElementsTest, RejectsMismatchedRows) {
  EXPECT_EQ(StackElements({}).status().message(), "expected at least one element to stack");

  std::vector<Element> counts = {{Tensor::Scalar<int64_t>(1)},
                                 {Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(2)}};
  EXPECT_EQ(StackElements(counts).status().message(),
            "all elements of a batch need the same number of components; element 1 has 2 but "
            "element 0 has 1");

  std::vector<Element> dtypes = {
      {Tensor::Scalar<int64_t>(1)}, {Tensor::Scalar<int64_t>(1)}, {Tensor::Scalar<double>(1)}};
  absl::StatusOr<Element> s = StackElements(dtypes);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "all elements of a batch need equal dtype and shape per component; component 0 of "
            "element 2 is float64[] but in element 0 it is int64[]");

  std::vector<Element> shapes = {{Tensor::FromVector<int32_t>({2}, std::vector<int32_t>{1, 2})},
                                 {Tensor::FromVector<int32_t>({1}, std::vector<int32_t>{1})}};
  EXPECT_EQ(StackElements(shapes).status().message(),
            "all elements of a batch need equal dtype and shape per component; component 0 of "
            "element 1 is int32[1] but in element 0 it is int32[2]");
}

TEST(BatchIteratorTest, KeepsOrDropsTheRemainder) {
  absl::StatusOr<std::vector<Element>> kept = DrainText("range(7) | batch(3)");
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->size(), 3u);
  EXPECT_THAT((*kept)[0][0].shape(), ElementsAre(3));
  EXPECT_THAT((*kept)[2][0].shape(), ElementsAre(1));
  EXPECT_THAT(FlatInt64s(*kept), ElementsAre(0, 1, 2, 3, 4, 5, 6));

  absl::StatusOr<std::vector<Element>> dropped =
      DrainText("range(7) | batch(3, drop_remainder=true)");
  ASSERT_TRUE(dropped.ok());
  ASSERT_EQ(dropped->size(), 2u);
  EXPECT_THAT(FlatInt64s(*dropped), ElementsAre(0, 1, 2, 3, 4, 5));

  absl::StatusOr<std::vector<Element>> none = DrainText("range(2) | batch(3, drop_remainder=true)");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(BatchIteratorTest, BatchesMultiComponentAndNestedBatches) {
  absl::StatusOr<std::vector<Element>> out =
      DrainText("range(4) | map(with_square) | batch(2) | batch(2)");
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  ASSERT_EQ((*out)[0].size(), 2u);
  EXPECT_THAT((*out)[0][0].shape(), ElementsAre(2, 2));
  EXPECT_THAT(FlatInt64s(*out, 0), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(FlatInt64s(*out, 1), ElementsAre(0, 1, 4, 9));
}

TEST(BatchIteratorTest, ReportsRaggedInputWithTheOpName) {
  // batch(3) then batch(2): the inner batches are [3] and [1], which cannot be stacked.
  absl::StatusOr<std::vector<Element>> out = DrainText("range(4) | batch(3) | batch(2)");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "batch: all elements of a batch need equal dtype and shape per component; "
            "component 0 of element 1 is int64[1] but in element 0 it is int64[3]");
}

}  // namespace
}  // namespace sluice::engine
