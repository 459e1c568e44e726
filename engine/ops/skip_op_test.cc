#include "engine/ops/skip_op.h"

#include <vector>

#include "engine/cardinality.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::ElementsAre;

TEST(SkipOpTest, DropsTheFirstCountElements) {
  EXPECT_THAT(ScalarInt64s(*DrainText("range(10) | skip(7)")), ElementsAre(7, 8, 9));
  EXPECT_TRUE(DrainText("range(3) | skip(5)")->empty());
  EXPECT_TRUE(DrainText("range(3) | skip(-1)")->empty());
  EXPECT_THAT(ScalarInt64s(*DrainText("range(3) | skip(0)")), ElementsAre(0, 1, 2));
  // Each repetition re-creates the skip's input, so skip applies per pass below a repeat.
  EXPECT_THAT(ScalarInt64s(*DrainText("range(3) | skip(1) | repeat(2)")), ElementsAre(1, 2, 1, 2));
}

TEST(SkipOpTest, CardinalityAndValidation) {
  EXPECT_EQ(*Cardinality(*ParsePipeline("range(10) | skip(3)")), 7);
  EXPECT_EQ(*Cardinality(*ParsePipeline("range(2) | skip(3)")), 0);
  EXPECT_EQ(*Cardinality(*ParsePipeline("range(2) | repeat() | skip(3)")), kInfinite);
  EXPECT_EQ(DrainText("range(3) | skip(-2)").status().message(),
            "stage 1 (skip): count must be >= 0, or -1 for all, got -2");
}

}  // namespace
}  // namespace sluice::engine
