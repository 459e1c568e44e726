// End to end: a dispatcher, workers and clients as separate `sluice` processes talking
// over real UCX endpoints on loopback. The transport comes from UCX_TLS in the environment;
// meson runs this binary once with shared memory and once with tcp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

// `status --json` once `ready` holds for it, or the last one after 20 s: workers' counters
// reach the dispatcher with their heartbeats, at whatever pace a loaded machine allows.
nlohmann::json StatusWhen(const std::string& address,
                          const std::function<bool(const nlohmann::json&)>& ready) {
  nlohmann::json last;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(20); absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(100))) {
    Subprocess status({Binary(), "status", "--dispatcher", address, "--json"});
    EXPECT_EQ(status.Wait(absl::Seconds(30)), 0) << status.stderr_text();
    last = nlohmann::json::parse(status.stdout_text(), nullptr, /*allow_exceptions=*/false);
    if (ready(last)) break;
  }
  return last;
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

// A reader that takes a few batches of a shared job fetches no more than those: what a
// client fetched counts as consumed, and the batches it prefetched beyond --take were lost
// to the job's next reader.
TEST(ServiceTest, ATakeOfASharedJobLeavesTheRestToItsNextReader) {
  Cluster cluster(1);
  const std::string pipeline = "range(2000) | batch(10)";
  auto first = StartRead(cluster.address(), pipeline, "dynamic", "taken", {"--take", "3"});
  ASSERT_EQ(first->Wait(absl::Seconds(30)), 0) << first->stderr_text();
  std::map<int64_t, int> counts = Values(*first);
  EXPECT_EQ(counts.size(), 30u);
  auto rest = StartRead(cluster.address(), pipeline, "dynamic", "taken");
  for (const auto& [v, c] : Values(*rest)) counts[v] += c;
  ExpectEachValueTimes(counts, 2000, 1);
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
  auto served = [](const nlohmann::json& s) {
    if (!s.is_object() || !s.contains("workers") || !s.contains("jobs")) return false;
    int64_t batches = 0;
    for (const auto& w : s["workers"]) batches += w.value("batches_served", int64_t{0});
    return batches >= 10 && s["jobs"].size() == 1 && s["jobs"][0].value("finished", false);
  };
  nlohmann::json s = StatusWhen(cluster.address(), served);
  ASSERT_TRUE(s.is_object()) << "status printed no JSON object";
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

// Short anonymous reads one after another: each job's tasks end when its reader releases it,
// so the worker's slabs come back. Before, each task kept its buffer's slabs until the job
// was garbage-collected (5 minutes), and with 8 slabs the third read waited for good.
TEST(ServiceTest, ShortReadsOneAfterAnotherDoNotRunAWorkerOutOfSlabs) {
  Cluster cluster(
      ClusterOptions{.workers = 1, .worker_args = {"--slab-bytes", "256KiB", "--slabs", "8"}});
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    auto read =
        StartRead(cluster.address(), "range(100000000) | batch(20000)", "off", "", {"--take", "2"});
    ASSERT_EQ(read->Wait(absl::Seconds(30)), 0) << read->stderr_text();
    ExpectEachValueTimes(Values(*read), 40000, 1);  // the first two batches
  }
}

// The first worker's counters, as `sluice status --json` gives them.
nlohmann::json FirstWorkersStats(const std::string& address) {
  Subprocess status({Binary(), "status", "--dispatcher", address, "--json"});
  EXPECT_EQ(status.Wait(absl::Seconds(30)), 0) << status.stderr_text();
  const nlohmann::json s = nlohmann::json::parse(status.stdout_text(), nullptr, false);
  if (s.is_discarded() || s["workers"].empty()) return nlohmann::json::object();
  return s["workers"][0];
}

// Named jobs whose readers took two batches and left keep their tasks until collected
// (minutes), and with them their buffered batches: here enough to hold every slab of the
// worker. Those batches move to the worker's heap once the next job's pipeline waits for a
// slab, and a reader joining a named job later gets them in turn, sent from there, on every
// transport.
TEST(ServiceTest, NamedJobsLeftMidwayLeaveTheirSlabsToTheNextJob) {
  // A buffer of 2 is refilled after each batch taken (a larger one only once half of it has
  // gone), so each job left holds 2 slabs: the 4 of the pool.
  Cluster cluster(ClusterOptions{
      .workers = 1,
      .worker_args = {"--slab-bytes", "64KiB", "--slabs", "4", "--buffer-batches", "2"}});
  const std::string left = "range(100000000) | batch(5000)";  // 40,000 bytes: a slab each
  std::map<int64_t, int> first_reads[2];
  nlohmann::json stats;
  for (int job = 0; job < 2; ++job) {
    auto read =
        StartRead(cluster.address(), left, "off", absl::StrCat("left-", job), {"--take", "2"});
    first_reads[job] = Values(*read);
    ExpectEachValueTimes(first_reads[job], 10000, 1);
    // Released, the reader is forgotten by the worker within a heartbeat or two, and what
    // was kept for it goes (a job created since the dispatcher started lists its readers at
    // once; it used to take a minute).
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    for (stats = FirstWorkersStats(cluster.address());
         stats.value("clients_forgotten", 0) <= job && absl::Now() < give_up;
         stats = FirstWorkersStats(cluster.address())) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_EQ(stats.value("clients_forgotten", 0), job + 1) << stats.dump();
  }
  // The pool full of the two buffers.
  int64_t buffered = 0;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(20);
       buffered < 4 && absl::Now() < give_up; absl::SleepFor(absl::Milliseconds(50))) {
    stats = FirstWorkersStats(cluster.address());
    buffered = stats.value("bytes_assembled_unserved", 0) / 40000;  // +64 each
  }
  ASSERT_EQ(buffered, 4) << stats.dump();

  auto next =
      StartRead(cluster.address(), "range(150000) | batch(5000)", "off", "", {"--take", "30"});
  ASSERT_EQ(next->Wait(absl::Seconds(60)), 0) << next->stderr_text();
  ExpectEachValueTimes(Values(*next), 150000, 1);
  // Every buffered batch moved: no task's reader asked for a second and more.
  EXPECT_GE(FirstWorkersStats(cluster.address()).value("batches_spilled", 0), buffered);

  for (int job = 0; job < 2; ++job) {
    SCOPED_TRACE(job);
    auto rest =
        StartRead(cluster.address(), left, "off", absl::StrCat("left-", job), {"--take", "14"});
    std::map<int64_t, int> all = Values(*rest);
    all.insert(first_reads[job].begin(), first_reads[job].end());
    ExpectEachValueTimes(all, 80000, 1);  // the next 14 batches, the moved ones among them
  }
}

// A worker's address given where the dispatcher's belongs is named as such; it said
// "unknown method 7".
TEST(ServiceTest, AWorkersAddressIsNotTakenForTheDispatchers) {
  Cluster cluster(1);
  Subprocess status({Binary(), "status", "--dispatcher", cluster.worker_address(0)});
  EXPECT_EQ(status.Wait(absl::Seconds(30)), 1) << status.stderr_text();
  EXPECT_THAT(status.stderr_text(), HasSubstr(cluster.worker_address(0) + " is not a dispatcher"));
}

// A reader joining a named job that has finished gets nothing, as in tf.data; it says why,
// where it used to print an empty read as if the dataset were empty.
TEST(ServiceTest, JoiningAFinishedJobSaysSo) {
  Cluster cluster(1);
  auto first = StartRead(cluster.address(), "range(100) | batch(10)", "dynamic", "once");
  ExpectEachValueTimes(Values(*first), 100, 1);
  EXPECT_THAT(first->stderr_text(), ::testing::Not(HasSubstr("had already finished")));
  // The dispatcher learns that the job finished from the worker's next heartbeat.
  bool finished = false;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(20);
       !finished && absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(100))) {
    Subprocess status({Binary(), "status", "--dispatcher", cluster.address(), "--json"});
    ASSERT_EQ(status.Wait(absl::Seconds(30)), 0) << status.stderr_text();
    const nlohmann::json s = nlohmann::json::parse(status.stdout_text());
    finished = s["jobs"].size() == 1 && s["jobs"][0]["finished"].get<bool>();
  }
  ASSERT_TRUE(finished) << "the dispatcher never saw the job finish";
  auto late = StartRead(cluster.address(), "range(100) | batch(10)", "dynamic", "once");
  ASSERT_EQ(late->Wait(absl::Seconds(60)), 0) << late->stderr_text();
  EXPECT_EQ(late->stdout_text(), "");
  EXPECT_THAT(late->stderr_text(), HasSubstr("job 'once' had already finished"));
}

// A filter leaves holes in each split's delivered ordinals unless the elements it drops are
// credited to the ones it keeps (engine/provenance.h); with the holes, the dispatcher's
// delivery log kept one entry per split read: 2000 here (splits of 100 elements), now 4.
// The dispatcher's delivery log entries for the one job `sluice status` shows.
// The last heartbeats carry the last deliveries: the count is taken once two readings
// 300 ms apart agree (within 20 s), not after a fixed wait a loaded machine may overrun.
int64_t DeliveryLogEntries(const std::string& address) {
  int64_t previous = -1;
  int64_t entries = -1;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(20); absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(300));
    Subprocess status({Binary(), "status", "--dispatcher", address, "--json"});
    EXPECT_EQ(status.Wait(absl::Seconds(30)), 0) << status.stderr_text();
    nlohmann::json s = nlohmann::json::parse(status.stdout_text());
    EXPECT_EQ(s["jobs"].size(), 1u);
    if (s["jobs"].size() != 1) return -1;
    entries = s["jobs"][0]["delivery_log_entries"].get<int64_t>();
    if (entries == previous) break;
    previous = entries;
  }
  return entries;
}

TEST(ServiceTest, AFilteredDynamicPassKeepsItsDeliveryLogSmall) {
  Cluster cluster(2);
  auto read =
      StartRead(cluster.address(), "range(200000) | filter(is_even) | batch(64)", "dynamic");
  std::map<int64_t, int> counts = Values(*read);
  ASSERT_EQ(counts.size(), 100000u);
  for (int64_t i = 0; i < 200000; i += 2) ASSERT_EQ(counts[i], 1) << i;
  const int64_t entries = DeliveryLogEntries(cluster.address());
  EXPECT_GE(entries, 1);  // deliveries were reported
  // Each worker's last split ends in a dropped element that nothing kept answers for (a
  // filter does not read ahead): two holed splits between runs of whole ones, 5 entries at
  // most (measured: 4 in 6 of 6 runs). The reader reports the batches that landed after
  // the dispatcher said the job finished, so no batch missing from the log adds more.
  EXPECT_LE(entries, 5);
}

// Files of 0 to 12 lines, one split each: a file read to the end is delivered whole, so
// the splits fold into a few entries although no two neighbours had the same size.
TEST(ServiceTest, FilesOfDifferentSizesKeepTheDeliveryLogSmall) {
  ScopedTempDir dir;
  std::set<std::string> expected;
  for (int f = 0; f < 80; ++f) {
    std::ofstream out(dir.path() + "/part-" + std::to_string(1000 + f) + ".txt");
    for (int l = 0; l < (f * 5) % 13; ++l) {
      const std::string line = "p" + std::to_string(f) + "-" + std::to_string(l);
      out << line << "\n";
      expected.insert(line);
    }
  }
  Cluster cluster(2, dir.path());
  auto read = StartRead(cluster.address(),
                        "list_files('part-*.txt') | interleave(text_line(), cycle_length=2) | "
                        "batch(8)",
                        "dynamic");
  std::map<std::string, int> counts = Records(*read);
  EXPECT_EQ(counts.size(), expected.size());
  for (const std::string& line : expected) EXPECT_EQ(counts[line], 1) << line;
  const int64_t entries = DeliveryLogEntries(cluster.address());
  EXPECT_GE(entries, 1);
  // A file's last line carries its rest (the interleave reads one line ahead). Only an
  // empty file opened after a worker's last line has nothing to answer for it: one per
  // worker at most here (no two empty files are neighbours), so 3 entries. Without the
  // look-ahead up to 9 (cycle_length holed files per worker), without any credit 73 (one
  // per non-empty split).
  EXPECT_LE(entries, 3) << "of 80 splits";
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

// The 12 GZIP TFRecord shards written by TFX (../shared/testdata, PROVENANCE.md: 5,091
// records in all), read by 3 worker processes.
class TaxiShardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestDataRoot();
    if (root_.empty()) GTEST_SKIP() << "SLUICE_TESTDATA (../shared/testdata) is not available";
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

// A record whose data CRC no longer matches: with skip_bad_records the read goes on, and the
// reader (on stderr) and the worker (in `sluice status`) report the skip; without it the read
// fails naming the file.
TEST(ServiceTest, SkippedBadRecordsAreCountedAndReported) {
  const std::string source =
      TestDataRoot() + "/tfrecord/pytorch-data/test/_fakedata/tfrecord/example.tfrecord";
  if (TestDataRoot().empty()) GTEST_SKIP() << "SLUICE_TESTDATA is not available";
  char dir_template[] = "/tmp/sluice_bad_records_XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string path = dir + "/bad.tfrecord";
  {
    std::ifstream in(source, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(bytes.size(), 523u) << "PROVENANCE.md: example.tfrecord is 523 bytes";
    bytes[200] ^= 0x40;  // inside the second record's data (records are ~130 bytes)
    std::ofstream(path, std::ios::binary) << bytes;
  }
  Cluster cluster(1, dir);
  auto skipping =
      StartRead(cluster.address(),
                "tfrecord(files=['" + path + "'], skip_bad_records=true) | batch(1)", "off");
  EXPECT_EQ(Total(Records(*skipping)), 3) << "4 records, one corrupt";
  // The reader says so too, with the file and offset of the record.
  EXPECT_THAT(skipping->stderr_text(),
              HasSubstr("the tasks this read drew from skipped 1 corrupt record"));
  EXPECT_THAT(skipping->stderr_text(), HasSubstr(path + "' at offset "));
  const std::string said = skipping->stderr_text();
  EXPECT_EQ(said.find("at offset "), said.rfind("at offset "))
      << "said once, not for every reply that ended the task: " << said;
  nlohmann::json s = StatusWhen(cluster.address(), [](const nlohmann::json& s) {
    return s.is_object() && s.contains("workers") && s["workers"].size() == 1 &&
           s["workers"][0].value("bad_records_skipped", int64_t{0}) >= 1;
  });
  ASSERT_TRUE(s.is_object()) << "status printed no JSON object";
  ASSERT_EQ(s["workers"].size(), 1u);
  EXPECT_EQ(s["workers"][0]["bad_records_skipped"], 1);

  auto strict = StartRead(cluster.address(), "tfrecord(files=['" + path + "']) | batch(1)", "off");
  EXPECT_EQ(strict->Wait(absl::Seconds(30)), 1);
  EXPECT_THAT(strict->stderr_text(), HasSubstr(path));
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(ServiceTest, DatasetIdsChosenByUsersKeepTheirPipeline) {
  Cluster cluster(1);
  auto first = StartRead(cluster.address(), "range(100) | batch(10)", "off", "",
                         {"--dataset-id", "hundred"});
  ExpectEachValueTimes(Values(*first), 100, 1);
  auto clash = StartRead(cluster.address(), "range(200) | batch(10)", "off", "",
                         {"--dataset-id", "hundred"});
  EXPECT_EQ(clash->Wait(absl::Seconds(30)), 2);  // refused input, as a --job-name clash is
  EXPECT_THAT(clash->stderr_text(), HasSubstr("dataset id 'hundred' is already registered"));
}

// `sluice read` receives batches on its reading thread (--progress caller) or on the
// client's progress thread (thread); auto, the default, picks one by the CPUs it may use.
// Every way, every value comes exactly once.
TEST(ServiceTest, EachWayOfWaitingForABatchReadsEveryValueOnce) {
  Cluster cluster(2);
  for (const char* progress : {"caller", "thread", "auto"}) {
    SCOPED_TRACE(progress);
    auto read = StartRead(cluster.address(), "range(50000) | batch(100)", "dynamic", "",
                          {"--progress", progress});
    ExpectEachValueTimes(Values(*read), 50000, 1);
  }
  auto sideways = StartRead(cluster.address(), "range(10)", "dynamic", "", {"--progress", "up"});
  EXPECT_EQ(sideways->Wait(absl::Seconds(30)), 2) << sideways->stderr_text();
  EXPECT_THAT(sideways->stderr_text(),
              HasSubstr("--progress must be auto, caller or thread, got 'up'"));
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

// A read with no worker to read from says what it waits on (it used to wait silently until
// no_worker_timeout), and Ctrl-C ends its wait with the summary of what it read (it used to
// be cut off, with no output, after the stop's grace).
TEST(ServiceTest, AReadWithNoWorkerSaysWhatItWaitsOnAndStopsOnSigint) {
  Cluster cluster(0);
  Subprocess read({Binary(), "read", "--dispatcher", cluster.address(), "--pipeline",
                   "range(100) | batch(10)"});
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  // The whole notice, not its first words: the line may be read while it is written.
  while (read.stderr_text().find("no live worker") == std::string::npos && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(read.stderr_text(), HasSubstr("the dispatcher lists no live worker"));
  read.Kill(SIGINT);
  EXPECT_EQ(read.Wait(absl::Seconds(10)), 128 + SIGINT) << read.stderr_text();
  EXPECT_THAT(read.stdout_text(), HasSubstr("read 0 batches")) << read.stderr_text();
}

TEST(ServiceTest, WorkerWithUnreachableDispatcherWaitsForItThenFailsClearly) {
  const absl::Time start = absl::Now();
  Subprocess worker({Binary(), "--timeout", "2s", "worker", "--dispatcher",
                     Scheme() + "://127.0.0.1:1", "--register-timeout", "3s"});
  EXPECT_EQ(worker.Wait(absl::Seconds(30)), 1);
  EXPECT_THAT(worker.stderr_text(), HasSubstr("waiting for the dispatcher at"));
  EXPECT_THAT(worker.stderr_text(), HasSubstr("could not register with the dispatcher"));
  EXPECT_GE(absl::Now() - start, absl::Seconds(3)) << worker.stderr_text();
}

// `read --device 0` lands batches in GPU memory. With a GPU the values are exactly those of a
// host read; without one the command fails with the reason, never silently on the host.
TEST(ServiceTest, ReadIntoDeviceMemoryMatchesAHostReadOrSaysWhyNot) {
  Cluster cluster(2);
  auto read =
      StartRead(cluster.address(), "range(5000) | batch(50)", "dynamic", "", {"--device", "0"});
  const int code = read->Wait(absl::Seconds(120));
  if (code == 0) {
    SCOPED_TRACE("stderr: " + read->stderr_text() +
                 "\nstdout begins: " + read->stdout_text().substr(0, 400));
    std::map<int64_t, int> counts;
    std::istringstream lines(read->stdout_text());
    for (std::string line; std::getline(lines, line);) {
      // Named: a range-for over a member of the temporary parse() result would outlive it.
      const nlohmann::json batch = nlohmann::json::parse(line);
      for (int64_t v : batch["tensors"][0]["values"]) ++counts[v];
    }
    ExpectEachValueTimes(counts, 5000, 1);
  } else {
    EXPECT_EQ(code, 1) << read->stderr_text();
    EXPECT_THAT(read->stderr_text(), HasSubstr("needs a CUDA device: "));
    EXPECT_EQ(read->stdout_text(), "") << "nothing may be printed from a host fallback";
  }
}

// Where the device is not there, `read --device` fails before it registers its dataset or
// joins its job: it used to join, and fetch from the moment it joined, then fail on the
// device; what it had fetched by then was lost to the job's other readers.
TEST(ServiceTest, AReadOnADeviceThatIsNotThereJoinsNoJob) {
  Cluster cluster(1);
  auto device_read = StartRead(cluster.address(), "range(5000) | batch(10)", "dynamic", "shared",
                               {"--device", "0"});
  if (device_read->Wait(absl::Seconds(120)) == 0) GTEST_SKIP() << "a GPU is usable here";
  EXPECT_THAT(device_read->stderr_text(), HasSubstr("needs a CUDA device: "));
  Subprocess status({Binary(), "status", "--dispatcher", cluster.address(), "--json"});
  ASSERT_EQ(status.Wait(absl::Seconds(30)), 0) << status.stderr_text();
  const nlohmann::json parsed = nlohmann::json::parse(status.stdout_text());
  EXPECT_TRUE(parsed["jobs"].empty()) << parsed["jobs"];
  EXPECT_TRUE(parsed["datasets"].empty()) << parsed["datasets"];
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
