#include "engine/ops/unbatch_op.h"

#include <vector>

#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::sluice::engine::testing::ScalarStrings;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(UnbatchOpTest, InvertsBatchIncludingTheRemainder) {
  EXPECT_THAT(ScalarInt64s(*DrainText("range(5) | batch(2) | unbatch()")),
              ElementsAre(0, 1, 2, 3, 4));
  absl::StatusOr<std::vector<Element>> rows =
      DrainText("from_tensor_slices([[[1, 2], [3, 4]]], [['a', 'b']]) | unbatch()");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1][0], Tensor::FromVector<int64_t>({2}, std::vector<int64_t>{3, 4}));
  EXPECT_THAT(ScalarStrings({{(*rows)[0][1]}, {(*rows)[1][1]}}), ElementsAre("a", "b"));
}

TEST(UnbatchOpTest, ScalarsAndRaggedDim0AreErrors) {
  EXPECT_THAT(DrainText("range(3) | unbatch()").status().message(),
              HasSubstr("unbatch: component 0 is a scalar; expected rank >= 1, got int64[]{0}"));
  EXPECT_THAT(DrainText("from_tensor_slices([[1, 2]], [[1]]) | unbatch()").status().message(),
              HasSubstr("all components need the same dim 0; component 1 has 1 but component 0 "
                        "has 2"));
}

}  // namespace
}  // namespace sluice::engine
