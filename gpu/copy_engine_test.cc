// DeviceCopyEngine: a clear error without a GPU; with one, bytes that arrive intact, one
// callback per copy, counters that add up and a bound on copies in flight.
#include "gpu/copy_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <vector>

#include "gpu/device_buffer.h"
#include "gpu/gpu_test_util.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sluice::gpu {
namespace {

TEST(CopyEngineTest, RejectsBadOptionsBeforeLookingForAGpu) {
  EXPECT_EQ(DeviceCopyEngine::Create({.num_streams = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceCopyEngine::Create({.max_in_flight = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CopyEngineTest, WithoutGpuCreateSaysWhy) {
  if (ProbeCuda().available) GTEST_SKIP() << "a GPU is usable: " << ProbeCuda().reason;
  testing::ExpectNoGpuError(DeviceCopyEngine::Create({}).status(), "DeviceCopyEngine");
}

#if SLUICE_HAVE_CUDA
// Copies `in` to the device in uneven chunks through `engine`, then reads it back.
std::vector<std::byte> CopyThrough(DeviceCopyEngine& engine, const std::byte* in, size_t n,
                                   int* callbacks) {
  absl::StatusOr<DeviceBuffer> device = DeviceBuffer::Allocate(0, n);
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return {};
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  size_t offset = 0;
  for (size_t chunk = 1; offset < n; chunk = chunk * 3 + 7) {
    size_t len = std::min(chunk, n - offset);
    absl::Status submitted =
        engine.Submit(in + offset, len, device->data() + offset, [&](absl::Status s) {
          if (!s.ok()) failed.fetch_add(1);
          done.fetch_add(1);
        });
    EXPECT_TRUE(submitted.ok()) << submitted;
    offset += len;
  }
  EXPECT_TRUE(engine.Flush().ok());
  EXPECT_EQ(failed.load(), 0);
  *callbacks = done.load();
  std::vector<std::byte> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), device->data(), n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}
#endif

TEST(CopyEngineTest, CopiesRandomBytesFromPinnedMemory) {
  SLUICE_SKIP_WITHOUT_GPU();
#if SLUICE_HAVE_CUDA
  auto engine = DeviceCopyEngine::Create({.num_streams = 3, .max_in_flight = 4});
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::mt19937_64 rng(7);
  const size_t n = (32 << 20) + 123;
  std::vector<std::byte> in = testing::RandomBytes(rng, n);
  absl::StatusOr<PinnedHostBuffer> pinned = PinnedHostBuffer::Allocate(n);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  std::copy(in.begin(), in.end(), pinned->data());
  int callbacks = 0;
  EXPECT_EQ(CopyThrough(**engine, pinned->data(), n, &callbacks), in);
  CopyEngineCounters counters = (*engine)->counters();
  EXPECT_EQ(counters.bytes_copied_to_device, n);
  EXPECT_EQ(counters.copies, static_cast<uint64_t>(callbacks));
  EXPECT_EQ(counters.failed_copies, 0u);
#endif
}

TEST(CopyEngineTest, CopiesFromPageableMemoryToo) {
  SLUICE_SKIP_WITHOUT_GPU();
#if SLUICE_HAVE_CUDA
  auto engine = DeviceCopyEngine::Create({});
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::mt19937_64 rng(8);
  std::vector<std::byte> in = testing::RandomBytes(rng, (4 << 20) + 5);
  int callbacks = 0;
  EXPECT_EQ(CopyThrough(**engine, in.data(), in.size(), &callbacks), in);
  EXPECT_GT(callbacks, 1);
#endif
}

TEST(CopyEngineTest, NeverMoreThanMaxInFlight) {
  SLUICE_SKIP_WITHOUT_GPU();
  auto engine = DeviceCopyEngine::Create({.num_streams = 2, .max_in_flight = 2});
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<PinnedHostBuffer> host = PinnedHostBuffer::Allocate(8 << 20);
  absl::StatusOr<DeviceBuffer> device = DeviceBuffer::Allocate(0, 8 << 20);
  ASSERT_TRUE(host.ok() && device.ok());
  std::atomic<int> returned{0};
  int submitted = 0;
  int most = 0;
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE((*engine)
                    ->Submit(host->data(), host->size(), device->data(),
                             [&](absl::Status s) { returned.fetch_add(1); })
                    .ok());
    ++submitted;
    most = std::max(most, submitted - returned.load());
  }
  ASSERT_TRUE((*engine)->Flush().ok());
  EXPECT_LE(most, 2);
  EXPECT_EQ(returned.load(), 64);
  EXPECT_EQ((*engine)->counters().copies, 64u);
}

TEST(CopyEngineTest, CallbacksCannotWaitOnTheEngine) {
  SLUICE_SKIP_WITHOUT_GPU();
  auto engine = DeviceCopyEngine::Create({});
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<DeviceBuffer> device = DeviceBuffer::Allocate(0, 64);
  ASSERT_TRUE(device.ok());
  std::vector<std::byte> host(64);
  absl::Status nested_submit;
  absl::Status nested_flush;
  DeviceCopyEngine* e = engine->get();
  ASSERT_TRUE(e->Submit(host.data(), host.size(), device->data(), [&](absl::Status) {
                 nested_submit = e->Submit(host.data(), 1, device->data(), nullptr);
                 nested_flush = e->Flush();
               }).ok());
  ASSERT_TRUE(e->Flush().ok());
  EXPECT_EQ(nested_submit.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(nested_flush.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(e->Submit(nullptr, 1, device->data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CopyEngineTest, DestructorRunsOutstandingCallbacks) {
  SLUICE_SKIP_WITHOUT_GPU();
  absl::StatusOr<PinnedHostBuffer> host = PinnedHostBuffer::Allocate(16 << 20);
  absl::StatusOr<DeviceBuffer> device = DeviceBuffer::Allocate(0, 16 << 20);
  ASSERT_TRUE(host.ok() && device.ok());
  std::atomic<int> done{0};
  {
    auto engine = DeviceCopyEngine::Create({.max_in_flight = 4});
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE((*engine)
                      ->Submit(host->data(), host->size(), device->data(),
                               [&](absl::Status s) { done.fetch_add(s.ok() ? 1 : 100); })
                      .ok());
    }
  }
  EXPECT_EQ(done.load(), 4);
}

}  // namespace
}  // namespace sluice::gpu
