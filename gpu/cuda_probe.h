// Whether this process can use a CUDA GPU, and why not when it cannot.
//
// Sluice reaches CUDA only through cudart (no nvcc, no kernels). A build without the toolkit
// (meson's cuda_dep not found) compiles every gpu/ file and reports "built without CUDA"; a
// build with it on a machine without a GPU or driver reports the CUDA error. Everything in
// gpu/ that needs a device checks this first and fails with the reason.
//
//   CudaAvailability cuda = ProbeCuda();
//   if (!cuda.available) {
//     std::cerr << "staying on the host: " << cuda.reason << "\n";
//   }
//   SLUICE_RETURN_IF_ERROR(RequireCudaDevice(0, "DeviceCopyEngine"));
#ifndef SLUICE_GPU_CUDA_PROBE_H_
#define SLUICE_GPU_CUDA_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::gpu {

struct CudaAvailability {
  bool available = false;
  int device_count = 0;
  // Never empty. When unavailable: "built without CUDA: cudart not found at build time", or
  // "cudaGetDeviceCount failed: <cudaGetErrorName>: <cudaGetErrorString>" (led by "no NVIDIA
  // driver on this host (libcuda.so.1: ...); " when the driver cannot be loaded), or that no device
  // is visible. When available: the devices, e.g. "1 CUDA device: 0 NVIDIA H100 (sm_90)".
  std::string reason;
};

// True when compiled with SLUICE_HAVE_CUDA (cudart found at build time).
[[nodiscard]] bool BuiltWithCuda();

// Probes once per process (cudaGetDeviceCount) and returns the cached answer after that.
[[nodiscard]] CudaAvailability ProbeCuda();

// OK when `device` exists. FailedPrecondition "<who> needs a CUDA device: <reason>" when no
// GPU can be used; InvalidArgument when `device` is outside [0, device_count).
[[nodiscard]] absl::Status RequireCudaDevice(int device, absl::string_view who);

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_CUDA_PROBE_H_
