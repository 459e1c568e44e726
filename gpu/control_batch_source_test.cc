// ControlBatchSource over a real local cluster (UCX shared memory): batches come through in
// order and intact, and dropping HostBatch::owner gives the landing slab back (ten batches fit
// through a two-slab pool). With a GPU, the same batches arrive on the device.
#include "gpu/control_batch_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control/client.h"
#include "control/local_cluster.h"
#include "engine/batch_layout.h"
#include "engine/pipeline_text.h"
#include "gpu/cuda_probe.h"
#include "gpu/device_batch_reader.h"
#include "gpu/gpu_test_util.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sluice::gpu {
namespace {

constexpr char kTls[] = "posix,sysv,cma,self";

class ControlBatchSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    control::LocalClusterOptions cluster_options;
    cluster_options.num_workers = 1;
    cluster_options.dispatcher.transport.ucx_tls = kTls;
    cluster_options.worker.transport.ucx_tls = kTls;
    cluster_options.worker.slab_bytes = 1 << 20;
    auto cluster = control::LocalCluster::Start(cluster_options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    control::ClientOptions client_options;
    client_options.dispatcher = cluster_->dispatcher_address();
    client_options.transport.ucx_tls = kTls;
    auto client = control::Client::Connect(client_options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // range(81920) | batch(8192): ten batches of 64 KiB (above the rendezvous threshold),
  // read through a pool of two landing slabs.
  std::unique_ptr<ControlBatchSource> Read() {
    auto pipeline = engine::ParsePipeline("range(81920) | batch(8192)");
    EXPECT_TRUE(pipeline.ok());
    auto dataset = client_->RegisterDataset(*pipeline);
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    if (!dataset.ok()) return nullptr;
    control::ReadOptions read;
    read.mode = proto::OFF;
    read.slab_bytes = 1 << 20;
    read.max_outstanding_requests = 1;
    read.prefetch_batches = 1;
    auto reader = client_->Read(*dataset, read);
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return nullptr;
    return std::make_unique<ControlBatchSource>(std::move(*reader), read);
  }

  std::unique_ptr<control::LocalCluster> cluster_;
  std::unique_ptr<control::Client> client_;
};

TEST_F(ControlBatchSourceTest, PassesBatchesThroughAndReturnsSlabs) {
  std::unique_ptr<ControlBatchSource> source = Read();
  ASSERT_NE(source, nullptr);
  int64_t next_value = 0;
  int64_t batches = 0;
  while (true) {
    absl::StatusOr<std::optional<HostBatch>> batch = source->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    EXPECT_EQ((*batch)->index, batches);
    EXPECT_FALSE((*batch)->worker.empty());
    ASSERT_NE((*batch)->owner, nullptr);
    absl::StatusOr<engine::BatchView> view = engine::BatchView::Parse((*batch)->bytes);
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_EQ(view->num_tensors(), 1u);
    for (int64_t v : view->tensor(0).values<int64_t>()) ASSERT_EQ(v, next_value++);
    ++batches;
  }  // each HostBatch, and so its slab, goes here: two slabs serve all ten batches
  EXPECT_EQ(batches, 10);
  EXPECT_EQ(next_value, 81920);
  if (ProbeCuda().available) {
    EXPECT_GE(source->pinned_slabs(), 1u);
    EXPECT_LE(source->pinned_slabs(), 2u);
  } else {
    EXPECT_EQ(source->pinned_slabs(), 0u) << "nothing to page-lock for without a GPU";
  }
}

TEST_F(ControlBatchSourceTest, BatchesReachTheDevice) {
  SLUICE_SKIP_WITHOUT_GPU();
#if SLUICE_HAVE_CUDA
  auto reader = DeviceBatchReader::Create(
      Read(), {.buffer_bytes = 1 << 20, .num_device_buffers = 3, .prefetch_depth = 1});
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t next_value = 0;
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    const DeviceTensor& t = (*batch)->tensor(0);
    ASSERT_EQ(t.dtype, engine::DType::kInt64);
    std::vector<int64_t> values(t.nbytes / sizeof(int64_t));
    ASSERT_EQ(cudaMemcpy(values.data(), t.data, t.nbytes, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int64_t v : values) ASSERT_EQ(v, next_value++);
  }
  EXPECT_EQ(next_value, 81920);
  EXPECT_EQ((*reader)->stats().copies.copies, 10u);
#endif
}

// Coordinated reads pass their round on (DeviceBatch::round comes from it), so a trainer
// reading through the device stops at the same round as every other consumer.
TEST_F(ControlBatchSourceTest, CoordinatedBatchesCarryTheirRound) {
  auto pipeline = engine::ParsePipeline("range(1000) | batch(10) | repeat()");
  ASSERT_TRUE(pipeline.ok());
  auto dataset = client_->RegisterDataset(*pipeline);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  control::ReadOptions read;
  read.mode = proto::OFF;
  read.job_name = "rounds";
  read.num_consumers = 1;
  read.slab_bytes = 1 << 20;
  auto reader = client_->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ControlBatchSource source(std::move(*reader), read);
  for (int64_t round = 0; round < 5; ++round) {
    absl::StatusOr<std::optional<HostBatch>> batch = source.Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(batch->has_value());
    EXPECT_EQ((*batch)->round, round);
  }
}

TEST_F(ControlBatchSourceTest, UncoordinatedBatchesHaveNoRound) {
  std::unique_ptr<ControlBatchSource> source = Read();
  ASSERT_NE(source, nullptr);
  absl::StatusOr<std::optional<HostBatch>> batch = source->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->has_value());
  EXPECT_EQ((*batch)->round, -1);
}

}  // namespace
}  // namespace sluice::gpu
