// Batches in GPU memory: wraps a HostBatchSource (e.g. a control::BatchReader through
// ControlBatchSource) and hands out DeviceBatch objects whose device buffer holds the batch's
// encoded bytes exactly as engine/batch_layout.h lays them out, so tensor i of the batch is at
// data() + (its offset in the BatchView). Device memory is a fixed pool of
// num_device_buffers × buffer_bytes; while the caller uses batch k, the copies of up to
// `prefetch_depth` later batches run, and each host batch is released (its slab freed for the
// next fetch) as soon as its copy finishes.
//
//   SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBatchReader> reader,
//                           DeviceBatchReader::Create(std::move(source), options));
//   while (true) {
//     SLUICE_ASSIGN_OR_RETURN(std::optional<DeviceBatch> batch, reader->Next());
//     if (!batch) break;
//     const DeviceTensor& x = batch->tensor(0);  // x.data is a device pointer
//     LaunchTraining(x.data, x.shape, stream);
//     batch->ReleaseAfter(stream);  // the buffer is reused once the training step is done,
//   }                               // without a cudaStreamSynchronize on the host
//
// Only kStagedThroughPinnedHost is implemented (see device_landing.h); Create refuses kDirect.
// Next() is for one thread; DeviceBatch objects may be destroyed on any thread.
#ifndef SLUICE_GPU_DEVICE_BATCH_READER_H_
#define SLUICE_GPU_DEVICE_BATCH_READER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/tensor.h"
#include "gpu/copy_engine.h"
#include "gpu/device_buffer_pool.h"
#include "gpu/device_landing.h"
#include "gpu/host_batch_source.h"

namespace sluice::gpu {

struct DeviceBatchReaderOptions {
  int device = 0;
  // Largest encoded batch accepted (the size of each device buffer).
  size_t buffer_bytes = 16 << 20;
  // Device buffers in all: those the caller holds, plus the batches being copied ahead.
  int num_device_buffers = 4;
  // Batches copied ahead of the one Next() returns (0: copy on demand, no overlap).
  int prefetch_depth = 2;
  int num_streams = 2;
  DeviceLanding landing = DeviceLanding::kStagedThroughPinnedHost;
  // How long Next() waits for the caller to give back a device buffer when it holds them all.
  absl::Duration buffer_wait_timeout = absl::Seconds(60);
};

// One tensor of a DeviceBatch: as engine::TensorView, with `data` pointing into device memory.
struct DeviceTensor {
  engine::DType dtype;
  std::vector<int64_t> shape;
  const std::byte* data;  // device pointer
  size_t offset;          // from the start of the batch's buffer
  size_t nbytes;
};

// One batch in device memory. Move-only; returns its device buffer when destroyed, so destroy
// it only once the device work reading it has finished.
class DeviceBatch {
 public:
  DeviceBatch(DeviceBatch&&) = default;
  DeviceBatch& operator=(DeviceBatch&&) = default;

  // Device pointer to the encoded batch: [data(), data() + size()) is its batch_layout bytes.
  [[nodiscard]] const std::byte* data() const { return buffer_.data(); }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] size_t num_tensors() const { return tensors_.size(); }
  [[nodiscard]] const DeviceTensor& tensor(size_t i) const { return tensors_.at(i); }
  [[nodiscard]] int64_t index() const { return index_; }
  [[nodiscard]] const std::string& worker() const { return worker_; }
  // Coordinated reads: the batch's round (HostBatch::round); -1 otherwise.
  [[nodiscard]] int64_t round() const { return round_; }
  // Gives the device buffer back without waiting on the host: the reader's next copy into
  // it waits on the device for the work queued on `stream` so far (the kernels that read
  // this batch). The batch must not be used afterwards.
  absl::Status ReleaseAfter(CUstream_st* stream) { return buffer_.ReleaseAfter(stream); }

 private:
  friend class DeviceBatchReader;
  DeviceBatch(DeviceBufferLease buffer, size_t size, std::vector<DeviceTensor> tensors,
              int64_t index, std::string worker, int64_t round)
      : buffer_(std::move(buffer)),
        size_(size),
        tensors_(std::move(tensors)),
        index_(index),
        worker_(std::move(worker)),
        round_(round) {}
  DeviceBufferLease buffer_;
  size_t size_;
  std::vector<DeviceTensor> tensors_;
  int64_t index_;
  std::string worker_;
  int64_t round_;
};

struct DeviceBatchReaderStats {
  size_t device_buffers = 0;
  size_t device_buffers_in_use = 0;
  size_t max_device_buffers_in_use = 0;  // never above device_buffers
  CopyEngineCounters copies;
};

class DeviceBatchReader {
 public:
  // InvalidArgument for bad options; Unimplemented for DeviceLanding::kDirect;
  // FailedPrecondition "DeviceBatchReader needs a CUDA device: <reason>" without a GPU.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DeviceBatchReader>> Create(
      std::unique_ptr<HostBatchSource> source, const DeviceBatchReaderOptions& options);
  // Waits for the copies in flight; batches already handed out stay valid.
  ~DeviceBatchReader();

  // The next batch, its bytes on the device; nullopt at the end. Errors (the source's, a batch
  // that does not parse or exceeds buffer_bytes, a CUDA error) end the read: later calls
  // return the same error. The source's come after the batches whose copies had started.
  [[nodiscard]] absl::StatusOr<std::optional<DeviceBatch>> Next();

  [[nodiscard]] DeviceBatchReaderStats stats() const;

 private:
  struct Pending {
    DeviceBufferLease buffer;
    size_t size = 0;
    std::vector<DeviceTensor> tensors;
    int64_t index = 0;
    std::string worker;
    int64_t round = -1;
    bool copied = false;  // guarded by mu_
    absl::Status status;  // guarded by mu_
  };

  DeviceBatchReader(std::unique_ptr<HostBatchSource> source,
                    const DeviceBatchReaderOptions& options, std::shared_ptr<DeviceBufferPool> pool,
                    std::unique_ptr<DeviceCopyEngine> engine);
  // Starts copies until prefetch_depth + 1 are pending, the source ends, or no buffer is free.
  absl::Status Fill();
  // Pulls one batch from the source into `buffer` and starts its copy; false at the end.
  absl::StatusOr<bool> StartOne(DeviceBufferLease buffer);

  const DeviceBatchReaderOptions options_;
  std::unique_ptr<HostBatchSource> source_;
  std::shared_ptr<DeviceBufferPool> pool_;
  absl::Mutex mu_;
  std::deque<std::unique_ptr<Pending>> pending_;  // oldest first; Next()'s thread only
  bool source_done_ = false;
  // What ended the source; Next() returns it once the batches started before it are out.
  absl::Status source_error_;
  absl::Status error_;
  // Last: destroyed first, so its callbacks finish while the state above still exists.
  std::unique_ptr<DeviceCopyEngine> engine_;
};

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_DEVICE_BATCH_READER_H_
