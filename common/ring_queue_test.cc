#include "common/ring_queue.h"

#include <deque>
#include <memory>
#include <random>
#include <utility>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(RingQueueTest, KeepsFifoOrderAcrossGrowthAndWrapAround) {
  RingQueue<int> queue;
  EXPECT_TRUE(queue.empty());
  int next_in = 0;
  int next_out = 0;
  // Pops trail pushes so the head wraps around the ring several times before it grows.
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 3; ++i) queue.push_back(next_in++);
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(queue.front(), next_out++);
      queue.pop_front();
    }
  }
  EXPECT_EQ(queue.size(), 100u);
  while (!queue.empty()) {
    ASSERT_EQ(queue.front(), next_out++);
    queue.pop_front();
  }
  EXPECT_EQ(next_out, next_in);
}

TEST(RingQueueTest, MatchesADequeUnderRandomOperations) {
  RingQueue<int> queue;
  std::deque<int> model;
  std::mt19937 random(7);
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(random() % 5);
    if (op <= 1) {
      queue.push_back(step);
      model.push_back(step);
    } else if (op == 2) {
      queue.push_front(-step);
      model.push_front(-step);
    } else if (!model.empty()) {
      ASSERT_EQ(queue.front(), model.front()) << "step " << step;
      queue.pop_front();
      model.pop_front();
    }
    ASSERT_EQ(queue.size(), model.size());
    if (step % 97 == 0) {
      // Indexing walks front to back across the ring's wrap-around, as the deque does.
      for (size_t i = 0; i < model.size(); ++i) ASSERT_EQ(queue[i], model[i]) << "step " << step;
    }
  }
}

TEST(RingQueueTest, AQueueThatStaysSmallStopsGrowing) {
  RingQueue<int> queue;
  for (int i = 0; i < 5; ++i) queue.push_back(i);
  const size_t capacity = queue.capacity();
  EXPECT_GE(capacity, 5u);
  for (int i = 0; i < 10000; ++i) {
    queue.pop_front();
    queue.push_back(i);
  }
  EXPECT_EQ(queue.capacity(), capacity);
}

TEST(RingQueueTest, PopDestroysTheElementAndMoveOnlyTypesWork) {
  RingQueue<std::unique_ptr<int>> queue;
  auto shared = std::make_shared<int>(1);
  RingQueue<std::shared_ptr<int>> holders;
  holders.push_back(shared);
  EXPECT_EQ(shared.use_count(), 2);
  holders.pop_front();
  EXPECT_EQ(shared.use_count(), 1) << "pop_front left the element alive";
  for (int i = 0; i < 20; ++i) queue.push_back(std::make_unique<int>(i));  // grows twice
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(*queue.front(), i);
    queue.pop_front();
  }
}

TEST(RingQueueTest, AMovedFromQueueIsEmptyAndUsable) {
  RingQueue<int> from;
  for (int i = 0; i < 10; ++i) from.push_back(i);
  from.pop_front();
  RingQueue<int> to(std::move(from));
  EXPECT_EQ(to.size(), 9u);
  EXPECT_EQ(to.front(), 1);
  EXPECT_TRUE(from.empty());  // NOLINT(bugprone-use-after-move): the contract under test
  from.push_back(42);
  EXPECT_EQ(from.front(), 42);
  to = std::move(from);
  EXPECT_EQ(to.size(), 1u);
  EXPECT_EQ(to.front(), 42);
  EXPECT_TRUE(from.empty());  // NOLINT(bugprone-use-after-move)
}

}  // namespace
}  // namespace sluice
