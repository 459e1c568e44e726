// Region names that survive pid reuse, and removal of regions left by dead processes: in a
// scratch directory, and in /dev/shm through a real shm transport.
#include "transport/ofi/shm_names.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "transport/rpc.h"

namespace sluice::transport::ofi {
namespace {

namespace fs = std::filesystem;

// A pid that belonged to a process which has exited and been reaped.
pid_t DeadPid() {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

void Touch(const fs::path& path) { std::ofstream(path) << "region"; }

class ShmNamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/sluice_shm_names_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(UniqueShmEndpointNameTest, CarriesThePidAndDiffersEachTime) {
  const std::string first = UniqueShmEndpointName();
  const std::string second = UniqueShmEndpointName();
  EXPECT_NE(first, second);
  const std::string prefix = absl::StrCat(kShmNamePrefix, getpid(), "_");
  EXPECT_EQ(first.rfind(prefix, 0), 0u) << first;
  EXPECT_EQ(first.size(), prefix.size() + 16) << first;
}

TEST_F(ShmNamesTest, RemovesOnlyRegionsOfDeadProcesses) {
  const pid_t dead = DeadPid();
  const fs::path stale = dir_ / absl::StrCat(kShmNamePrefix, dead, "_00000000000000aa");
  const fs::path live = dir_ / absl::StrCat(kShmNamePrefix, getpid(), "_00000000000000bb");
  const fs::path foreign = dir_ / absl::StrCat(dead, ":0:0");  // libfabric's own naming
  const fs::path not_a_pid = dir_ / absl::StrCat(kShmNamePrefix, "abc_1");
  const fs::path directory = dir_ / absl::StrCat(kShmNamePrefix, dead, "_dir");
  for (const fs::path& p : {stale, live, foreign, not_a_pid}) Touch(p);
  fs::create_directory(directory);

  EXPECT_EQ(RemoveStaleShmRegions(dir_.string()), 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(foreign));
  EXPECT_TRUE(fs::exists(not_a_pid));
  EXPECT_TRUE(fs::exists(directory));
  EXPECT_EQ(RemoveStaleShmRegions(dir_.string()), 0);
}

TEST_F(ShmNamesTest, MissingDirectoryRemovesNothing) {
  EXPECT_EQ(RemoveStaleShmRegions((dir_ / "absent").string()), 0);
}

// A region left in /dev/shm by a killed process is gone once a shm transport starts, and
// endpoints keep working across it.
TEST(ShmTransportTest, StartingRemovesRegionsOfDeadProcesses) {
  const fs::path stale =
      fs::path("/dev/shm") / absl::StrCat(kShmNamePrefix, DeadPid(), "_00000000000000cc");
  Touch(stale);
  ASSERT_TRUE(fs::exists(stale));
  RpcOptions options;
  options.scheme = "ofi";
  options.transport.ofi_provider = "shm";
  auto endpoint = RpcEndpoint::Create(options);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_FALSE(fs::exists(stale));
}

}  // namespace
}  // namespace sluice::transport::ofi
