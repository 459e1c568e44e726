// Watches a read for `sluice read` and `sluice local`: once no batch has come for a few
// seconds it says on stderr what the read waits on (BatchReader::DescribeWait), again every
// half minute, and a stop request (Ctrl-C, SIGTERM) ends a Next() that waits, so the command
// still prints what it read instead of being cut off after the StopRequest's grace.
//
//   ReadWatch watch("read", reader.get(), stop);   // destroyed before the reader
//   while (!stop.requested()) {
//     absl::StatusOr<std::optional<control::Batch>> batch = reader->Next();
//     if (!batch.ok() && IsReadInterruption(batch.status())) break;  // not a failure
//     watch.BatchArrived();
//     ...
//   }
//   watch.SaySkippedRecords();
#ifndef SLUICE_TOOLS_READ_WATCH_H_
#define SLUICE_TOOLS_READ_WATCH_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "control/batch_reader.h"
#include "tools/stop_request.h"

namespace sluice::tools {

// The error a reader the watch interrupted returns (and nothing else is): a read that failed
// for a reason of its own as a stop came still says why.
[[nodiscard]] bool IsReadInterruption(const absl::Status& status);

class ReadWatch {
 public:
  // `reader` must outlive the watch.
  ReadWatch(std::string command, control::BatchReader* reader, const StopRequest& stop,
            absl::Duration quiet_notice = absl::Seconds(5));
  ~ReadWatch();
  ReadWatch(const ReadWatch&) = delete;
  ReadWatch& operator=(const ReadWatch&) = delete;

  // A batch came: the quiet spell starts over.
  void BatchArrived();

  // Once the read's output is out: how many records the workers skipped as corrupt
  // (skip_bad_records=true), and why for the first few. Nothing when none was, but
  // otherwise a read of a corrupt file would look whole.
  void SaySkippedRecords() const;

 private:
  void Watch();

  const std::string command_;
  control::BatchReader* const reader_;
  const StopRequest& stop_;
  const absl::Duration quiet_notice_;
  std::atomic<int64_t> last_batch_unix_ns_;
  absl::Notification done_;
  std::thread watcher_;
};

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_READ_WATCH_H_
