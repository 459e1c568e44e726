// DeviceBatchReader over a fake HostBatchSource: refuses cleanly without a GPU or with
// DeviceLanding::kDirect; with a GPU, yields every batch in order with identical bytes,
// within its device buffers, releasing each host batch once it is copied.
#include "gpu/device_batch_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/batch_layout.h"
#include "gpu/cuda_handles.h"
#include "gpu/gpu_test_util.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sluice::gpu {
namespace {

using ::testing::HasSubstr;

// Hands out `batches` in order; counts calls and host batches not yet released.
class FakeSource : public HostBatchSource {
 public:
  explicit FakeSource(std::vector<std::vector<std::byte>> batches) : batches_(std::move(batches)) {}

  absl::StatusOr<std::optional<HostBatch>> Next() override {
    calls_->fetch_add(1);
    if (!fail_at_.ok() && next_ == fail_after_) return fail_at_;
    if (next_ == batches_.size()) return std::nullopt;
    live_->fetch_add(1);
    std::shared_ptr<std::atomic<int>> live = live_;
    auto owner = std::shared_ptr<std::vector<std::byte>>(
        new std::vector<std::byte>(batches_[next_]), [live](std::vector<std::byte>* v) {
          live->fetch_sub(1);
          delete v;
        });
    // Rounds as a coordinated read's: a DeviceBatch must carry its source's.
    HostBatch batch{*owner, static_cast<int64_t>(next_), "fake-worker", owner,
                    static_cast<int64_t>(100 + next_)};
    ++next_;
    return batch;
  }

  void FailAfter(size_t n, absl::Status status) {
    fail_after_ = n;
    fail_at_ = std::move(status);
  }
  std::shared_ptr<std::atomic<int>> calls() const { return calls_; }
  std::shared_ptr<std::atomic<int>> live() const { return live_; }

 private:
  std::vector<std::vector<std::byte>> batches_;
  size_t next_ = 0;
  std::shared_ptr<std::atomic<int>> calls_ = std::make_shared<std::atomic<int>>(0);
  size_t fail_after_ = 0;
  absl::Status fail_at_;
  std::shared_ptr<std::atomic<int>> live_ = std::make_shared<std::atomic<int>>(0);
};

std::vector<std::vector<std::byte>> RandomBatches(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::byte>> out;
  for (int i = 0; i < n; ++i) out.push_back(testing::RandomEncodedBatch(rng, 1 + rng() % 2000));
  return out;
}

TEST(DeviceLandingTest, StagesUntilSlabsCanLiveOnTheDevice) {
  EXPECT_EQ(ChooseDeviceLanding(false), DeviceLanding::kStagedThroughPinnedHost);
  EXPECT_EQ(ChooseDeviceLanding(true), kSlabPoolTakesDeviceMemory
                                           ? DeviceLanding::kDirect
                                           : DeviceLanding::kStagedThroughPinnedHost);
  EXPECT_EQ(DeviceLandingName(DeviceLanding::kDirect), "direct");
  EXPECT_EQ(DeviceLandingName(DeviceLanding::kStagedThroughPinnedHost),
            "staged-through-pinned-host");
}

TEST(DeviceBatchReaderTest, RejectsBadArgumentsAndDirectLanding) {
  auto make = [](DeviceBatchReaderOptions options) {
    return DeviceBatchReader::Create(std::make_unique<FakeSource>(RandomBatches(1, 1)), options)
        .status();
  };
  EXPECT_EQ(DeviceBatchReader::Create(nullptr, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(make({.buffer_bytes = 0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(make({.num_device_buffers = 0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(make({.prefetch_depth = -1}).code(), absl::StatusCode::kInvalidArgument);
  absl::Status direct = make({.landing = DeviceLanding::kDirect});
  EXPECT_EQ(direct.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(direct.message()), HasSubstr("SlabPool"));
}

TEST(DeviceBatchReaderTest, WithoutGpuCreateSaysWhyAndReadsNothing) {
  if (ProbeCuda().available) GTEST_SKIP() << "a GPU is usable: " << ProbeCuda().reason;
  auto source = std::make_unique<FakeSource>(RandomBatches(3, 2));
  std::shared_ptr<std::atomic<int>> calls = source->calls();
  absl::StatusOr<std::unique_ptr<DeviceBatchReader>> reader =
      DeviceBatchReader::Create(std::move(source), {});
  testing::ExpectNoGpuError(reader.status(), "DeviceBatchReader");
  EXPECT_EQ(calls->load(), 0) << "no batch is pulled from the source without a GPU";
}

#if SLUICE_HAVE_CUDA
std::vector<std::byte> ToHost(const DeviceBatch& batch) {
  std::vector<std::byte> out(batch.size());
  EXPECT_EQ(cudaMemcpy(out.data(), batch.data(), out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}
#endif

TEST(DeviceBatchReaderTest, FiftyBatchesInOrderWithinTheDeviceBuffers) {
  SLUICE_SKIP_WITHOUT_GPU();
#if SLUICE_HAVE_CUDA
  std::vector<std::vector<std::byte>> batches = RandomBatches(50, 3);
  auto source = std::make_unique<FakeSource>(batches);
  std::shared_ptr<std::atomic<int>> live_host_batches = source->live();
  DeviceBatchReaderOptions options{
      .buffer_bytes = 256 << 10, .num_device_buffers = 3, .prefetch_depth = 1};
  auto reader = DeviceBatchReader::Create(std::move(source), options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::optional<DeviceBatch> previous;  // held while the next one is fetched, as a trainer would
  int64_t expected = 0;
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    const DeviceBatch& b = **batch;
    ASSERT_EQ(b.index(), expected);
    EXPECT_EQ(b.worker(), "fake-worker");
    EXPECT_EQ(b.round(), 100 + expected);
    const std::vector<std::byte>& sent = batches[expected];
    ASSERT_EQ(ToHost(b), sent) << "batch " << expected;
    absl::StatusOr<engine::BatchView> view = engine::BatchView::Parse(sent);
    ASSERT_TRUE(view.ok());
    ASSERT_EQ(b.num_tensors(), view->num_tensors());
    for (size_t i = 0; i < b.num_tensors(); ++i) {
      engine::TensorView t = view->tensor(i);
      EXPECT_EQ(b.tensor(i).data, b.data() + (t.data - sent.data()));
      EXPECT_EQ(b.tensor(i).nbytes, t.nbytes);
      EXPECT_EQ(b.tensor(i).dtype, t.dtype);
      EXPECT_THAT(b.tensor(i).shape, ::testing::ElementsAreArray(t.shape));
    }
    EXPECT_LE((*reader)->stats().device_buffers_in_use, 3u);
    previous = std::move(*batch);
    ++expected;
  }
  EXPECT_EQ(expected, 50);
  DeviceBatchReaderStats stats = (*reader)->stats();
  EXPECT_EQ(stats.device_buffers, 3u);
  EXPECT_LE(stats.max_device_buffers_in_use, 3u);
  EXPECT_EQ(stats.copies.copies, 50u);
  EXPECT_EQ(live_host_batches->load(), 0) << "every host batch released once copied";
  EXPECT_TRUE((*reader)->Next().ok());  // still the end
#endif
}

TEST(DeviceBatchReaderTest, ErrorsEndTheRead) {
  SLUICE_SKIP_WITHOUT_GPU();
  // A source error after two batches comes back, and keeps coming back.
  auto source = std::make_unique<FakeSource>(RandomBatches(5, 4));
  source->FailAfter(2, absl::UnavailableError("worker went away"));
  auto reader = DeviceBatchReader::Create(std::move(source), {.prefetch_depth = 0});
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->Next().ok());
  EXPECT_TRUE((*reader)->Next().ok());
  EXPECT_EQ((*reader)->Next().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*reader)->Next().status().code(), absl::StatusCode::kUnavailable);

  // Copying ahead, the first Next() meets the error while filling: the two batches already
  // taken from the source (in a shared job, read by nobody else) still come out first.
  auto ahead_source = std::make_unique<FakeSource>(RandomBatches(5, 4));
  ahead_source->FailAfter(2, absl::UnavailableError("worker went away"));
  auto ahead = DeviceBatchReader::Create(std::move(ahead_source), {.prefetch_depth = 2});
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  for (int64_t index = 0; index < 2; ++index) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = (*ahead)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(batch->has_value());
    EXPECT_EQ((*batch)->index(), index);
  }
  EXPECT_EQ((*ahead)->Next().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*ahead)->Next().status().code(), absl::StatusCode::kUnavailable);

  // A batch larger than the device buffers, and bytes that are no batch.
  std::vector<std::vector<std::byte>> big = RandomBatches(1, 5);
  auto too_big = DeviceBatchReader::Create(std::make_unique<FakeSource>(big),
                                           {.buffer_bytes = big[0].size() - 1});
  ASSERT_TRUE(too_big.ok());
  EXPECT_EQ((*too_big)->Next().status().code(), absl::StatusCode::kResourceExhausted);
  auto garbage = DeviceBatchReader::Create(
      std::make_unique<FakeSource>(
          std::vector<std::vector<std::byte>>{std::vector<std::byte>(128, std::byte{7})}),
      {});
  ASSERT_TRUE(garbage.ok());
  EXPECT_EQ((*garbage)->Next().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceBatchReaderTest, CallerHoldingEveryBufferGetsDeadlineExceeded) {
  SLUICE_SKIP_WITHOUT_GPU();
  auto reader = DeviceBatchReader::Create(std::make_unique<FakeSource>(RandomBatches(4, 6)),
                                          {.num_device_buffers = 2,
                                           .prefetch_depth = 0,
                                           .buffer_wait_timeout = absl::Milliseconds(20)});
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::optional<DeviceBatch>> a = (*reader)->Next();
  absl::StatusOr<std::optional<DeviceBatch>> b = (*reader)->Next();
  ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value());
  absl::StatusOr<std::optional<DeviceBatch>> c = (*reader)->Next();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("device buffers"));
}

#if SLUICE_HAVE_CUDA
void CUDART_CB SleepOnStream(void* milliseconds) {
  absl::SleepFor(absl::Milliseconds(*static_cast<int*>(milliseconds)));
}
#endif

// A consumer whose GPU work on each batch runs late (a 20 ms host function ahead of it on
// its stream) and gives each batch back with ReleaseAfter, never synchronising: with two
// device buffers the reader reuses each buffer while that work is still queued, so only the
// stream order (the copy waits on the buffer's event) keeps the bytes the work reads intact.
TEST(DeviceBatchReaderTest, StreamOrderedReleaseKeepsBytesUntilTheConsumersWorkRan) {
  SLUICE_SKIP_WITHOUT_GPU();
#if SLUICE_HAVE_CUDA
  constexpr int kBatches = 12;
  std::vector<std::vector<std::byte>> batches = RandomBatches(kBatches, 8);
  auto reader = DeviceBatchReader::Create(
      std::make_unique<FakeSource>(batches),
      {.buffer_bytes = 256 << 10, .num_device_buffers = 2, .prefetch_depth = 1});
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<CudaStreamPtr> stream = CreateCudaStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<std::byte*> seen(kBatches, nullptr);  // pinned, written by the late work
  int delay_ms = 20;
  for (int k = 0; k < kBatches; ++k) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&seen[k]), (*batch)->size()), cudaSuccess);
    ASSERT_EQ(cudaLaunchHostFunc(stream->get(), SleepOnStream, &delay_ms), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(seen[k], (*batch)->data(), (*batch)->size(), cudaMemcpyDeviceToHost,
                              stream->get()),
              cudaSuccess);
    ASSERT_TRUE((*batch)->ReleaseAfter(stream->get()).ok());
  }
  ASSERT_EQ(cudaStreamSynchronize(stream->get()), cudaSuccess);
  for (int k = 0; k < kBatches; ++k) {
    EXPECT_EQ(std::memcmp(seen[k], batches[k].data(), batches[k].size()), 0) << "batch " << k;
    cudaFreeHost(seen[k]);
  }
#endif
}

}  // namespace
}  // namespace sluice::gpu
