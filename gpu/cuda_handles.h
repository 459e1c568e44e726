// RAII owners for the CUDA runtime handles gpu/ uses (streams, events) and a scoped switch of
// the calling thread's current device.
//
// The header names only the runtime's opaque struct tags (cudaStream_t is CUstream_st*), so
// it compiles without the CUDA toolkit; there every factory returns FailedPrecondition with
// ProbeCuda()'s reason.
//
//   SLUICE_ASSIGN_OR_RETURN(CudaStreamPtr stream, CreateCudaStream(/*device=*/0));
//   SLUICE_ASSIGN_OR_RETURN(CudaEventPtr done, CreateCudaEvent(0));
//   {
//     SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(0));
//     cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream.get());
//   }  // previous device restored; cudaEventDestroy / cudaStreamDestroy on scope exit
#ifndef SLUICE_GPU_CUDA_HANDLES_H_
#define SLUICE_GPU_CUDA_HANDLES_H_

#include <memory>
#include <utility>

#include "absl/status/statusor.h"

struct CUstream_st;
struct CUevent_st;

namespace sluice::gpu {

struct CudaStreamDeleter {
  void operator()(CUstream_st* stream) const;  // cudaStreamDestroy
};
struct CudaEventDeleter {
  void operator()(CUevent_st* event) const;  // cudaEventDestroy
};
using CudaStreamPtr = std::unique_ptr<CUstream_st, CudaStreamDeleter>;
using CudaEventPtr = std::unique_ptr<CUevent_st, CudaEventDeleter>;

// A stream on `device` that does not synchronise with the legacy default stream.
[[nodiscard]] absl::StatusOr<CudaStreamPtr> CreateCudaStream(int device);
// A completion-only event on `device` (no timing); waiting on it blocks instead of spinning.
[[nodiscard]] absl::StatusOr<CudaEventPtr> CreateCudaEvent(int device);

// Makes `device` current for the calling thread and restores the previous device when
// destroyed. Move-only.
class ScopedCudaDevice {
 public:
  [[nodiscard]] static absl::StatusOr<ScopedCudaDevice> Enter(int device);
  ScopedCudaDevice(ScopedCudaDevice&& other) noexcept
      : previous_(std::exchange(other.previous_, -1)) {}
  ScopedCudaDevice& operator=(ScopedCudaDevice&&) = delete;
  ~ScopedCudaDevice();

 private:
  explicit ScopedCudaDevice(int previous) : previous_(previous) {}
  int previous_;  // -1: nothing to restore
};

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_CUDA_HANDLES_H_
