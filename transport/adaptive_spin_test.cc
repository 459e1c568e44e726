#include "transport/adaptive_spin.h"

#include <gtest/gtest.h>

namespace sluice::transport {
namespace {

constexpr absl::Duration kBase = absl::Microseconds(50);
constexpr absl::Duration kMax = absl::Milliseconds(1);

TEST(AdaptiveSpinTest, StartsAtTheBase) {
  AdaptiveSpin spin(kBase, kMax);
  EXPECT_EQ(spin.current(), kBase);
}

TEST(AdaptiveSpinTest, AnEventSoonAfterSleepingLengthensTheSpinBeyondTheGap) {
  AdaptiveSpin spin(kBase, kMax);
  // Gaps of ~100 µs between events: 50 µs spun, then 50 µs asleep.
  spin.Slept(absl::Microseconds(50), /*woken_by_event=*/true);
  EXPECT_GE(spin.current(), absl::Microseconds(100));
  EXPECT_LE(spin.current(), kMax);
}

TEST(AdaptiveSpinTest, NeverSpinsLongerThanTheMaximum) {
  AdaptiveSpin spin(kBase, kMax);
  for (int i = 0; i < 20; ++i) spin.Slept(absl::Microseconds(900), true);
  EXPECT_EQ(spin.current(), kMax);
}

TEST(AdaptiveSpinTest, QuietPeriodsShrinkItBackToTheBase) {
  AdaptiveSpin spin(kBase, kMax);
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
  AdaptiveSpin spin(kBase, absl::ZeroDuration());
  spin.Slept(absl::Microseconds(10), true);
  EXPECT_EQ(spin.current(), kBase);
  spin.Slept(absl::Seconds(1), false);
  EXPECT_EQ(spin.current(), kBase);
}

}  // namespace
}  // namespace sluice::transport
