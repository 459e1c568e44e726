// DeviceBuffer, PinnedHostBuffer, HostRegistration and DeviceBufferPool: clear errors without
// a GPU; with one, memory that round-trips bytes and a pool that never hands out more buffers
// than it has.
#include "gpu/device_buffer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gpu/device_buffer_pool.h"
#include "gpu/gpu_test_util.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sluice::gpu {
namespace {

using testing::ExpectNoGpuError;

TEST(DeviceBufferTest, ZeroBytesOrNullAreInvalidEverywhere) {
  EXPECT_EQ(DeviceBuffer::Allocate(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PinnedHostBuffer::Allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
  int x = 0;
  EXPECT_EQ(HostRegistration::Register(&x, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostRegistration::Register(nullptr, 64).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceBufferPool::Create(0, 0, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceBufferPool::Create(0, 64, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceBufferTest, DefaultsAreEmpty) {
  EXPECT_FALSE(DeviceBuffer());
  EXPECT_EQ(DeviceBuffer().size(), 0u);
  EXPECT_FALSE(PinnedHostBuffer());
  EXPECT_TRUE(PinnedHostBuffer().span().empty());
  EXPECT_FALSE(HostRegistration());
  EXPECT_FALSE(DeviceBufferLease());
}

TEST(DeviceBufferTest, WithoutGpuEveryAllocationSaysWhy) {
  if (ProbeCuda().available) GTEST_SKIP() << "a GPU is usable: " << ProbeCuda().reason;
  ExpectNoGpuError(DeviceBuffer::Allocate(0, 1024).status(), "DeviceBuffer::Allocate");
  ExpectNoGpuError(PinnedHostBuffer::Allocate(1024).status(), "PinnedHostBuffer::Allocate");
  std::vector<std::byte> host(4096);
  ExpectNoGpuError(HostRegistration::Register(host.data(), host.size()).status(),
                   "HostRegistration::Register");
  ExpectNoGpuError(DeviceBufferPool::Create(0, 1024, 2).status(), "DeviceBuffer::Allocate");
}

TEST(DeviceBufferTest, DeviceMemoryRoundTripsBytes) {
  SLUICE_SKIP_WITHOUT_GPU();
#if SLUICE_HAVE_CUDA
  std::mt19937_64 rng(1);
  std::vector<std::byte> in = testing::RandomBytes(rng, (1 << 20) + 3);
  absl::StatusOr<DeviceBuffer> device = DeviceBuffer::Allocate(0, in.size());
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->size(), in.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(device->data()) % 256, 0u);
  absl::StatusOr<PinnedHostBuffer> pinned = PinnedHostBuffer::Allocate(in.size());
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  std::copy(in.begin(), in.end(), pinned->data());
  ASSERT_EQ(cudaMemcpy(device->data(), pinned->data(), in.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<std::byte> out(in.size());
  ASSERT_EQ(cudaMemcpy(out.data(), device->data(), in.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(in, out);
  DeviceBuffer moved = std::move(*device);
  EXPECT_FALSE(*device);
  EXPECT_EQ(moved.size(), in.size());
#endif
}

TEST(DeviceBufferTest, RegistersExistingHostMemoryOnce) {
  SLUICE_SKIP_WITHOUT_GPU();
#if SLUICE_HAVE_CUDA
  std::vector<std::byte> host(1 << 20);
  absl::StatusOr<HostRegistration> first = HostRegistration::Register(host.data(), host.size());
  ASSERT_TRUE(first.ok()) << first.status();
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, host.data()), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  absl::StatusOr<HostRegistration> again = HostRegistration::Register(host.data(), host.size());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_THAT(std::string(again.status().message()), ::testing::HasSubstr("cudaHostRegister"));
  *first = HostRegistration();  // unregistered: registering works again
  EXPECT_TRUE(HostRegistration::Register(host.data(), host.size()).ok());
#endif
}

TEST(DeviceBufferPoolTest, HandsOutAtMostItsBuffers) {
  SLUICE_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::shared_ptr<DeviceBufferPool>> pool = DeviceBufferPool::Create(0, 4096, 2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::optional<DeviceBufferLease> a = (*pool)->TryAcquire();
  std::optional<DeviceBufferLease> b = (*pool)->TryAcquire();
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_NE(a->data(), b->data());
  EXPECT_EQ(a->capacity(), 4096u);
  EXPECT_FALSE((*pool)->Acquire(absl::Milliseconds(10)).has_value());
  EXPECT_EQ((*pool)->in_use(), 2u);
  a.reset();
  EXPECT_EQ((*pool)->in_use(), 1u);
  EXPECT_TRUE((*pool)->TryAcquire().has_value());
  EXPECT_EQ((*pool)->max_in_use(), 2u);
}

}  // namespace
}  // namespace sluice::gpu
