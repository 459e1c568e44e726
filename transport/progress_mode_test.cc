#include "transport/progress_mode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace sluice::transport {
namespace {

TEST(ProgressModeTest, ParsesEachNameBackToItself) {
  for (ProgressMode mode : {ProgressMode::kAuto, ProgressMode::kThread, ProgressMode::kCaller}) {
    absl::StatusOr<ProgressMode> parsed = ParseProgressMode(ProgressModeName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, mode);
  }
}

TEST(ProgressModeTest, AnUnknownNameSaysWhatIsAccepted) {
  absl::StatusOr<ProgressMode> parsed = ParseProgressMode("Caller");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), "must be auto, caller or thread, got 'Caller'");
}

TEST(ProgressModeTest, AutoDrivesFromTheCallerOnlyWhereCpusAreScarce) {
  EXPECT_TRUE(UsesCallerDrivenProgress(ProgressMode::kAuto, 1));
  EXPECT_TRUE(UsesCallerDrivenProgress(ProgressMode::kAuto, 2));
  EXPECT_FALSE(UsesCallerDrivenProgress(ProgressMode::kAuto, 3));
  EXPECT_FALSE(UsesCallerDrivenProgress(ProgressMode::kAuto, 16));
  for (int cpus : {1, 2, 64}) {
    EXPECT_TRUE(UsesCallerDrivenProgress(ProgressMode::kCaller, cpus)) << cpus;
    EXPECT_FALSE(UsesCallerDrivenProgress(ProgressMode::kThread, cpus)) << cpus;
  }
}

// A container's CPU quota: 2 CPUs' time on a 96-CPU host is 2 CPUs, however many its
// affinity mask lists (auto then chose thread progress, meant for many CPUs).
TEST(ProgressModeTest, ACpuQuotaCountsAsTheCpusItsTimeIsWorth) {
  EXPECT_EQ(CpusOfCgroupCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(CpusOfCgroupCpuMax("150000 100000"), 2) << "rounded up";
  EXPECT_EQ(CpusOfCgroupCpuMax("50000 100000"), 1);
  EXPECT_EQ(CpusOfCgroupCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(CpusOfCgroupCpuMax(""), std::nullopt);
  EXPECT_EQ(CpusOfQuota(-1, 100000), std::nullopt) << "cgroup v1's 'no quota'";
  EXPECT_EQ(CpusOfQuota(400000, 100000), 4);
}

TEST(ProgressModeTest, UsableCpusFollowsTheThreadsAffinity) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  const int usable = UsableCpus();  // at most the affinity's; fewer under a CPU quota
  EXPECT_GE(usable, 1);
  EXPECT_LE(usable, CPU_COUNT(&all));
  // A thread pinned to one CPU (as under `taskset -c 0`) sees one, and so does auto.
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  int seen = 0;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) seen = UsableCpus();
  });
  pinned.join();
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(UsableCpus(), usable) << "pinning another thread changed this one";
}

}  // namespace
}  // namespace sluice::transport
