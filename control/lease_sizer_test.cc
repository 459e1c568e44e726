#include "control/lease_sizer.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::control {
namespace {

using ::testing::ElementsAre;

constexpr absl::Duration kTarget = absl::Milliseconds(5);

// Asks for leases that each last `lasted`, and returns the sizes asked for.
std::vector<int> Leases(LeaseSizer& sizer, absl::Time& now, absl::Duration lasted, int count) {
  std::vector<int> sizes;
  for (int i = 0; i < count; ++i) {
    sizes.push_back(sizer.Next(now));
    sizer.Arrived(now);
    now += lasted;
  }
  return sizes;
}

TEST(LeaseSizerTest, FastLeasesDoubleUpToTheMaximum) {
  LeaseSizer sizer(4, 64, kTarget);
  absl::Time now = absl::UnixEpoch();
  EXPECT_THAT(Leases(sizer, now, absl::Microseconds(300), 7),
              ElementsAre(4, 8, 16, 32, 64, 64, 64));
}

TEST(LeaseSizerTest, SlowLeasesHalveDownToTheMinimumAndOnTargetOnesStay) {
  LeaseSizer sizer(4, 64, kTarget);
  absl::Time now = absl::UnixEpoch();
  Leases(sizer, now, absl::Microseconds(100), 5);  // up to 64
  // The 64-split lease that lasts 100 µs is what the first Next below measures.
  EXPECT_EQ(sizer.Next(now), 64);
  sizer.Arrived(now);
  now += absl::Milliseconds(10);  // between one and four targets: keep
  EXPECT_EQ(sizer.Next(now), 64);
  sizer.Arrived(now);
  now += absl::Milliseconds(21);  // over four targets: halve
  EXPECT_EQ(sizer.Next(now), 32);
  sizer.Arrived(now);
  now += absl::Milliseconds(50);
  EXPECT_THAT(Leases(sizer, now, absl::Milliseconds(50), 5), ElementsAre(16, 8, 4, 4, 4));
}

TEST(LeaseSizerTest, ANewPassKeepsTheSizeButNotTheTiming) {
  LeaseSizer sizer(4, 64, kTarget);
  absl::Time now = absl::UnixEpoch();
  Leases(sizer, now, absl::Microseconds(100), 3);  // 4, 8, 16 asked; 16 arrived
  sizer.NewPass();
  now += absl::Seconds(10);  // the gap between passes is not a slow lease
  EXPECT_EQ(sizer.Next(now), 16);
}

TEST(LeaseSizerTest, BoundsAreClamped) {
  LeaseSizer sizer(0, -3, kTarget);
  absl::Time now = absl::UnixEpoch();
  EXPECT_THAT(Leases(sizer, now, absl::Microseconds(1), 3), ElementsAre(1, 1, 1));
}

}  // namespace
}  // namespace sluice::control
