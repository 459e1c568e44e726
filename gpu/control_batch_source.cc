#include "gpu/control_batch_source.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gpu/cuda_probe.h"

namespace sluice::gpu {

ControlBatchSource::ControlBatchSource(std::unique_ptr<control::BatchReader> reader,
                                       const control::ReadOptions& read_options, int device)
    : reader_(std::move(reader)),
      slab_bytes_(read_options.slab_bytes),
      device_(device),
      pin_(ProbeCuda().available && read_options.slab_bytes > 0) {}

absl::StatusOr<std::optional<HostBatch>> ControlBatchSource::Next() {
  SLUICE_ASSIGN_OR_RETURN(std::optional<control::Batch> batch, reader_->Next());
  if (!batch.has_value()) return std::nullopt;
  PinSlab(batch->data());
  auto owner = std::make_shared<control::Batch>(std::move(*batch));
  HostBatch host;
  host.bytes = owner->view().bytes();
  host.index = owner->index();
  host.worker = owner->worker();
  host.round = owner->round();
  host.owner = std::move(owner);
  return host;
}

absl::StatusOr<std::unique_ptr<DeviceBatchReader>> ReadIntoDevice(
    std::unique_ptr<control::BatchReader> reader, const control::ReadOptions& read_options,
    int device) {
  DeviceBatchReaderOptions options;
  options.device = device;
  options.buffer_bytes = read_options.slab_bytes;
  return DeviceBatchReader::Create(
      std::make_unique<ControlBatchSource>(std::move(reader), read_options, device), options);
}

void ControlBatchSource::PinSlab(const std::byte* slab) {
  if (!pin_ || std::find(seen_.begin(), seen_.end(), slab) != seen_.end()) return;
  absl::StatusOr<HostRegistration> registration =
      HostRegistration::Register(const_cast<std::byte*>(slab), slab_bytes_, device_);
  if (registration.ok()) {
    pinned_.push_back(*std::move(registration));
  } else if (!absl::IsAlreadyExists(registration.status())) {
    // Pinning only lets the copy run asynchronously; from pageable memory it is still right
    // (copy_engine.h). The batch, taken from the service already, is not dropped for it.
    std::fprintf(stderr,
                 "sluice: cannot page-lock landing slabs for CUDA (%s); batches are copied to "
                 "the device from pageable memory, more slowly\n",
                 std::string(registration.status().message()).c_str());
    pin_ = false;
    return;
  }
  seen_.push_back(slab);
}

}  // namespace sluice::gpu
