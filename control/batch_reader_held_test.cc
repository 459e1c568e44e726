// Batches the caller keeps hold their landing slabs: a caller that keeps every one of them
// while it asks for the next is told so after request_timeout, instead of waiting for ever.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <thread>

#include "absl/time/clock.h"
#include "control/client.h"
#include "control/local_cluster.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

constexpr const char* kSharedMemory = "posix,sysv,cma,self";

// A one-worker cluster over shared memory and a client of it, reading range(100) | batch(10)
// in OFF mode with one request in flight and 64 KiB slabs.
class BatchReaderHeldTest : public ::testing::Test {
 protected:
  static ReadOptions OneRequestAtATime() {
    ReadOptions read;
    read.mode = proto::OFF;
    read.slab_bytes = 64 << 10;
    read.max_outstanding_requests = 1;
    return read;
  }

  void StartReading(const ReadOptions& read, std::unique_ptr<BatchReader>* reader) {
    LocalClusterOptions options;
    options.num_workers = 1;
    options.dispatcher.transport.ucx_tls = kSharedMemory;
    options.worker.transport.ucx_tls = kSharedMemory;
    options.worker.slab_bytes = 64 << 10;
    options.worker.num_slabs = 4;
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    ClientOptions client_options;
    client_options.dispatcher = cluster_->dispatcher_address();
    client_options.transport.ucx_tls = kSharedMemory;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    absl::StatusOr<std::string> dataset =
        client_->RegisterDataset(*engine::ParsePipeline("range(100) | batch(10)"));
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    absl::StatusOr<std::unique_ptr<BatchReader>> started = client_->Read(*dataset, read);
    ASSERT_TRUE(started.ok()) << started.status();
    *reader = *std::move(started);
  }

  // Members: they outlive the reader and batches of the test body, as a Client must.
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
};

TEST_F(BatchReaderHeldTest, ACallerThatKeepsEverySlabIsToldSo) {
  ReadOptions read = OneRequestAtATime();
  read.prefetch_batches = 1;  // two slabs
  read.request_timeout = absl::Seconds(1);
  std::unique_ptr<BatchReader> reader;
  ASSERT_NO_FATAL_FAILURE(StartReading(read, &reader));

  absl::StatusOr<std::optional<Batch>> first = reader->Next();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  absl::StatusOr<std::optional<Batch>> second = reader->Next();
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status();
  // Both slabs are the caller's now. Before, this Next() waited for ever.
  const absl::Time start = absl::Now();
  absl::StatusOr<std::optional<Batch>> third = reader->Next();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  ASSERT_FALSE(third.ok()) << "a third batch landed in a slab the caller holds";
  EXPECT_EQ(third.status().code(), absl::StatusCode::kFailedPrecondition) << third.status();
  EXPECT_THAT(third.status().message(),
              ::testing::HasSubstr("every landing slab the read has (2) has been held by a Batch "
                                   "the caller kept for 1s"));
}

// A caller whose other thread gives its batch back within request_timeout reads on, however
// long every slab was held in all: the wait counts from the last time one was free.
TEST_F(BatchReaderHeldTest, ACallerWhoseOtherThreadGivesBatchesBackReadsOn) {
  ReadOptions read = OneRequestAtATime();
  read.prefetch_batches = 0;  // one slab
  read.request_timeout = absl::Seconds(2);
  std::unique_ptr<BatchReader> reader;
  ASSERT_NO_FATAL_FAILURE(StartReading(read, &reader));
  absl::StatusOr<std::optional<Batch>> first = reader->Next();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  std::optional<Batch> held = **std::move(first);
  for (int step = 0; step < 3; ++step) {  // 3 x 1.2 s held in all, past request_timeout
    std::thread trainer([&held] {
      absl::SleepFor(absl::Milliseconds(1200));
      held.reset();
    });
    absl::StatusOr<std::optional<Batch>> next = reader->Next();
    trainer.join();
    ASSERT_TRUE(next.ok()) << "step " << step << ": " << next.status();
    ASSERT_TRUE(next->has_value()) << "step " << step;
    held = **std::move(next);
  }
}

// A caller that holds its batch through a step longer than request_timeout, and lets it go
// before it asks again, reads on: only a wait in Next() counts. The heartbeat's own look at
// the slabs failed the read meanwhile.
TEST_F(BatchReaderHeldTest, ALongStepBetweenNextsIsNoWait) {
  ReadOptions read = OneRequestAtATime();
  read.prefetch_batches = 0;  // one slab
  read.request_timeout = absl::Seconds(1);
  std::unique_ptr<BatchReader> reader;
  ASSERT_NO_FATAL_FAILURE(StartReading(read, &reader));
  for (int step = 0; step < 2; ++step) {
    absl::StatusOr<std::optional<Batch>> batch = reader->Next();
    ASSERT_TRUE(batch.ok()) << "step " << step << ": " << batch.status();
    ASSERT_TRUE(batch->has_value());
    absl::SleepFor(absl::Milliseconds(1500));  // the step, holding the batch
  }
}

}  // namespace
}  // namespace sluice::control
