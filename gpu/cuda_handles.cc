#include "gpu/cuda_handles.h"

#include "common/status_macros.h"
#include "gpu/cuda_probe.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu/cuda_error.h"
#endif

namespace sluice::gpu {

#if SLUICE_HAVE_CUDA

void CudaStreamDeleter::operator()(CUstream_st* stream) const { cudaStreamDestroy(stream); }
void CudaEventDeleter::operator()(CUevent_st* event) const { cudaEventDestroy(event); }

absl::StatusOr<ScopedCudaDevice> ScopedCudaDevice::Enter(int device) {
  int previous = 0;
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(cudaGetDevice(&previous), "cudaGetDevice"));
  if (previous != device) {
    SLUICE_RETURN_IF_ERROR(internal::CudaCheck(cudaSetDevice(device), "cudaSetDevice"));
    return ScopedCudaDevice(previous);
  }
  return ScopedCudaDevice(-1);
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

absl::StatusOr<CudaStreamPtr> CreateCudaStream(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CreateCudaStream"));
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  cudaStream_t stream = nullptr;
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  return CudaStreamPtr(stream);
}

absl::StatusOr<CudaEventPtr> CreateCudaEvent(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CreateCudaEvent"));
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  cudaEvent_t event = nullptr;
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(
      cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync),
      "cudaEventCreateWithFlags"));
  return CudaEventPtr(event);
}

#else  // !SLUICE_HAVE_CUDA: nothing is ever created, so the deleters never run.

void CudaStreamDeleter::operator()(CUstream_st*) const {}
void CudaEventDeleter::operator()(CUevent_st*) const {}

absl::StatusOr<ScopedCudaDevice> ScopedCudaDevice::Enter(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "ScopedCudaDevice"));
  return ScopedCudaDevice(-1);
}

ScopedCudaDevice::~ScopedCudaDevice() = default;

absl::StatusOr<CudaStreamPtr> CreateCudaStream(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CreateCudaStream"));
  return CudaStreamPtr();
}

absl::StatusOr<CudaEventPtr> CreateCudaEvent(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CreateCudaEvent"));
  return CudaEventPtr();
}

#endif  // SLUICE_HAVE_CUDA

}  // namespace sluice::gpu
