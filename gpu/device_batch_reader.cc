#include "gpu/device_batch_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/batch_layout.h"
#include "gpu/cuda_probe.h"

namespace sluice::gpu {
namespace {

absl::Status CheckOptions(const DeviceBatchReaderOptions& options) {
  if (options.buffer_bytes == 0 || options.num_device_buffers < 1 || options.prefetch_depth < 0 ||
      options.num_streams < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceBatchReader needs buffer_bytes > 0, num_device_buffers >= 1, prefetch_depth >= 0 "
        "and num_streams >= 1; got ",
        options.buffer_bytes, ", ", options.num_device_buffers, ", ", options.prefetch_depth,
        " and ", options.num_streams));
  }
  switch (options.landing) {
    case DeviceLanding::kDirect:
      // TODO(gpu): needs landing slabs in device memory (see device_landing.h).
      return absl::UnimplementedError(
          "DeviceLanding::kDirect needs landing slabs in device memory, which "
          "transport::SlabPool cannot hold yet; use kStagedThroughPinnedHost");
    case DeviceLanding::kStagedThroughPinnedHost:
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("DeviceBatchReader: invalid DeviceLanding value");
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBatchReader>> DeviceBatchReader::Create(
    std::unique_ptr<HostBatchSource> source, const DeviceBatchReaderOptions& options) {
  if (source == nullptr) return absl::InvalidArgumentError("DeviceBatchReader: null source");
  SLUICE_RETURN_IF_ERROR(CheckOptions(options));
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(options.device, "DeviceBatchReader"));
  SLUICE_ASSIGN_OR_RETURN(
      std::shared_ptr<DeviceBufferPool> pool,
      DeviceBufferPool::Create(options.device, options.buffer_bytes,
                               static_cast<size_t>(options.num_device_buffers)));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceCopyEngine> engine,
                          DeviceCopyEngine::Create({.device = options.device,
                                                    .num_streams = options.num_streams,
                                                    .max_in_flight = options.num_device_buffers}));
  return std::unique_ptr<DeviceBatchReader>(
      new DeviceBatchReader(std::move(source), options, std::move(pool), std::move(engine)));
}

DeviceBatchReader::DeviceBatchReader(std::unique_ptr<HostBatchSource> source,
                                     const DeviceBatchReaderOptions& options,
                                     std::shared_ptr<DeviceBufferPool> pool,
                                     std::unique_ptr<DeviceCopyEngine> engine)
    : options_(options),
      source_(std::move(source)),
      pool_(std::move(pool)),
      engine_(std::move(engine)) {}

DeviceBatchReader::~DeviceBatchReader() {
  engine_.reset();  // runs the callbacks of the copies in flight while pending_ exists
}

absl::StatusOr<std::optional<DeviceBatch>> DeviceBatchReader::Next() {
  if (!error_.ok()) return error_;
  if (source_error_.ok()) {
    // Copies already started go out before the error that stopped the next: they were
    // taken from the service (a shared job counts them read) and are whole on the device.
    if (absl::Status filled = Fill(); !filled.ok()) source_error_ = filled;
  }
  if (pending_.empty()) {
    if (!source_error_.ok()) error_ = source_error_;
    if (!error_.ok()) return error_;
    return std::nullopt;  // the source ended and every batch went out
  }
  std::unique_ptr<Pending> batch = std::move(pending_.front());
  pending_.pop_front();
  absl::Status copied;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&batch->copied));
    copied = batch->status;
  }
  if (!copied.ok()) {
    error_ = absl::Status(copied.code(), absl::StrCat("copying batch ", batch->index,
                                                      " to the device: ", copied.message()));
    return error_;
  }
  return DeviceBatch(std::move(batch->buffer), batch->size, std::move(batch->tensors), batch->index,
                     std::move(batch->worker), batch->round);
}

absl::Status DeviceBatchReader::Fill() {
  const size_t target = static_cast<size_t>(options_.prefetch_depth) + 1;
  while (!source_done_ && pending_.size() < target) {
    std::optional<DeviceBufferLease> buffer = pool_->TryAcquire();
    if (!buffer.has_value()) {
      // Copies are running: their buffers become the caller's batches, so stop here.
      if (!pending_.empty()) break;
      buffer = pool_->Acquire(options_.buffer_wait_timeout);
      if (!buffer.has_value()) {
        return absl::DeadlineExceededError(absl::StrCat(
            "DeviceBatchReader: all ", pool_->num_buffers(), " device buffers stayed in use for ",
            absl::FormatDuration(options_.buffer_wait_timeout),
            "; destroy DeviceBatch objects (or raise num_device_buffers) before calling Next"));
      }
    }
    SLUICE_ASSIGN_OR_RETURN(bool started, StartOne(std::move(*buffer)));
    if (!started) source_done_ = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> DeviceBatchReader::StartOne(DeviceBufferLease buffer) {
  SLUICE_ASSIGN_OR_RETURN(std::optional<HostBatch> host, source_->Next());
  if (!host.has_value()) return false;
  absl::StatusOr<engine::BatchView> view = engine::BatchView::Parse(host->bytes);
  if (!view.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", host->index, " from ", host->worker, ": ", view.status().message()));
  }
  const std::span<const std::byte> bytes = view->bytes();
  if (bytes.size() > buffer.capacity()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("batch ", host->index, " from ", host->worker, " is ", bytes.size(),
                     " bytes; device buffers hold ", buffer.capacity(),
                     " (DeviceBatchReaderOptions::buffer_bytes)"));
  }
  auto pending = std::make_unique<Pending>();
  pending->size = bytes.size();
  pending->index = host->index;
  pending->worker = std::move(host->worker);
  pending->round = host->round;
  pending->tensors.reserve(view->num_tensors());
  for (size_t i = 0; i < view->num_tensors(); ++i) {
    engine::TensorView t = view->tensor(i);
    size_t offset = static_cast<size_t>(t.data - bytes.data());
    pending->tensors.push_back(DeviceTensor{t.dtype,
                                            std::vector<int64_t>(t.shape.begin(), t.shape.end()),
                                            buffer.data() + offset, offset, t.nbytes});
  }
  pending->buffer = std::move(buffer);
  Pending* p = pending.get();
  // The callback owns the host batch, so its slab is freed the moment the copy is done.
  SLUICE_RETURN_IF_ERROR(engine_->Submit(
      bytes.data(), bytes.size(), p->buffer.data(),
      [this, p, owner = std::move(host->owner)](absl::Status status) mutable {
        owner.reset();
        absl::MutexLock lock(&mu_);
        p->status = std::move(status);
        p->copied = true;
      },
      p->buffer.ready_after()));
  pending_.push_back(std::move(pending));
  return true;
}

DeviceBatchReaderStats DeviceBatchReader::stats() const {
  return DeviceBatchReaderStats{pool_->num_buffers(), pool_->in_use(), pool_->max_in_use(),
                                engine_->counters()};
}

}  // namespace sluice::gpu
