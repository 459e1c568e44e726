#include "tools/read_watch.h"

#include <iostream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/thread_name.h"

namespace sluice::tools {
namespace {

constexpr absl::Duration kLook = absl::Milliseconds(100);
constexpr absl::Duration kRepeatNotice = absl::Seconds(30);
constexpr absl::string_view kInterrupted = "stopped by a signal";

}  // namespace

bool IsReadInterruption(const absl::Status& status) {
  return absl::IsCancelled(status) && status.message() == kInterrupted;
}

ReadWatch::ReadWatch(std::string command, control::BatchReader* reader, const StopRequest& stop,
                     absl::Duration quiet_notice)
    : command_(std::move(command)),
      reader_(reader),
      stop_(stop),
      quiet_notice_(quiet_notice),
      last_batch_unix_ns_(absl::ToUnixNanos(absl::Now())),
      watcher_([this] { Watch(); }) {}

ReadWatch::~ReadWatch() {
  done_.Notify();
  watcher_.join();
}

void ReadWatch::BatchArrived() {
  last_batch_unix_ns_.store(absl::ToUnixNanos(absl::Now()), std::memory_order_relaxed);
}

void ReadWatch::Watch() {
  SetCurrentThreadName("sluice-watch");
  bool interrupted = false;
  int64_t said_for = -1;  // the quiet spell (its start) last described
  absl::Time said_at = absl::InfinitePast();
  while (!done_.WaitForNotificationWithTimeout(kLook)) {
    if (stop_.requested() && !interrupted) {
      reader_->Interrupt(absl::CancelledError(kInterrupted));
      interrupted = true;
    }
    if (interrupted) continue;
    const int64_t since_ns = last_batch_unix_ns_.load(std::memory_order_relaxed);
    const absl::Time now = absl::Now();
    const absl::Duration quiet = now - absl::FromUnixNanos(since_ns);
    if (quiet < quiet_notice_) continue;
    if (said_for == since_ns && now - said_at < kRepeatNotice) continue;
    std::cerr << "sluice " << command_ << ": no batch for "
              << absl::FormatDuration(absl::Trunc(quiet, absl::Seconds(1))) << ": "
              << reader_->DescribeWait() << std::endl;
    said_for = since_ns;
    said_at = now;
  }
}

void ReadWatch::SaySkippedRecords() const {
  const int64_t skipped = reader_->bad_records_skipped();
  if (skipped == 0) return;
  std::cerr << "sluice " << command_ << ": the tasks this read drew from skipped " << skipped
            << (skipped == 1 ? " corrupt record" : " corrupt records")
            << " (skip_bad_records=true)";
  const std::vector<std::string> examples = reader_->bad_record_examples();
  std::cerr << (examples.empty()                                   ? ""
                : static_cast<int64_t>(examples.size()) == skipped ? ":"
                                                                   : ", among them:")
            << "\n";
  for (const std::string& example : examples) std::cerr << "  " << example << "\n";
}

}  // namespace sluice::tools
