#include "transport/progress_mode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
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
  EXPECT_EQ(CpusOfQuota(std::numeric_limits<int64_t>::max(), 1000), std::numeric_limits<int>::max())
      << "no overflow";
}

// A cgroup tree under a temporary directory, as /sys/fs/cgroup would hold it.
class FakeCgroups {
 public:
  FakeCgroups() {
    char dir[] = "/tmp/sluice_cgroups_XXXXXX";
    root_ = mkdtemp(dir);
  }
  ~FakeCgroups() { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

// A quota set on a parent (a systemd slice, a Kubernetes pod) binds the cgroup below it,
// whose own file says "max"; inside a container the path named is the host's, absent here,
// and the container's own cgroup is the mount's root.
TEST(ProgressModeTest, TheSmallestQuotaFromTheCgroupUpToTheRootCounts) {
  FakeCgroups v2;
  v2.Write("/kubepods/pod1/cpu.max", "max 100000\n");
  v2.Write("/kubepods/cpu.max", "300000 100000\n");
  v2.Write("/cpu.max", "max 100000\n");
  EXPECT_EQ(CgroupCpuQuota("0::/kubepods/pod1\n", v2.root()), 3);
  EXPECT_EQ(CgroupCpuQuota("0::/elsewhere/on/the/host\n", v2.root()), std::nullopt);
  FakeCgroups container;
  container.Write("/cpu.max", "200000 100000\n");
  EXPECT_EQ(CgroupCpuQuota("0::/host/path/of/it\n", container.root()), 2);

  FakeCgroups v1;
  v1.Write("/cpu,cpuacct/user.slice/cpu.cfs_quota_us", "-1\n");
  v1.Write("/cpu,cpuacct/user.slice/cpu.cfs_period_us", "100000\n");
  v1.Write("/cpu,cpuacct/cpu.cfs_quota_us", "150000\n");
  v1.Write("/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(CgroupCpuQuota("5:cpuset:/\n4:cpu,cpuacct:/user.slice\n1:name=systemd:/\n", v1.root()),
            2);
  // Hybrid: the quota is the v1 cpu controller's (2), not what a v2 file says (1).
  v1.Write("/x/cpu.max", "100000 100000\n");
  EXPECT_EQ(CgroupCpuQuota("4:cpu,cpuacct:/\n0::/x\n", v1.root()), 2);
  EXPECT_EQ(CgroupCpuQuota("", v1.root()), std::nullopt);
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
