#include "transport/payload_retention.h"

#include <gtest/gtest.h>

#include <memory>

#include "absl/time/clock.h"

namespace sluice::transport {
namespace {

TEST(PayloadRetentionTest, OnlyAMarkedFailureSaysThePayloadMayStillBeRead) {
  const absl::Status why = absl::UnavailableError("worker restarted");
  EXPECT_FALSE(PayloadMayStillBeRead(why));
  const absl::Status marked = PayloadMayStillBeReadError(why);
  EXPECT_TRUE(PayloadMayStillBeRead(marked));
  EXPECT_EQ(marked.code(), why.code());
  EXPECT_EQ(marked.message(), why.message());
  EXPECT_FALSE(PayloadMayStillBeRead(absl::OkStatus()));
}

TEST(PayloadRetentionTest, AnOwnerIsHeldUntilItsHoldHasPassed) {
  auto owner = std::make_shared<int>(7);
  std::weak_ptr<int> watch = owner;
  const int64_t before = PayloadsKeptForPeerReads();
  KeepForPeerReads(std::move(owner), absl::Milliseconds(200));
  EXPECT_EQ(PayloadsKeptForPeerReads(), before + 1);
  ReleaseExpiredPeerReadHolds();
  EXPECT_FALSE(watch.expired()) << "dropped before its hold passed";
  absl::SleepFor(absl::Milliseconds(250));
  ReleaseExpiredPeerReadHolds();
  EXPECT_TRUE(watch.expired()) << "still held after its hold passed";
  EXPECT_EQ(PayloadsKeptForPeerReads(), before);
}

TEST(PayloadRetentionTest, KeepingAnotherDropsTheExpiredOnes) {
  auto first = std::make_shared<int>(1);
  std::weak_ptr<int> watch = first;
  KeepForPeerReads(std::move(first), absl::ZeroDuration());
  auto second = std::make_shared<int>(2);
  std::weak_ptr<int> second_watch = second;
  KeepForPeerReads(std::move(second), absl::Seconds(60));
  EXPECT_TRUE(watch.expired());
  EXPECT_FALSE(second_watch.expired());
}

}  // namespace
}  // namespace sluice::transport
