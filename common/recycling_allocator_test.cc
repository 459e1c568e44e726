#include "common/recycling_allocator.h"

#include <array>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

struct Object {
  explicit Object(int v) : value(v) {}
  int value;
  std::array<char, 100> bytes{};
};

using Allocator = RecyclingAllocator<Object, 4>;

TEST(RecyclingAllocatorTest, ASharedObjectReusesTheBlockOfOneDroppedBefore) {
  auto first = std::allocate_shared<Object>(Allocator(), 1);
  const Object* address = first.get();
  first.reset();
  auto second = std::allocate_shared<Object>(Allocator(), 2);
  EXPECT_EQ(second.get(), address);
  EXPECT_EQ(second->value, 2);
}

TEST(RecyclingAllocatorTest, KeepsAtMostItsBoundPerThread) {
  Allocator allocator;
  std::vector<Object*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(allocator.allocate(1));
  const size_t kept_before = Allocator::kept_on_this_thread();
  for (Object* block : blocks) allocator.deallocate(block, 1);
  EXPECT_EQ(Allocator::kept_on_this_thread(), 4u);
  EXPECT_LE(kept_before, 4u);
  // What it kept comes back, each block once.
  std::set<Object*> again;
  for (int i = 0; i < 4; ++i) again.insert(allocator.allocate(1));
  EXPECT_EQ(again.size(), 4u);
  EXPECT_EQ(Allocator::kept_on_this_thread(), 0u);
  for (Object* block : again) allocator.deallocate(block, 1);
}

TEST(RecyclingAllocatorTest, AnObjectFreedOnAnotherThreadJoinsThatThreadsList) {
  Allocator allocator;
  Object* block = allocator.allocate(1);
  const size_t here_before = Allocator::kept_on_this_thread();
  size_t there = 0;
  std::thread other([&] {
    allocator.deallocate(block, 1);
    there = Allocator::kept_on_this_thread();
  });
  other.join();  // the other thread's list gave its block back to the heap as it ended
  EXPECT_EQ(there, 1u);
  EXPECT_EQ(Allocator::kept_on_this_thread(), here_before);
}

TEST(RecyclingAllocatorTest, ArraysGoToTheHeap) {
  Allocator allocator;
  Object* array = allocator.allocate(3);
  const size_t kept = Allocator::kept_on_this_thread();
  allocator.deallocate(array, 3);
  EXPECT_EQ(Allocator::kept_on_this_thread(), kept);
}

}  // namespace
}  // namespace sluice
