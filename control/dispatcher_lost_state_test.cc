// A dispatcher restarted without its state (no --fault-tolerant journal) numbers datasets,
// jobs and tasks from 1 again, so a task it gives a worker can carry the id of one that
// worker still runs for the dispatcher before. The worker must serve the new task's
// pipeline, not the old one's batches under the new id. Over real UCX, in one process.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "control/client.h"
#include "control/dispatcher.h"
#include "control/worker.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

constexpr const char* kSharedMemory = "posix,sysv,cma,self";

absl::StatusOr<std::unique_ptr<Dispatcher>> StartDispatcher(uint16_t port) {
  DispatcherOptions options;
  options.bind = transport::Address{"ucx", "127.0.0.1", port};
  options.transport.ucx_tls = kSharedMemory;
  return Dispatcher::Start(options);
}

// The first values of the first `n` batches of an OFF read of `pipeline`.
std::vector<int64_t> FirstValues(const transport::Address& dispatcher, const char* pipeline,
                                 int n) {
  ClientOptions client_options;
  client_options.dispatcher = dispatcher;
  client_options.transport.ucx_tls = kSharedMemory;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return {};
  absl::StatusOr<std::string> dataset =
      (*client)->RegisterDataset(*engine::ParsePipeline(pipeline));
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  if (!dataset.ok()) return {};
  ReadOptions options;
  options.mode = proto::OFF;
  options.slab_bytes = 1 << 16;
  options.request_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<BatchReader>> reader = (*client)->Read(*dataset, options);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  std::vector<int64_t> firsts;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::optional<Batch>> batch = (*reader)->Next();
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok() || !batch->has_value()) break;
    firsts.push_back((*batch)->view().tensor(0).values<int64_t>()[0]);
  }
  return firsts;
}

TEST(DispatcherLostStateTest, AWorkerServesTheNewDispatchersTaskNotAnOldOneOfTheSameId) {
  absl::StatusOr<std::unique_ptr<Dispatcher>> before = StartDispatcher(0);
  ASSERT_TRUE(before.ok()) << before.status();
  const transport::Address address = (*before)->address();

  WorkerOptions worker_options;
  worker_options.dispatcher = address;
  worker_options.bind = transport::Address{"ucx", "127.0.0.1", 0};
  worker_options.advertise_host = "127.0.0.1";
  worker_options.transport.ucx_tls = kSharedMemory;
  worker_options.slab_bytes = 1 << 16;
  worker_options.num_slabs = 8;
  worker_options.dispatcher_timeout = absl::Seconds(2);
  worker_options.heartbeat_interval = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Start(worker_options);
  ASSERT_TRUE(worker.ok()) << worker.status();

  // Endless, so the worker still runs its task when the dispatcher goes.
  EXPECT_EQ(FirstValues(address, "range(100) | batch(10) | repeat()", 2),
            (std::vector<int64_t>{0, 10}));
  const proto::GetStatusResponse old_status = (*before)->state().Status();
  ASSERT_EQ(old_status.workers_size(), 1);
  const std::vector<int64_t> old_task_ids(old_status.workers(0).task_ids().begin(),
                                          old_status.workers(0).task_ids().end());
  before->reset();

  // The same port, no state. The trainer is back first (the worker beats every 2 s): its
  // job is made before the worker registers again, which gives the worker's task of it the
  // id of its task from before (dataset 1, client 2, job 3, task 4 both times), and the
  // worker lists that id as one it runs.
  absl::StatusOr<std::unique_ptr<Dispatcher>> after = StartDispatcher(address.port);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(FirstValues(address, "range(1000, 1100) | batch(10) | repeat()", 3),
            (std::vector<int64_t>{1000, 1010, 1020}))
      << "the worker served the old dispatcher's task under the new one's id";
  const proto::GetStatusResponse status = (*after)->state().Status();
  ASSERT_EQ(status.workers_size(), 1);
  EXPECT_EQ(std::vector<int64_t>(status.workers(0).task_ids().begin(),
                                 status.workers(0).task_ids().end()),
            old_task_ids)
      << "the new task's id is not the old one's: the test proves nothing";
}

}  // namespace
}  // namespace sluice::control
