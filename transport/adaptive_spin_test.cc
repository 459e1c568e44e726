#include "transport/adaptive_spin.h"

#include <gtest/gtest.h>

namespace sluice::transport {
namespace {

constexpr absl::Duration kBase = absl::Microseconds(50);
constexpr absl::Duration kMax = absl::Milliseconds(1);  // tests use a wider range than the default

TEST(AdaptiveSpinTest, StartsAtTheBase) {
  AdaptiveSpin spin(kBase, kMax, [] { return true; });
  EXPECT_EQ(spin.current(), kBase);
}

TEST(AdaptiveSpinTest, AnEventSoonAfterSleepingLengthensTheSpinBeyondTheGap) {
  AdaptiveSpin spin(kBase, kMax, [] { return true; });
  // Gaps of ~100 µs between events: 50 µs spun, then 50 µs asleep.
  spin.Slept(absl::Microseconds(50), /*woken_by_event=*/true);
  EXPECT_GE(spin.current(), absl::Microseconds(100));
  EXPECT_LE(spin.current(), kMax);
}

TEST(AdaptiveSpinTest, NeverSpinsLongerThanTheMaximum) {
  AdaptiveSpin spin(kBase, kMax, [] { return true; });
  for (int i = 0; i < 20; ++i) spin.Slept(absl::Microseconds(900), true);
  EXPECT_EQ(spin.current(), kMax);
}

TEST(AdaptiveSpinTest, QuietPeriodsShrinkItBackToTheBase) {
  AdaptiveSpin spin(kBase, kMax, [] { return true; });
  for (int i = 0; i < 5; ++i) spin.Slept(absl::Microseconds(400), true);
  ASSERT_EQ(spin.current(), kMax);
  spin.Slept(absl::Milliseconds(5), /*woken_by_event=*/false);  // the sleep timed out
  EXPECT_EQ(spin.current(), kMax / 2);
  spin.Slept(absl::Milliseconds(3), /*woken_by_event=*/true);  // an event, but long after
  EXPECT_EQ(spin.current(), kMax / 4);
  for (int i = 0; i < 20; ++i) spin.Slept(absl::Seconds(1), false);
  EXPECT_EQ(spin.current(), kBase);
}

TEST(AdaptiveSpinTest, AMaximumBelowTheBaseMeansAFixedSpin) {
  AdaptiveSpin spin(kBase, absl::ZeroDuration(), [] { return true; });
  spin.Slept(absl::Microseconds(10), true);
  EXPECT_EQ(spin.current(), kBase);
  spin.Slept(absl::Seconds(1), false);
  EXPECT_EQ(spin.current(), kBase);
}

TEST(AdaptiveSpinTest, DoesNotGrowWhileThreadsWaitForACpuAndShrinksInstead) {
  bool spare = true;
  AdaptiveSpin spin(kBase, kMax, [&] { return spare; });
  spin.Slept(absl::Microseconds(300), true);
  const absl::Duration grown = spin.current();
  ASSERT_GT(grown, kBase);
  spare = false;  // other threads are runnable and waiting: spinning would take their CPU
  spin.Slept(absl::Microseconds(10), true);
  EXPECT_EQ(spin.current(), grown / 2);
  for (int i = 0; i < 20; ++i) spin.Slept(absl::Microseconds(10), true);
  EXPECT_EQ(spin.current(), kBase);
  spare = true;
  spin.Slept(absl::Microseconds(10), true);
  EXPECT_GT(spin.current(), kBase);
}

TEST(AdaptiveSpinTest, LoadavgSaysWhetherAThreadWaitsForACpu) {
  EXPECT_TRUE(NoThreadWaitsForACpu("0.52 0.58 0.59 2/912 12345\n", 2));
  EXPECT_FALSE(NoThreadWaitsForACpu("0.52 0.58 0.59 3/912 12345\n", 2));
  EXPECT_TRUE(NoThreadWaitsForACpu("9.00 8.00 7.00 16/912 12345\n", 16));
  EXPECT_TRUE(NoThreadWaitsForACpu("not a loadavg", 2));  // unknown: do not hold back
}

}  // namespace
}  // namespace sluice::transport
