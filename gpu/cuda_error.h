// Internal to gpu/: turns a cudaError_t into an absl::Status naming the failed call.
//
// Only for .cc files compiled with SLUICE_HAVE_CUDA; public gpu/ headers name no CUDA type.
//
//   SLUICE_RETURN_IF_ERROR(CudaCheck(cudaMalloc(&p, n), "cudaMalloc"));
//   // -> "cudaMalloc failed: cudaErrorMemoryAllocation: out of memory" (ResourceExhausted)
#ifndef SLUICE_GPU_CUDA_ERROR_H_
#define SLUICE_GPU_CUDA_ERROR_H_

#if SLUICE_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sluice::gpu::internal {

// "<call> failed: <cudaGetErrorName>: <cudaGetErrorString>", with a code that says what to do:
// ResourceExhausted for out-of-memory, FailedPrecondition for no device or driver,
// InvalidArgument for bad values or devices, AlreadyExists for memory registered twice,
// Internal otherwise.
inline absl::Status CudaError(cudaError_t err, absl::string_view call) {
  std::string message =
      absl::StrCat(call, " failed: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
      return absl::FailedPreconditionError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
      return absl::InvalidArgumentError(message);
    case cudaErrorHostMemoryAlreadyRegistered:
      return absl::AlreadyExistsError(message);
    default:
      return absl::InternalError(message);
  }
}

// A failed call is reported here, as a Status: the runtime's last-error slot is cleared, or
// the trainer sharing this thread would find our error in its own next launch check
// (cudaGetLastError after a kernel) and blame its kernel. A sticky error stays sticky.
inline absl::Status CudaCheck(cudaError_t err, absl::string_view call) {
  if (err == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();
  return CudaError(err, call);
}

}  // namespace sluice::gpu::internal

#endif  // SLUICE_HAVE_CUDA
#endif  // SLUICE_GPU_CUDA_ERROR_H_
