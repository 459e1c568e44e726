// Helpers for tests of DispatcherState under churn (dispatcher_churn_test.cc,
// dispatcher_lease_test.cc): heartbeats, leases and DYNAMIC jobs driven straight through
// the state, and a worker lost past its timeout.
//
//   DispatcherState state({.elements_per_split = 10});
//   const proto::GetOrCreateJobResponse job = DynamicJob(state, "range(20)");
//   const int64_t task = Heartbeat(state, "ucx://a:1").new_tasks(0).task_id();
//   EXPECT_EQ(Lease(state, job.job_id(), task, 8).splits_size(), 2);
#ifndef SLUICE_CONTROL_DISPATCHER_CHURN_TEST_UTIL_H_
#define SLUICE_CONTROL_DISPATCHER_CHURN_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "absl/time/clock.h"
#include "control/dispatcher_state.h"
#include "engine/pipeline_text.h"

namespace sluice::control {

inline proto::WorkerHeartbeatResponse Heartbeat(DispatcherState& state,
                                                const std::string& address) {
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address);
  absl::StatusOr<proto::WorkerHeartbeatResponse> response = state.WorkerHeartbeat(request);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? *response : proto::WorkerHeartbeatResponse();
}

inline proto::GetSplitResponse Lease(DispatcherState& state, int64_t job, int64_t task, int splits,
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
inline proto::GetOrCreateJobResponse DynamicJob(DispatcherState& state, const char* pipeline,
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
inline void LoseWorkerA(DispatcherState& state, const proto::GetOrCreateJobResponse& job,
                        int64_t doomed, proto::WorkerHeartbeatResponse* survivor) {
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

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_DISPATCHER_CHURN_TEST_UTIL_H_
