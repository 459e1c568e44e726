#include "control/spill_budget.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace sluice::control {
namespace {

TEST(SpillBudgetTest, TakesUpToItsBoundAndGivesBack) {
  SpillBudget budget(100);
  EXPECT_TRUE(budget.TryTake(60));
  EXPECT_FALSE(budget.TryTake(41));  // would pass it: nothing taken
  EXPECT_EQ(budget.held(), 60u);
  EXPECT_TRUE(budget.TryTake(40));
  EXPECT_FALSE(budget.TryTake(1));
  budget.Give(60);
  EXPECT_EQ(budget.held(), 40u);
  EXPECT_TRUE(budget.TryTake(60));
  EXPECT_EQ(budget.held(), 100u);
  EXPECT_EQ(budget.refusals(), 2u);
}

TEST(SpillBudgetTest, AZeroBudgetTakesNothing) {
  SpillBudget budget(0);
  EXPECT_FALSE(budget.TryTake(1));
  EXPECT_TRUE(budget.TryTake(0));
  EXPECT_EQ(budget.held(), 0u);
}

TEST(SpillBudgetTest, ThreadsTakingAtOnceNeverPassTheBound) {
  SpillBudget budget(1000);
  std::vector<std::thread> threads;
  std::vector<int> taken(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&budget, &taken, t] {
      for (int i = 0; i < 10000; ++i) {
        if (budget.TryTake(7)) ++taken[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  int total = 0;
  for (int n : taken) total += n;
  EXPECT_EQ(total, 1000 / 7);
  EXPECT_EQ(budget.held(), static_cast<size_t>(total) * 7);
}

}  // namespace
}  // namespace sluice::control
