// `sluice read --device N`: the batches of a read land in the memory of CUDA device N
// (staged through the client's pinned landing slabs and gpu::DeviceBatchReader, as a trainer
// linking Sluice gets them). To print them the command copies each batch back to the host;
// that copy is for output only and is not part of the data path.
//
//   SLUICE_RETURN_IF_ERROR(ReadThroughDevice("read", std::move(reader), read_options,
//                                            /*device=*/0, /*take=*/-1, stop, sink));
#ifndef SLUICE_TOOLS_DEVICE_READ_H_
#define SLUICE_TOOLS_DEVICE_READ_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "control/batch_reader.h"
#include "tools/batch_output.h"
#include "tools/stop_request.h"

namespace sluice::tools {

// Reads until the end (or `take` batches, when >= 0; coordinated reads: rounds) into device
// `device` and hands each batch to `sink`. FailedPrecondition naming the reason when no CUDA device
// is usable.
[[nodiscard]] absl::Status ReadThroughDevice(absl::string_view command,
                                             std::unique_ptr<control::BatchReader> reader,
                                             const control::ReadOptions& read_options, int device,
                                             int64_t take, const StopRequest& stop,
                                             BatchSink& sink);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_DEVICE_READ_H_
