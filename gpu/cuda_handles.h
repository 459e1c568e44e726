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
//
// Every call here runs on its own device, whichever thread makes it: a thread that never
// chose a device is on device 0, and any runtime call there would create GPU 0's context
// (hundreds of MiB on GPU 0 for every rank of a job whose reader runs on another GPU).
#ifndef SLUICE_GPU_CUDA_HANDLES_H_
#define SLUICE_GPU_CUDA_HANDLES_H_

#include <memory>
#include <utility>

#include "absl/status/statusor.h"

struct CUstream_st;
struct CUevent_st;

namespace sluice::gpu {

// Each destroys its handle on the device it was made on.
struct CudaStreamDeleter {
  int device = 0;
  void operator()(CUstream_st* stream) const;  // cudaStreamDestroy
};
struct CudaEventDeleter {
  int device = 0;
  void operator()(CUevent_st* event) const;  // cudaEventDestroy
};
using CudaStreamPtr = std::unique_ptr<CUstream_st, CudaStreamDeleter>;
using CudaEventPtr = std::unique_ptr<CUevent_st, CudaEventDeleter>;

// A stream on `device` that does not synchronise with the legacy default stream.
[[nodiscard]] absl::StatusOr<CudaStreamPtr> CreateCudaStream(int device);
// A completion-only event on `device` (no timing); waiting on it blocks instead of spinning.
[[nodiscard]] absl::StatusOr<CudaEventPtr> CreateCudaEvent(int device);

// Makes `device` current for the calling thread and, when destroyed, makes the previous
// device current again if its context exists in this process. If not (a thread that never
// chose a device is on device 0 without having made its context), the thread stays on
// `device`: going back would create a context on a GPU nobody asked for, as PyTorch's device
// guard also avoids. Move-only.
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
