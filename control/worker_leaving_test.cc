// A worker that stops says so to the dispatcher (WorkerHeartbeatRequest.leaving), over the
// real control channel: its task is given up at once, where a worker that died leaves it to
// the worker timeout (an hour here) and its readers wait that long for the re-issue.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "control/dispatcher.h"
#include "control/worker.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

constexpr const char* kSharedMemory = "posix,sysv,cma,self";

const proto::WorkerStatus* FindWorker(const proto::GetStatusResponse& status,
                                      const std::string& address) {
  for (const proto::WorkerStatus& worker : status.workers()) {
    if (worker.address() == address) return &worker;
  }
  return nullptr;
}

TEST(WorkerLeavingTest, AStoppedWorkersTaskIsGivenUpAtOnce) {
  DispatcherOptions dispatcher_options;
  dispatcher_options.bind = transport::Address{"ucx", "127.0.0.1", 0};
  dispatcher_options.transport.ucx_tls = kSharedMemory;
  dispatcher_options.config.worker_timeout = absl::Hours(1);
  absl::StatusOr<std::unique_ptr<Dispatcher>> dispatcher = Dispatcher::Start(dispatcher_options);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();

  WorkerOptions worker_options;
  worker_options.dispatcher = (*dispatcher)->address();
  worker_options.bind = transport::Address{"ucx", "127.0.0.1", 0};
  worker_options.advertise_host = "127.0.0.1";
  worker_options.transport.ucx_tls = kSharedMemory;
  worker_options.slab_bytes = 1 << 16;
  worker_options.num_slabs = 8;
  absl::StatusOr<std::unique_ptr<Worker>> staying = Worker::Start(worker_options);
  ASSERT_TRUE(staying.ok()) << staying.status();
  absl::StatusOr<std::unique_ptr<Worker>> leaving = Worker::Start(worker_options);
  ASSERT_TRUE(leaving.ok()) << leaving.status();

  // Endless: the task is unfinished when its worker goes.
  DispatcherState& state = (*dispatcher)->state();
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(1000) | repeat()")));
  request.set_mode(proto::DYNAMIC);
  ASSERT_TRUE(state.GetOrCreateJob(request).ok());
  const std::string gone = (*leaving)->address();
  auto has_its_task = [&] {
    const proto::WorkerStatus* worker = FindWorker(state.Status(), gone);
    return worker != nullptr && worker->task_ids_size() == 1;
  };
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
       !has_its_task() && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(has_its_task()) << "the worker never heard of its task";

  leaving->reset();
  const proto::GetStatusResponse status = state.Status();
  const proto::WorkerStatus* left = FindWorker(status, gone);
  ASSERT_NE(left, nullptr);
  EXPECT_TRUE(left->lost()) << "the stopped worker still counts as live";
  ASSERT_EQ(status.jobs_size(), 1);
  EXPECT_EQ(status.jobs(0).lost_tasks(), 1);
  const proto::WorkerStatus* other = FindWorker(status, (*staying)->address());
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->lost());
}

}  // namespace
}  // namespace sluice::control
