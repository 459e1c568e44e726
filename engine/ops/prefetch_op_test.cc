#include "engine/ops/prefetch_op.h"

#include <vector>

#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PrefetchOpTest, SameElementsAndErrorsAsWithout) {
  EXPECT_EQ(ScalarInt64s(*DrainText("range(500) | map(square) | prefetch(3)")),
            ScalarInt64s(*DrainText("range(500) | map(square)")));
  // Prefetch under repeat: each pass re-creates the prefetching input.
  EXPECT_THAT(ScalarInt64s(*DrainText("range(3) | prefetch(1) | repeat(2)")),
              ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(DrainText("from_tensor_slices(['x']) | map(square) | prefetch(2)").status().message(),
              HasSubstr("map(square): square expects numeric tensors"));
  EXPECT_THAT(DrainText("range(3) | prefetch(0)").status().message(),
              HasSubstr("buffer_size must be in [1, 65536], got 0"));
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(3) | prefetch(4)");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(FormatPipeline(*def), "range(0, 3, 1) | prefetch(4)");
}

TEST(PrefetchOpTest, DestroyedMidStreamOverAnInfiniteInput) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(5) | repeat() | prefetch(8)");
  ASSERT_TRUE(def.ok());
  for (size_t n : {0, 1, 50}) {
    absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, {});
    ASSERT_TRUE(it.ok());
    absl::StatusOr<std::vector<Element>> some = testing::Drain(**it, n);
    ASSERT_TRUE(some.ok());
    EXPECT_EQ(some->size(), n);
  }
}

}  // namespace
}  // namespace sluice::engine
