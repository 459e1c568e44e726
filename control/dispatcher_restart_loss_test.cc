// DispatcherState restarted from its journal after workers were lost or restarted: lost
// tasks stay lost, and a DYNAMIC one's splits are still re-issued, to a live worker.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "control/dispatcher_state.h"
#include "control/journal_test_util.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

using journal_test::Lease;
using journal_test::TempDir;

// A DispatcherState under `config` restored from the journal in `dir`.
std::unique_ptr<DispatcherState> Restored(const std::string& dir, const DispatcherConfig& config) {
  absl::StatusOr<Recovered> recovered = Recover(dir);
  EXPECT_TRUE(recovered.ok()) << recovered.status();
  auto state = std::make_unique<DispatcherState>(config);
  if (recovered.ok()) {
    EXPECT_TRUE(state->Restore(*recovered).ok());
  }
  return state;
}

// On `state`: a job over range(100) | batch(10) in `mode` (named `job_name`) made by
// *client, whose task on `worker` is *task; a DYNAMIC one leases splits.
void StartAPass(DispatcherState& state, proto::ProcessingMode mode,
                const proto::WorkerHeartbeatRequest& worker, const std::string& job_name,
                proto::ClientHeartbeatRequest* client, int64_t* task) {
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100) | batch(10)")));
  job.set_mode(mode);
  job.set_job_name(job_name);
  absl::StatusOr<proto::GetOrCreateJobResponse> created = state.GetOrCreateJob(job);
  ASSERT_TRUE(created.ok()) << created.status();
  client->set_job_id(created->job_id());
  client->set_client_id(created->client_id());
  absl::StatusOr<proto::WorkerHeartbeatResponse> first = state.WorkerHeartbeat(worker);
  ASSERT_TRUE(first.ok() && first->new_tasks_size() == 1);
  *task = first->new_tasks(0).task_id();
  if (mode == proto::DYNAMIC) {
    absl::StatusOr<proto::GetSplitResponse> leased =
        state.GetSplit(Lease(created->job_id(), *task, 1));
    ASSERT_TRUE(leased.ok() && leased->splits_size() > 0);
  }
}

// A worker that restarted (a new process at its address) has its old task given up and a
// new one made. That loss is journaled: after the dispatcher's own restart the old task was
// live again in the worker's list, sent to it as new, and read twice (an OFF pass; a
// DYNAMIC task's leases, which the new process asked for again). A DYNAMIC task's splits
// still wait for the clients to confirm, and then go to a recovery task.
void ARestartedWorkersOldTaskStaysLostAfterARestart(proto::ProcessingMode mode,
                                                    int64_t compact_every) {
  TempDir tmp;
  proto::WorkerHeartbeatRequest old_process;
  old_process.set_worker_address("ucx://127.0.0.1:7001");
  old_process.set_worker_uid("a-1");
  proto::WorkerHeartbeatRequest new_process = old_process;
  new_process.set_worker_uid("a-2");
  proto::ClientHeartbeatRequest client;
  int64_t old_task = 0;
  int64_t new_task = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({});
    state.AttachJournal(journal.get(), compact_every);
    ASSERT_NO_FATAL_FAILURE(StartAPass(state, mode, old_process, "passes", &client, &old_task));
    absl::StatusOr<proto::WorkerHeartbeatResponse> restarted = state.WorkerHeartbeat(new_process);
    ASSERT_TRUE(restarted.ok() && restarted->new_tasks_size() == 1);
    new_task = restarted->new_tasks(0).task_id();
    ASSERT_NE(new_task, old_task);
    ASSERT_TRUE(journal->Flush().ok());
  }
  absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  DispatcherState state({});
  ASSERT_TRUE(state.Restore(*recovered).ok());
  new_process.add_current_tasks(new_task);
  absl::StatusOr<proto::WorkerHeartbeatResponse> beat = state.WorkerHeartbeat(new_process);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->new_tasks_size(), 0) << "the old process's task was sent to the new one";
  client.add_abandoned_tasks(old_task);
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_THAT(told->lost_tasks(), ::testing::ElementsAre(old_task));
  if (mode != proto::DYNAMIC) return;
  // Confirmed by the job's one client: its splits go to a recovery task on the live worker.
  beat = state.WorkerHeartbeat(new_process);
  ASSERT_TRUE(beat.ok()) << beat.status();
  ASSERT_EQ(beat->new_tasks_size(), 1) << "the lost task's splits were not re-issued";
  EXPECT_NE(beat->new_tasks(0).task_id(), old_task);
  EXPECT_NE(beat->new_tasks(0).task_id(), new_task);
}

TEST(DispatcherRestartLossTest, ARestartedWorkersOldTaskStaysLostAfterARestart) {
  for (proto::ProcessingMode mode : {proto::OFF, proto::DYNAMIC}) {
    for (int64_t compact_every : {0, 1}) {
      SCOPED_TRACE(
          absl::StrCat(proto::ProcessingMode_Name(mode), ", compact every ", compact_every));
      ARestartedWorkersOldTaskStaysLostAfterARestart(mode, compact_every);
    }
  }
}

// The same with the worker restarted while the dispatcher was down: the uid of the process
// behind an address is journaled, so the first heartbeat after the restore tells the new
// process from the old. Before, the old task was sent to the new process as its own.
void AWorkerRestartedWhileTheDispatcherWasDownLosesItsOldTask(proto::ProcessingMode mode,
                                                              int64_t compact_every) {
  TempDir tmp;
  proto::WorkerHeartbeatRequest old_process;
  old_process.set_worker_address("ucx://127.0.0.1:7001");
  old_process.set_worker_uid("a-1");
  proto::WorkerHeartbeatRequest new_process = old_process;
  new_process.set_worker_uid("a-2");
  proto::ClientHeartbeatRequest client;
  int64_t old_task = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({});
    state.AttachJournal(journal.get(), compact_every);
    ASSERT_NO_FATAL_FAILURE(StartAPass(state, mode, old_process, "", &client, &old_task));
    old_process.add_current_tasks(old_task);
    ASSERT_TRUE(state.WorkerHeartbeat(old_process).ok());
    ASSERT_TRUE(journal->Flush().ok());
  }
  std::unique_ptr<DispatcherState> restored = Restored(tmp.dir(), {});
  DispatcherState& state = *restored;
  absl::StatusOr<proto::WorkerHeartbeatResponse> beat = state.WorkerHeartbeat(new_process);
  ASSERT_TRUE(beat.ok()) << beat.status();
  ASSERT_EQ(beat->new_tasks_size(), 1) << "the restarted pass is not read";
  const int64_t new_task = beat->new_tasks(0).task_id();
  EXPECT_NE(new_task, old_task) << "the old process's task was sent to the new one";
  client.add_abandoned_tasks(old_task);
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_THAT(told->lost_tasks(), ::testing::ElementsAre(old_task));
  if (mode != proto::DYNAMIC) return;
  new_process.add_current_tasks(new_task);
  beat = state.WorkerHeartbeat(new_process);
  ASSERT_TRUE(beat.ok()) << beat.status();
  ASSERT_EQ(beat->new_tasks_size(), 1) << "the lost task's splits were not re-issued";
  EXPECT_NE(beat->new_tasks(0).task_id(), old_task);
  EXPECT_NE(beat->new_tasks(0).task_id(), new_task);
}

TEST(DispatcherRestartLossTest, AWorkerRestartedWhileTheDispatcherWasDownLosesItsOldTask) {
  for (proto::ProcessingMode mode : {proto::OFF, proto::DYNAMIC}) {
    for (int64_t compact_every : {0, 1}) {
      SCOPED_TRACE(
          absl::StrCat(proto::ProcessingMode_Name(mode), ", compact every ", compact_every));
      AWorkerRestartedWhileTheDispatcherWasDownLosesItsOldTask(mode, compact_every);
    }
  }
}

// A journal without the worker's uid (written before it was kept, or by a worker that sent
// none) learns it at the worker's first heartbeat after the restore, so that a restart of
// the worker during the dispatcher's next outage is told apart.
TEST(DispatcherRestartLossTest, AUidFirstHeardAfterARestoreIsJournaled) {
  TempDir tmp;
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address("ucx://a:1");  // no uid, as an old journal has it
  int64_t old_task = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({});
    state.AttachJournal(journal.get(), 0);
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100)")));
    job.set_mode(proto::OFF);
    ASSERT_TRUE(state.GetOrCreateJob(job).ok());
    absl::StatusOr<proto::WorkerHeartbeatResponse> first = state.WorkerHeartbeat(a);
    ASSERT_TRUE(first.ok() && first->new_tasks_size() == 1);
    old_task = first->new_tasks(0).task_id();
    ASSERT_TRUE(journal->Flush().ok());
  }
  {
    std::unique_ptr<DispatcherState> restored = Restored(tmp.dir(), {});
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    restored->AttachJournal(journal.get(), 0);
    a.set_worker_uid("a-1");
    a.add_current_tasks(old_task);
    absl::StatusOr<proto::WorkerHeartbeatResponse> beat = restored->WorkerHeartbeat(a);
    ASSERT_TRUE(beat.ok() && beat->new_tasks_size() == 0);
    ASSERT_TRUE(journal->Flush().ok());
  }
  std::unique_ptr<DispatcherState> restored = Restored(tmp.dir(), {});
  proto::WorkerHeartbeatRequest restarted;
  restarted.set_worker_address("ucx://a:1");
  restarted.set_worker_uid("a-2");
  absl::StatusOr<proto::WorkerHeartbeatResponse> beat = restored->WorkerHeartbeat(restarted);
  ASSERT_TRUE(beat.ok()) << beat.status();
  ASSERT_EQ(beat->new_tasks_size(), 1);
  EXPECT_NE(beat->new_tasks(0).task_id(), old_task)
      << "the old process's task was sent to the new one";
}

// A worker lost before the restart whose process comes back (its network healed) gets a
// task of a job made while it was lost: a worker's loss is not journaled, so it was
// restored as live and, its uid known, no longer joined that job.
TEST(DispatcherRestartLossTest, AWorkerLostBeforeARestartJoinsTheJobsMadeMeanwhile) {
  TempDir tmp;
  const DispatcherConfig config{.worker_timeout = absl::Milliseconds(50)};
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address("ucx://a:1");
  a.set_worker_uid("a-1");
  int64_t later_job = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state(config);
    state.AttachJournal(journal.get(), 0);
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100)")));
    job.set_mode(proto::OFF);
    ASSERT_TRUE(state.GetOrCreateJob(job).ok());
    absl::StatusOr<proto::WorkerHeartbeatResponse> first = state.WorkerHeartbeat(a);
    ASSERT_TRUE(first.ok() && first->new_tasks_size() == 1);
    a.add_current_tasks(first->new_tasks(0).task_id());
    absl::SleepFor(absl::Milliseconds(100));
    state.CheckLiveness(absl::Now());
    job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(10)")));
    absl::StatusOr<proto::GetOrCreateJobResponse> made = state.GetOrCreateJob(job);
    ASSERT_TRUE(made.ok()) << made.status();
    later_job = made->job_id();
    ASSERT_TRUE(journal->Flush().ok());
  }
  std::unique_ptr<DispatcherState> restored = Restored(tmp.dir(), {});
  absl::StatusOr<proto::WorkerHeartbeatResponse> beat = restored->WorkerHeartbeat(a);
  ASSERT_TRUE(beat.ok()) << beat.status();
  std::vector<int64_t> jobs;
  for (const proto::TaskDef& task : beat->new_tasks()) {
    EXPECT_NE(task.task_id(), a.current_tasks(0)) << "its lost task was sent again";
    jobs.push_back(task.job_id());
  }
  EXPECT_THAT(jobs, ::testing::Contains(later_job));
}

// A task's loss is found by the liveness check, outside any handler, and any reply may
// tell a client of it (which then drops the task's batches): no reply goes before the loss
// is durable, or a crash meanwhile would bring the task back live with no one reading it.
TEST(DispatcherRestartLossTest, NoReplyGoesBeforeATaskLossIsDurable) {
  TempDir tmp;
  std::unique_ptr<JournalWriter> journal =
      *JournalWriter::Open(tmp.dir(), {.max_delay = absl::Seconds(3)});
  DispatcherState state({.worker_timeout = absl::Milliseconds(50)});
  state.AttachJournal(journal.get(), 0);
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100)")));
  job.set_mode(proto::DYNAMIC);
  ASSERT_TRUE(state.GetOrCreateJob(job).ok());
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address("ucx://a:1");
  ASSERT_EQ(state.WorkerHeartbeat(a)->new_tasks_size(), 1);
  ASSERT_TRUE(journal->Flush().ok());
  absl::SleepFor(absl::Milliseconds(100));
  state.CheckLiveness(absl::Now());
  ASSERT_EQ(state.Status().jobs(0).lost_tasks(), 1);
  EXPECT_TRUE(state.coordination_unsynced()) << "replies need not wait for the loss";
  ASSERT_TRUE(journal->Flush().ok());
  EXPECT_FALSE(state.coordination_unsynced()) << "durable once flushed";
}

// Journals into `dir`, under `config` (a 50 ms worker timeout): a DYNAMIC job over
// range(1000) made by *client, whose task on worker a leases splits; then a goes silent
// past the timeout and is lost. `meanwhile` runs just before the liveness check (other
// workers and clients beat). Sets *lost_task to a's task.
void JournalALostTask(const std::string& dir, const DispatcherConfig& config,
                      const std::function<void(DispatcherState&)>& meanwhile,
                      proto::ClientHeartbeatRequest* client, int64_t* lost_task) {
  std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(dir, {});
  DispatcherState state(config);
  state.AttachJournal(journal.get(), 0);
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(1000)")));
  job.set_mode(proto::DYNAMIC);
  const proto::GetOrCreateJobResponse created = *state.GetOrCreateJob(job);
  client->set_job_id(created.job_id());
  client->set_client_id(created.client_id());
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address("ucx://a:1");
  *lost_task = state.WorkerHeartbeat(a)->new_tasks(0).task_id();
  ASSERT_GT(state.GetSplit(Lease(created.job_id(), *lost_task, 1))->splits_size(), 0);
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time checked = absl::Now();  // `meanwhile`'s beats are live as of it
  meanwhile(state);
  state.CheckLiveness(checked);
  ASSERT_EQ(state.Status().jobs(0).lost_tasks(), 1);
  ASSERT_TRUE(journal->Flush().ok());
}

// A DYNAMIC task lost before a restart of the dispatcher, its splits not re-issued yet:
// after the restart they go to a worker heard from since, not to one merely restored (it
// may be the dead one: a recovery task there was lost again, its splits re-issued late).
TEST(DispatcherRestartLossTest, ALostTasksSplitsGoToAWorkerHeardFromSinceTheRestart) {
  TempDir tmp;
  const DispatcherConfig config{.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)};
  int64_t doomed = 0;
  proto::ClientHeartbeatRequest client;
  proto::WorkerHeartbeatRequest b;
  b.set_worker_address("ucx://b:1");
  auto b_joins = [&b](DispatcherState& state) {
    absl::StatusOr<proto::WorkerHeartbeatResponse> joined = state.WorkerHeartbeat(b);
    ASSERT_TRUE(joined.ok() && joined->new_tasks_size() == 1);
    b.add_current_tasks(joined->new_tasks(0).task_id());
  };
  ASSERT_NO_FATAL_FAILURE(JournalALostTask(tmp.dir(), config, b_joins, &client, &doomed));
  ASSERT_EQ(b.current_tasks_size(), 1);
  std::unique_ptr<DispatcherState> restored = Restored(tmp.dir(), config);
  DispatcherState& state = *restored;
  client.add_abandoned_tasks(doomed);
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_THAT(told->lost_tasks(), ::testing::ElementsAre(doomed));
  absl::StatusOr<proto::WorkerHeartbeatResponse> survivor = state.WorkerHeartbeat(b);
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  ASSERT_EQ(survivor->new_tasks_size(), 1) << "the lost task's splits went to silent worker a";
  EXPECT_EQ(survivor->new_tasks(0).job_id(), client.job_id());
  EXPECT_NE(survivor->new_tasks(0).task_id(), b.current_tasks(0));
}

// The same with the job's only worker lost: with no task left that is not lost, the job
// looked finished at the restore, so its lost task's splits were not waited for again and
// never read (the job said finished to its clients, a new worker got no task).
TEST(DispatcherRestartLossTest, AJobWhoseOnlyWorkerWasLostIsNotFinishedAfterARestart) {
  TempDir tmp;
  const DispatcherConfig config{.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)};
  int64_t doomed = 0;
  proto::ClientHeartbeatRequest client;
  ASSERT_NO_FATAL_FAILURE(JournalALostTask(
      tmp.dir(), config, [](DispatcherState&) {}, &client, &doomed));
  std::unique_ptr<DispatcherState> restored = Restored(tmp.dir(), config);
  DispatcherState& state = *restored;
  client.add_abandoned_tasks(doomed);
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_FALSE(told->job_finished()) << "its lost task's splits were never read";
  proto::WorkerHeartbeatRequest b;
  b.set_worker_address("ucx://b:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> joined = state.WorkerHeartbeat(b);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->new_tasks_size(), 2) << "a task of its own and the lost one's splits";
}

// After a restart the rebuilt wait counts every client restored, also one that joined
// after the loss and so never held the task (an older reader never confirms such a task):
// past a client timeout from the restore it is not waited for any more, however long that
// reader lives. Before, the lost task's splits waited on it for ever.
TEST(DispatcherRestartLossTest, TheRebuiltWaitEndsAClientTimeoutAfterTheRestore) {
  TempDir tmp;
  const DispatcherConfig config{.elements_per_split = 10,
                                .worker_timeout = absl::Milliseconds(50),
                                .client_timeout = absl::Seconds(2)};
  proto::ClientHeartbeatRequest reader;
  int64_t doomed = 0;
  auto reader_beats = [&reader](DispatcherState& state) {
    ASSERT_TRUE(state.ClientHeartbeat(reader).ok());
  };
  ASSERT_NO_FATAL_FAILURE(JournalALostTask(tmp.dir(), config, reader_beats, &reader, &doomed));
  // Workers are not lost while the test sleeps past the client timeout.
  std::unique_ptr<DispatcherState> restored =
      Restored(tmp.dir(), {.elements_per_split = 10, .client_timeout = absl::Seconds(2)});
  DispatcherState& state = *restored;
  proto::WorkerHeartbeatRequest b;
  b.set_worker_address("ucx://b:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> joined = state.WorkerHeartbeat(b);
  ASSERT_TRUE(joined.ok() && joined->new_tasks_size() == 1) << "a task of its own";
  b.add_current_tasks(joined->new_tasks(0).task_id());
  // The reader heartbeats on and never says it abandoned the lost task.
  ASSERT_TRUE(state.ClientHeartbeat(reader).ok());
  state.CheckLiveness(absl::Now());
  EXPECT_EQ(state.WorkerHeartbeat(b)->new_tasks_size(), 0) << "re-issued before the wait ended";
  absl::SleepFor(absl::Milliseconds(2200));
  ASSERT_TRUE(state.ClientHeartbeat(reader).ok());
  state.CheckLiveness(absl::Now());
  absl::StatusOr<proto::WorkerHeartbeatResponse> later = state.WorkerHeartbeat(b);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->new_tasks_size(), 1) << "the lost task's splits still wait on the reader";
}

}  // namespace
}  // namespace sluice::control
