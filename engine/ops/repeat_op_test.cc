#include "engine/ops/repeat_op.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::ElementsAre;

std::vector<int64_t> Values(std::string_view text, const PipelineContext& context = {}) {
  absl::StatusOr<std::vector<Element>> out = DrainText(text, context, /*limit=*/1000);
  EXPECT_TRUE(out.ok()) << text << ": " << out.status();
  return out.ok() ? ScalarInt64s(*out) : std::vector<int64_t>{};
}

// Serves [0, n) as a single split for every repetition below `repetitions`, and records
// every request.
class CountingFeed : public SplitFeed {
 public:
  CountingFeed(int64_t n, int64_t repetitions) : n_(n), repetitions_(repetitions) {}
  std::vector<int64_t> requests;

  absl::Status GetNext(int64_t repetition, proto::Split* split, bool* end) override {
    requests.push_back(repetition);
    *end = repetition >= repetitions_ || !served_.insert(repetition).second;
    if (!*end) {
      split->set_begin(0);
      split->set_end(n_);
    }
    return absl::OkStatus();
  }

 private:
  int64_t n_;
  int64_t repetitions_;
  std::set<int64_t> served_;
};

TEST(RepeatIteratorTest, RepeatsCountTimes) {
  EXPECT_THAT(Values("range(3) | repeat(2)"), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(Values("range(3) | repeat(1)"), ElementsAre(0, 1, 2));
  EXPECT_THAT(Values("range(3) | repeat(0)"), ElementsAre());
  EXPECT_THAT(Values("range(2) | repeat() | take(5)"), ElementsAre(0, 1, 0, 1, 0));
  EXPECT_THAT(Values("range(2) | repeat(2) | repeat(2)"), ElementsAre(0, 1, 0, 1, 0, 1, 0, 1));
  EXPECT_THAT(
      Values("range(3) | batch(2) | repeat(2) | take(-1) | map(identity) | take(100)").size(), 4u);
}

TEST(RepeatIteratorTest, AnEmptyPassEndsEvenAForeverRepeat) {
  EXPECT_THAT(Values("range(0) | repeat()"), ElementsAre());
  EXPECT_THAT(Values("range(5) | take(0) | repeat()"), ElementsAre());
}

TEST(RepeatIteratorTest, EachPassAsksTheFeedForANewRepetition) {
  CountingFeed feed(/*n=*/3, /*repetitions=*/2);
  PipelineContext context;
  context.split_feed = &feed;
  EXPECT_THAT(Values("range(3) | repeat(5)", context), ElementsAre(0, 1, 2, 0, 1, 2));
  // Pass 0 and 1 each get one split then the end; pass 2 finds nothing, and the feed says
  // the source is empty, which ends the repeat before count 5 is reached.
  EXPECT_THAT(feed.requests, ElementsAre(0, 0, 1, 1, 2));
}

// A DYNAMIC feed whose passes 0 and 2 other workers took before this one leased any: they
// end with no split, and the dispatcher says the source is not empty.
class SharedFeed : public SplitFeed {
 public:
  std::vector<int64_t> requests;

  absl::Status GetNext(int64_t repetition, proto::Split* split, bool* end) override {
    requests.push_back(repetition);
    const bool taken = repetition == 0 || repetition == 2;
    *end = taken || !served_.insert(repetition).second;
    if (!*end) {
      split->set_begin(0);
      split->set_end(2);
    }
    return absl::OkStatus();
  }
  bool source_empty() const override { return false; }

 private:
  std::set<int64_t> served_;
};

// A finite repeat goes on past passes the others took, to its count, as tf.data's does: it
// ended at the first, and with it the worker's part in the passes still to come.
TEST(RepeatIteratorTest, AFiniteRepeatGoesOnPastPassesOthersTook) {
  SharedFeed feed;
  PipelineContext context;
  context.split_feed = &feed;
  EXPECT_THAT(Values("range(2) | repeat(5)", context), ElementsAre(0, 1, 0, 1, 0, 1));
  EXPECT_THAT(feed.requests, ElementsAre(0, 1, 1, 2, 3, 3, 4, 4));
}

// A pass that never asks the feed (take(0), an inner repeat(0)) yields nothing by itself:
// the repeat ends, whatever the feed said of an earlier pass. It looped for ever.
TEST(RepeatIteratorTest, APassThatNeverAsksTheFeedEndsTheRepeat) {
  for (const char* pipeline : {"range(2) | take(0) | repeat()", "range(2) | repeat(0) | repeat()",
                               "range(2) | take(0) | repeat(1000000000)"}) {
    SharedFeed feed;
    PipelineContext context;
    context.split_feed = &feed;
    EXPECT_THAT(Values(pipeline, context), ElementsAre()) << pipeline;
    EXPECT_THAT(feed.requests, ElementsAre()) << pipeline;
  }
}

TEST(RepeatIteratorTest, NestedRepeatsNumberSourcePassesConsecutively) {
  CountingFeed feed(/*n=*/1, /*repetitions=*/100);
  PipelineContext context;
  context.split_feed = &feed;
  EXPECT_THAT(Values("range(1) | repeat(2) | map(increment) | repeat(3)", context),
              ElementsAre(1, 1, 1, 1, 1, 1));
  EXPECT_THAT(feed.requests, ElementsAre(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5));
}

// Serves one split [0, sizes[r]) for each repetition r it has a size for; none after.
class SizedFeed : public SplitFeed {
 public:
  explicit SizedFeed(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {}
  std::vector<int64_t> requests;

  absl::Status GetNext(int64_t repetition, proto::Split* split, bool* end) override {
    requests.push_back(repetition);
    *end = repetition >= static_cast<int64_t>(sizes_.size()) || !served_.insert(repetition).second;
    if (!*end) {
      split->set_begin(0);
      split->set_end(sizes_[repetition]);
    }
    return absl::OkStatus();
  }

 private:
  std::vector<int64_t> sizes_;
  std::set<int64_t> served_;
};

// A worker's share of a DYNAMIC pass can yield nothing while the source does not: here its
// one-element splits fall short of a batch(drop_remainder=true). The repeat goes on to the
// pass that yields, as tf.data's does with split providers; it ended at the first before.
// A pass with no split at all still ends it.
TEST(RepeatIteratorTest, ADynamicPassWhoseSplitsYieldNothingDoesNotEndTheRepeat) {
  for (const char* count : {"", "5"}) {
    SizedFeed feed({1, 1, 4});
    PipelineContext context;
    context.split_feed = &feed;
    absl::StatusOr<std::vector<Element>> out = DrainText(
        absl::StrCat("range(4) | batch(2, drop_remainder=true) | repeat(", count, ")"), context,
        /*limit=*/100);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->size(), 2u) << "repeat(" << count << ")";
    EXPECT_THAT(feed.requests, ElementsAre(0, 0, 1, 1, 2, 2, 3)) << "repeat(" << count << ")";
  }
}

// The same with a prefetch under the repeat, whose thread leases as soon as it is made: the
// pass's count of splits starts before it, or the splits it took first went uncounted.
TEST(RepeatIteratorTest, SplitsAPrefetchTakesAtOnceCountForItsPass) {
  for (int run = 0; run < 20; ++run) {
    SizedFeed feed({1, 1, 4});
    PipelineContext context;
    context.split_feed = &feed;
    absl::StatusOr<std::vector<Element>> out = DrainText(
        "range(4) | batch(2, drop_remainder=true) | prefetch(2) | repeat()", context, 100);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->size(), 2u) << "run " << run;
  }
}

// Splits in every pass and never an element (a filter that drops everything): the repeat
// still ends, after 1000 such passes in a row, rather than lease passes for ever.
TEST(RepeatIteratorTest, ADynamicPipelineThatNeverYieldsStillEnds) {
  CountingFeed feed(/*n=*/1, /*repetitions=*/1'000'000);
  PipelineContext context;
  context.split_feed = &feed;
  EXPECT_THAT(Values("range(1) | skip(5) | repeat()", context), ElementsAre());
  // Each pass: its split, then the end of its splits.
  EXPECT_EQ(feed.requests.size(), 2u * 1001);
}

TEST(RepeatIteratorTest, RepeatZeroNeverTouchesItsInput) {
  CountingFeed feed(/*n=*/1, /*repetitions=*/1);
  PipelineContext context;
  context.split_feed = &feed;
  EXPECT_THAT(Values("range(1) | repeat(0)", context), ElementsAre());
  EXPECT_TRUE(feed.requests.empty());
}

}  // namespace
}  // namespace sluice::engine
