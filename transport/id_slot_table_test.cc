#include "transport/id_slot_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

namespace sluice::transport {
namespace {

using ::testing::ElementsAre;

TEST(IdSlotTableTest, EachEntryIsFoundByItsOwnIdUntilTaken) {
  IdSlotTable<std::string> table;
  const uint64_t a = table.Insert("a");
  const uint64_t b = table.Insert("b");
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(table.size(), 2u);
  ASSERT_NE(table.Find(a), nullptr);
  EXPECT_EQ(*table.Find(a), "a");
  EXPECT_EQ(*table.Find(b), "b");

  std::optional<std::string> taken = table.Take(a);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(*taken, "a");
  EXPECT_EQ(table.Find(a), nullptr);
  EXPECT_FALSE(table.Take(a).has_value()) << "taken twice";
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(*table.Find(b), "b");
}

TEST(IdSlotTableTest, AddMakesAnEntryInPlaceWithAFreshIdInAReusedSlot) {
  IdSlotTable<std::string> table;
  const uint64_t first = table.Insert("first");
  ASSERT_TRUE(table.Erase(first));
  uint64_t id = 0;
  std::string* added = table.Add(&id);
  ASSERT_NE(added, nullptr);
  EXPECT_TRUE(added->empty()) << "default-made, not the erased entry's value";
  *added = "filled in";
  EXPECT_NE(id, 0u);
  EXPECT_NE(id, first) << "a reused slot gets a new id";
  EXPECT_EQ(table.slot_count(), 1u) << "the erased entry's slot was reused";
  EXPECT_EQ(table.Find(first), nullptr);
  ASSERT_NE(table.Find(id), nullptr);
  EXPECT_EQ(*table.Find(id), "filled in");
  EXPECT_EQ(table.size(), 1u);
}

TEST(IdSlotTableTest, EraseRemovesOnlyALiveEntryAndFreesItsSlot) {
  IdSlotTable<std::string> table;
  const uint64_t a = table.Insert("a");
  const uint64_t b = table.Insert("b");
  EXPECT_TRUE(table.Erase(a));
  EXPECT_FALSE(table.Erase(a)) << "erased twice";
  EXPECT_EQ(table.Find(a), nullptr);
  EXPECT_EQ(*table.Find(b), "b");
  EXPECT_EQ(table.size(), 1u);
  const uint64_t c = table.Insert("c");
  EXPECT_NE(c, a) << "the slot is reused under a new id";
  EXPECT_EQ(table.slot_count(), 2u);
  EXPECT_FALSE(table.Erase(a)) << "a stale id does not erase the slot's new entry";
  EXPECT_EQ(*table.Find(c), "c");
}

// A late reply carries the id of a call that is gone; its slot may hold a newer call.
TEST(IdSlotTableTest, AnIdIsNeverHandedOutAgainWhenItsSlotIs) {
  IdSlotTable<int> table;
  std::set<uint64_t> seen;
  uint64_t first = table.Insert(0);
  seen.insert(first);
  for (int i = 1; i <= 1000; ++i) {
    ASSERT_TRUE(table.Take(first).has_value());
    const uint64_t next = table.Insert(i);
    EXPECT_TRUE(seen.insert(next).second) << "id " << next << " handed out twice";
    EXPECT_EQ(table.Find(first), nullptr) << "the old id finds the slot's new entry";
    EXPECT_EQ(*table.Find(next), i);
    first = next;
  }
  EXPECT_EQ(table.size(), 1u);
}

// After 2^40 inserts the sequence wraps: the insert whose sequence shifts to 0 must not make
// slot 0's id 0 ("none", the table's answer when full), which lost the entry in the table
// and told its caller the table was full.
TEST(IdSlotTableTest, TheSequenceWrapsWithoutHandingOutIdZero) {
  constexpr uint64_t kWrap = uint64_t{1} << (64 - IdSlotTable<int>::kIndexBits);
  IdSlotTable<int> table(kWrap - 2);
  const uint64_t last = table.Insert(1);  // slot 0, the last sequence before the wrap
  ASSERT_NE(last, 0u);
  ASSERT_TRUE(table.Erase(last));
  const uint64_t wrapped = table.Insert(2);  // slot 0 again
  EXPECT_NE(wrapped, 0u);
  ASSERT_NE(table.Find(wrapped), nullptr);
  EXPECT_EQ(*table.Find(wrapped), 2);
  uint64_t added = 0;
  ASSERT_NE(table.Add(&added), nullptr);
  EXPECT_NE(added, 0u);
  EXPECT_EQ(table.size(), 2u);
}

TEST(IdSlotTableTest, IdsThatWereNeverGivenFindNothing) {
  IdSlotTable<int> table;
  EXPECT_EQ(table.Find(0), nullptr);
  EXPECT_EQ(table.Find(12345), nullptr);
  const uint64_t id = table.Insert(7);
  ASSERT_TRUE(table.Take(id).has_value());
  EXPECT_EQ(table.Find(0), nullptr) << "a free slot's id must not match 0";
  EXPECT_EQ(table.Find(id + (uint64_t{1} << IdSlotTable<int>::kIndexBits)), nullptr);
}

TEST(IdSlotTableTest, TakeIfTakesTheMatchingEntriesAndMayChangeTheRest) {
  IdSlotTable<std::unique_ptr<int>> table;  // move-only values
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(table.Insert(std::make_unique<int>(i)));
  std::vector<std::unique_ptr<int>> odd = table.TakeIf([](uint64_t, std::unique_ptr<int>& value) {
    if (*value % 2 == 1) return true;
    *value += 100;  // the kept ones are marked, as OnDisconnect marks orphaned calls
    return false;
  });
  std::vector<int> taken;
  for (auto& value : odd) taken.push_back(*value);
  EXPECT_THAT(taken, ElementsAre(1, 3, 5));
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(**table.Find(ids[0]), 100);
  EXPECT_EQ(**table.Find(ids[2]), 102);
  EXPECT_EQ(table.Find(ids[1]), nullptr);
  // Freed slots are reused: the table does not grow while calls come and go.
  for (int i = 0; i < 3; ++i) EXPECT_NE(table.Insert(std::make_unique<int>(i)), 0u);
  EXPECT_EQ(table.size(), 6u);
  EXPECT_EQ(table.slot_count(), 6u);
  EXPECT_FALSE(table.full());
}

}  // namespace
}  // namespace sluice::transport
