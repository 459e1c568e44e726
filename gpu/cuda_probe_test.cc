// ProbeCuda / RequireCudaDevice on whatever machine runs the tests: without a GPU they must
// say why, and the reason must come from CUDA (or from the build) rather than be generic.
#include "gpu/cuda_probe.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

namespace sluice::gpu {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CudaProbeTest, BuiltWithCudaMatchesTheBuild) {
#if SLUICE_HAVE_CUDA
  EXPECT_TRUE(BuiltWithCuda());
#else
  EXPECT_FALSE(BuiltWithCuda());
#endif
}

TEST(CudaProbeTest, ExplainsItsAnswer) {
  CudaAvailability cuda = ProbeCuda();
  EXPECT_FALSE(cuda.reason.empty());
  if (cuda.available) {
    EXPECT_GT(cuda.device_count, 0);
    EXPECT_THAT(cuda.reason, HasSubstr("CUDA device"));
    return;
  }
  EXPECT_EQ(cuda.device_count, 0);
  if (!BuiltWithCuda()) {
    EXPECT_EQ(cuda.reason, "built without CUDA: cudart not found at build time");
  } else {
    // "cudaGetDeviceCount failed: cudaErrorNoDevice: no CUDA-capable device is detected", or
    // the driver's error, or no device at all; a host with no driver says so first (cudart
    // alone calls it cudaErrorInsufficientDriver, "driver version is insufficient").
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) {
      EXPECT_THAT(cuda.reason, StartsWith("no NVIDIA driver on this host (libcuda.so.1: "));
    } else {
      dlclose(driver);
      EXPECT_THAT(cuda.reason, StartsWith("cudaGetDeviceCount"));
    }
    EXPECT_THAT(cuda.reason, HasSubstr("cudaGetDeviceCount"));
    if (cuda.reason.find("failed") != std::string::npos) {
      EXPECT_THAT(cuda.reason, HasSubstr(": cudaError"));
    }
  }
}

TEST(CudaProbeTest, AnswerIsCached) {
  CudaAvailability first = ProbeCuda();
  CudaAvailability second = ProbeCuda();
  EXPECT_EQ(first.available, second.available);
  EXPECT_EQ(first.device_count, second.device_count);
  EXPECT_EQ(first.reason, second.reason);
}

TEST(CudaProbeTest, RequireCudaDeviceWithoutGpuCarriesTheReason) {
  if (ProbeCuda().available) GTEST_SKIP() << "a GPU is usable: " << ProbeCuda().reason;
  testing::ExpectNoGpuError(RequireCudaDevice(0, "the trainer"), "the trainer");
}

TEST(CudaProbeTest, RequireCudaDeviceChecksTheIndex) {
  SLUICE_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(RequireCudaDevice(0, "test").ok());
  EXPECT_EQ(RequireCudaDevice(-1, "test").code(), absl::StatusCode::kInvalidArgument);
  absl::Status past_end = RequireCudaDevice(ProbeCuda().device_count, "test");
  EXPECT_EQ(past_end.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(past_end.message()), HasSubstr("does not exist"));
}

}  // namespace
}  // namespace sluice::gpu
