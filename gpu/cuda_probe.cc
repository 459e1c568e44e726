#include "gpu/cuda_probe.h"

#include "absl/strings/str_cat.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "gpu/cuda_error.h"
#endif

namespace sluice::gpu {
namespace {

#if SLUICE_HAVE_CUDA
// Why a host has no driver to talk to, or "" when libcuda.so.1 loads. Without it cudart
// answers cudaErrorInsufficientDriver ("CUDA driver version is insufficient"), which reads
// as "upgrade the driver" on a host that has none.
std::string MissingDriver() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver != nullptr) {
    dlclose(driver);
    return "";
  }
  const char* why = dlerror();
  return absl::StrCat("no NVIDIA driver on this host (",
                      why != nullptr ? why : "libcuda.so.1 cannot be loaded", ")");
}
#endif

CudaAvailability ProbeOnce() {
  CudaAvailability result;
#if SLUICE_HAVE_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    result.reason = std::string(internal::CudaCheck(err, "cudaGetDeviceCount").message());
    if (std::string missing = MissingDriver(); !missing.empty()) {
      result.reason = absl::StrCat(missing, "; ", result.reason);
    }
    return result;
  }
  if (count <= 0) {
    result.reason = "cudaGetDeviceCount found no CUDA device";
    return result;
  }
  result.available = true;
  result.device_count = count;
  result.reason = absl::StrCat(count, count == 1 ? " CUDA device:" : " CUDA devices:");
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (internal::CudaCheck(cudaGetDeviceProperties(&prop, i), "cudaGetDeviceProperties").ok()) {
      absl::StrAppend(&result.reason, i == 0 ? " " : ", ", i, " ", prop.name, " (sm_", prop.major,
                      prop.minor, ")");
    } else {
      absl::StrAppend(&result.reason, i == 0 ? " " : ", ", i, " (properties unavailable)");
    }
  }
#else
  result.reason = "built without CUDA: cudart not found at build time";
#endif
  return result;
}

}  // namespace

bool BuiltWithCuda() {
#if SLUICE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

CudaAvailability ProbeCuda() {
  static const CudaAvailability* const probed = new CudaAvailability(ProbeOnce());
  return *probed;
}

absl::Status RequireCudaDevice(int device, absl::string_view who) {
  CudaAvailability cuda = ProbeCuda();
  if (!cuda.available) {
    return absl::FailedPreconditionError(absl::StrCat(who, " needs a CUDA device: ", cuda.reason));
  }
  if (device < 0 || device >= cuda.device_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": CUDA device ", device, " does not exist (", cuda.reason, ")"));
  }
  return absl::OkStatus();
}

}  // namespace sluice::gpu
