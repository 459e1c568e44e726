#include "control/heartbeat_pacer.h"

namespace sluice::control {

bool HeartbeatPacer::Wait() {
  absl::MutexLock lock(&mu_);
  auto soon_or_stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return soon_ || stopped_; };
  mu_.AwaitWithDeadline(absl::Condition(&soon_or_stopped), last_beat_ + interval_);
  if (soon_ && !stopped_) {
    // Early, but not sooner than min_gap after the last beat.
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped_; };
    mu_.AwaitWithDeadline(absl::Condition(&stopped), last_beat_ + min_gap_);
  }
  soon_ = false;
  last_beat_ = absl::Now();
  return !stopped_;
}

void HeartbeatPacer::Soon() {
  absl::MutexLock lock(&mu_);
  soon_ = true;
}

void HeartbeatPacer::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

}  // namespace sluice::control
