// Adapts a control::BatchReader (batches landing in the client's registered UCX slabs) to a
// HostBatchSource for DeviceBatchReader.
//
// When a GPU is usable, each landing slab is page-locked for CUDA (cudaHostRegister) the first
// time a batch arrives in it, so the copies out of it are asynchronous; the reader's slabs are
// few (max_outstanding_requests + prefetch_batches) and registered once each. The reader does
// not expose its pool, so each slab is registered over [data, data + ReadOptions::slab_bytes),
// which always lies inside it. Without a GPU it passes batches through untouched.
//
//   ReadOptions read;
//   SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<control::BatchReader> reader,
//                           client->Read(dataset_id, read));
//   SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBatchReader> gpu_reader,
//                           ReadIntoDevice(std::move(reader), read, /*device=*/0));
#ifndef SLUICE_GPU_CONTROL_BATCH_SOURCE_H_
#define SLUICE_GPU_CONTROL_BATCH_SOURCE_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "control/batch_reader.h"
#include "gpu/device_batch_reader.h"
#include "gpu/device_buffer.h"
#include "gpu/host_batch_source.h"

namespace sluice::gpu {

class ControlBatchSource final : public HostBatchSource {
 public:
  // `read_options` are those `reader` was started with (for slab_bytes); slabs are pinned
  // in `device`'s context, the one the batches are copied to.
  ControlBatchSource(std::unique_ptr<control::BatchReader> reader,
                     const control::ReadOptions& read_options, int device = 0);

  // HostBatch::owner holds the control::Batch: dropping it returns the landing slab.
  [[nodiscard]] absl::StatusOr<std::optional<HostBatch>> Next() override;

  // Landing slabs page-locked for CUDA so far (0 without a GPU).
  [[nodiscard]] size_t pinned_slabs() const { return pinned_.size(); }

 private:
  // Page-locks `slab` once; where that fails, says so and pins nothing more.
  void PinSlab(const std::byte* slab);

  std::unique_ptr<control::BatchReader> reader_;
  const size_t slab_bytes_;
  const int device_;
  bool pin_;
  std::vector<const std::byte*> seen_;  // slabs already pinned (or pinned by someone else)
  // After reader_: unregistered before the reader (and its slab pool) goes away.
  std::vector<HostRegistration> pinned_;
};

// A DeviceBatchReader over `reader` (started with `read_options`) landing in `device`, its
// device buffers as large as the landing slabs: what `sluice read --device` and
// `sluice-perf service --device` read through.
[[nodiscard]] absl::StatusOr<std::unique_ptr<DeviceBatchReader>> ReadIntoDevice(
    std::unique_ptr<control::BatchReader> reader, const control::ReadOptions& read_options,
    int device);

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_CONTROL_BATCH_SOURCE_H_
