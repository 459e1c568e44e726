// DispatcherState when a worker goes silent: its tasks are given up, clients are told, and
// once every client confirmed, the lost task's splits go to a recovery task on a live
// worker with the ordinals clients already received attached.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "control/dispatcher_churn_test_util.h"
#include "control/dispatcher_state.h"
#include "control/processing_mode.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"

namespace sluice::control {
namespace {

using ::testing::ElementsAre;

// A job made while a worker is lost gets no task there: its readers waited out their
// timeout on a dead address, and failed (`sluice read` after a worker was killed). The
// worker coming back joins the job as a new one would.
TEST(DispatcherChurnTest, NewJobsGetNoTaskOnALostWorker) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)});
  Heartbeat(state, "ucx://a:1");
  Heartbeat(state, "ucx://b:1");
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time checked = absl::Now();
  Heartbeat(state, "ucx://b:1");
  state.CheckLiveness(checked);
  EXPECT_EQ(state.num_workers(), 1) << "a is lost";

  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(100)");
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job.job_id());
  client.set_client_id(job.client_id());
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok()) << told.status();
  ASSERT_EQ(told->tasks_size(), 1);
  EXPECT_EQ(told->tasks(0).worker_address(), "ucx://b:1");
  EXPECT_EQ(told->num_workers(), 1);

  const proto::WorkerHeartbeatResponse back = Heartbeat(state, "ucx://a:1");
  ASSERT_EQ(back.new_tasks_size(), 1);
  EXPECT_EQ(back.new_tasks(0).job_id(), job.job_id());
  told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_EQ(told->tasks_size(), 2);
}

TEST(DispatcherChurnTest, LostTasksSplitsAreReissuedOnceClientsConfirm) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)});
  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(100)");
  const int64_t doomed = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  Heartbeat(state, "ucx://b:1");

  const proto::GetSplitResponse leased = Lease(state, job.job_id(), doomed, 3);
  ASSERT_EQ(leased.splits_size(), 3);
  EXPECT_NE(leased.splits(0).key(), 0);
  // The client received ordinals 0..3 of the first split and all of the second.
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job.job_id());
  client.set_client_id(job.client_id());
  proto::ProvenanceRun* run = client.add_delivered();
  run->set_split_key(leased.splits(0).key());
  run->set_count(4);
  run = client.add_delivered();
  run->set_split_key(leased.splits(1).key());
  run->set_count(10);
  ASSERT_TRUE(state.ClientHeartbeat(client).ok());
  client.clear_delivered();

  absl::SleepFor(absl::Milliseconds(100));
  // Liveness as of just before b's heartbeat: b stays live however late the check runs.
  const absl::Time checked = absl::Now();
  const int64_t survivor_tasks_before = Heartbeat(state, "ucx://b:1").new_tasks_size();
  state.CheckLiveness(checked);
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok());
  EXPECT_THAT(told->lost_tasks(), ElementsAre(doomed));
  EXPECT_FALSE(told->job_finished());
  // No recovery before the client confirms it stopped reading the lost task.
  EXPECT_EQ(Heartbeat(state, "ucx://b:1").new_tasks_size(), survivor_tasks_before);

  client.add_abandoned_tasks(doomed);
  ASSERT_TRUE(state.ClientHeartbeat(client).ok());
  proto::WorkerHeartbeatResponse survivor = Heartbeat(state, "ucx://b:1");
  ASSERT_EQ(survivor.new_tasks_size(), survivor_tasks_before + 1);
  const int64_t recovery = survivor.new_tasks(survivor.new_tasks_size() - 1).task_id();
  const proto::GetSplitResponse reissued = Lease(state, job.job_id(), recovery, 8);
  ASSERT_EQ(reissued.splits_size(), 3);
  EXPECT_TRUE(reissued.end_of_splits());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reissued.splits(i).key(), leased.splits(i).key());
    EXPECT_EQ(reissued.splits(i).begin(), leased.splits(i).begin());
  }
  ASSERT_EQ(reissued.splits(0).delivered_size(), 1);
  EXPECT_EQ(reissued.splits(0).delivered(0).begin(), 0);
  EXPECT_EQ(reissued.splits(0).delivered(0).end(), 4);
  EXPECT_EQ(reissued.splits(1).delivered(0).end(), 10);
  EXPECT_EQ(reissued.splits(2).delivered_size(), 0);
  EXPECT_EQ(state.Status().jobs(0).reissued_splits(), 3);
  EXPECT_EQ(state.Status().jobs(0).reissued_splits_partly_read(), 2) << "the third was unread";
  EXPECT_EQ(state.Status().jobs(0).lost_tasks(), 1);

  // The lost worker's task cannot lease any more.
  proto::GetSplitRequest late;
  late.set_job_id(job.job_id());
  late.set_task_id(doomed);
  EXPECT_EQ(state.GetSplit(late).status().code(), absl::StatusCode::kAborted);
}

// A reader that stops reports with its release what it received since its last heartbeat:
// the dispatcher stops waiting for a released reader, so those elements were re-issued,
// and read again by the job's other readers, once the worker that served them was lost.
TEST(DispatcherChurnTest, AReleasingReadersLastDeliveriesAreNotReadAgain) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)});
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100)")));
  request.set_mode(proto::DYNAMIC);
  request.set_job_name("shared");
  absl::StatusOr<proto::GetOrCreateJobResponse> leaving = state.GetOrCreateJob(request);
  absl::StatusOr<proto::GetOrCreateJobResponse> staying = state.GetOrCreateJob(request);
  ASSERT_TRUE(leaving.ok() && staying.ok());
  ASSERT_EQ(leaving->job_id(), staying->job_id());
  const int64_t doomed = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  Heartbeat(state, "ucx://b:1");
  const proto::GetSplitResponse leased = Lease(state, leaving->job_id(), doomed, 2);
  ASSERT_EQ(leased.splits_size(), 2);

  proto::ReleaseClientRequest release;
  release.set_job_id(leaving->job_id());
  release.set_client_id(leaving->client_id());
  proto::ProvenanceRun* run = release.add_delivered();
  run->set_split_key(leased.splits(0).key());
  run->set_count(10);
  ASSERT_TRUE(state.ReleaseClient(release).ok());

  proto::WorkerHeartbeatResponse survivor;
  LoseWorkerA(state, *staying, doomed, &survivor);
  ASSERT_GE(survivor.new_tasks_size(), 1);
  const int64_t recovery = survivor.new_tasks(survivor.new_tasks_size() - 1).task_id();
  const proto::GetSplitResponse reissued = Lease(state, leaving->job_id(), recovery, 8);
  ASSERT_EQ(reissued.splits_size(), 2);
  ASSERT_EQ(reissued.splits(0).delivered_size(), 1) << "the released reader's elements";
  EXPECT_EQ(reissued.splits(0).delivered(0).begin(), 0);
  EXPECT_EQ(reissued.splits(0).delivered(0).end(), 10);
  EXPECT_EQ(reissued.splits(1).delivered_size(), 0);
}

TEST(DispatcherChurnTest, DeliveredRangesMergeAcrossReports) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)});
  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(100)");
  const int64_t doomed = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  const proto::GetSplitResponse leased = Lease(state, job.job_id(), doomed, 1);
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job.job_id());
  client.set_client_id(job.client_id());
  for (auto [first, count] :
       {std::pair{5, 2}, std::pair{0, 2}, std::pair{2, 1}, std::pair{8, 1}, std::pair{6, 2}}) {
    proto::ProvenanceRun* run = client.add_delivered();
    run->set_split_key(leased.splits(0).key());
    run->set_first_ordinal(first);
    run->set_count(count);
  }
  ASSERT_TRUE(state.ClientHeartbeat(client).ok());
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time checked = absl::Now();  // before b's heartbeat (see above)
  Heartbeat(state, "ucx://b:1");
  state.CheckLiveness(checked);
  client.clear_delivered();
  client.add_abandoned_tasks(doomed);
  ASSERT_TRUE(state.ClientHeartbeat(client).ok());
  proto::WorkerHeartbeatResponse survivor = Heartbeat(state, "ucx://b:1");
  const int64_t recovery = survivor.new_tasks(survivor.new_tasks_size() - 1).task_id();
  const proto::GetSplitResponse reissued = Lease(state, job.job_id(), recovery, 8);
  ASSERT_EQ(reissued.splits_size(), 1);
  // [0,2) + [2,3) + [5,7) + [6,8) + [8,9) = [0,3) and [5,9).
  ASSERT_EQ(reissued.splits(0).delivered_size(), 2);
  EXPECT_EQ(reissued.splits(0).delivered(0).begin(), 0);
  EXPECT_EQ(reissued.splits(0).delivered(0).end(), 3);
  EXPECT_EQ(reissued.splits(0).delivered(1).begin(), 5);
  EXPECT_EQ(reissued.splits(0).delivered(1).end(), 9);
}

// Coordinated DYNAMIC jobs re-issue a lost task's splits too (they used to drop them): the
// recovery task enters the rotation after the horizon, flagged so that consumers expect its
// end, and leaves the rotation when its worker reports it finished.
TEST(DispatcherChurnTest, CoordinatedJobsReissueALostTasksSplitsInTheRotation) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)});
  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(1000) | repeat()", 2);
  const int64_t doomed = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  Heartbeat(state, "ucx://b:1");
  const proto::GetSplitResponse leased = Lease(state, job.job_id(), doomed, 2);
  ASSERT_EQ(leased.splits_size(), 2);
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job.job_id());
  client.set_client_id(job.client_id());
  client.set_current_round(100);
  proto::ProvenanceRun* run = client.add_delivered();  // one batch of the first split
  run->set_split_key(leased.splits(0).key());
  run->set_count(8);
  ASSERT_TRUE(state.ClientHeartbeat(client).ok());
  client.clear_delivered();

  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time checked = absl::Now();  // before b's heartbeat (see above)
  Heartbeat(state, "ucx://b:1");
  state.CheckLiveness(checked);
  client.add_abandoned_tasks(doomed);
  client.set_current_round(200);
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok());
  const proto::WorkerHeartbeatResponse survivor = Heartbeat(state, "ucx://b:1");
  ASSERT_EQ(survivor.new_tasks_size(), 2) << "its own task and a recovery task";
  const int64_t recovery = survivor.new_tasks(1).task_id();
  EXPECT_EQ(survivor.new_tasks(1).num_consumers(), 2);
  const proto::GetSplitResponse reissued = Lease(state, job.job_id(), recovery, 8);
  ASSERT_EQ(reissued.splits_size(), 2);
  ASSERT_EQ(reissued.splits(0).delivered_size(), 1);
  EXPECT_EQ(reissued.splits(0).delivered(0).end(), 8);

  told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok());
  const int64_t horizon = told->round_horizon();
  const proto::TaskInfo* info = nullptr;
  for (const proto::TaskInfo& task : told->tasks()) {
    if (task.task_id() == recovery) info = &task;
  }
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->recovery());
  EXPECT_GT(info->starting_round(), 200) << "after the rounds consumers were told of";
  EXPECT_EQ(info->ending_round(), 0);

  proto::WorkerHeartbeatRequest done;
  done.set_worker_address("ucx://b:1");
  done.add_current_tasks(recovery);
  done.add_finished_tasks(recovery);
  ASSERT_TRUE(state.WorkerHeartbeat(done).ok());
  told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok());
  for (const proto::TaskInfo& task : told->tasks()) {
    if (task.task_id() == recovery) {
      EXPECT_EQ(task.ending_round(), horizon + 1);
      EXPECT_FALSE(task.lost());
    }
  }
}

// A consumer that went silent is forgotten with its round: a task made when no task is live
// starts where the live consumers wait, not at the round a gone consumer stopped at (it
// started at round 20 here, and the consumers waited at 900 for a task serving from 20).
TEST(DispatcherChurnTest, AGoneConsumersRoundNoLongerPlacesNewTasks) {
  DispatcherState state({.worker_timeout = absl::Seconds(1),
                         .client_timeout = absl::Hours(1),
                         .job_gc_timeout = absl::Hours(10)});
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(10) | repeat()")));
  request.set_mode(proto::OFF);
  request.set_job_name("rounds");
  request.set_num_consumers(2);
  auto join = [&](int32_t index) {
    request.set_consumer_index(index);
    absl::StatusOr<proto::GetOrCreateJobResponse> joined = state.GetOrCreateJob(request);
    EXPECT_TRUE(joined.ok()) << joined.status();
    return joined.ok() ? *joined : proto::GetOrCreateJobResponse();
  };
  auto beat = [&](const proto::GetOrCreateJobResponse& client, int64_t round) {
    proto::ClientHeartbeatRequest heartbeat;
    heartbeat.set_job_id(client.job_id());
    heartbeat.set_client_id(client.client_id());
    heartbeat.set_current_round(round);
    absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(heartbeat);
    EXPECT_TRUE(told.ok()) << told.status();
    return told.ok() ? *told : proto::ClientHeartbeatResponse();
  };
  const proto::GetOrCreateJobResponse first = join(0);
  const proto::GetOrCreateJobResponse gone = join(1);
  ASSERT_EQ(Heartbeat(state, "ucx://a:1").new_tasks_size(), 1);
  beat(first, 900);
  beat(gone, 20);

  // Two hours later both consumers and worker a have been silent: all are given up.
  state.CheckLiveness(absl::Now() + absl::Hours(2));
  beat(first, 900);  // the first consumer was only slow, and speaks again
  const proto::GetOrCreateJobResponse replacement = join(1);
  EXPECT_EQ(replacement.starting_round(), 900);
  const proto::WorkerHeartbeatResponse b = Heartbeat(state, "ucx://b:1");
  ASSERT_EQ(b.new_tasks_size(), 1);
  const proto::ClientHeartbeatResponse told = beat(first, 900);
  const proto::TaskInfo* placed = nullptr;
  for (const proto::TaskInfo& task : told.tasks()) {
    if (task.task_id() == b.new_tasks(0).task_id()) placed = &task;
  }
  ASSERT_NE(placed, nullptr);
  EXPECT_EQ(placed->starting_round(), 900) << "placed by the gone consumer's round";
}

// A lost task's re-issued splits name the files the pass listed, though files were added
// and removed since (new data written into the directory): globbed again, a recovery task
// read a.txt and b.txt instead of the b.txt and d.txt its predecessor was handed.
TEST(DispatcherChurnTest, ALostTasksFilesAreReissuedAsThePassListedThem) {
  engine::testing::TempDir data;
  for (const char* name : {"b.txt", "d.txt", "f.txt"}) {
    engine::testing::WriteFile(absl::StrCat(data.path(), "/", name), "x\n");
  }
  DispatcherState state({.data_roots = {data.path()}, .worker_timeout = absl::Milliseconds(50)});
  const proto::GetOrCreateJobResponse job =
      DynamicJob(state, "list_files('*.txt') | interleave(text_line())");
  const int64_t doomed = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  Heartbeat(state, "ucx://b:1");
  const proto::GetSplitResponse leased = Lease(state, job.job_id(), doomed, 2);
  ASSERT_EQ(leased.splits_size(), 2);
  engine::testing::WriteFile(absl::StrCat(data.path(), "/a.txt"), "x\n");
  std::filesystem::remove(absl::StrCat(data.path(), "/d.txt"));

  proto::WorkerHeartbeatResponse survivor;
  ASSERT_NO_FATAL_FAILURE(LoseWorkerA(state, job, doomed, &survivor));
  ASSERT_GE(survivor.new_tasks_size(), 1);
  const proto::GetSplitResponse reissued =
      Lease(state, job.job_id(), survivor.new_tasks(survivor.new_tasks_size() - 1).task_id(), 8);
  ASSERT_EQ(reissued.splits_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(reissued.splits(i).SerializeAsString(), leased.splits(i).SerializeAsString())
        << reissued.splits(i).ShortDebugString() << " for " << leased.splits(i).ShortDebugString();
  }
}

// A worker shutting down says so in a last heartbeat (WorkerHeartbeatRequest.leaving): its
// task is lost at once, not a worker timeout (an hour here) later, and its splits go to a
// recovery task once the job's client confirms, as after missed heartbeats.
TEST(DispatcherChurnTest, ALeavingWorkersSplitsAreReissuedWithoutAWait) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Hours(1)});
  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(100)");
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address("ucx://a:1");
  a.set_worker_uid("a's process");
  absl::StatusOr<proto::WorkerHeartbeatResponse> joined = state.WorkerHeartbeat(a);
  ASSERT_TRUE(joined.ok() && joined->new_tasks_size() == 1);
  const int64_t leaving = joined->new_tasks(0).task_id();
  Heartbeat(state, "ucx://b:1");
  const proto::GetSplitResponse leased = Lease(state, job.job_id(), leaving, 2);
  ASSERT_EQ(leased.splits_size(), 2);

  a.set_leaving(true);
  absl::StatusOr<proto::WorkerHeartbeatResponse> last = state.WorkerHeartbeat(a);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->new_tasks_size(), 0);
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job.job_id());
  client.set_client_id(job.client_id());
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok());
  EXPECT_THAT(told->lost_tasks(), ElementsAre(leaving));
  client.add_abandoned_tasks(leaving);
  ASSERT_TRUE(state.ClientHeartbeat(client).ok());
  const proto::WorkerHeartbeatResponse survivor = Heartbeat(state, "ucx://b:1");
  ASSERT_GE(survivor.new_tasks_size(), 1);
  const int64_t recovery = survivor.new_tasks(survivor.new_tasks_size() - 1).task_id();
  ASSERT_NE(recovery, leaving);
  const proto::GetSplitResponse reissued = Lease(state, job.job_id(), recovery, 8);
  ASSERT_EQ(reissued.splits_size(), 2);
  EXPECT_EQ(reissued.splits(0).key(), leased.splits(0).key());
  EXPECT_EQ(reissued.splits(1).key(), leased.splits(1).key());
}

// The old process's last word, late, after a new one joined at its address: the new one
// and its task stay.
TEST(DispatcherChurnTest, AnOldProcessLeavingLateDoesNotLoseTheNewOne) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Hours(1)});
  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(100)");
  proto::WorkerHeartbeatRequest old_process;
  old_process.set_worker_address("ucx://a:1");
  old_process.set_worker_uid("old");
  ASSERT_TRUE(state.WorkerHeartbeat(old_process).ok());
  proto::WorkerHeartbeatRequest new_process = old_process;
  new_process.set_worker_uid("new");
  absl::StatusOr<proto::WorkerHeartbeatResponse> restarted = state.WorkerHeartbeat(new_process);
  ASSERT_TRUE(restarted.ok() && restarted->new_tasks_size() == 1);
  const int64_t new_task = restarted->new_tasks(0).task_id();

  old_process.set_leaving(true);
  ASSERT_TRUE(state.WorkerHeartbeat(old_process).ok());
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job.job_id());
  client.set_client_id(job.client_id());
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok());
  EXPECT_THAT(told->lost_tasks(), ::testing::Not(::testing::Contains(new_task)));
  ASSERT_EQ(state.Status().workers_size(), 1);
  EXPECT_FALSE(state.Status().workers(0).lost());
}

// An OFF pass starts over when its worker restarts. The old process's goodbye must not make
// the job look finished meanwhile (the other worker's pass is done): the restarted worker
// would then get no task and its pass would never be read.
TEST(DispatcherChurnTest, AWorkerLeavingMidPassOfAnOffJobReadsItAgainOnRestart) {
  DispatcherState state({.worker_timeout = absl::Hours(1)});
  proto::GetOrCreateJobRequest off;
  off.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100)")));
  off.set_mode(proto::OFF);
  ASSERT_TRUE(state.GetOrCreateJob(off).ok());
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address("ucx://a:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> a_joined = state.WorkerHeartbeat(a);
  ASSERT_TRUE(a_joined.ok() && a_joined->new_tasks_size() == 1);
  proto::WorkerHeartbeatRequest b;
  b.set_worker_address("ucx://b:1");
  b.set_worker_uid("old");
  absl::StatusOr<proto::WorkerHeartbeatResponse> b_joined = state.WorkerHeartbeat(b);
  ASSERT_TRUE(b_joined.ok() && b_joined->new_tasks_size() == 1);
  a.add_current_tasks(a_joined->new_tasks(0).task_id());
  a.add_finished_tasks(a_joined->new_tasks(0).task_id());
  ASSERT_TRUE(state.WorkerHeartbeat(a).ok());

  b.add_current_tasks(b_joined->new_tasks(0).task_id());
  b.set_leaving(true);
  ASSERT_TRUE(state.WorkerHeartbeat(b).ok());
  EXPECT_FALSE(state.Status().jobs(0).finished()) << "b's pass was not read";
  proto::WorkerHeartbeatRequest restarted;
  restarted.set_worker_address("ucx://b:1");
  restarted.set_worker_uid("new");
  absl::StatusOr<proto::WorkerHeartbeatResponse> again = state.WorkerHeartbeat(restarted);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->new_tasks_size(), 1) << "the restarted worker reads its pass again";
}

// A worker whose static share (or OFF pass) was read to its end there is lost, then comes
// back as a new process (a static one on another port of its host), while the other worker
// still reads. Its finished task was taken for lost: a static job then waited for that
// share for ever (and named no one it waited for), and the worker that came back read its
// share, or its pass, a second time. Its clients are still told it is gone, so that they
// stop asking that worker for it.
TEST(DispatcherChurnTest, AFinishedShareIsNeitherLostWithItsWorkerNorReadAgain) {
  for (const proto::ProcessingMode mode : {proto::DATA, proto::OFF}) {
    SCOPED_TRACE(ProcessingModeName(mode));
    DispatcherConfig config{.worker_timeout = absl::Milliseconds(50)};
    if (mode == proto::DATA) config.worker_addresses = {"a", "b"};
    DispatcherState state(config);
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100)")));
    job.set_mode(mode);
    absl::StatusOr<proto::GetOrCreateJobResponse> created = state.GetOrCreateJob(job);
    ASSERT_TRUE(created.ok()) << created.status();
    proto::WorkerHeartbeatRequest a;
    a.set_worker_address("ucx://a:1");
    a.set_worker_uid("a");
    absl::StatusOr<proto::WorkerHeartbeatResponse> a_joined = state.WorkerHeartbeat(a);
    ASSERT_TRUE(a_joined.ok() && a_joined->new_tasks_size() == 1);
    proto::WorkerHeartbeatRequest b;
    b.set_worker_address("ucx://b:1");
    b.set_worker_uid("old");
    absl::StatusOr<proto::WorkerHeartbeatResponse> b_joined = state.WorkerHeartbeat(b);
    ASSERT_TRUE(b_joined.ok() && b_joined->new_tasks_size() == 1);
    const int64_t b_task = b_joined->new_tasks(0).task_id();
    b.add_current_tasks(b_task);
    b.add_finished_tasks(b_task);
    ASSERT_TRUE(state.WorkerHeartbeat(b).ok());

    absl::SleepFor(absl::Milliseconds(100));
    const absl::Time checked = absl::Now();
    a.add_current_tasks(a_joined->new_tasks(0).task_id());
    ASSERT_TRUE(state.WorkerHeartbeat(a).ok());
    state.CheckLiveness(checked);  // b is lost, a is not
    EXPECT_EQ(state.Status().jobs(0).lost_tasks(), 0) << "b's finished task taken for lost";
    proto::ClientHeartbeatRequest client;
    client.set_job_id(created->job_id());
    client.set_client_id(created->client_id());
    absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
    ASSERT_TRUE(told.ok()) << told.status();
    EXPECT_THAT(told->gone_tasks(), ::testing::ElementsAre(b_task)) << "readers would ask b";
    EXPECT_THAT(told->lost_tasks(), ::testing::ElementsAre()) << "nothing of it is lost";

    proto::WorkerHeartbeatRequest back;
    back.set_worker_address(mode == proto::DATA ? "ucx://b:2" : "ucx://b:1");
    back.set_worker_uid("new");
    absl::StatusOr<proto::WorkerHeartbeatResponse> again = state.WorkerHeartbeat(back);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->new_tasks_size(), 0) << "b reads its share a second time";

    a.add_finished_tasks(a_joined->new_tasks(0).task_id());
    ASSERT_TRUE(state.WorkerHeartbeat(a).ok());
    EXPECT_TRUE(state.Status().jobs(0).finished()) << "the job waits for b's share";
  }
}

// A worker that read its OFF pass to the end leaves (shutting down) while another still
// reads: its readers are told the task is gone, as when it is lost; it left quietly, and a
// reader that had not had the task's end asked the gone worker until its request timeout.
TEST(DispatcherChurnTest, AWorkerLeavingAfterItsPassTellsReadersTheTaskIsGone) {
  DispatcherState state({.worker_timeout = absl::Hours(1)});
  proto::GetOrCreateJobRequest off;
  off.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100)")));
  off.set_mode(proto::OFF);
  absl::StatusOr<proto::GetOrCreateJobResponse> created = state.GetOrCreateJob(off);
  ASSERT_TRUE(created.ok()) << created.status();
  proto::WorkerHeartbeatRequest a;
  a.set_worker_address("ucx://a:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> a_joined = state.WorkerHeartbeat(a);
  ASSERT_TRUE(a_joined.ok() && a_joined->new_tasks_size() == 1);
  ASSERT_EQ(Heartbeat(state, "ucx://b:1").new_tasks_size(), 1);  // b reads on
  a.add_current_tasks(a_joined->new_tasks(0).task_id());
  a.add_finished_tasks(a_joined->new_tasks(0).task_id());
  a.set_leaving(true);
  ASSERT_TRUE(state.WorkerHeartbeat(a).ok());
  proto::ClientHeartbeatRequest client;
  client.set_job_id(created->job_id());
  client.set_client_id(created->client_id());
  absl::StatusOr<proto::ClientHeartbeatResponse> told = state.ClientHeartbeat(client);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_FALSE(told->job_finished()) << "b still reads";
  EXPECT_THAT(told->gone_tasks(), ::testing::ElementsAre(a_joined->new_tasks(0).task_id()));
}

}  // namespace
}  // namespace sluice::control
