#include "gpu/device_buffer_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/await.h"
#include "common/status_macros.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu/cuda_error.h"
#endif

namespace sluice::gpu {

DeviceBufferLease& DeviceBufferLease::operator=(DeviceBufferLease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::move(other.pool_);
    index_ = other.index_;
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    ready_after_ = std::exchange(other.ready_after_, nullptr);
  }
  return *this;
}

void DeviceBufferLease::Release() {
  if (data_ == nullptr) return;
  // Work the previous holder queued may still be pending if nobody waited on it: keep it.
  pool_->Return(index_, /*recorded=*/ready_after_ != nullptr);
  data_ = nullptr;
  capacity_ = 0;
  ready_after_ = nullptr;
  pool_.reset();
}

absl::Status DeviceBufferLease::ReleaseAfter(CUstream_st* stream) {
  if (data_ == nullptr) return absl::OkStatus();
  absl::Status recorded = absl::FailedPreconditionError("built without CUDA");
#if SLUICE_HAVE_CUDA
  recorded = [&]() -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(pool_->device()));
    return internal::CudaCheck(cudaEventRecord(pool_->released_[index_].get(), stream),
                               "cudaEventRecord");
  }();
  // Not recorded (nor even on the device: the stream carries its own context): the slow, safe
  // way, for the next holder may write at once.
  if (!recorded.ok() && cudaStreamSynchronize(stream) != cudaSuccess) (void)cudaGetLastError();
#else
  (void)stream;
#endif
  pool_->Return(index_, recorded.ok());
  data_ = nullptr;
  capacity_ = 0;
  ready_after_ = nullptr;
  pool_.reset();
  return recorded;
}

absl::StatusOr<std::shared_ptr<DeviceBufferPool>> DeviceBufferPool::Create(int device,
                                                                           size_t buffer_bytes,
                                                                           size_t num_buffers) {
  if (buffer_bytes == 0 || num_buffers == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device buffer pool needs buffer_bytes > 0 and num_buffers > 0, got ",
                     buffer_bytes, " and ", num_buffers));
  }
  std::vector<DeviceBuffer> buffers;
  std::vector<CudaEventPtr> released;
  buffers.reserve(num_buffers);
  for (size_t i = 0; i < num_buffers; ++i) {
    SLUICE_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(device, buffer_bytes));
    buffers.push_back(std::move(buffer));
    SLUICE_ASSIGN_OR_RETURN(CudaEventPtr event, CreateCudaEvent(device));
    released.push_back(std::move(event));
  }
  return std::shared_ptr<DeviceBufferPool>(
      new DeviceBufferPool(device, buffer_bytes, std::move(buffers), std::move(released)));
}

DeviceBufferPool::DeviceBufferPool(int device, size_t buffer_bytes,
                                   std::vector<DeviceBuffer> buffers,
                                   std::vector<CudaEventPtr> released)
    : device_(device),
      buffer_bytes_(buffer_bytes),
      buffers_(std::move(buffers)),
      released_(std::move(released)),
      recorded_(buffers_.size(), false) {
  free_.reserve(buffers_.size());
  for (size_t i = buffers_.size(); i-- > 0;) free_.push_back(i);
}

std::optional<DeviceBufferLease> DeviceBufferPool::Acquire(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_.empty(); };
  // A zero timeout must not sleep: a reader polls its pool after every batch (see
  // common/await.h).
  if (!AwaitAtMost(mu_, absl::Condition(&available), timeout)) {
    return std::nullopt;
  }
  size_t index = free_.back();
  free_.pop_back();
  max_in_use_ = std::max(max_in_use_, buffers_.size() - free_.size());
  return DeviceBufferLease(shared_from_this(), index, buffers_[index].data(), buffer_bytes_,
                           recorded_[index] ? released_[index].get() : nullptr);
}

void DeviceBufferPool::Return(size_t index, bool recorded) {
  absl::MutexLock lock(&mu_);
  recorded_[index] = recorded;
  free_.push_back(index);
}

size_t DeviceBufferPool::in_use() const {
  absl::MutexLock lock(&mu_);
  return buffers_.size() - free_.size();
}

size_t DeviceBufferPool::max_in_use() const {
  absl::MutexLock lock(&mu_);
  return max_in_use_;
}

}  // namespace sluice::gpu
