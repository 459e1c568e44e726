#include "engine/ops/take_op.h"

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

TEST(TakeOpTest, YieldsAtMostCountElements) {
  EXPECT_THAT(ScalarInt64s(*DrainText("range(10) | take(3)")), ElementsAre(0, 1, 2));
  EXPECT_THAT(ScalarInt64s(*DrainText("range(3) | repeat() | take(5)")),
              ElementsAre(0, 1, 2, 0, 1));
  EXPECT_THAT(ScalarInt64s(*DrainText("range(2) | take(-1)")), ElementsAre(0, 1));
  EXPECT_EQ(*Cardinality(*ParsePipeline("range(3) | repeat() | take(5)")), 5);
  EXPECT_EQ(DrainText("range(3) | take(-2)").status().message(),
            "stage 1 (take): count must be >= 0, or -1 for all, got -2");
}

}  // namespace
}  // namespace sluice::engine
