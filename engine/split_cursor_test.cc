#include "engine/split_cursor.h"

#include <deque>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ListFeed : public SplitFeed {
 public:
  explicit ListFeed(std::deque<std::pair<int64_t, int64_t>> splits) : splits_(std::move(splits)) {}
  absl::Status GetNext(int64_t, proto::Split* split, bool* end) override {
    *end = splits_.empty();
    if (!*end) {
      split->set_begin(splits_.front().first);
      split->set_end(splits_.front().second);
      splits_.pop_front();
    }
    return absl::OkStatus();
  }

 private:
  std::deque<std::pair<int64_t, int64_t>> splits_;
};

std::vector<int64_t> All(SplitCursor& cursor, absl::Status* status) {
  std::vector<int64_t> out;
  while (true) {
    int64_t i;
    bool end = false;
    *status = cursor.Next(&i, &end);
    if (!status->ok() || end) return out;
    out.push_back(i);
  }
}

TEST(SplitCursorTest, WithoutAFeedWalksEverything) {
  SplitCursor cursor(nullptr, 0, 4, "op");
  absl::Status s;
  EXPECT_THAT(All(cursor, &s), ElementsAre(0, 1, 2, 3));
  EXPECT_TRUE(s.ok());
}

TEST(SplitCursorTest, WalksExactlyTheFedSplitsAndRejectsBadOnes) {
  ListFeed feed({{4, 6}, {0, 1}, {6, 6}});
  SplitCursor cursor(&feed, 0, 10, "op");
  absl::Status s;
  EXPECT_THAT(All(cursor, &s), ElementsAre(4, 5, 0));
  EXPECT_TRUE(s.ok());
  ListFeed bad({{8, 12}});
  SplitCursor outside(&bad, 3, 10, "from_tensor_slices");
  All(outside, &s);
  EXPECT_EQ(s.message(),
            "from_tensor_slices: expected a split within [0, 10) with begin <= end, got [8, 12) "
            "for repetition 3");
}

}  // namespace
}  // namespace sluice::engine
