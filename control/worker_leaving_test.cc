// A worker that stops says so to the dispatcher (WorkerHeartbeatRequest.leaving), over the
// real control channel: its task is given up at once, where a worker that died leaves it to
// the worker timeout (an hour here) and its readers wait that long for the re-issue. And
// what is left of a finite repeat is read by the workers that stay.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "control/client.h"
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

DispatcherOptions TestDispatcherOptions() {
  DispatcherOptions options;
  options.bind = transport::Address{"ucx", "127.0.0.1", 0};
  options.transport.ucx_tls = kSharedMemory;
  options.config.worker_timeout = absl::Hours(1);
  return options;
}

WorkerOptions TestWorkerOptions(const transport::Address& dispatcher) {
  WorkerOptions options;
  options.dispatcher = dispatcher;
  options.bind = transport::Address{"ucx", "127.0.0.1", 0};
  options.advertise_host = "127.0.0.1";
  options.transport.ucx_tls = kSharedMemory;
  options.slab_bytes = 1 << 16;
  options.num_slabs = 8;
  return options;
}

TEST(WorkerLeavingTest, AStoppedWorkersTaskIsGivenUpAtOnce) {
  absl::StatusOr<std::unique_ptr<Dispatcher>> dispatcher =
      Dispatcher::Start(TestDispatcherOptions());
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();

  const WorkerOptions worker_options = TestWorkerOptions((*dispatcher)->address());
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

// A worker that joins a finite repeat(20) after its first passes were read finds them taken
// and goes on to the passes still to come, as tf.data's workers do; the first worker then
// leaves. Before, the late worker's repeat() ended at its first empty pass, so when the
// first worker left, the passes after its last lease were read by no one and the job ended
// without them.
TEST(WorkerLeavingTest, AFiniteRepeatIsReadToItsEndByAWorkerThatJoinedLate) {
  DispatcherOptions dispatcher_options = TestDispatcherOptions();
  dispatcher_options.config.elements_per_split = 10;
  absl::StatusOr<std::unique_ptr<Dispatcher>> dispatcher = Dispatcher::Start(dispatcher_options);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  const WorkerOptions worker_options = TestWorkerOptions((*dispatcher)->address());
  absl::StatusOr<std::unique_ptr<Worker>> first = Worker::Start(worker_options);
  ASSERT_TRUE(first.ok()) << first.status();

  ClientOptions client_options;
  client_options.dispatcher = (*dispatcher)->address();
  client_options.transport.ucx_tls = kSharedMemory;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> dataset =
      (*client)->RegisterDataset(*engine::ParsePipeline("range(100) | repeat(20) | batch(10)"));
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ReadOptions read;
  read.mode = proto::DYNAMIC;
  read.slab_bytes = 1 << 16;
  absl::StatusOr<std::unique_ptr<BatchReader>> reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();

  std::map<int64_t, int> seen;
  int batches = 0;
  auto read_batches = [&](int limit) {
    for (; batches < limit; ++batches) {
      absl::StatusOr<std::optional<Batch>> batch = (*reader)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      if (!batch->has_value()) return;
      for (int64_t value : (*batch)->view().tensor(0).values<int64_t>()) ++seen[value];
    }
  };
  ASSERT_NO_FATAL_FAILURE(read_batches(30));  // three passes of the 20
  ASSERT_EQ(batches, 30);

  absl::StatusOr<std::unique_ptr<Worker>> late = Worker::Start(worker_options);
  ASSERT_TRUE(late.ok()) << late.status();
  DispatcherState& state = (*dispatcher)->state();
  const std::string late_address = (*late)->address();
  auto late_has_its_task = [&] {
    const proto::WorkerStatus* worker = FindWorker(state.Status(), late_address);
    return worker != nullptr && worker->task_ids_size() == 1;
  };
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
       !late_has_its_task() && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(late_has_its_task()) << "the late worker never heard of the job";
  absl::SleepFor(absl::Milliseconds(300));  // its first lease finds pass 0 taken
  first->reset();

  ASSERT_NO_FATAL_FAILURE(read_batches(1000));
  EXPECT_EQ(batches, 200);
  ASSERT_EQ(seen.size(), 100u);
  for (const auto& [value, times] : seen) EXPECT_EQ(times, 20) << "value " << value;
}

}  // namespace
}  // namespace sluice::control
