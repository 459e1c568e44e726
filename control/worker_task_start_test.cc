// A task its worker cannot start (TaskRunner::Start fails: out of threads, or options it
// refuses) is tried again at each heartbeat for task_start_timeout; after that its readers
// are told why, as of a pipeline's error, instead of being asked to retry for ever.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "absl/time/clock.h"
#include "control/client.h"
#include "control/local_cluster.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

TEST(WorkerTaskStartTest, ReadersOfATaskThatCannotStartAreToldWhyAfterTheTimeout) {
  LocalClusterOptions options;
  options.num_workers = 1;
  options.dispatcher.transport.ucx_tls = "posix,sysv,cma,self";
  options.worker.transport.ucx_tls = "posix,sysv,cma,self";
  options.worker.slab_bytes = 64 << 10;
  options.worker.num_slabs = 4;
  options.worker.task.buffer_batches = 0;  // TaskRunner::Start refuses every task
  options.worker.task_start_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ClientOptions client_options;
  client_options.dispatcher = (*cluster)->dispatcher_address();
  client_options.transport.ucx_tls = "posix,sysv,cma,self";
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> dataset =
      (*client)->RegisterDataset(*engine::ParsePipeline("range(100) | batch(10)"));
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ReadOptions read;
  read.mode = proto::OFF;
  read.slab_bytes = 64 << 10;
  absl::StatusOr<std::unique_ptr<BatchReader>> reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  // Before, the worker answered "retry later" for as long as the reader lived.
  const absl::Time started = absl::Now();
  absl::StatusOr<std::optional<Batch>> batch = (*reader)->Next();
  EXPECT_LT(absl::Now() - started, absl::Seconds(30));
  ASSERT_FALSE(batch.ok()) << "a batch of a task that never started";
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument) << batch.status();
  EXPECT_THAT(batch.status().message(),
              ::testing::HasSubstr("could not start this task for 1s: task buffer must hold"));
}

}  // namespace
}  // namespace sluice::control
