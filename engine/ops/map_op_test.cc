#include "engine/ops/map_op.h"

#include <string>
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

std::vector<int64_t> Squares(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i * i);
  return v;
}

TEST(MapOpTest, ParallelMapKeepsTheInputOrder) {
  for (int parallel : {0, 1, 2, 8}) {
    absl::StatusOr<std::vector<Element>> out =
        DrainText("range(1000) | map(square, parallel=" + std::to_string(parallel) + ")");
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(ScalarInt64s(*out), Squares(1000)) << parallel;
  }
}

TEST(MapOpTest, ErrorsNameTheFunctionAndParallelIsBounded) {
  EXPECT_THAT(DrainText("from_tensor_slices(['a']) | map(square, parallel=4)").status().message(),
              HasSubstr("map(square): square expects numeric tensors, got string[]"));
  EXPECT_THAT(DrainText("range(3) | map(square, parallel=5000)").status().message(),
              HasSubstr("parallel must be in [0, 1024], got 5000"));
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(3) | map(square, parallel=4)");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(FormatPipeline(*def), "range(0, 3, 1) | map(square, parallel=4)");
}

TEST(MapOpTest, DestroyingAParallelMapMidStreamJoinsItsThreads) {
  absl::StatusOr<proto::PipelineDef> def =
      ParsePipeline("range(0, 1000000000) | map(square, parallel=8)");
  ASSERT_TRUE(def.ok());
  for (int round = 0; round < 20; ++round) {
    absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, {});
    ASSERT_TRUE(it.ok()) << it.status();
    absl::StatusOr<std::vector<Element>> some = testing::Drain(**it, /*limit=*/round);
    ASSERT_TRUE(some.ok());
    EXPECT_EQ(some->size(), static_cast<size_t>(round));
  }  // Each iterator is destroyed with its pool busy; a hang or crash fails the test.
}

}  // namespace
}  // namespace sluice::engine
