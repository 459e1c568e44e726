#include "transport/spin_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "transport/progress_mode.h"

namespace sluice::transport {
namespace {

TEST(SpinWaitTest, SeesWhatAnotherThreadDoesWithinTheBudget) {
  std::atomic<bool> done{false};
  std::thread setter([&done] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    done.store(true, std::memory_order_release);
  });
  // A budget far above the setter's delay, so a busy machine cannot make it miss.
  EXPECT_TRUE(
      SpinUntil([&done] { return done.load(std::memory_order_acquire); }, absl::Seconds(10)));
  setter.join();
}

TEST(SpinWaitTest, GivesUpOnceTheBudgetHasPassed) {
  int polls = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(SpinUntil(
      [&polls] {
        ++polls;
        return false;
      },
      absl::Milliseconds(5)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(5));
  EXPECT_GT(polls, 1);
}

TEST(SpinWaitTest, AZeroBudgetLooksOnce) {
  int polls = 0;
  auto count = [&polls] {
    ++polls;
    return polls > 1;
  };
  EXPECT_FALSE(SpinUntil(count, absl::ZeroDuration()));
  EXPECT_EQ(polls, 1);
  EXPECT_TRUE(SpinUntil(count, absl::ZeroDuration()));
}

TEST(SpinWaitTest, SpinsByDefaultOnlyWhereCpusAreToSpare) {
  EXPECT_EQ(ResolveWaitSpin(absl::Microseconds(7)), absl::Microseconds(7));
  EXPECT_EQ(ResolveWaitSpin(absl::Microseconds(-1)), absl::ZeroDuration());
  EXPECT_EQ(ResolveWaitSpin(absl::InfiniteDuration()), kMaxWaitSpin);
  EXPECT_EQ(ResolveWaitSpin(std::nullopt),
            UsableCpus() > kMaxCpusForCallerProgress ? kDefaultWaitSpin : absl::ZeroDuration());
}

TEST(SpinWaitTest, ParsesAutoOrADuration) {
  auto automatic = ParseWaitSpin("auto");
  ASSERT_TRUE(automatic.ok());
  EXPECT_FALSE(automatic->has_value());
  auto fifty = ParseWaitSpin("50us");
  ASSERT_TRUE(fifty.ok());
  EXPECT_EQ(*fifty, absl::Microseconds(50));
  auto never = ParseWaitSpin("0");
  ASSERT_TRUE(never.ok());
  EXPECT_EQ(*never, absl::ZeroDuration());
  for (const char* bad : {"", "fast", "-5us", "50", "inf", "11ms"}) {
    EXPECT_EQ(ParseWaitSpin(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace sluice::transport
