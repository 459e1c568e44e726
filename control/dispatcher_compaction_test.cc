// A DispatcherState restored from its journal, compacted after every update or never: what
// a restart must neither lose nor double, whether a snapshot or the records brought it back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "control/dispatcher_state.h"
#include "control/journal_test_util.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"

namespace sluice::control {
namespace {

using journal_test::Begins;
using journal_test::Lease;
using journal_test::RestartAndLoseWorkerA;
using journal_test::TempDir;

constexpr char kWorkerA[] = "ucx://a:1";

// Registers `pipeline` and a worker at kWorkerA, then `readers` clients join a DYNAMIC job
// of it named `job_name` (or one anonymous client makes it): the job's CreateJob and its
// task's CreateTask are journaled in one change. Their replies go to *joined.
void JoinJobOnWorkerA(DispatcherState& state, const std::string& pipeline,
                      const std::string& job_name, int readers,
                      std::vector<proto::GetOrCreateJobResponse>* joined) {
  const std::string ds = *state.RegisterDataset(*engine::ParsePipeline(pipeline));
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address(kWorkerA);
  ASSERT_TRUE(state.WorkerHeartbeat(a).ok());
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(ds);
  job.set_mode(proto::DYNAMIC);
  job.set_job_name(job_name);
  for (int i = 0; i < readers; ++i) {
    absl::StatusOr<proto::GetOrCreateJobResponse> reply = state.GetOrCreateJob(job);
    ASSERT_TRUE(reply.ok()) << reply.status();
    joined->push_back(*reply);
  }
}

// An anonymous DYNAMIC job of `pipeline` on worker a (JoinJobOnWorkerA); returns its id.
int64_t JobOnWorkerA(DispatcherState& state, const std::string& pipeline) {
  std::vector<proto::GetOrCreateJobResponse> joined;
  JoinJobOnWorkerA(state, pipeline, "", 1, &joined);
  // A failure above ends the run: its callers would go on with job 0.
  if (joined.empty()) {
    std::fprintf(stderr, "JobOnWorkerA: no job was made (see the failure above)\n");
    std::abort();
  }
  return joined[0].job_id();
}

// The task worker a was given (JobOnWorkerA's), into *task.
void TaskOnWorkerA(DispatcherState& state, int64_t* task) {
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address(kWorkerA);
  absl::StatusOr<proto::WorkerHeartbeatResponse> tasks = state.WorkerHeartbeat(a);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->new_tasks_size(), 1);
  *task = tasks->new_tasks(0).task_id();
}

// Restores the state journaled in `dir`, then worker a stays silent past the worker timeout
// while b does not, and so do the job's clients past their (shortened) client timeout: b's
// recovery task leases every split a had, each given to `reissued`.
template <typename F>
void ReissueAfterARestart(const std::string& dir, DispatcherConfig config, int64_t job_id,
                          F reissued) {
  config.client_timeout = absl::Milliseconds(50);
  std::unique_ptr<DispatcherState> restarted;
  ASSERT_NO_FATAL_FAILURE(RestartAndLoseWorkerA(dir, config, &restarted));
  DispatcherState& state = *restarted;
  proto::WorkerHeartbeatRequest b;
  b.set_worker_address("ucx://b:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> survivor = state.WorkerHeartbeat(b);
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  ASSERT_GT(survivor->new_tasks_size(), 0);
  const int64_t recovery_task = survivor->new_tasks(survivor->new_tasks_size() - 1).task_id();
  for (int64_t seq = 1; seq <= 10; ++seq) {
    absl::StatusOr<proto::GetSplitResponse> lease =
        state.GetSplit(Lease(job_id, recovery_task, seq));
    ASSERT_TRUE(lease.ok()) << lease.status();
    for (const proto::Split& split : lease->splits()) reissued(split);
    if (lease->end_of_splits()) return;
  }
  ADD_FAILURE() << "the recovery task's splits did not end";
}

// Two snapshot faults made this fail. With a compaction after every update, one fell
// inside the job's creation (CreateJob journaled before the job was entered), and the
// restore failed on a task of an unknown job. And a task that leased twice in a row holds
// one merged range, which the snapshot wrote beside the last lease: both were restored,
// and the task's loss after the restart re-issued that lease's splits twice.
void ALostTaskIsReissuedOnceAfterARestart(int64_t compact_every) {
  TempDir tmp;
  const DispatcherConfig config{.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)};
  int64_t job_id = 0;
  std::vector<int64_t> leased;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state(config);
    state.AttachJournal(journal.get(), compact_every);
    job_id = JobOnWorkerA(state, "range(1000)");
    int64_t doomed = 0;
    ASSERT_NO_FATAL_FAILURE(TaskOnWorkerA(state, &doomed));
    for (int64_t seq : {1, 2}) {
      absl::StatusOr<proto::GetSplitResponse> lease = state.GetSplit(Lease(job_id, doomed, seq));
      ASSERT_TRUE(lease.ok()) << lease.status();
      for (int64_t begin : Begins(*lease)) leased.push_back(begin);
    }
    ASSERT_EQ(leased.size(), 6u);
    ASSERT_TRUE(journal->Flush().ok());
  }
  std::vector<int64_t> reissued;
  ASSERT_NO_FATAL_FAILURE(
      ReissueAfterARestart(tmp.dir(), config, job_id,
                           [&](const proto::Split& split) { reissued.push_back(split.begin()); }));
  std::sort(reissued.begin(), reissued.end());
  EXPECT_EQ(reissued, leased) << "the lost task's splits, each once";
}

// The last snapshot before a restart taken while a job was being made: whichever update of
// the making it falls on, the restart must know the job and its task.
TEST(DispatcherCompactionTest, AJobMadeAsTheJournalCompactsSurvivesARestart) {
  for (int64_t compact_every = 1; compact_every <= 4; ++compact_every) {
    SCOPED_TRACE(compact_every);
    TempDir tmp;
    int64_t job_id = 0;
    {
      std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
      DispatcherState state({});
      state.AttachJournal(journal.get(), compact_every);
      job_id = JobOnWorkerA(state, "range(100)");
      ASSERT_TRUE(journal->Flush().ok());
    }
    absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    DispatcherState state({});
    const absl::Status restored = state.Restore(*recovered);
    ASSERT_TRUE(restored.ok()) << restored;
    ASSERT_EQ(state.Status().jobs_size(), 1);
    EXPECT_EQ(state.Status().jobs(0).job_id(), job_id);
    EXPECT_EQ(state.Status().jobs(0).num_tasks(), 1);
  }
}

TEST(DispatcherCompactionTest, ALostTaskIsReissuedOnceAfterARestart) {
  for (int64_t compact_every : {0, 1}) {
    SCOPED_TRACE(compact_every);
    ALostTaskIsReissuedOnceAfterARestart(compact_every);
  }
}

// What clients reported receiving before a restart is journaled: a worker lost after it has
// its splits re-issued minus those elements. As soft state, the restarted dispatcher re-issued
// each split whole, and the 4 + 10 elements the client had were delivered twice.
TEST(DispatcherCompactionTest, DeliveriesReportedBeforeARestartAreNotReadAgain) {
  for (int64_t compact_every : {0, 1, 3}) {
    SCOPED_TRACE(compact_every);
    TempDir tmp;
    const DispatcherConfig config{.elements_per_split = 10,
                                  .worker_timeout = absl::Milliseconds(50)};
    int64_t job_id = 0;
    std::vector<int64_t> keys;
    {
      std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
      DispatcherState state(config);
      state.AttachJournal(journal.get(), compact_every);
      job_id = JobOnWorkerA(state, "range(1000)");
      int64_t task = 0;
      ASSERT_NO_FATAL_FAILURE(TaskOnWorkerA(state, &task));
      absl::StatusOr<proto::GetSplitResponse> lease = state.GetSplit(Lease(job_id, task, 1));
      ASSERT_TRUE(lease.ok()) << lease.status();
      ASSERT_EQ(lease->splits_size(), 3);
      for (const proto::Split& split : lease->splits()) keys.push_back(split.key());
      proto::ClientHeartbeatRequest client;
      client.set_job_id(job_id);
      for (auto [key, first, count] : {std::tuple<int64_t, int64_t, int64_t>{keys[0], 0, 4},
                                       {keys[1], 0, 6},
                                       {keys[1], 6, 4},
                                       {0, 0, 5},            // untracked: not journaled
                                       {keys[2], -3, 2}}) {  // no split has these
        proto::ProvenanceRun* run = client.add_delivered();
        run->set_split_key(key);
        run->set_first_ordinal(first);
        run->set_count(count);
      }
      const int64_t before = state.journaled_updates();
      ASSERT_TRUE(state.ClientHeartbeat(client).ok());
      EXPECT_EQ(state.journaled_updates(), before + 1) << "one record per report";
      ASSERT_TRUE(journal->Flush().ok());
    }
    std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> delivered;
    ASSERT_NO_FATAL_FAILURE(
        ReissueAfterARestart(tmp.dir(), config, job_id, [&](const proto::Split& split) {
          auto& ranges = delivered[split.key()];
          for (const proto::OrdinalRange& r : split.delivered())
            ranges.emplace_back(r.begin(), r.end());
        }));
    using Ranges = std::vector<std::pair<int64_t, int64_t>>;
    EXPECT_EQ(delivered.size(), 3u);
    EXPECT_EQ(delivered[keys[0]], (Ranges{{0, 4}}));
    EXPECT_EQ(delivered[keys[1]], (Ranges{{0, 10}}));
    EXPECT_EQ(delivered[keys[2]], Ranges{});
  }
}

// The journal names a job's clients (CreateJob, AddClient, ReleaseClient). A worker lost
// in a restarted dispatcher's first client timeout has its splits re-issued once the clients
// that had not released the job said what they got; before, the restarted dispatcher knew
// no client, re-issued at once, and what a client got since its last report came twice.
void AWorkerLostAfterARestartWaitsForTheJobsClients(int64_t compact_every) {
  TempDir tmp;
  int64_t job_id = 0, doomed = 0, first = 0, second = 0;
  std::vector<int64_t> keys;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({.elements_per_split = 10});
    state.AttachJournal(journal.get(), compact_every);
    std::vector<proto::GetOrCreateJobResponse> clients;
    ASSERT_NO_FATAL_FAILURE(JoinJobOnWorkerA(state, "range(1000)", "train", 3, &clients));
    job_id = clients[0].job_id();
    first = clients[0].client_id();
    second = clients[2].client_id();
    proto::ReleaseClientRequest release;  // the middle one is done reading
    release.set_job_id(job_id);
    release.set_client_id(clients[1].client_id());
    ASSERT_TRUE(state.ReleaseClient(release).ok());
    ASSERT_NO_FATAL_FAILURE(TaskOnWorkerA(state, &doomed));
    absl::StatusOr<proto::GetSplitResponse> lease = state.GetSplit(Lease(job_id, doomed, 1));
    ASSERT_TRUE(lease.ok()) << lease.status();
    for (const proto::Split& split : lease->splits()) keys.push_back(split.key());
    ASSERT_EQ(keys.size(), 3u);
    ASSERT_TRUE(journal->Flush().ok());
  }

  std::unique_ptr<DispatcherState> restarted;
  ASSERT_NO_FATAL_FAILURE(RestartAndLoseWorkerA(
      tmp.dir(), {.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)}, &restarted));
  DispatcherState& state = *restarted;
  proto::WorkerHeartbeatRequest b;
  b.set_worker_address("ucx://b:1");
  auto b_tasks = [&] {
    absl::StatusOr<proto::WorkerHeartbeatResponse> tasks = state.WorkerHeartbeat(b);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    return tasks.ok() ? tasks->new_tasks_size() : -1;
  };
  ASSERT_EQ(b_tasks(), 1) << "re-issued before the job's clients reported";

  // Each client learns of the loss, stops reading the lost task and says what it got.
  proto::ClientHeartbeatRequest report;
  report.set_job_id(job_id);
  report.set_client_id(first);
  report.add_abandoned_tasks(doomed);
  proto::ProvenanceRun* run = report.add_delivered();
  run->set_split_key(keys[1]);
  run->set_first_ordinal(0);
  run->set_count(7);
  ASSERT_TRUE(state.ClientHeartbeat(report).ok());
  ASSERT_EQ(b_tasks(), 1) << "re-issued before the second client reported";
  report.clear_delivered();
  report.set_client_id(second);
  ASSERT_TRUE(state.ClientHeartbeat(report).ok());
  // The released client is not waited for.
  absl::StatusOr<proto::WorkerHeartbeatResponse> survivor = state.WorkerHeartbeat(b);
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  ASSERT_EQ(survivor->new_tasks_size(), 2) << "the lost task's splits were not re-issued";
  const int64_t recovery_task = survivor->new_tasks(1).task_id();
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> delivered;
  for (int64_t seq = 1; seq <= 10 && delivered.size() < 3; ++seq) {
    absl::StatusOr<proto::GetSplitResponse> lease =
        state.GetSplit(Lease(job_id, recovery_task, seq));
    ASSERT_TRUE(lease.ok()) << lease.status();
    for (const proto::Split& split : lease->splits()) {
      auto& ranges = delivered[split.key()];
      for (const proto::OrdinalRange& r : split.delivered())
        ranges.emplace_back(r.begin(), r.end());
    }
    if (lease->end_of_splits()) break;
  }
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  ASSERT_EQ(delivered.size(), 3u);
  EXPECT_EQ(delivered[keys[0]], Ranges{});
  EXPECT_EQ(delivered[keys[1]], (Ranges{{0, 7}})) << "the report after the restart was missed";
  EXPECT_EQ(delivered[keys[2]], Ranges{});
}

TEST(DispatcherCompactionTest, AWorkerLostAfterARestartWaitsForTheJobsClients) {
  for (int64_t compact_every : {0, 1}) {
    SCOPED_TRACE(compact_every);
    AWorkerLostAfterARestartWaitsForTheJobsClients(compact_every);
  }
}

// An anonymous job its reader released stays released across a restart, from its record or
// from a snapshot: its workers are told to drop its tasks. (Not journaled, a restarted
// dispatcher showed it unreleased, and a static shard's workers read for nobody.)
TEST(DispatcherCompactionTest, AReleasedAnonymousJobStaysReleasedAfterARestart) {
  for (int64_t compact_every : {0, 1}) {
    SCOPED_TRACE(compact_every);
    TempDir tmp;
    int64_t task = 0;
    {
      std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
      DispatcherState state({});
      state.AttachJournal(journal.get(), compact_every);
      std::vector<proto::GetOrCreateJobResponse> made;
      ASSERT_NO_FATAL_FAILURE(JoinJobOnWorkerA(state, "range(1000)", "", 1, &made));
      ASSERT_NO_FATAL_FAILURE(TaskOnWorkerA(state, &task));
      proto::ReleaseClientRequest release;
      release.set_job_id(made[0].job_id());
      release.set_client_id(made[0].client_id());
      ASSERT_TRUE(state.ReleaseClient(release).ok());
      ASSERT_TRUE(journal->Flush().ok());
    }
    absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    DispatcherState state({});
    ASSERT_TRUE(state.Restore(*recovered).ok());
    const proto::GetStatusResponse status = state.Status();
    ASSERT_EQ(status.jobs_size(), 1);
    EXPECT_TRUE(status.jobs(0).released());
    proto::WorkerHeartbeatRequest a;
    a.set_worker_address(kWorkerA);
    a.add_current_tasks(task);
    absl::StatusOr<proto::WorkerHeartbeatResponse> told = state.WorkerHeartbeat(a);
    ASSERT_TRUE(told.ok()) << told.status();
    EXPECT_THAT(told->tasks_to_delete(), ::testing::ElementsAre(task));
    EXPECT_EQ(told->new_tasks_size(), 0);
  }
}

// A list_files pass keeps the files its first provider listed: files added and removed
// before a restart do not change which files a lost task's splits name. (Globbed again, the
// recovery task read a.txt, b.txt and c.txt instead of the b.txt, d.txt and f.txt it lost.)
TEST(DispatcherCompactionTest, APassReadsTheFilesItListedAfterARestart) {
  for (int64_t compact_every : {0, 1, 3}) {
    SCOPED_TRACE(compact_every);
    TempDir tmp;
    engine::testing::TempDir data;
    for (const char* name : {"b.txt", "d.txt", "f.txt", "h.txt"}) {
      engine::testing::WriteFile(absl::StrCat(data.path(), "/", name), "x\n");
    }
    const DispatcherConfig config{.elements_per_split = 10,
                                  .data_roots = {data.path()},
                                  .worker_timeout = absl::Milliseconds(50)};
    int64_t job_id = 0;
    std::vector<std::string> leased;
    {
      std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
      DispatcherState state(config);
      state.AttachJournal(journal.get(), compact_every);
      job_id = JobOnWorkerA(state, "list_files('*.txt') | interleave(text_line())");
      int64_t task = 0;
      ASSERT_NO_FATAL_FAILURE(TaskOnWorkerA(state, &task));
      absl::StatusOr<proto::GetSplitResponse> lease = state.GetSplit(Lease(job_id, task, 1));
      ASSERT_TRUE(lease.ok()) << lease.status();
      for (const proto::Split& split : lease->splits()) {
        leased.insert(leased.end(), split.files().begin(), split.files().end());
      }
      ASSERT_EQ(leased.size(), 3u);
      ASSERT_TRUE(journal->Flush().ok());
    }
    for (const char* name : {"a.txt", "c.txt"}) {
      engine::testing::WriteFile(absl::StrCat(data.path(), "/", name), "x\n");
    }
    std::filesystem::remove(absl::StrCat(data.path(), "/d.txt"));
    std::vector<std::string> reissued;
    ASSERT_NO_FATAL_FAILURE(
        ReissueAfterARestart(tmp.dir(), config, job_id, [&](const proto::Split& split) {
          reissued.insert(reissued.end(), split.files().begin(), split.files().end());
        }));
    EXPECT_EQ(reissued, leased);
    EXPECT_THAT(reissued,
                ::testing::ElementsAre(::testing::EndsWith("b.txt"), ::testing::EndsWith("d.txt"),
                                       ::testing::EndsWith("f.txt")));
  }
}

// The journal's RemoveJob records rebuild the collected jobs; a snapshot left them out, so
// after a compaction and a restart a collected DYNAMIC job's name was made again from its
// first pass, which a running dispatcher refuses.
TEST(DispatcherCompactionTest, ACollectedJobStaysCollectedAfterARestart) {
  TempDir tmp;
  const DispatcherConfig config{.client_timeout = absl::Milliseconds(20),
                                .job_gc_timeout = absl::Milliseconds(30)};
  std::string ds;
  int64_t job_id = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state(config);
    state.AttachJournal(journal.get(), /*compact_every=*/1);
    ds = *state.RegisterDataset(*engine::ParsePipeline("range(10)"));
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(ds);
    job.set_mode(proto::DYNAMIC);
    job.set_job_name("epoch");
    absl::StatusOr<proto::GetOrCreateJobResponse> created = state.GetOrCreateJob(job);
    ASSERT_TRUE(created.ok()) << created.status();
    job_id = created->job_id();
    proto::ReleaseClientRequest release;
    release.set_job_id(job_id);
    release.set_client_id(created->client_id());
    ASSERT_TRUE(state.ReleaseClient(release).ok());
    state.CheckLiveness(absl::Now());
    absl::SleepFor(absl::Milliseconds(60));
    state.CheckLiveness(absl::Now());  // collects it, and compacts
    ASSERT_EQ(state.Status().jobs_size(), 0);
    ASSERT_TRUE(journal->Flush().ok());
  }
  absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_TRUE(recovered->snapshot.has_value()) << "no compaction: the test proves nothing";
  DispatcherState state(config);
  ASSERT_TRUE(state.Restore(*recovered).ok());
  proto::GetOrCreateJobRequest again;
  again.set_dataset_id(ds);
  again.set_mode(proto::DYNAMIC);
  again.set_job_name("epoch");
  absl::Status reused = state.GetOrCreateJob(again).status();
  EXPECT_EQ(reused.code(), absl::StatusCode::kFailedPrecondition) << reused;
  proto::ClientHeartbeatRequest late;
  late.set_job_id(job_id);
  EXPECT_THAT(std::string(state.ClientHeartbeat(late).status().message()),
              testing::HasSubstr("garbage-collected"));
}

std::vector<std::string> Files(const proto::GetSplitResponse& lease) {
  std::vector<std::string> files;
  for (const proto::Split& split : lease.splits()) {
    files.insert(files.end(), split.files().begin(), split.files().end());
  }
  return files;
}

// An unseeded list_files(shuffle=true) was shuffled afresh by every provider the dispatcher
// made: a lease replayed after a restart (its reply lost in the crash) named other files
// than it had, and the pass went on in another order, reading some files twice and others
// never. Each job now has a journaled seed.
TEST(DispatcherCompactionTest, AnUnseededFileShuffleKeepsItsOrderAcrossARestart) {
  for (int64_t compact_every : {0, 1}) {
    SCOPED_TRACE(compact_every);
    TempDir tmp;
    const std::string data = tmp.path() + "/data";
    std::filesystem::create_directories(data);
    for (int i = 0; i < 12; ++i) engine::testing::WriteFile(absl::StrCat(data, "/part-", i), "x");
    const DispatcherConfig config{.data_roots = {data}};
    int64_t job_id = 0;
    int64_t task_id = 0;
    proto::GetSplitResponse first;
    {
      std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
      DispatcherState state(config);
      state.AttachJournal(journal.get(), compact_every);
      absl::StatusOr<std::string> ds = state.RegisterDataset(*engine::ParsePipeline(
          "list_files('part-*', shuffle=true) | interleave(text_line()) | batch(2)"));
      ASSERT_TRUE(ds.ok()) << ds.status();
      proto::GetOrCreateJobRequest job;
      job.set_dataset_id(*ds);
      job.set_mode(proto::DYNAMIC);
      job_id = state.GetOrCreateJob(job)->job_id();
      proto::WorkerHeartbeatRequest worker;
      worker.set_worker_address("ucx://a:1");
      task_id = state.WorkerHeartbeat(worker)->new_tasks(0).task_id();
      absl::StatusOr<proto::GetSplitResponse> lease = state.GetSplit(Lease(job_id, task_id, 1));
      ASSERT_TRUE(lease.ok()) << lease.status();
      first = *lease;
      ASSERT_EQ(Files(first).size(), 3u);
      ASSERT_TRUE(journal->Flush().ok());
    }
    absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    DispatcherState state(config);
    ASSERT_TRUE(state.Restore(*recovered).ok());
    absl::StatusOr<proto::GetSplitResponse> replayed = state.GetSplit(Lease(job_id, task_id, 1));
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    EXPECT_EQ(Files(*replayed), Files(first)) << "a replayed lease named other files";
    std::vector<std::string> all = Files(first);
    for (int64_t seq = 2; seq <= 10; ++seq) {
      absl::StatusOr<proto::GetSplitResponse> lease = state.GetSplit(Lease(job_id, task_id, seq));
      ASSERT_TRUE(lease.ok()) << lease.status();
      for (const std::string& file : Files(*lease)) all.push_back(file);
      if (lease->end_of_splits()) break;
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all.size(), 12u);
    EXPECT_EQ(std::unique(all.begin(), all.end()), all.end()) << "a file was read twice";
  }
}

}  // namespace
}  // namespace sluice::control
