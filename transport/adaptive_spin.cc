#include "transport/adaptive_spin.h"

#include <algorithm>

namespace sluice::transport {

AdaptiveSpin::AdaptiveSpin(absl::Duration base, absl::Duration max)
    : base_(base), max_(std::max(base, max)), current_(base) {}

void AdaptiveSpin::Slept(absl::Duration slept, bool woken_by_event) {
  if (woken_by_event && slept <= max_) {
    // Spinning current_ + slept would have caught this event without a wake-up; ask for
    // twice that much so that jitter in the gaps does not put the loop back to sleep.
    current_ = std::min(max_, std::max(2 * current_, 2 * (current_ + slept)));
    return;
  }
  current_ = std::max(base_, current_ / 2);
}

}  // namespace sluice::transport
