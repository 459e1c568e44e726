#include "engine/cardinality.h"

#include "engine/pipeline_text.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

int64_t CardinalityOf(std::string_view text) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  absl::StatusOr<int64_t> n = Cardinality(*def);
  EXPECT_TRUE(n.ok()) << text << ": " << n.status();
  return n.ok() ? *n : -100;
}

TEST(CardinalityTest, CountsThroughEveryOp) {
  EXPECT_EQ(CardinalityOf("range(10)"), 10);
  EXPECT_EQ(CardinalityOf("range(10, 0, -3)"), 4);
  EXPECT_EQ(CardinalityOf("range(0)"), 0);
  EXPECT_EQ(CardinalityOf("range(10) | map(square) | shuffle(4)"), 10);
  EXPECT_EQ(CardinalityOf("range(10) | batch(3)"), 4);
  EXPECT_EQ(CardinalityOf("range(10) | batch(3, drop_remainder=true)"), 3);
  EXPECT_EQ(CardinalityOf("range(9) | batch(3)"), 3);
  EXPECT_EQ(CardinalityOf("range(10) | repeat(3)"), 30);
  EXPECT_EQ(CardinalityOf("range(10) | repeat(0)"), 0);
  EXPECT_EQ(CardinalityOf("range(10) | take(4)"), 4);
  EXPECT_EQ(CardinalityOf("range(10) | take(40)"), 10);
  EXPECT_EQ(CardinalityOf("range(10) | take(-1)"), 10);
}

TEST(CardinalityTest, InfiniteFlowsThroughAndTakeBoundsIt) {
  EXPECT_EQ(CardinalityOf("range(10) | repeat()"), kInfinite);
  EXPECT_EQ(CardinalityOf("range(10) | repeat() | batch(4) | map(identity)"), kInfinite);
  EXPECT_EQ(CardinalityOf("range(10) | repeat() | take(25)"), 25);
  EXPECT_EQ(CardinalityOf("range(10) | repeat() | repeat(2)"), kInfinite);
  // An empty pass ends the repeat, so forever over nothing is nothing.
  EXPECT_EQ(CardinalityOf("range(0) | repeat()"), 0);
  // skip(-1) never gets past an infinite input: refused (tf.data calls it infinite; it
  // said 0 and spun).
  absl::StatusOr<proto::PipelineDef> endless_skip =
      ParsePipeline("range(10) | repeat() | skip(-1)");
  ASSERT_TRUE(endless_skip.ok());
  EXPECT_EQ(Cardinality(*endless_skip).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CardinalityOf("range(10) | skip(-1)"), 0);
}

// As tf.data: repeat() makes any input of unknown size infinite, so that the usual
// `list_files | interleave(tfrecord()) | repeat()`, or a filter before the repeat, can be
// read by coordinated consumers and keeps its workers on an endless DYNAMIC job.
TEST(CardinalityTest, RepeatForeverOfAnUnknownSizeIsInfinite) {
  EXPECT_EQ(CardinalityOf("range(10) | filter(is_even)"), kUnknown);
  EXPECT_EQ(CardinalityOf("range(10) | filter(is_even) | repeat()"), kInfinite);
  EXPECT_EQ(CardinalityOf("range(10) | filter(is_even) | repeat() | batch(2)"), kInfinite);
  EXPECT_EQ(CardinalityOf("range(10) | filter(is_even) | repeat(3)"), kUnknown);
}

TEST(CardinalityTest, OverflowIsOutOfRange) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(4611686018427387904) | repeat(4)");
  ASSERT_TRUE(def.ok());
  absl::StatusOr<int64_t> n = Cardinality(*def);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(n.status().message(),
            "stage 1 (repeat): cardinality 4611686018427387904 x 4 does not fit in int64");
}

TEST(CardinalityTest, InvalidPipelinesAreRejected) {
  EXPECT_EQ(Cardinality(proto::PipelineDef()).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(10) | batch(0)");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(Cardinality(*def).status().message(), "stage 1 (batch): batch_size must be > 0, got 0");
}

}  // namespace
}  // namespace sluice::engine
