#include "control/kept_slab_count.h"

#include <gtest/gtest.h>

#include <thread>
#include <utility>
#include <vector>

namespace sluice::control {
namespace {

TEST(KeptSlabCountTest, ASlabCountsOnceWhileAnyBatchInItIsKept) {
  KeptSlabCount count(4);
  KeptSlabCount::Mark first = count.MarkKept(2);
  KeptSlabCount::Mark packed_beside_it = count.MarkKept(2);
  EXPECT_EQ(count.slabs(), 1u);
  KeptSlabCount::Mark other = count.MarkKept(0);
  EXPECT_EQ(count.slabs(), 2u);
  first = {};
  EXPECT_EQ(count.slabs(), 2u) << "slab 2 still holds a kept batch";
  packed_beside_it = {};
  EXPECT_EQ(count.slabs(), 1u);
  other = {};
  EXPECT_EQ(count.slabs(), 0u);
}

TEST(KeptSlabCountTest, AMoveCarriesTheCountAndAnAssignmentDropsWhatItReplaces) {
  KeptSlabCount count(4);
  std::vector<KeptSlabCount::Mark> kept;
  kept.push_back(count.MarkKept(1));
  kept.push_back(count.MarkKept(3));
  kept.reserve(64);  // the marks move
  EXPECT_EQ(count.slabs(), 2u);
  KeptSlabCount::Mark moved = std::move(kept[0]);
  EXPECT_FALSE(kept[0].counted());
  EXPECT_TRUE(moved.counted());
  kept.clear();
  EXPECT_EQ(count.slabs(), 1u) << "the moved-from mark must not count slab 1 down";
  moved = count.MarkKept(3);  // slab 1's mark is replaced
  EXPECT_EQ(count.slabs(), 1u);
  { KeptSlabCount::Mark goes_out_of_scope = std::move(moved); }
  EXPECT_EQ(count.slabs(), 0u);
}

TEST(KeptSlabCountTest, MarksDroppedOnOtherThreadsLeaveAnExactCount) {
  KeptSlabCount count(8);
  std::vector<KeptSlabCount::Mark> marks[2];
  for (int i = 0; i < 20000; ++i) marks[i % 2].push_back(count.MarkKept(i % 8));
  KeptSlabCount::Mark stays = count.MarkKept(5);
  std::thread a([&] { marks[0].clear(); });
  std::thread b([&] { marks[1].clear(); });
  a.join();
  b.join();
  EXPECT_EQ(count.slabs(), 1u);
}

}  // namespace
}  // namespace sluice::control
