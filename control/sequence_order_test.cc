#include "control/sequence_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace sluice::control {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kStream = 77;

// Items are their own numbers, as move-only values (the reader's are slabs).
class SequenceOrderTest : public ::testing::Test {
 protected:
  auto Sink() {
    return [this](std::unique_ptr<int64_t> item) { out_.push_back(*item); };
  }
  // Adds item `n` sent with `floor`, unless it was handed out already (returns false).
  bool Add(int64_t n, int64_t floor, uint64_t stream = kStream) {
    if (order_.HandedOut(stream, n)) return false;
    order_.Add(stream, n, floor, std::make_unique<int64_t>(n), Sink());
    return true;
  }

  SequenceOrder<std::unique_ptr<int64_t>> order_;
  std::vector<int64_t> out_;
};

TEST_F(SequenceOrderTest, InOrderItemsGoStraightThrough) {
  for (int64_t n = 1; n <= 4; ++n) EXPECT_TRUE(Add(n, n));
  EXPECT_THAT(out_, ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(order_.held(), 0u);
}

TEST_F(SequenceOrderTest, AnEarlyItemWaitsForTheOnesBeforeIt) {
  EXPECT_TRUE(Add(3, 1));
  EXPECT_TRUE(Add(2, 1));
  EXPECT_THAT(out_, IsEmpty());
  EXPECT_EQ(order_.held(), 2u);
  EXPECT_TRUE(Add(1, 1));
  EXPECT_THAT(out_, ElementsAre(1, 2, 3));
  EXPECT_EQ(order_.held(), 0u);
}

TEST_F(SequenceOrderTest, TheFloorGivesUpNumbersThatNeverLanded) {
  EXPECT_TRUE(Add(1, 1));
  EXPECT_TRUE(Add(4, 2));  // 2 and 3 may still come
  EXPECT_THAT(out_, ElementsAre(1));
  EXPECT_TRUE(Add(5, 4));  // 2 and 3 will not
  EXPECT_THAT(out_, ElementsAre(1, 4, 5));
  EXPECT_EQ(order_.skipped(), 2u);
}

TEST_F(SequenceOrderTest, AHeldItemBelowTheFloorGoesOutInOrder) {
  EXPECT_TRUE(Add(3, 1));
  EXPECT_TRUE(Add(6, 5));  // 1, 2 and 4 given up; 3 was held; 5 may still come
  EXPECT_THAT(out_, ElementsAre(3));
  EXPECT_EQ(order_.skipped(), 3u);
  EXPECT_TRUE(Add(5, 5));
  EXPECT_THAT(out_, ElementsAre(3, 5, 6));
}

TEST_F(SequenceOrderTest, ASkippedItemArrivingAfterAllIsHandedOutLateNotLost) {
  EXPECT_TRUE(Add(1, 1));
  EXPECT_TRUE(Add(3, 3));  // 2 given up
  EXPECT_TRUE(Add(2, 3));  // it came after all
  EXPECT_THAT(out_, ElementsAre(1, 3, 2));
  EXPECT_FALSE(Add(2, 4)) << "and a copy of it is refused";
  EXPECT_EQ(order_.skipped(), 0u);
}

TEST_F(SequenceOrderTest, CopiesOfHandedOutOrHeldItemsAreRefused) {
  EXPECT_TRUE(Add(1, 1));
  EXPECT_TRUE(Add(3, 2));
  EXPECT_FALSE(Add(1, 2)) << "handed out";
  EXPECT_FALSE(Add(3, 2)) << "held";
  EXPECT_TRUE(Add(2, 2));
  EXPECT_FALSE(Add(3, 4)) << "handed out once 2 came";
  EXPECT_THAT(out_, ElementsAre(1, 2, 3));
}

TEST_F(SequenceOrderTest, ANewStreamStartsAtOneAfterWhatWaitedUnderTheOld) {
  EXPECT_TRUE(Add(1, 1));
  EXPECT_TRUE(Add(3, 2));  // waits for 2, which will never come: the sender restarted
  EXPECT_TRUE(Add(2, 1, /*stream=*/99));
  EXPECT_THAT(out_, ElementsAre(1, 3));
  EXPECT_TRUE(Add(1, 1, 99)) << "numbers of the new stream are new";
  EXPECT_THAT(out_, ElementsAre(1, 3, 1, 2));
}

// A reply of the old numbering that lands after the new one began (it was on its way when
// the worker forgot the client) goes out at once, and the new numbering carries on. It used
// to switch back to the old stream, then forward again, each time starting over at 1: the
// new stream's item 2 then waited for its item 1, handed out long before.
TEST_F(SequenceOrderTest, ALateItemOfAnOldStreamDoesNotTakeTheNumberingBack) {
  EXPECT_TRUE(Add(1, 1));
  EXPECT_TRUE(Add(2, 1));
  EXPECT_TRUE(Add(1, 1, kStream + 1));
  EXPECT_TRUE(Add(3, 1));  // old stream, late
  EXPECT_TRUE(Add(2, 1, kStream + 1));
  EXPECT_THAT(out_, ElementsAre(1, 2, 1, 3, 2));
  EXPECT_EQ(order_.held(), 0u);
  EXPECT_FALSE(Add(2, 1, kStream + 1)) << "the new stream still knows its copies";
}

TEST_F(SequenceOrderTest, FlushHandsOutWhatIsHeldAndKnowsItsCopies) {
  EXPECT_TRUE(Add(1, 1));
  EXPECT_TRUE(Add(4, 2));
  EXPECT_TRUE(Add(6, 2));
  order_.Flush(Sink());
  EXPECT_THAT(out_, ElementsAre(1, 4, 6));
  EXPECT_EQ(order_.held(), 0u);
  EXPECT_FALSE(Add(4, 2)) << "a copy of a flushed item";
  EXPECT_TRUE(Add(5, 2)) << "a number flushing jumped over, arriving after all";
  EXPECT_TRUE(Add(7, 2));
  EXPECT_THAT(out_, ElementsAre(1, 4, 6, 5, 7));
}

TEST_F(SequenceOrderTest, SkippedNumbersAreBounded) {
  constexpr int64_t kMax = SequenceOrder<std::unique_ptr<int64_t>>::kMaxSkipped;
  EXPECT_TRUE(Add(3 * kMax, 3 * kMax));
  EXPECT_EQ(order_.skipped(), static_cast<size_t>(kMax));
  EXPECT_TRUE(Add(3 * kMax - 1, 3 * kMax)) << "a recent skipped number still comes";
  EXPECT_FALSE(Add(1, 3 * kMax)) << "one too old to remember counts as a copy";
}

}  // namespace
}  // namespace sluice::control
