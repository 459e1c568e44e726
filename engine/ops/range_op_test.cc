#include "engine/ops/range_op.h"

#include <deque>
#include <limits>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::ElementsAre;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

proto::RangeOp Range(int64_t start, int64_t stop, int64_t step) {
  proto::RangeOp r;
  r.set_start(start);
  r.set_stop(stop);
  r.set_step(step);
  return r;
}

// Hands out scripted splits per repetition and records what was asked.
class ScriptedFeed : public SplitFeed {
 public:
  std::map<int64_t, std::deque<proto::Split>> splits;
  std::vector<int64_t> requests;

  absl::Status GetNext(int64_t repetition, proto::Split* split, bool* end) override {
    requests.push_back(repetition);
    std::deque<proto::Split>& q = splits[repetition];
    if (q.empty()) {
      *end = true;
      return absl::OkStatus();
    }
    *split = q.front();
    q.pop_front();
    *end = false;
    return absl::OkStatus();
  }
};

proto::Split MakeSplit(int64_t begin, int64_t end) {
  proto::Split s;
  s.set_begin(begin);
  s.set_end(end);
  return s;
}

TEST(RangeLengthTest, MatchesBruteForceCounting) {
  for (int64_t start = -6; start <= 6; ++start) {
    for (int64_t stop = -6; stop <= 6; ++stop) {
      for (int64_t step : {-7, -3, -2, -1, 1, 2, 3, 7}) {
        int64_t expected = 0;
        for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) ++expected;
        absl::StatusOr<int64_t> n = RangeLength(Range(start, stop, step));
        ASSERT_TRUE(n.ok()) << n.status();
        EXPECT_EQ(*n, expected) << start << ", " << stop << ", " << step;
        for (int64_t i = 0; i < expected; ++i) {
          EXPECT_EQ(RangeValue(Range(start, stop, step), i), start + i * step);
        }
      }
    }
  }
}

TEST(RangeLengthTest, ExtremesDoNotOverflow) {
  EXPECT_EQ(*RangeLength(Range(kMin, kMax, kMax)), 3);  // kMin, -1, kMax - 1
  EXPECT_EQ(RangeValue(Range(kMin, kMax, kMax), 1), -1);
  EXPECT_EQ(RangeValue(Range(kMin, kMax, kMax), 2), kMax - 1);
  EXPECT_EQ(*RangeLength(Range(kMax, kMin, kMin)), 2);  // kMax, -1
  EXPECT_EQ(RangeValue(Range(kMax, kMin, kMin), 1), -1);
  EXPECT_EQ(*RangeLength(Range(0, kMax, 1)), kMax);
  EXPECT_EQ(*RangeLength(Range(kMin + 1, kMax, 2)), kMax);
  EXPECT_EQ(RangeValue(Range(kMin + 1, kMax, 2), kMax - 1), kMax - 2);
  // Python's len(range(-2**63, 2**63 - 1, 2)) is 2**63: one too many.
  EXPECT_FALSE(RangeLength(Range(kMin, kMax, 2)).ok());

  absl::StatusOr<int64_t> too_long = RangeLength(Range(-1, kMax, 1));
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<int64_t> zero = RangeLength(Range(0, 10, 0));
  EXPECT_EQ(zero.status().message(), "step must be != 0, got 0");
}

TEST(RangeIteratorTest, ProducesScalarInt64Elements) {
  absl::StatusOr<std::vector<Element>> out = DrainText("range(3)");
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 3u);
  for (const Element& e : *out) {
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].dtype(), DType::kInt64);
    EXPECT_TRUE(e[0].shape().empty());
  }
}

TEST(RangeIteratorTest, WithAFeedProducesExactlyTheFedIndices) {
  ScriptedFeed feed;
  feed.splits[0] = {MakeSplit(7, 9), MakeSplit(2, 2), MakeSplit(0, 1), MakeSplit(9, 10)};
  PipelineContext context;
  context.split_feed = &feed;
  // Element i is 100 - 5 * i.
  absl::StatusOr<std::vector<Element>> out = DrainText("range(100, 50, -5)", context);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ScalarInt64s(*out), ElementsAre(65, 60, 100, 55));
  EXPECT_THAT(feed.requests, ElementsAre(0, 0, 0, 0, 0));
}

TEST(RangeIteratorTest, RejectsSplitsOutsideTheSource) {
  for (proto::Split bad : {MakeSplit(5, 11), MakeSplit(-1, 3), MakeSplit(4, 3)}) {
    ScriptedFeed feed;
    feed.splits[0] = {MakeSplit(0, 2), bad};
    PipelineContext context;
    context.split_feed = &feed;
    absl::StatusOr<std::vector<Element>> out = DrainText("range(10)", context);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(out.status().message(),
              absl::StrCat("range: expected a split within [0, 10) with begin <= end, got [",
                           bad.begin(), ", ", bad.end(), ") for repetition 0"));
  }
}

TEST(RangeIteratorTest, FeedErrorsPropagate) {
  class FailingFeed : public SplitFeed {
    absl::Status GetNext(int64_t, proto::Split*, bool*) override {
      return absl::UnavailableError("dispatcher unreachable");
    }
  } feed;
  PipelineContext context;
  context.split_feed = &feed;
  absl::StatusOr<std::vector<Element>> out = DrainText("range(10) | batch(2)", context);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(out.status().message(), "dispatcher unreachable");
}

}  // namespace
}  // namespace sluice::engine
