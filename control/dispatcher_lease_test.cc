// DispatcherState's split leases at pass boundaries: an empty pass of an endless job points
// at the next repetition, a recovery task is pointed at the repetitions it holds, passes
// beyond what split keys hold are refused, and a retried lease is answered as the first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control/dispatcher_churn_test_util.h"
#include "control/dispatcher_state.h"

namespace sluice::control {
namespace {

// A worker whose pass others exhausted before it leased any of it is pointed at the next
// pass when the job never ends: an empty pass would end its repeat() (a late worker of an
// endless job used to end at once). A finite job's pass just ends. repeat() of an input of
// unknown size (a filter) is endless too: it was not, and its late workers left the job.
TEST(DispatcherLeaseTest, EndlessJobsPointAnEmptyPassAtTheNextRepetition) {
  DispatcherState state({.elements_per_split = 10});
  const proto::GetOrCreateJobResponse endless = DynamicJob(state, "range(20) | repeat()");
  const proto::GetOrCreateJobResponse finite = DynamicJob(state, "range(20) | repeat(3)");
  const proto::GetOrCreateJobResponse filtered =
      DynamicJob(state, "range(20) | filter(is_even) | repeat()");
  const proto::WorkerHeartbeatResponse first = Heartbeat(state, "ucx://a:1");
  const proto::WorkerHeartbeatResponse late = Heartbeat(state, "ucx://b:1");
  ASSERT_EQ(first.new_tasks_size(), 3);
  ASSERT_EQ(late.new_tasks_size(), 3);
  for (int j = 0; j < 3; ++j) {
    const int64_t job_id = first.new_tasks(j).job_id();
    const bool is_endless = job_id == endless.job_id() || job_id == filtered.job_id();
    ASSERT_TRUE(is_endless || job_id == finite.job_id());
    const proto::GetSplitResponse whole = Lease(state, job_id, first.new_tasks(j).task_id(), 8);
    EXPECT_EQ(whole.splits_size(), 2);
    EXPECT_TRUE(whole.end_of_splits());
    const proto::GetSplitResponse empty = Lease(state, job_id, late.new_tasks(j).task_id(), 8);
    EXPECT_EQ(empty.splits_size(), 0);
    EXPECT_TRUE(empty.end_of_splits());
    EXPECT_EQ(empty.next_repetition(), is_endless ? 1 : 0) << (is_endless ? "endless" : "finite");
    EXPECT_FALSE(empty.source_empty()) << "others took the pass; a finite repeat goes on";
  }
  // A pass no task got any split of is an empty source: that ends a repeat().
  const proto::GetOrCreateJobResponse nothing = DynamicJob(state, "range(0) | repeat(3)");
  const proto::WorkerHeartbeatResponse third = Heartbeat(state, "ucx://c:1");
  ASSERT_EQ(third.new_tasks_size(), 4);
  ASSERT_EQ(third.new_tasks(3).job_id(), nothing.job_id());
  const proto::GetSplitResponse none =
      Lease(state, nothing.job_id(), third.new_tasks(3).task_id(), 8);
  EXPECT_EQ(none.splits_size(), 0);
  EXPECT_TRUE(none.end_of_splits());
  EXPECT_TRUE(none.source_empty());
}

// The reply to an empty lease was lost and the worker asks again (the same lease_seq): the
// answer points at the next repetition as the first did. Without it the task's repeat()
// ended, and the task with it.
TEST(DispatcherLeaseTest, ARetriedEmptyLeaseStillPointsAtTheNextRepetition) {
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
TEST(DispatcherLeaseTest, RecoveryTasksArePointedAtTheRepetitionsTheyHold) {
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
  EXPECT_FALSE(pass0.source_empty());
  const proto::GetSplitResponse reissued = Lease(state, job.job_id(), recovery, 8, 1);
  ASSERT_EQ(reissued.splits_size(), 1);
  EXPECT_EQ(reissued.splits(0).key(), leased.splits(0).key());
  const proto::GetSplitResponse after = Lease(state, job.job_id(), recovery, 8, 2);
  EXPECT_EQ(after.splits_size(), 0);
  EXPECT_TRUE(after.end_of_splits());
  EXPECT_EQ(after.next_repetition(), 0);
  EXPECT_TRUE(after.source_empty()) << "nothing more: the pass ends its repeat()";
}

// Split keys hold the repetition in their top 23 bits: a pass beyond that is refused, not
// keyed onto pass 0's splits (whose delivery reports would then be dropped).
TEST(DispatcherLeaseTest, RepetitionsBeyondWhatKeysHoldAreRefused) {
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
TEST(DispatcherLeaseTest, ARetriedRecoveryLeaseWaitsForTheJournal) {
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

}  // namespace
}  // namespace sluice::control
