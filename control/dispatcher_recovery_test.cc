// A DispatcherState journaled into a real journal directory and rebuilt from it: what a
// fault-tolerant dispatcher restarted after kill -9 sees.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/dispatcher_state.h"
#include "control/journal_test_util.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

using journal_test::Begins;
using journal_test::Lease;
using journal_test::LoseWorkerA;
using journal_test::RestartAndLoseWorkerA;
using journal_test::TempDir;

struct Journaled {
  int64_t job_id = 0;
  int64_t task_id = 0;
  std::string dataset_id;
  proto::GetSplitResponse third_lease;
};

// Registers a dataset, a named DYNAMIC job and a worker, and leases splits 0..8 in three
// leases of three splits of 10 elements.
Journaled RunLeases(DispatcherState& state) {
  Journaled out;
  out.dataset_id = *state.RegisterDataset(*engine::ParsePipeline("range(1000) | batch(7)"));
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(out.dataset_id);
  job.set_mode(proto::DYNAMIC);
  job.set_job_name("train");
  out.job_id = state.GetOrCreateJob(job)->job_id();
  proto::WorkerHeartbeatRequest heartbeat;
  heartbeat.set_worker_address("ucx://127.0.0.1:7000");
  out.task_id = state.WorkerHeartbeat(heartbeat)->new_tasks(0).task_id();
  for (int64_t seq = 1; seq <= 3; ++seq) {
    absl::StatusOr<proto::GetSplitResponse> lease =
        state.GetSplit(Lease(out.job_id, out.task_id, seq));
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (seq == 3) out.third_lease = *lease;
  }
  return out;
}

// RunLeases on a state journaled into `dir`, compacted every `compact_every` updates (0:
// never); how many updates it journaled goes to `journaled_updates`.
void JournalLeases(const std::string& dir, int64_t compact_every, Journaled* before,
                   int64_t* journaled_updates = nullptr) {
  std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(dir, {});
  DispatcherState state({.elements_per_split = 10});
  state.AttachJournal(journal.get(), compact_every);
  *before = RunLeases(state);
  if (journaled_updates != nullptr) *journaled_updates = state.journaled_updates();
  ASSERT_TRUE(journal->Flush().ok());
}

void ExpectRestoredStateContinues(const std::string& dir, const Journaled& before,
                                  int64_t compact_every) {
  absl::StatusOr<Recovered> recovered = Recover(dir);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  DispatcherState state({.elements_per_split = 999});  // the journaled split size wins
  ASSERT_TRUE(state.Restore(*recovered).ok());

  // A retried lease (its reply was lost in the crash) gets the same splits.
  absl::StatusOr<proto::GetSplitResponse> retried =
      state.GetSplit(Lease(before.job_id, before.task_id, 3));
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(Begins(*retried), Begins(before.third_lease));
  EXPECT_EQ(Begins(*retried), (std::vector<int64_t>{60, 70, 80}));
  // The next lease continues at the journaled cursor, with the journaled split size.
  absl::StatusOr<proto::GetSplitResponse> next =
      state.GetSplit(Lease(before.job_id, before.task_id, 4));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Begins(*next), (std::vector<int64_t>{90, 100, 110}))
      << "compact_every " << compact_every;

  // The named job, its task and the dataset survived; new ids do not collide.
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(before.dataset_id);
  job.set_mode(proto::DYNAMIC);
  job.set_job_name("train");
  absl::StatusOr<proto::GetOrCreateJobResponse> rejoined = state.GetOrCreateJob(job);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  EXPECT_EQ(rejoined->job_id(), before.job_id);
  EXPECT_GT(rejoined->client_id(), before.task_id);
  proto::ClientHeartbeatRequest client;
  client.set_job_id(before.job_id);
  absl::StatusOr<proto::ClientHeartbeatResponse> tasks = state.ClientHeartbeat(client);
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->tasks_size(), 1);
  EXPECT_EQ(tasks->tasks(0).task_id(), before.task_id);
  EXPECT_EQ(state.num_workers(), 1);
}

TEST(DispatcherRecoveryTest, RestoredStateRepeatsLostLeasesAndContinuesTheCursor) {
  TempDir tmp;
  Journaled before;
  int64_t journaled_updates = 0;
  ASSERT_NO_FATAL_FAILURE(JournalLeases(tmp.dir(), 0, &before, &journaled_updates));
  EXPECT_GE(journaled_updates, 7);
  ExpectRestoredStateContinues(tmp.dir(), before, 0);
}

// The journal holds the clients that joined, not whether they are still reading (a crash
// loses who went silent): a restored job's readers are told to its workers only once
// a client timeout has passed (lest the workers forget live readers that have not beaten
// yet), while a job created after the restart is listed at once.
TEST(DispatcherRecoveryTest, RestoredJobsListTheirClientsOnlyAfterAClientTimeout) {
  TempDir tmp;
  Journaled before;
  ASSERT_NO_FATAL_FAILURE(JournalLeases(tmp.dir(), 0, &before));
  absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  DispatcherState state({.client_timeout = absl::Seconds(2)});
  ASSERT_TRUE(state.Restore(*recovered).ok());
  proto::GetOrCreateJobRequest fresh;
  fresh.set_dataset_id(before.dataset_id);
  fresh.set_mode(proto::OFF);
  const absl::StatusOr<proto::GetOrCreateJobResponse> created = state.GetOrCreateJob(fresh);
  ASSERT_TRUE(created.ok()) << created.status();
  proto::WorkerHeartbeatRequest worker;
  worker.set_worker_address("ucx://127.0.0.1:7000");
  worker.add_current_tasks(before.task_id);
  auto listed = [&]() {
    std::map<int64_t, std::vector<int64_t>> clients;
    absl::StatusOr<proto::WorkerHeartbeatResponse> response = state.WorkerHeartbeat(worker);
    EXPECT_TRUE(response.ok()) << response.status();
    for (const proto::JobClients& job : response->job_clients()) {
      clients[job.job_id()].assign(job.client_ids().begin(), job.client_ids().end());
    }
    for (const proto::TaskDef& task : response->new_tasks()) {
      worker.add_current_tasks(task.task_id());
    }
    return clients;
  };
  std::map<int64_t, std::vector<int64_t>> at_once = listed();
  at_once = listed();  // the first beat gave the worker the new job's task
  EXPECT_FALSE(at_once.contains(before.job_id)) << "restored: its clients are not known yet";
  ASSERT_TRUE(at_once.contains(created->job_id()));
  EXPECT_THAT(at_once[created->job_id()], ::testing::ElementsAre(created->client_id()));
  absl::SleepFor(absl::Milliseconds(2100));
  proto::ClientHeartbeatRequest beat;
  beat.set_job_id(created->job_id());
  beat.set_client_id(created->client_id());
  ASSERT_TRUE(state.ClientHeartbeat(beat).ok());
  std::map<int64_t, std::vector<int64_t>> later = listed();
  ASSERT_TRUE(later.contains(before.job_id)) << "a client timeout since the restart";
  EXPECT_TRUE(later[before.job_id].empty()) << "its reader never came back";
}

TEST(DispatcherRecoveryTest, SnapshotsTakenByCompactionRestoreTheSameState) {
  TempDir tmp;
  Journaled before;
  ASSERT_NO_FATAL_FAILURE(JournalLeases(tmp.dir(), 2, &before));
  bool has_snapshot = false;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.dir())) {
    has_snapshot |= entry.path().filename().string().rfind("snapshot_", 0) == 0;
  }
  EXPECT_TRUE(has_snapshot);
  ExpectRestoredStateContinues(tmp.dir(), before, 2);
}

// A worker lost, its splits handed to a recovery task that leased one of them, then the
// dispatcher dies: the restarted one knows the recovery task, answers its retried lease with
// the same split and hands it exactly the rest (with what clients already received).
// Run once replaying updates only and once from snapshots (compaction every 3 updates).
void RecoveryTaskSurvivesARestart(int64_t compact_every) {
  TempDir tmp;
  int64_t job_id = 0;
  int64_t recovery_task = 0;
  std::vector<int64_t> lost_begins;
  proto::GetSplitResponse first_recovery_lease;
  int tasks_before_restart = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)});
    state.AttachJournal(journal.get(), compact_every);
    const std::string ds = *state.RegisterDataset(*engine::ParsePipeline("range(1000)"));
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(ds);
    job.set_mode(proto::DYNAMIC);
    const proto::GetOrCreateJobResponse created = *state.GetOrCreateJob(job);
    job_id = created.job_id();
    proto::WorkerHeartbeatRequest a;
    a.set_worker_address("ucx://a:1");
    const int64_t doomed = state.WorkerHeartbeat(a)->new_tasks(0).task_id();
    const proto::GetSplitResponse leased = *state.GetSplit(Lease(job_id, doomed, 1));
    lost_begins = Begins(leased);
    proto::ClientHeartbeatRequest client;
    client.set_job_id(job_id);
    client.set_client_id(created.client_id());
    proto::ProvenanceRun* run = client.add_delivered();
    run->set_split_key(leased.splits(0).key());
    run->set_count(4);
    ASSERT_TRUE(state.ClientHeartbeat(client).ok());
    client.clear_delivered();
    ASSERT_NO_FATAL_FAILURE(LoseWorkerA(state));
    client.add_abandoned_tasks(doomed);
    ASSERT_TRUE(state.ClientHeartbeat(client).ok());
    proto::WorkerHeartbeatRequest b;
    b.set_worker_address("ucx://b:1");
    proto::WorkerHeartbeatResponse survivor = *state.WorkerHeartbeat(b);
    recovery_task = survivor.new_tasks(survivor.new_tasks_size() - 1).task_id();
    proto::GetSplitRequest one = Lease(job_id, recovery_task, 1);
    one.set_max_splits(1);
    first_recovery_lease = *state.GetSplit(one);
    ASSERT_EQ(first_recovery_lease.splits_size(), 1);
    tasks_before_restart = state.Status().jobs(0).num_tasks();
    ASSERT_TRUE(journal->Flush().ok());
  }
  // The lost worker stays silent past the restarted dispatcher's timeout, the survivor does
  // not. Its task was lost and recovered before the restart: recovering it again would hand
  // out its splits a second time beside the first recovery task. (The loss of an
  // uncoordinated task was not journaled, so it was.)
  std::unique_ptr<DispatcherState> restarted;
  ASSERT_NO_FATAL_FAILURE(RestartAndLoseWorkerA(
      tmp.dir(), {.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)}, &restarted));
  DispatcherState& state = *restarted;
  ASSERT_EQ(state.Status().jobs_size(), 1);
  EXPECT_EQ(state.Status().jobs(0).num_tasks(), tasks_before_restart)
      << "the lost task was recovered twice";
  EXPECT_EQ(state.Status().jobs(0).lost_tasks(), 1);
  // The status counts what was re-issued from the restored recovery task.
  ASSERT_EQ(state.Status().jobs_size(), 1);
  EXPECT_EQ(state.Status().jobs(0).reissued_splits(), static_cast<int64_t>(lost_begins.size()));
  EXPECT_EQ(state.Status().jobs(0).reissued_splits_partly_read(), 1);

  proto::GetSplitRequest retry = Lease(job_id, recovery_task, 1);
  retry.set_max_splits(1);
  absl::StatusOr<proto::GetSplitResponse> again = state.GetSplit(retry);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), first_recovery_lease.SerializeAsString());
  ASSERT_EQ(again->splits(0).delivered_size(), 1);
  EXPECT_EQ(again->splits(0).delivered(0).end(), 4);
  absl::StatusOr<proto::GetSplitResponse> rest = state.GetSplit(Lease(job_id, recovery_task, 2));
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_TRUE(rest->end_of_splits());
  std::vector<int64_t> all = Begins(*again);
  for (int64_t begin : Begins(*rest)) all.push_back(begin);
  EXPECT_EQ(all, lost_begins) << "exactly the lost task's splits, once";
}

TEST(DispatcherRecoveryTest, RecoveryTasksAndTheirLeasesSurviveARestart) {
  for (int64_t compact_every : {0, 3}) {
    SCOPED_TRACE(compact_every);
    RecoveryTaskSurvivesARestart(compact_every);
  }
}

// Coordinated reads: consumers assign rounds to workers from the task list and the round
// horizon they were told. Both must survive a restart: a worker that registers afterwards
// must enter past every round a consumer may have assigned, and a lost worker's task must
// leave the rotation where consumers were told it does (before this was journaled, a
// restarted dispatcher put a newcomer at round 0 and forgot the lost task's end: both
// inside rounds that consumers at round 5000 had assigned).
struct Rotation {
  int64_t starting_round;
  int64_t ending_round;
  bool lost;
  bool operator==(const Rotation&) const = default;
};
std::map<int64_t, Rotation> RotationOf(const proto::ClientHeartbeatResponse& response) {
  std::map<int64_t, Rotation> rotation;
  for (const proto::TaskInfo& task : response.tasks()) {
    rotation[task.task_id()] = {task.starting_round(), task.ending_round(), task.lost()};
  }
  return rotation;
}

proto::WorkerHeartbeatRequest WorkerBeat(int port, const std::string& uid) {
  proto::WorkerHeartbeatRequest beat;
  beat.set_worker_address(absl::StrCat("ucx://127.0.0.1:", port));
  beat.set_worker_uid(uid);
  return beat;
}

// A coordinated OFF job named "rounds" read by two consumers; the first client's reply.
absl::StatusOr<proto::GetOrCreateJobResponse> CreateRoundsJob(DispatcherState& state) {
  proto::GetOrCreateJobRequest job;
  SLUICE_ASSIGN_OR_RETURN(
      *job.mutable_dataset_id(),
      state.RegisterDataset(*engine::ParsePipeline("range(1000) | batch(8) | repeat()")));
  job.set_mode(proto::OFF);
  job.set_job_name("rounds");
  job.set_num_consumers(2);
  return state.GetOrCreateJob(job);
}

void CoordinatedRoundsSurviveARestart(int64_t compact_every) {
  TempDir tmp;
  proto::ClientHeartbeatRequest heartbeat;
  std::map<int64_t, Rotation> told;
  int64_t told_horizon = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({});
    state.AttachJournal(journal.get(), compact_every);
    absl::StatusOr<proto::GetOrCreateJobResponse> created = CreateRoundsJob(state);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE(state.WorkerHeartbeat(WorkerBeat(7000, "a")).ok());
    ASSERT_TRUE(state.WorkerHeartbeat(WorkerBeat(7001, "b")).ok());
    heartbeat.set_job_id(created->job_id());
    heartbeat.set_client_id(created->client_id());
    heartbeat.set_current_round(5000);
    ASSERT_TRUE(state.ClientHeartbeat(heartbeat).ok());
    // Worker a restarts: its task is lost, and its new process gets a task.
    ASSERT_TRUE(state.WorkerHeartbeat(WorkerBeat(7000, "a2")).ok());
    absl::StatusOr<proto::ClientHeartbeatResponse> response = state.ClientHeartbeat(heartbeat);
    ASSERT_TRUE(response.ok()) << response.status();
    told = RotationOf(*response);
    told_horizon = response->round_horizon();
    EXPECT_EQ(told_horizon, 5000 + DispatcherState::kRoundWindow);
    ASSERT_EQ(told.size(), 3u);
    ASSERT_EQ(std::count_if(told.begin(), told.end(), [](const auto& t) { return t.second.lost; }),
              1);
    ASSERT_TRUE(journal->Flush().ok());
    EXPECT_FALSE(state.coordination_unsynced()) << "durable once flushed";
  }
  absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  DispatcherState state({});
  ASSERT_TRUE(state.Restore(*recovered).ok());
  // A newcomer, before any consumer heartbeat reached the restarted dispatcher.
  absl::StatusOr<proto::WorkerHeartbeatResponse> joined =
      state.WorkerHeartbeat(WorkerBeat(7002, "c"));
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->new_tasks_size(), 1);
  const int64_t newcomer = joined->new_tasks(0).task_id();
  heartbeat.set_current_round(5001);
  absl::StatusOr<proto::ClientHeartbeatResponse> after = state.ClientHeartbeat(heartbeat);
  ASSERT_TRUE(after.ok()) << after.status();
  std::map<int64_t, Rotation> rotation = RotationOf(*after);
  ASSERT_EQ(rotation.size(), 4u);
  EXPECT_GT(rotation[newcomer].starting_round, told_horizon)
      << "the newcomer enters inside rounds consumers assigned";
  rotation.erase(newcomer);
  EXPECT_TRUE(rotation == told) << "the tasks consumers knew keep their rounds";
  for (const auto& [id, task] : told) {
    if (task.lost) {
      EXPECT_EQ(task.ending_round, told_horizon + 1);
    }
  }
  EXPECT_GE(after->round_horizon(), told_horizon);
}

TEST(DispatcherRecoveryTest, CoordinatedRoundsSurviveARestart) {
  for (int64_t compact_every : {0, 2}) {
    SCOPED_TRACE(compact_every);
    CoordinatedRoundsSurviveARestart(compact_every);
  }
}

// A coordinated task that read all it was given (a recovery task) leaves the rotation as a
// lost one does, but it was not lost: a restarted dispatcher used to tell consumers it was.
void AFinishedTaskIsNotLostAfterARestart(int64_t compact_every) {
  TempDir tmp;
  proto::ClientHeartbeatRequest heartbeat;
  std::map<int64_t, Rotation> told;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({});
    state.AttachJournal(journal.get(), compact_every);
    absl::StatusOr<proto::GetOrCreateJobResponse> created = CreateRoundsJob(state);
    ASSERT_TRUE(created.ok()) << created.status();
    absl::StatusOr<proto::WorkerHeartbeatResponse> a = state.WorkerHeartbeat(WorkerBeat(7000, "a"));
    ASSERT_TRUE(a.ok() && a->new_tasks_size() == 1);
    ASSERT_TRUE(state.WorkerHeartbeat(WorkerBeat(7001, "b")).ok());
    heartbeat.set_job_id(created->job_id());
    heartbeat.set_client_id(created->client_id());
    heartbeat.set_current_round(10);
    ASSERT_TRUE(state.ClientHeartbeat(heartbeat).ok());
    proto::WorkerHeartbeatRequest done = WorkerBeat(7000, "a");
    done.add_current_tasks(a->new_tasks(0).task_id());
    done.add_finished_tasks(a->new_tasks(0).task_id());
    ASSERT_TRUE(state.WorkerHeartbeat(done).ok());
    absl::StatusOr<proto::ClientHeartbeatResponse> response = state.ClientHeartbeat(heartbeat);
    ASSERT_TRUE(response.ok()) << response.status();
    told = RotationOf(*response);
    ASSERT_EQ(told.size(), 2u);
    const Rotation& finished = told[a->new_tasks(0).task_id()];
    ASSERT_GT(finished.ending_round, 0) << "it left the rotation";
    ASSERT_FALSE(finished.lost);
    ASSERT_TRUE(journal->Flush().ok());
  }
  absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  DispatcherState state({});
  ASSERT_TRUE(state.Restore(*recovered).ok());
  absl::StatusOr<proto::ClientHeartbeatResponse> after = state.ClientHeartbeat(heartbeat);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(RotationOf(*after) == told) << "the finished task shows as it did";
  EXPECT_EQ(after->lost_tasks_size(), 0);
}

TEST(DispatcherRecoveryTest, AFinishedTaskIsNotLostAfterARestart) {
  for (int64_t compact_every : {0, 2}) {
    SCOPED_TRACE(compact_every);
    AFinishedTaskIsNotLostAfterARestart(compact_every);
  }
}

// A pass every task has left is pruned, also of a lost task's leases (they went to its
// recovery task): a snapshot wrote those as cursors, and a restore took the oldest one for
// the first live pass, so a new worker was handed the rest of pass 0 again.
TEST(DispatcherRecoveryTest, APrunedPassStaysPrunedThroughASnapshot) {
  TempDir tmp;
  const DispatcherConfig config{.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)};
  int64_t job_id = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state(config);
    state.AttachJournal(journal.get(), /*compact_every=*/1);
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(20) | repeat()")));
    job.set_mode(proto::DYNAMIC);
    const proto::GetOrCreateJobResponse created = *state.GetOrCreateJob(job);
    job_id = created.job_id();
    proto::WorkerHeartbeatRequest a;
    a.set_worker_address("ucx://a:1");
    const int64_t doomed = state.WorkerHeartbeat(a)->new_tasks(0).task_id();
    proto::WorkerHeartbeatRequest b;
    b.set_worker_address("ucx://b:1");
    const int64_t survivor = state.WorkerHeartbeat(b)->new_tasks(0).task_id();
    proto::GetSplitRequest lease = Lease(job_id, doomed, 1);
    lease.set_max_splits(1);
    ASSERT_EQ(state.GetSplit(lease)->splits_size(), 1);  // split 0 of pass 0
    ASSERT_NO_FATAL_FAILURE(LoseWorkerA(state));
    proto::ClientHeartbeatRequest client;
    client.set_job_id(job_id);
    client.set_client_id(created.client_id());
    client.add_abandoned_tasks(doomed);
    ASSERT_TRUE(state.ClientHeartbeat(client).ok());
    proto::WorkerHeartbeatResponse given = *state.WorkerHeartbeat(b);
    const int64_t recovery = given.new_tasks(given.new_tasks_size() - 1).task_id();
    ASSERT_NE(recovery, survivor);
    ASSERT_EQ(state.GetSplit(Lease(job_id, recovery, 1))->splits_size(), 1);
    b.add_current_tasks(survivor);
    b.add_current_tasks(recovery);
    b.add_finished_tasks(recovery);
    ASSERT_TRUE(state.WorkerHeartbeat(b).ok());
    for (int64_t repetition = 0; repetition < 3; ++repetition) {
      proto::GetSplitRequest pass = Lease(job_id, survivor, 10 + repetition);
      pass.set_repetition(repetition);
      ASSERT_TRUE(state.GetSplit(pass).ok());
    }
    ASSERT_TRUE(journal->Flush().ok());
  }
  absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_TRUE(recovered->snapshot.has_value()) << "the test needs a compaction";
  DispatcherState state(config);
  ASSERT_TRUE(state.Restore(*recovered).ok());
  proto::WorkerHeartbeatRequest c;
  c.set_worker_address("ucx://c:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> joined = state.WorkerHeartbeat(c);
  ASSERT_TRUE(joined.ok() && joined->new_tasks_size() == 1);
  absl::StatusOr<proto::GetSplitResponse> pass0 =
      state.GetSplit(Lease(job_id, joined->new_tasks(0).task_id(), 1));
  ASSERT_TRUE(pass0.ok()) << pass0.status();
  EXPECT_EQ(pass0->splits_size(), 0) << "pass 0, read long ago, was handed out again";
  EXPECT_TRUE(pass0->end_of_splits());
}

// A worker lost when a job was made got no task of it; lost is not journaled, so after a
// restart it looked live and known, and on its next heartbeat still got none: a static
// shard of it would have been waited for for ever. Its first heartbeat to the restarted
// dispatcher now joins it to the jobs it lacks.
TEST(DispatcherRecoveryTest, AJobMadeWhileAWorkerWasLostReachesItAfterARestart) {
  TempDir tmp;
  int64_t job_id = 0;
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address("ucx://127.0.0.1:7001");
  a.set_worker_uid("a-1");
  proto::WorkerHeartbeatRequest b;
  b.set_worker_address("ucx://127.0.0.1:7002");
  b.set_worker_uid("b-1");
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({.worker_timeout = absl::Milliseconds(50)});
    state.AttachJournal(journal.get(), /*compact_every=*/0);
    ASSERT_TRUE(state.WorkerHeartbeat(a).ok());
    ASSERT_TRUE(state.WorkerHeartbeat(b).ok());
    absl::SleepFor(absl::Milliseconds(100));
    const absl::Time checked = absl::Now();
    ASSERT_TRUE(state.WorkerHeartbeat(b).ok());
    state.CheckLiveness(checked);
    ASSERT_EQ(state.num_workers(), 1) << "a is lost";
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100) | batch(10)")));
    job.set_mode(proto::OFF);
    job.set_job_name("late");
    job_id = state.GetOrCreateJob(job)->job_id();
    ASSERT_TRUE(journal->Flush().ok());
  }
  absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  DispatcherState state({});
  ASSERT_TRUE(state.Restore(*recovered).ok());
  absl::StatusOr<proto::WorkerHeartbeatResponse> back = state.WorkerHeartbeat(a);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->new_tasks_size(), 1);
  EXPECT_EQ(back->new_tasks(0).job_id(), job_id);
  // b had its task all along and gets no second one.
  absl::StatusOr<proto::WorkerHeartbeatResponse> other = state.WorkerHeartbeat(b);
  ASSERT_TRUE(other.ok()) << other.status();
  const int b_tasks = std::count_if(other->new_tasks().begin(), other->new_tasks().end(),
                                    [&](const proto::TaskDef& t) { return t.job_id() == job_id; });
  EXPECT_EQ(b_tasks, 1);
}

// A restart from records alone (no snapshot) brings passes back as cursors, with no
// provider made yet: a worker new to an endless job is pointed at the newest of them at
// once. It was pointed one pass a lease past each exhausted one.
TEST(DispatcherRecoveryTest, ANewWorkerAfterARestartGoesToTheNewestPassAtOnce) {
  TempDir tmp;
  const DispatcherConfig config{.elements_per_split = 10};
  int64_t job_id = 0;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state(config);
    state.AttachJournal(journal.get(), /*compact_every=*/0);
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(20) | repeat()")));
    job.set_mode(proto::DYNAMIC);
    job_id = state.GetOrCreateJob(job)->job_id();
    proto::WorkerHeartbeatRequest a;
    a.set_worker_address("ucx://a:1");
    const int64_t task = state.WorkerHeartbeat(a)->new_tasks(0).task_id();
    for (int64_t repetition = 0; repetition < 5; ++repetition) {
      proto::GetSplitRequest pass = Lease(job_id, task, 1 + repetition);
      pass.set_repetition(repetition);
      ASSERT_EQ(state.GetSplit(pass)->splits_size(), 2);  // the whole pass
    }
    ASSERT_TRUE(journal->Flush().ok());
  }
  absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_FALSE(recovered->snapshot.has_value());
  DispatcherState state(config);
  ASSERT_TRUE(state.Restore(*recovered).ok());
  proto::WorkerHeartbeatRequest c;
  c.set_worker_address("ucx://c:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> joined = state.WorkerHeartbeat(c);
  ASSERT_TRUE(joined.ok() && joined->new_tasks_size() == 1);
  absl::StatusOr<proto::GetSplitResponse> pass0 =
      state.GetSplit(Lease(job_id, joined->new_tasks(0).task_id(), 1));
  ASSERT_TRUE(pass0.ok()) << pass0.status();
  EXPECT_EQ(pass0->splits_size(), 0);
  EXPECT_EQ(pass0->next_repetition(), 4);
}

}  // namespace
}  // namespace sluice::control
