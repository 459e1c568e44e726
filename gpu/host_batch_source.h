// Where a DeviceBatchReader gets its batches: encoded batches (engine/batch_layout.h) in host
// memory, one at a time. control::BatchReader is adapted to it by ControlBatchSource
// (gpu/control_batch_source.h); tests feed a fake.
//
//   class VectorSource : public HostBatchSource {
//     absl::StatusOr<std::optional<HostBatch>> Next() override {
//       if (next_ == batches_.size()) return std::nullopt;
//       auto owned = std::make_shared<std::vector<std::byte>>(batches_[next_]);
//       return HostBatch{*owned, static_cast<int64_t>(next_++), "fake", owned};
//     }
//   };
#ifndef SLUICE_GPU_HOST_BATCH_SOURCE_H_
#define SLUICE_GPU_HOST_BATCH_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace sluice::gpu {

struct HostBatch {
  // One encoded batch, starting at its header; may run past the batch's total_bytes. Ideally
  // page-locked for CUDA (see HostRegistration), so the copy to the device is asynchronous.
  std::span<const std::byte> bytes;
  // Position of the batch in its task's output, and the worker that produced it.
  int64_t index = 0;
  std::string worker;
  // Keeps `bytes` valid (e.g. the landing slab). Dropped as soon as the bytes are on the
  // device, which frees the slab for the next fetch while later copies still run.
  std::shared_ptr<void> owner;
  // Coordinated reads: the round the batch belongs to; -1 otherwise.
  int64_t round = -1;
};

class HostBatchSource {
 public:
  virtual ~HostBatchSource() = default;
  // The next batch; nullopt at the end; an error ends the read.
  [[nodiscard]] virtual absl::StatusOr<std::optional<HostBatch>> Next() = 0;
};

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_HOST_BATCH_SOURCE_H_
