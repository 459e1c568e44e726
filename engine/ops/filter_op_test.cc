#include "engine/ops/filter_op.h"

#include <vector>

#include "engine/pipeline_text.h"
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

TEST(FilterOpTest, KeepsElementsWhosePredicateIsNonzero) {
  absl::StatusOr<std::vector<Element>> even = DrainText("range(10) | filter(is_even)");
  ASSERT_TRUE(even.ok()) << even.status();
  EXPECT_THAT(ScalarInt64s(*even), ElementsAre(0, 2, 4, 6, 8));
  absl::StatusOr<std::vector<Element>> odd_parallel =
      DrainText("range(100) | filter(is_odd, parallel=4) | take(5)");
  ASSERT_TRUE(odd_parallel.ok()) << odd_parallel.status();
  EXPECT_THAT(ScalarInt64s(*odd_parallel), ElementsAre(1, 3, 5, 7, 9));
  absl::StatusOr<std::vector<Element>> words =
      DrainText("from_tensor_slices(['a', '', 'b']) | filter(non_empty)");
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_THAT(ScalarStrings(*words), ElementsAre("a", "b"));
}

TEST(FilterOpTest, NonScalarPredicateResultsAreErrors) {
  // identity returns the element itself: a vector is not a truth value.
  EXPECT_THAT(DrainText("from_tensor_slices([[1, 2]]) | filter(identity)").status().message(),
              HasSubstr("filter(identity): expected the predicate to return a numeric scalar as "
                        "component 0, got int64[2]{1, 2}"));
  EXPECT_THAT(DrainText("range(3) | filter(nope)").status().message(),
              HasSubstr("stage 1 (filter): unknown function 'nope'"));
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(4) | filter(is_even, parallel=2)");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(FormatPipeline(*def), "range(0, 4, 1) | filter(is_even, parallel=2)");
}

}  // namespace
}  // namespace sluice::engine
