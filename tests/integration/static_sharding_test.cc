// Static sharding end to end: a dispatcher with a fixed worker list and three worker
// processes on known ports; each worker reads only its share (FILE, DATA, HINT), so one
// client reading all of them sees every element exactly once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

std::set<std::string> WorkersIn(const std::string& jsonl) {
  std::set<std::string> workers;
  std::istringstream lines(jsonl);
  for (std::string line; std::getline(lines, line);) {
    workers.insert(nlohmann::json::parse(line)["worker"].get<std::string>());
  }
  return workers;
}

class StaticShardingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestDataRoot();
    ClusterOptions options;
    options.workers = 3;
    options.data_root = root_;
    std::string list;
    for (int i = 0; i < 3; ++i) {
      options.worker_ports.push_back(FreePort());
      absl::StrAppend(&list, i ? "," : "", "127.0.0.1:", options.worker_ports.back());
    }
    options.dispatcher_args = {"--worker-addresses", list};
    cluster_ = std::make_unique<Cluster>(options);
  }
  std::string root_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(StaticShardingTest, FileShardingReadsEachTaxiShardOnceAcrossThreeWorkers) {
  if (root_.empty()) GTEST_SKIP() << "SLUICE_TESTDATA (../shared/testdata) is not available";
  const std::string pipeline =
      "list_files('tfrecord/tfx/tfx/components/testdata/csv_example_gen/Split-eval/*.gz') "
      "| interleave(tfrecord(compression='gzip'), cycle_length=2) | batch(64)";
  auto file = StartRead(cluster_->address(), pipeline, "file");
  std::map<std::string, int> by_file = Records(*file);
  EXPECT_EQ(Total(by_file), 5091) << "PROVENANCE.md: 5,091 records in the 12 shards";
  for (const auto& [record, count] : by_file) ASSERT_EQ(count, 1);
  EXPECT_EQ(WorkersIn(file->stdout_text()).size(), 3u) << "every worker read its 4 shards";
  auto dynamic = StartRead(cluster_->address(), pipeline, "dynamic");
  EXPECT_EQ(Records(*dynamic), by_file) << "FILE and DYNAMIC read the same records";
}

TEST_F(StaticShardingTest, DataAndHintShardingSplitElementsBetweenWorkers) {
  auto data = StartRead(cluster_->address(), "range(3000) | map(identity) | batch(16)", "data");
  ExpectEachValueTimes(Values(*data), 3000, 1);
  EXPECT_EQ(WorkersIn(data->stdout_text()).size(), 3u);
  auto hint = StartRead(cluster_->address(),
                        "range(999) | shard(SHARD_HINT, SHARD_HINT) | batch(7)", "hint");
  ExpectEachValueTimes(Values(*hint), 999, 1);
  auto file_or_data = StartRead(cluster_->address(), "range(500) | batch(9)", "file_or_data");
  ExpectEachValueTimes(Values(*file_or_data), 500, 1);
}

// A listed worker that has not joined holds its share back: the read says which one it
// waits for (it used to wait without a word), and goes on once that worker starts.
TEST(StaticShardingWaitTest, AReadSaysWhichListedWorkerItWaitsFor) {
  ClusterOptions options;
  options.workers = 1;
  options.worker_ports = {FreePort()};
  const int missing_port = FreePort();
  options.dispatcher_args = {
      "--worker-addresses",
      absl::StrCat("127.0.0.1:", options.worker_ports[0], ",127.0.0.1:", missing_port)};
  Cluster cluster(options);
  auto read = StartRead(cluster.address(), "range(300) | batch(10)", "data");
  const std::string expected = absl::StrCat("waiting for worker 127.0.0.1:", missing_port, ":");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline && read->stderr_text().find(expected) == std::string::npos) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_THAT(read->stderr_text(), HasSubstr(expected));
  Subprocess status({Binary(), "status", "--dispatcher", cluster.address(), "--json"});
  ASSERT_EQ(status.Wait(absl::Seconds(30)), 0) << status.stderr_text();
  nlohmann::json jobs = nlohmann::json::parse(status.stdout_text())["jobs"];
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["workers_awaited"],
            nlohmann::json::array({absl::StrCat("127.0.0.1:", missing_port)}));
  cluster.AddWorker(missing_port);
  ExpectEachValueTimes(Values(*read), 300, 1);
  EXPECT_EQ(WorkersIn(read->stdout_text()).size(), 2u);
}

TEST_F(StaticShardingTest, UnlistedWorkersAndImpossibleSharesAreRefused) {
  Subprocess stranger({Binary(), "--timeout", "5s", "worker", "--dispatcher", cluster_->address(),
                       "--host", "127.0.0.1", "--advertise-host", "127.0.0.1"});
  EXPECT_EQ(stranger.Wait(absl::Seconds(30)), 1);
  EXPECT_THAT(stranger.stderr_text(), HasSubstr("is not in the dispatcher's --worker-addresses"));

  auto few = StartRead(cluster_->address(), "tfrecord(files=['a', 'b']) | batch(2)", "file");
  EXPECT_EQ(few->Wait(absl::Seconds(30)), 1);
  EXPECT_THAT(few->stderr_text(), HasSubstr("needs at least 3 files, got 2"));
}

TEST(StaticShardingWithoutListTest, IsRefusedWithTheFlagToUse) {
  Cluster cluster(1);
  auto read = StartRead(cluster.address(), "range(10) | batch(2)", "data");
  EXPECT_EQ(read->Wait(absl::Seconds(30)), 1);
  EXPECT_THAT(read->stderr_text(), HasSubstr("start the dispatcher with --worker-addresses"));
}

}  // namespace
}  // namespace sluice::testing
