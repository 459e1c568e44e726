#include "control/heartbeat_pacer.h"

#include <functional>
#include <thread>
#include <utility>

#include "gtest/gtest.h"

namespace sluice::control {
namespace {

// Runs `fn` on another thread after `delay`; join the thread returned.
std::thread After(absl::Duration delay, std::function<void()> fn) {
  return std::thread([delay, fn = std::move(fn)] {
    absl::SleepFor(delay);
    fn();
  });
}

TEST(HeartbeatPacerTest, BeatsEveryIntervalWhenNobodyAsks) {
  const absl::Time start = absl::Now();  // before the pacer starts counting
  HeartbeatPacer pacer(absl::Milliseconds(30), absl::Milliseconds(1));
  ASSERT_TRUE(pacer.Wait());
  ASSERT_TRUE(pacer.Wait());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(60));
}

TEST(HeartbeatPacerTest, SoonBeatsEarlyButNotWithinTheMinimumGap) {
  const absl::Time start = absl::Now();
  HeartbeatPacer pacer(absl::Seconds(10), absl::Milliseconds(40));
  pacer.Soon();
  pacer.Soon();  // counts once
  ASSERT_TRUE(pacer.Wait());
  const absl::Duration first = absl::Now() - start;
  EXPECT_GE(first, absl::Milliseconds(40)) << "the gap holds even for the first beat";
  EXPECT_LT(first, absl::Seconds(5)) << "and it did not wait for the interval";
  // Asked from another thread while the pacer waits.
  const absl::Time before = absl::Now();  // before the asker starts its 60 ms
  std::thread asker = After(absl::Milliseconds(60), [&] { pacer.Soon(); });
  ASSERT_TRUE(pacer.Wait());
  EXPECT_GE(absl::Now() - before, absl::Milliseconds(55));
  EXPECT_LT(absl::Now() - before, absl::Seconds(5));
  asker.join();
}

TEST(HeartbeatPacerTest, StopEndsAWaitAtOnce) {
  HeartbeatPacer pacer(absl::Seconds(10), absl::Milliseconds(1));
  std::thread stopper = After(absl::Milliseconds(20), [&] { pacer.Stop(); });
  const absl::Time start = absl::Now();
  EXPECT_FALSE(pacer.Wait());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  stopper.join();
  EXPECT_FALSE(pacer.Wait()) << "stays stopped";
}

}  // namespace
}  // namespace sluice::control
