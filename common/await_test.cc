#include "common/await.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdint>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sluice {
namespace {

int64_t VoluntaryContextSwitchesOfThisThread() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

TEST(AwaitAtMostTest, AZeroTimeoutOnAFalseConditionAnswersWithoutSleeping) {
  absl::Mutex mu;
  bool ready = false;
  absl::MutexLock lock(&mu);
  const int64_t before = VoluntaryContextSwitchesOfThisThread();
  int refused = 0;
  for (int i = 0; i < 1000; ++i) {
    refused += AwaitAtMost(mu, absl::Condition(&ready), absl::ZeroDuration()) ? 0 : 1;
  }
  const int64_t slept = VoluntaryContextSwitchesOfThisThread() - before;
  EXPECT_EQ(refused, 1000);
  // Mutex::AwaitWithTimeout(condition, 0) slept once per call: 1,000 here.
  EXPECT_LT(slept, 100) << "slept in the kernel " << slept << " times in 1,000 tries";
}

TEST(AwaitAtMostTest, ATrueConditionAnswersAtOnceWhateverTheTimeout) {
  absl::Mutex mu;
  bool ready = true;
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(AwaitAtMost(mu, absl::Condition(&ready), absl::ZeroDuration()));
  EXPECT_TRUE(AwaitAtMost(mu, absl::Condition(&ready), -absl::Seconds(1)));
  const absl::Time start = absl::Now();
  EXPECT_TRUE(AwaitAtMost(mu, absl::Condition(&ready), absl::Hours(1)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(AwaitAtMostTest, APositiveTimeoutWaitsForAnotherThreadAndReleasesTheMutex) {
  absl::Mutex mu;
  bool ready = false;
  std::thread setter;
  {
    // Held before the setter exists: it can set `ready` only once the wait releases `mu`.
    absl::MutexLock lock(&mu);
    setter = std::thread([&] {
      absl::MutexLock setter_lock(&mu);
      ready = true;
    });
    EXPECT_TRUE(AwaitAtMost(mu, absl::Condition(&ready), absl::Seconds(30)));
  }
  setter.join();
}

TEST(AwaitAtMostTest, APositiveTimeoutGivesUpWhenNothingChanges) {
  absl::Mutex mu;
  bool ready = false;
  absl::MutexLock lock(&mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(AwaitAtMost(mu, absl::Condition(&ready), absl::Milliseconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(25));
}

}  // namespace
}  // namespace sluice
