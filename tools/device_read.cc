#include "tools/device_read.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "engine/batch_layout.h"
#include "gpu/control_batch_source.h"
#include "gpu/device_batch_reader.h"
#include "gpu/device_buffer.h"
#include "tools/read_watch.h"

namespace sluice::tools {

absl::Status ReadThroughDevice(absl::string_view command,
                               std::unique_ptr<control::BatchReader> reader,
                               const control::ReadOptions& read_options, int device, int64_t take,
                               const StopRequest& stop, BatchSink& sink) {
  control::BatchReader* const host_reader = reader.get();  // the device reader's, from here
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<gpu::DeviceBatchReader> device_reader,
                          gpu::ReadIntoDevice(std::move(reader), read_options, device));
  ReadWatch watch(std::string(command), host_reader, stop);  // gone before device_reader
  std::vector<std::byte> host;
  // Coordinated consumers count rounds, as the host path does (read_command.cc), and a
  // reader bounded by max_batches ends by itself, reporting its last deliveries.
  const bool coordinated = read_options.num_consumers > 0;
  const bool ends_by_itself = read_options.max_batches > 0;
  for (int64_t taken = 0; (take < 0 || taken < take || ends_by_itself) && !stop.requested();
       ++taken) {
    absl::StatusOr<std::optional<gpu::DeviceBatch>> next = device_reader->Next();
    if (!next.ok()) {
      watch.SaySkippedRecords();  // perhaps why the data looked wrong
      return next.status();
    }
    std::optional<gpu::DeviceBatch>& batch = *next;
    if (!batch) break;
    watch.BatchArrived();
    if (coordinated && take >= 0 && batch->round() >= take) break;
    if (coordinated) taken = batch->round();
    host.resize(batch->size());
    SLUICE_RETURN_IF_ERROR(
        gpu::CopyDeviceToHost(device, batch->data(), batch->size(), host.data()));
    SLUICE_ASSIGN_OR_RETURN(engine::BatchView view, engine::BatchView::Parse(host));
    sink.Add(view, batch->worker(), batch->index(), batch->round());
    if (sink.output_failed()) break;  // the caller tells a closed pipe
  }
  // Before the caller's summary, unlike the host path; not to a reader that went away.
  if (!sink.output_failed()) watch.SaySkippedRecords();
  return absl::OkStatus();
}

}  // namespace sluice::tools
