// A fixed set of equal-sized device buffers, handed out one at a time: the device-side
// counterpart of transport::SlabPool. Device memory use is buffer_bytes × num_buffers, fixed
// at creation, never driven by the data.
//
//   SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<DeviceBufferPool> pool,
//                           DeviceBufferPool::Create(/*device=*/0, 16 << 20, 4));
//   std::optional<DeviceBufferLease> buffer = pool->Acquire(absl::Seconds(1));
//   engine.Submit(host, n, buffer->data(), ..., buffer->ready_after());
//   ...                                  // back to the pool when `buffer` is destroyed, or
//   buffer->ReleaseAfter(train_stream);  // once the work queued on train_stream is done
#ifndef SLUICE_GPU_DEVICE_BUFFER_POOL_H_
#define SLUICE_GPU_DEVICE_BUFFER_POOL_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gpu/cuda_handles.h"
#include "gpu/device_buffer.h"

namespace sluice::gpu {

class DeviceBufferPool;

// Exclusive use of one pooled device buffer; returns it when destroyed. Keeps the pool (and
// so the device memory) alive.
class DeviceBufferLease {
 public:
  DeviceBufferLease() = default;
  DeviceBufferLease(DeviceBufferLease&& other) noexcept { *this = std::move(other); }
  DeviceBufferLease& operator=(DeviceBufferLease&& other) noexcept;
  ~DeviceBufferLease() { Release(); }

  // A device pointer.
  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] size_t capacity() const { return capacity_; }
  explicit operator bool() const { return data_ != nullptr; }
  void Release();
  // Returns the buffer now, stream-ordered: the next user of the buffer must not write it
  // before the work queued on `stream` so far has finished (it waits for ready_after() on
  // the device, not on the host). If the event cannot be recorded, waits for `stream` here
  // and returns its error after releasing.
  absl::Status ReleaseAfter(CUstream_st* stream);
  // The event a writer of this buffer must wait for (cudaStreamWaitEvent); null when the
  // previous holder released it outright.
  [[nodiscard]] CUevent_st* ready_after() const { return ready_after_; }

 private:
  friend class DeviceBufferPool;
  DeviceBufferLease(std::shared_ptr<DeviceBufferPool> pool, size_t index, std::byte* data,
                    size_t capacity, CUevent_st* ready_after)
      : pool_(std::move(pool)),
        index_(index),
        data_(data),
        capacity_(capacity),
        ready_after_(ready_after) {}
  std::shared_ptr<DeviceBufferPool> pool_;
  size_t index_ = 0;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
  CUevent_st* ready_after_ = nullptr;
};

class DeviceBufferPool : public std::enable_shared_from_this<DeviceBufferPool> {
 public:
  // InvalidArgument for zero sizes; FailedPrecondition without a GPU; cudaMalloc's error.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<DeviceBufferPool>> Create(int device,
                                                                                size_t buffer_bytes,
                                                                                size_t num_buffers);

  // A free buffer, or nullopt when none frees up within `timeout`.
  [[nodiscard]] std::optional<DeviceBufferLease> Acquire(absl::Duration timeout);
  [[nodiscard]] std::optional<DeviceBufferLease> TryAcquire() {
    return Acquire(absl::ZeroDuration());
  }

  [[nodiscard]] size_t buffer_bytes() const { return buffer_bytes_; }
  [[nodiscard]] size_t num_buffers() const { return buffers_.size(); }
  [[nodiscard]] int device() const { return device_; }
  [[nodiscard]] size_t in_use() const;
  // Most buffers ever leased at once: never above num_buffers().
  [[nodiscard]] size_t max_in_use() const;

 private:
  friend class DeviceBufferLease;
  DeviceBufferPool(int device, size_t buffer_bytes, std::vector<DeviceBuffer> buffers,
                   std::vector<CudaEventPtr> released);
  // `recorded`: released_[index] was recorded on the holder's stream.
  void Return(size_t index, bool recorded);

  const int device_;
  const size_t buffer_bytes_;
  const std::vector<DeviceBuffer> buffers_;
  // One event per buffer, recorded by ReleaseAfter on the releasing holder's stream.
  const std::vector<CudaEventPtr> released_;
  mutable absl::Mutex mu_;
  std::vector<size_t> free_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> recorded_ ABSL_GUARDED_BY(mu_);  // per buffer: released_ must be waited
  size_t max_in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_DEVICE_BUFFER_POOL_H_
