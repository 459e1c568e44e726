// DispatcherState when a worker goes silent: its tasks are given up, clients are told, and
// once every client confirmed, the lost task's splits go to a recovery task on a live
// worker with the ordinals clients already received attached.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "control/dispatcher_state.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"

namespace sluice::control {
namespace {

using ::testing::ElementsAre;

proto::WorkerHeartbeatResponse Heartbeat(DispatcherState& state, const std::string& address) {
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address);
  absl::StatusOr<proto::WorkerHeartbeatResponse> response = state.WorkerHeartbeat(request);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? *response : proto::WorkerHeartbeatResponse();
}

proto::GetSplitResponse Lease(DispatcherState& state, int64_t job, int64_t task, int splits,
                              int64_t repetition = 0) {
  proto::GetSplitRequest request;
  request.set_job_id(job);
  request.set_task_id(task);
  request.set_max_splits(splits);
  request.set_repetition(repetition);
  absl::StatusOr<proto::GetSplitResponse> response = state.GetSplit(request);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? *response : proto::GetSplitResponse();
}

// A DYNAMIC job over `pipeline`, created by its first client (coordinated when
// `num_consumers` > 0).
proto::GetOrCreateJobResponse DynamicJob(DispatcherState& state, const char* pipeline,
                                         int32_t num_consumers = 0) {
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline(pipeline)));
  request.set_mode(proto::DYNAMIC);
  if (num_consumers > 0) {
    request.set_job_name("coordinated");
    request.set_num_consumers(num_consumers);
  }
  absl::StatusOr<proto::GetOrCreateJobResponse> job = state.GetOrCreateJob(request);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : proto::GetOrCreateJobResponse();
}

// Worker a stays silent past the worker timeout (50 ms) while b heartbeats, and the job's
// client confirms it stopped reading a's task `doomed`: b's next heartbeat, which carries
// the recovery task, goes to *survivor.
void LoseWorkerA(DispatcherState& state, const proto::GetOrCreateJobResponse& job, int64_t doomed,
                 proto::WorkerHeartbeatResponse* survivor) {
  absl::SleepFor(absl::Milliseconds(100));
  // Liveness as of just before b's heartbeat: b stays live however late the check runs.
  const absl::Time checked = absl::Now();
  Heartbeat(state, "ucx://b:1");
  state.CheckLiveness(checked);
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job.job_id());
  client.set_client_id(job.client_id());
  client.add_abandoned_tasks(doomed);
  ASSERT_TRUE(state.ClientHeartbeat(client).ok());
  *survivor = Heartbeat(state, "ucx://b:1");
}

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

// A worker whose pass others exhausted before it leased any of it is pointed at the next
// pass when the job never ends: an empty pass would end its repeat() (a late worker of an
// endless job used to end at once). A finite job's pass just ends.
TEST(DispatcherChurnTest, EndlessJobsPointAnEmptyPassAtTheNextRepetition) {
  DispatcherState state({.elements_per_split = 10});
  const proto::GetOrCreateJobResponse endless = DynamicJob(state, "range(20) | repeat()");
  const proto::GetOrCreateJobResponse finite = DynamicJob(state, "range(20) | repeat(3)");
  const proto::WorkerHeartbeatResponse first = Heartbeat(state, "ucx://a:1");
  const proto::WorkerHeartbeatResponse late = Heartbeat(state, "ucx://b:1");
  ASSERT_EQ(first.new_tasks_size(), 2);
  ASSERT_EQ(late.new_tasks_size(), 2);
  for (int j = 0; j < 2; ++j) {
    const bool is_endless = first.new_tasks(j).job_id() == endless.job_id();
    const int64_t job = first.new_tasks(j).job_id();
    const proto::GetSplitResponse whole = Lease(state, job, first.new_tasks(j).task_id(), 8);
    EXPECT_EQ(whole.splits_size(), 2);
    EXPECT_TRUE(whole.end_of_splits());
    const proto::GetSplitResponse empty = Lease(state, job, late.new_tasks(j).task_id(), 8);
    EXPECT_EQ(empty.splits_size(), 0);
    EXPECT_TRUE(empty.end_of_splits());
    EXPECT_EQ(empty.next_repetition(), is_endless ? 1 : 0) << (is_endless ? "endless" : "finite");
  }
}

// The reply to an empty lease was lost and the worker asks again (the same lease_seq): the
// answer points at the next repetition as the first did. Without it the task's repeat()
// ended, and the task with it.
TEST(DispatcherChurnTest, ARetriedEmptyLeaseStillPointsAtTheNextRepetition) {
  DispatcherState state({.elements_per_split = 10});
  const proto::GetOrCreateJobResponse endless = DynamicJob(state, "range(20) | repeat()");
  const int64_t first = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  const int64_t late = Heartbeat(state, "ucx://b:1").new_tasks(0).task_id();
  EXPECT_EQ(Lease(state, endless.job_id(), first, 8).splits_size(), 2);
  proto::GetSplitRequest request;
  request.set_job_id(endless.job_id());
  request.set_task_id(late);
  request.set_max_splits(8);
  request.set_lease_seq(1);
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<proto::GetSplitResponse> empty = state.GetSplit(request);
    ASSERT_TRUE(empty.ok()) << empty.status();
    EXPECT_EQ(empty->splits_size(), 0);
    EXPECT_TRUE(empty->end_of_splits());
    EXPECT_EQ(empty->next_repetition(), 1) << "attempt " << attempt;
  }
}

// A recovery task's pipeline counts passes from 0, but the splits re-issued to it may all
// belong to a later repetition: its empty pass 0 is pointed at that one, and the pass after
// its last repetition ends it.
TEST(DispatcherChurnTest, RecoveryTasksArePointedAtTheRepetitionsTheyHold) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)});
  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(30) | repeat()");
  const int64_t doomed = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  const int64_t other = Heartbeat(state, "ucx://b:1").new_tasks(0).task_id();
  EXPECT_EQ(Lease(state, job.job_id(), other, 8).splits_size(), 3);  // all of repetition 0
  const proto::GetSplitResponse skipped = Lease(state, job.job_id(), doomed, 8);
  ASSERT_EQ(skipped.next_repetition(), 1);
  const proto::GetSplitResponse leased = Lease(state, job.job_id(), doomed, 1, 1);
  ASSERT_EQ(leased.splits_size(), 1);

  proto::WorkerHeartbeatResponse survivor;
  ASSERT_NO_FATAL_FAILURE(LoseWorkerA(state, job, doomed, &survivor));
  ASSERT_EQ(survivor.new_tasks_size(), 2) << "its own task and the recovery task";
  const int64_t recovery = survivor.new_tasks(1).task_id();
  const proto::GetSplitResponse pass0 = Lease(state, job.job_id(), recovery, 8, 0);
  EXPECT_EQ(pass0.splits_size(), 0);
  EXPECT_EQ(pass0.next_repetition(), 1);
  const proto::GetSplitResponse reissued = Lease(state, job.job_id(), recovery, 8, 1);
  ASSERT_EQ(reissued.splits_size(), 1);
  EXPECT_EQ(reissued.splits(0).key(), leased.splits(0).key());
  const proto::GetSplitResponse after = Lease(state, job.job_id(), recovery, 8, 2);
  EXPECT_EQ(after.splits_size(), 0);
  EXPECT_TRUE(after.end_of_splits());
  EXPECT_EQ(after.next_repetition(), 0) << "nothing more: the pass ends its repeat()";
}

// Split keys hold the repetition in their top 23 bits: a pass beyond that is refused, not
// keyed onto pass 0's splits (whose delivery reports would then be dropped).
TEST(DispatcherChurnTest, RepetitionsBeyondWhatKeysHoldAreRefused) {
  DispatcherState state({.elements_per_split = 10});
  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(20) | repeat()");
  const int64_t task = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  proto::GetSplitRequest request;
  request.set_job_id(job.job_id());
  request.set_task_id(task);
  request.set_repetition(DispatcherState::kMaxRepetitions - 1);
  EXPECT_TRUE(state.GetSplit(request).ok());
  request.set_repetition(DispatcherState::kMaxRepetitions);
  absl::StatusOr<proto::GetSplitResponse> beyond = state.GetSplit(request);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kOutOfRange) << beyond.status();
  EXPECT_THAT(beyond.status().message(), ::testing::HasSubstr("passes over its source at most"));
}

// A recovery task's lease asked for again (its reply lost, or its journal write failed) is
// answered once durable, as the first answer is: it was answered at once, and a restart
// before the journal had the lease handed its splits out again.
TEST(DispatcherChurnTest, ARetriedRecoveryLeaseWaitsForTheJournal) {
  DispatcherState state({.elements_per_split = 10, .worker_timeout = absl::Milliseconds(50)});
  const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(30)");
  const int64_t doomed = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
  Heartbeat(state, "ucx://b:1");
  ASSERT_EQ(Lease(state, job.job_id(), doomed, 2).splits_size(), 2);
  proto::WorkerHeartbeatResponse survivor;
  ASSERT_NO_FATAL_FAILURE(LoseWorkerA(state, job, doomed, &survivor));
  ASSERT_GE(survivor.new_tasks_size(), 1);
  proto::GetSplitRequest request;
  request.set_job_id(job.job_id());
  request.set_task_id(survivor.new_tasks(survivor.new_tasks_size() - 1).task_id());
  request.set_max_splits(1);
  request.set_lease_seq(1);
  absl::StatusOr<proto::GetSplitResponse> leased = state.GetSplit(request);
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_EQ(leased->splits_size(), 1);
  const int64_t awaiting = state.answers_awaiting_the_journal();
  absl::StatusOr<proto::GetSplitResponse> again = state.GetSplit(request);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->splits_size(), 1);
  EXPECT_EQ(again->splits(0).key(), leased->splits(0).key());
  EXPECT_GT(state.answers_awaiting_the_journal(), awaiting) << "answered without the journal";
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

}  // namespace
}  // namespace sluice::control
