// DispatcherState when a worker goes silent: its tasks are given up, clients are told, and
// once every client confirmed, the lost task's splits go to a recovery task on a live
// worker with the ordinals clients already received attached.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control/dispatcher_state.h"
#include "engine/pipeline_text.h"

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

proto::GetSplitResponse Lease(DispatcherState& state, int64_t job, int64_t task, int splits) {
  proto::GetSplitRequest request;
  request.set_job_id(job);
  request.set_task_id(task);
  request.set_max_splits(splits);
  absl::StatusOr<proto::GetSplitResponse> response = state.GetSplit(request);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? *response : proto::GetSplitResponse();
}

// A DYNAMIC job over `pipeline`, created by its first client.
proto::GetOrCreateJobResponse DynamicJob(DispatcherState& state, const char* pipeline) {
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline(pipeline)));
  request.set_mode(proto::DYNAMIC);
  absl::StatusOr<proto::GetOrCreateJobResponse> job = state.GetOrCreateJob(request);
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : proto::GetOrCreateJobResponse();
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
  const int64_t survivor_tasks_before = Heartbeat(state, "ucx://b:1").new_tasks_size();
  state.CheckLiveness(absl::Now());
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
  EXPECT_EQ(state.Status().jobs(0).lost_tasks(), 1);

  // The lost worker's task cannot lease any more.
  proto::GetSplitRequest late;
  late.set_job_id(job.job_id());
  late.set_task_id(doomed);
  EXPECT_EQ(state.GetSplit(late).status().code(), absl::StatusCode::kAborted);
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
  Heartbeat(state, "ucx://b:1");
  state.CheckLiveness(absl::Now());
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

}  // namespace
}  // namespace sluice::control
