// Memory CUDA copies use, each owned by an RAII type:
//   DeviceBuffer      device memory (cudaMalloc / cudaFree)
//   PinnedHostBuffer  page-locked host memory (cudaHostAlloc / cudaFreeHost)
//   HostRegistration  existing host memory made page-locked for CUDA (cudaHostRegister /
//                     cudaHostUnregister), e.g. a client's UCX landing slabs, so that
//                     cudaMemcpyAsync from them is truly asynchronous.
// Without CUDA, or without a GPU, every factory returns FailedPrecondition with the reason.
// Each is made and released on its `device` (gpu/cuda_handles.h says why).
//
//   SLUICE_ASSIGN_OR_RETURN(DeviceBuffer dev, DeviceBuffer::Allocate(/*device=*/0, 1 << 20));
//   SLUICE_ASSIGN_OR_RETURN(PinnedHostBuffer staging, PinnedHostBuffer::Allocate(1 << 20));
//   SLUICE_ASSIGN_OR_RETURN(HostRegistration pinned,
//                           HostRegistration::Register(pool.region().base(),
//                           pool.region().size()));
//   // unregistered, freed on scope exit; keep `pinned` no longer than the memory it covers
#ifndef SLUICE_GPU_DEVICE_BUFFER_H_
#define SLUICE_GPU_DEVICE_BUFFER_H_

#include <cstddef>
#include <memory>
#include <span>
#include <utility>

#include "absl/status/statusor.h"

namespace sluice::gpu {

// Copies `bytes` from device memory on `device` to host memory and waits for it (for tools
// and checks, not for the data path).
[[nodiscard]] absl::Status CopyDeviceToHost(int device, const std::byte* device_ptr, size_t bytes,
                                            std::byte* host);

class DeviceBuffer {
 public:
  // `bytes` > 0 on `device`; cudaMalloc aligns to at least 256 bytes.
  [[nodiscard]] static absl::StatusOr<DeviceBuffer> Allocate(int device, size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&&) noexcept = default;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept = default;

  // A device pointer: not dereferenceable on the host.
  [[nodiscard]] std::byte* data() const { return memory_.get(); }
  [[nodiscard]] size_t size() const { return memory_ ? size_ : 0; }
  [[nodiscard]] int device() const { return device_; }
  explicit operator bool() const { return memory_ != nullptr; }

 private:
  struct Free {
    int device;  // no initializer: it would keep the class from being default-constructed
    void operator()(std::byte* p) const;  // cudaFree
  };
  DeviceBuffer(std::byte* p, size_t size, int device)
      : memory_(p, Free{device}), size_(size), device_(device) {}
  std::unique_ptr<std::byte, Free> memory_;
  size_t size_ = 0;
  int device_ = -1;
};

class PinnedHostBuffer {
 public:
  // `bytes` > 0, page-locked and usable from every device (cudaHostAllocPortable); made in
  // `device`'s context.
  [[nodiscard]] static absl::StatusOr<PinnedHostBuffer> Allocate(size_t bytes, int device = 0);
  PinnedHostBuffer() = default;
  PinnedHostBuffer(PinnedHostBuffer&&) noexcept = default;
  PinnedHostBuffer& operator=(PinnedHostBuffer&&) noexcept = default;

  [[nodiscard]] std::byte* data() const { return memory_.get(); }
  [[nodiscard]] size_t size() const { return memory_ ? size_ : 0; }
  [[nodiscard]] std::span<std::byte> span() const { return {data(), size()}; }
  explicit operator bool() const { return memory_ != nullptr; }

 private:
  struct Free {
    int device;  // no initializer: it would keep the class from being default-constructed
    void operator()(std::byte* p) const;  // cudaFreeHost
  };
  PinnedHostBuffer(std::byte* p, size_t size, int device) : memory_(p, Free{device}), size_(size) {}
  std::unique_ptr<std::byte, Free> memory_;
  size_t size_ = 0;
};

class HostRegistration {
 public:
  // Page-locks [base, base + bytes) for CUDA (cudaHostRegisterPortable). AlreadyExists when
  // part of the range is registered already. The memory must outlive the registration.
  [[nodiscard]] static absl::StatusOr<HostRegistration> Register(void* base, size_t bytes,
                                                                 int device = 0);
  HostRegistration() = default;
  HostRegistration(HostRegistration&&) noexcept = default;
  HostRegistration& operator=(HostRegistration&&) noexcept = default;

  [[nodiscard]] std::byte* base() const { return base_.get(); }
  [[nodiscard]] size_t size() const { return base_ ? size_ : 0; }
  explicit operator bool() const { return base_ != nullptr; }

 private:
  struct Unregister {
    int device;  // no initializer: it would keep the class from being default-constructed
    void operator()(std::byte* p) const;  // cudaHostUnregister
  };
  HostRegistration(std::byte* base, size_t size, int device)
      : base_(base, Unregister{device}), size_(size) {}
  std::unique_ptr<std::byte, Unregister> base_;
  size_t size_ = 0;
};

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_DEVICE_BUFFER_H_
