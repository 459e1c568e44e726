#include "gpu/device_buffer.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gpu/cuda_handles.h"
#include "gpu/cuda_probe.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu/cuda_error.h"
#endif

namespace sluice::gpu {
namespace {

absl::Status CheckSize(size_t bytes, absl::string_view what) {
  if (bytes == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": zero bytes"));
  return absl::OkStatus();
}

}  // namespace

#if SLUICE_HAVE_CUDA

void DeviceBuffer::Free::operator()(std::byte* p) const {
  absl::StatusOr<ScopedCudaDevice> on_device = ScopedCudaDevice::Enter(device);
  if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

void PinnedHostBuffer::Free::operator()(std::byte* p) const {
  absl::StatusOr<ScopedCudaDevice> on_device = ScopedCudaDevice::Enter(device);
  if (cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
}

void HostRegistration::Unregister::operator()(std::byte* p) const {
  absl::StatusOr<ScopedCudaDevice> on_device = ScopedCudaDevice::Enter(device);
  if (cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes) {
  SLUICE_RETURN_IF_ERROR(CheckSize(bytes, "DeviceBuffer::Allocate"));
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "DeviceBuffer::Allocate"));
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  void* p = nullptr;
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(
      cudaMalloc(&p, bytes), absl::StrCat("cudaMalloc(", bytes, " bytes on device ", device, ")")));
  return DeviceBuffer(static_cast<std::byte*>(p), bytes, device);
}

absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(size_t bytes, int device) {
  SLUICE_RETURN_IF_ERROR(CheckSize(bytes, "PinnedHostBuffer::Allocate"));
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "PinnedHostBuffer::Allocate"));
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  void* p = nullptr;
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
                                             absl::StrCat("cudaHostAlloc(", bytes, " bytes)")));
  return PinnedHostBuffer(static_cast<std::byte*>(p), bytes, device);
}

absl::StatusOr<HostRegistration> HostRegistration::Register(void* base, size_t bytes, int device) {
  SLUICE_RETURN_IF_ERROR(CheckSize(bytes, "HostRegistration::Register"));
  if (base == nullptr) return absl::InvalidArgumentError("HostRegistration::Register: null base");
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "HostRegistration::Register"));
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  SLUICE_RETURN_IF_ERROR(
      internal::CudaCheck(cudaHostRegister(base, bytes, cudaHostRegisterPortable),
                          absl::StrCat("cudaHostRegister(", bytes, " bytes)")));
  return HostRegistration(static_cast<std::byte*>(base), bytes, device);
}

absl::Status CopyDeviceToHost(int device, const std::byte* device_ptr, size_t bytes,
                              std::byte* host) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CopyDeviceToHost"));
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  return internal::CudaCheck(cudaMemcpy(host, device_ptr, bytes, cudaMemcpyDeviceToHost),
                             absl::StrCat("cudaMemcpy(", bytes, " bytes device to host)"));
}

#else  // !SLUICE_HAVE_CUDA: nothing is ever allocated, so the deleters never run.

void DeviceBuffer::Free::operator()(std::byte*) const {}
void PinnedHostBuffer::Free::operator()(std::byte*) const {}
void HostRegistration::Unregister::operator()(std::byte*) const {}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes) {
  SLUICE_RETURN_IF_ERROR(CheckSize(bytes, "DeviceBuffer::Allocate"));
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "DeviceBuffer::Allocate"));
  return absl::InternalError("unreachable: CUDA reported available in a build without CUDA");
}

absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(size_t bytes, int device) {
  SLUICE_RETURN_IF_ERROR(CheckSize(bytes, "PinnedHostBuffer::Allocate"));
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "PinnedHostBuffer::Allocate"));
  return absl::InternalError("unreachable: CUDA reported available in a build without CUDA");
}

absl::StatusOr<HostRegistration> HostRegistration::Register(void* base, size_t bytes, int device) {
  SLUICE_RETURN_IF_ERROR(CheckSize(bytes, "HostRegistration::Register"));
  if (base == nullptr) return absl::InvalidArgumentError("HostRegistration::Register: null base");
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "HostRegistration::Register"));
  return absl::InternalError("unreachable: CUDA reported available in a build without CUDA");
}

absl::Status CopyDeviceToHost(int device, const std::byte*, size_t, std::byte*) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CopyDeviceToHost"));
  return absl::InternalError("unreachable: CUDA reported available in a build without CUDA");
}

#endif  // SLUICE_HAVE_CUDA

}  // namespace sluice::gpu
