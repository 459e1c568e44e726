// End to end: a dispatcher, workers and clients as separate `sluice` processes talking
// over real UCX endpoints on loopback. The transport comes from UCX_TLS in the environment;
// meson runs this binary once with shared memory and once with tcp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

// The transport under test: SLUICE_TEST_TRANSPORT=ofi runs everything over libfabric.
std::string Scheme() {
  const char* scheme = std::getenv("SLUICE_TEST_TRANSPORT");
  return scheme ? scheme : "ucx";
}

std::string Binary() {
  const char* path = std::getenv("SLUICE_BINARY");
  return path ? path : "sluice";
}

// A dispatcher and N workers, each its own process.
class Cluster {
 public:
  // `data_root`: given to the dispatcher and every worker as --data-root.
  explicit Cluster(int workers, const std::string& data_root = "") {
    std::vector<std::string> roots;
    if (!data_root.empty()) roots = {"--data-root", data_root};
    std::vector<std::string> argv = {
        Binary(), "--transport", Scheme(),    "dispatcher",           "--port",
        "0",      "--host",      "127.0.0.1", "--elements-per-split", "100"};
    argv.insert(argv.end(), roots.begin(), roots.end());
    dispatcher_ = std::make_unique<Subprocess>(argv);
    std::string line = dispatcher_->WaitForOutput("listening on", absl::Seconds(20));
    EXPECT_FALSE(line.empty()) << dispatcher_->stderr_text();
    size_t start = line.find(Scheme() + "://");
    address_ = line.substr(start, line.find(' ', start) - start);
    for (int i = 0; i < workers; ++i) {
      std::vector<std::string> worker_argv = {
          Binary(),           "worker",    "--dispatcher", address_,  "--host",  "127.0.0.1",
          "--advertise-host", "127.0.0.1", "--slab-bytes", "1048576", "--slabs", "8"};
      worker_argv.insert(worker_argv.end(), roots.begin(), roots.end());
      auto worker = std::make_unique<Subprocess>(worker_argv);
      EXPECT_FALSE(worker->WaitForOutput("serving at", absl::Seconds(20)).empty())
          << worker->stderr_text();
      workers_.push_back(std::move(worker));
    }
  }
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<Subprocess> dispatcher_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
  std::string address_;
};

std::unique_ptr<Subprocess> StartRead(const std::string& address, const std::string& pipeline,
                                      const std::string& mode, const std::string& job = "") {
  std::vector<std::string> argv = {Binary(), "read",   "--dispatcher", address,    "--pipeline",
                                   pipeline, "--mode", mode,           "--format", "jsonl"};
  if (!job.empty()) {
    argv.push_back("--job-name");
    argv.push_back(job);
  }
  return std::make_unique<Subprocess>(argv);
}

// value -> how many times it was read, from a finished `sluice read --format jsonl`.
std::map<int64_t, int> Values(Subprocess& read) {
  EXPECT_EQ(read.Wait(absl::Seconds(120)), 0) << read.stderr_text();
  std::map<int64_t, int> counts;
  std::istringstream lines(read.stdout_text());
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json batch = nlohmann::json::parse(line);
    EXPECT_EQ(batch["tensors"].size(), 1u);
    EXPECT_EQ(batch["tensors"][0]["dtype"], "int64");
    for (int64_t v : batch["tensors"][0]["values"]) ++counts[v];
  }
  return counts;
}

void ExpectEachValueTimes(const std::map<int64_t, int>& counts, int64_t n, int times) {
  ASSERT_EQ(counts.size(), static_cast<size_t>(n)) << "distinct values read";
  ASSERT_EQ(counts.begin()->first, 0);
  ASSERT_EQ(counts.rbegin()->first, n - 1);
  for (const auto& [value, count] : counts) ASSERT_EQ(count, times) << "value " << value;
}

TEST(ServiceTest, DynamicTwoClientsOfOneJobReadEachElementOnce) {
  Cluster cluster(2);
  const std::string pipeline = "range(20000) | batch(64)";
  auto a = StartRead(cluster.address(), pipeline, "dynamic", "shared");
  auto b = StartRead(cluster.address(), pipeline, "dynamic", "shared");
  std::map<int64_t, int> union_counts = Values(*a);
  for (const auto& [v, c] : Values(*b)) union_counts[v] += c;
  ExpectEachValueTimes(union_counts, 20000, 1);
}

TEST(ServiceTest, OffModeEveryWorkerProducesEverything) {
  Cluster cluster(2);
  auto read = StartRead(cluster.address(), "range(5000) | map(identity) | batch(50)", "off");
  std::map<int64_t, int> counts = Values(*read);
  ExpectEachValueTimes(counts, 5000, 2);
  // Both workers served: lines name two distinct workers.
  std::istringstream lines(read->stdout_text());
  std::set<std::string> workers;
  for (std::string line; std::getline(lines, line);) {
    workers.insert(nlohmann::json::parse(line)["worker"].get<std::string>());
  }
  EXPECT_EQ(workers.size(), 2u);
}

TEST(ServiceTest, StatusShowsWorkersDatasetsAndJobs) {
  Cluster cluster(2);
  auto read = StartRead(cluster.address(), "range(1000) | batch(100)", "dynamic", "watched");
  ExpectEachValueTimes(Values(*read), 1000, 1);
  absl::SleepFor(absl::Milliseconds(300));  // a heartbeat carries the workers' counters
  Subprocess status({Binary(), "status", "--dispatcher", cluster.address(), "--json"});
  ASSERT_EQ(status.Wait(absl::Seconds(30)), 0) << status.stderr_text();
  nlohmann::json s = nlohmann::json::parse(status.stdout_text());
  ASSERT_EQ(s["workers"].size(), 2u);
  int64_t batches = 0;
  for (const auto& w : s["workers"]) batches += w["batches_served"].get<int64_t>();
  EXPECT_GE(batches, 10);
  ASSERT_EQ(s["jobs"].size(), 1u);
  EXPECT_EQ(s["jobs"][0]["job_name"], "watched");
  EXPECT_EQ(s["jobs"][0]["mode"], "dynamic");
  EXPECT_EQ(s["jobs"][0]["finished"], true);
  ASSERT_EQ(s["datasets"].size(), 1u);
}

TEST(ServiceTest, DifferentJobNamesAreIndependent) {
  Cluster cluster(2);
  const std::string pipeline = "range(3000) | batch(32)";
  auto a = StartRead(cluster.address(), pipeline, "dynamic", "job-a");
  auto b = StartRead(cluster.address(), pipeline, "dynamic", "job-b");
  ExpectEachValueTimes(Values(*a), 3000, 1);
  ExpectEachValueTimes(Values(*b), 3000, 1);
}

TEST(ServiceTest, MapFunctionsAndShuffleKeepTheMultiset) {
  Cluster cluster(1);
  auto read = StartRead(cluster.address(),
                        "range(1000) | shuffle(100, seed=3) | map(square) | batch(7)", "dynamic");
  std::map<int64_t, int> counts = Values(*read);
  ASSERT_EQ(counts.size(), 1000u);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(counts[i * i], 1) << i;
}

// String values (TFRecord records) read by a finished `sluice read --format jsonl`.
std::map<std::string, int> Records(Subprocess& read) {
  EXPECT_EQ(read.Wait(absl::Seconds(120)), 0) << read.stderr_text();
  std::map<std::string, int> counts;
  std::istringstream lines(read.stdout_text());
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json batch = nlohmann::json::parse(line);
    EXPECT_EQ(batch["tensors"][0]["dtype"], "string");
    for (const auto& v : batch["tensors"][0]["values"]) ++counts[v.get<std::string>()];
  }
  return counts;
}

int64_t Total(const std::map<std::string, int>& counts) {
  int64_t n = 0;
  for (const auto& [v, c] : counts) n += c;
  return n;
}

// The 12 GZIP TFRecord shards written by TFX (../shared/testdata, PROVENANCE.md: 5,091
// records in all), read by 3 worker processes.
class TaxiShardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* root = std::getenv("SLUICE_TESTDATA");
    if (root == nullptr || access(root, R_OK) != 0) {
      GTEST_SKIP() << "SLUICE_TESTDATA (../shared/testdata) is not available";
    }
    root_ = root;
  }
  static constexpr const char* kPipeline =
      "list_files('tfrecord/tfx/tfx/components/testdata/csv_example_gen/Split-eval/*.gz') "
      "| interleave(tfrecord(compression='gzip'), cycle_length=2) | batch(64)";
  std::string root_;
};

TEST_F(TaxiShardsTest, DynamicReadsEveryRecordOnceAndOffReadsThemPerWorker) {
  std::map<std::string, int> reference;
  {
    Cluster one(1, root_);
    auto read = StartRead(one.address(), kPipeline, "off");
    reference = Records(*read);
  }
  ASSERT_EQ(Total(reference), 5091);
  Cluster three(3, root_);
  auto dynamic = StartRead(three.address(), kPipeline, "dynamic");
  EXPECT_EQ(Records(*dynamic), reference) << "DYNAMIC: each record exactly once";
  auto off = StartRead(three.address(), kPipeline, "off");
  std::map<std::string, int> tripled = reference;
  for (auto& [record, count] : tripled) count *= 3;
  EXPECT_EQ(Records(*off), tripled) << "OFF: every worker reads everything";
}

TEST_F(TaxiShardsTest, WorkersRefuseFilesOutsideTheirDataRoots) {
  Cluster cluster(1, root_ + "/tfrecord/pytorch-data");
  auto read = StartRead(cluster.address(), "tfrecord(files=['/etc/passwd']) | batch(1)", "off");
  EXPECT_NE(read->Wait(absl::Seconds(60)), 0);
  EXPECT_THAT(read->stderr_text(), HasSubstr("/etc/passwd"));
}

struct BadInput {
  const char* name;
  const char* pipeline;
  const char* expected_message;
};

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, IsAClearErrorAndNonZeroExit) {
  Cluster cluster(1);
  auto read = StartRead(cluster.address(), GetParam().pipeline, "dynamic");
  int code = read->Wait(absl::Seconds(30));
  EXPECT_EQ(code, 2) << "stderr: " << read->stderr_text();  // 2 = bad input, not a crash
  EXPECT_THAT(read->stderr_text(), HasSubstr(GetParam().expected_message));
  EXPECT_EQ(read->stdout_text(), "");
}

INSTANTIATE_TEST_SUITE_P(
    Pipelines, BadInputTest,
    ::testing::Values(BadInput{"Malformed", "range(10 | batch(2)", "column 10"},
                      BadInput{"UnknownOp", "range(10) | frobnicate(3)", "unknown op"},
                      BadInput{"UnknownFunction", "range(10) | map(cube)", "cube"},
                      BadInput{"NegativeBatchSize", "range(10) | batch(-1)", "batch_size"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ServiceTest, UnreachableDispatcherFailsWithinTheTimeout) {
  absl::Time start = absl::Now();
  Subprocess read({Binary(), "--timeout", "3s", "read", "--dispatcher", Scheme() + "://127.0.0.1:1",
                   "--pipeline", "range(10)"});
  int code = read.Wait(absl::Seconds(30));
  EXPECT_EQ(code, 1) << read.stderr_text();
  EXPECT_THAT(read.stderr_text(),
              HasSubstr("cannot reach the dispatcher at " + Scheme() + "://127.0.0.1:1"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
}

TEST(ServiceTest, WorkerWithUnreachableDispatcherFailsClearly) {
  Subprocess worker(
      {Binary(), "--timeout", "2s", "worker", "--dispatcher", Scheme() + "://127.0.0.1:1"});
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 1);
  EXPECT_THAT(worker.stderr_text(), HasSubstr("could not register with the dispatcher"));
}

TEST(ServiceTest, LocalClusterReadsEverythingOnce) {
  Subprocess local({Binary(), "--transport", Scheme(), "local", "--workers", "3", "--pipeline",
                    "range(4000) | map(identity) | batch(10)", "--format", "jsonl"});
  ExpectEachValueTimes(Values(local), 4000, 1);
}

TEST(ServiceTest, EverySubcommandHasHelp) {
  for (const char* command : {"dispatcher", "worker", "read", "local", "status"}) {
    Subprocess help({Binary(), command, "--help"});
    EXPECT_EQ(help.Wait(absl::Seconds(10)), 0) << command;
    EXPECT_THAT(help.stdout_text(), HasSubstr("--")) << command;
  }
  Subprocess bad({Binary(), "read", "--no-such-flag"});
  EXPECT_EQ(bad.Wait(absl::Seconds(10)), 2);
}

}  // namespace
}  // namespace sluice::testing
