// The worker's warnings of memory pressure, each said once: every further occurrence shows
// in its stats, and a log line per batch would flood.
#include <iostream>

#include "control/worker.h"

namespace sluice::control {

void Worker::SayPoolPressureOnce(const proto::WorkerStats& stats) {
  if (stats.kept_batches_released() > 0 && !warned_kept_released_) {
    // Once: each further release shows in the stats, and a log line per batch would flood.
    warned_kept_released_ = true;
    std::cerr << "sluice worker " << address_ << ": let batches go before their clients "
              << "acknowledged them (to keep slabs for the pipeline); a broken connection "
              << "may now lose a batch. Raise --slabs (now " << options_.num_slabs << " of "
              << options_.slab_bytes << " bytes; half of them keep batches) to hold at least "
              << "2 x clients x requests in flight per client of its batches\n";
  }
  if (stats.slab_waits() > 0 && !warned_slab_waits_) {
    warned_slab_waits_ = true;
    std::cerr << "sluice worker " << address_ << ": a task's pipeline waited for a free slab; "
              << "all " << options_.num_slabs << " were held by batches buffered (up to "
              << options_.task.buffer_batches << " per task) or kept for acknowledgements. "
              << "A reader that stops reading holds its task's until its buffer moves to "
              << "the heap (after a second or two); raise --slabs to serve more tasks at "
              << "once\n";
  }
  // --spill-bytes 0 refuses every spill by choice: nothing to warn of.
  if (options_.max_spilled_bytes > 0 && task_options_.spill_budget->refusals() > 0 &&
      !warned_spill_budget_) {
    warned_spill_budget_ = true;
    std::cerr << "sluice worker " << address_ << ": the buffers of readers that stopped "
              << "fill the heap they may move to (" << options_.max_spilled_bytes
              << " bytes, --spill-bytes), so theirs keep slabs other jobs wait for; raise "
              << "--spill-bytes or --slabs\n";
  }
}

}  // namespace sluice::control
