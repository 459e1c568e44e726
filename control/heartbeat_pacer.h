// HeartbeatPacer paces a heartbeat loop: a beat every `interval`, or sooner when someone
// knows the other side has news (Soon()), but never two within `min_gap`.
//
// tf.data's workers and clients learn of new tasks and finished jobs only on their next
// heartbeat, so a job's first batch and its end each wait up to an interval: 200 ms of
// fixed cost for any job at the 100 ms default. A worker asked for a task it does not know,
// or for more of a task that has produced everything, and a reader waiting only for the
// dispatcher to call its job finished, ask for the next beat now.
//
//   HeartbeatPacer pacer(absl::Milliseconds(100), absl::Milliseconds(5));
//   while (pacer.Wait()) Heartbeat();   // in the heartbeat thread
//   pacer.Soon();                      // from any thread: beat again soon
//   pacer.Stop();                      // Wait() returns false at once
#ifndef SLUICE_CONTROL_HEARTBEAT_PACER_H_
#define SLUICE_CONTROL_HEARTBEAT_PACER_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sluice::control {

class HeartbeatPacer {
 public:
  HeartbeatPacer(absl::Duration interval, absl::Duration min_gap)
      : interval_(interval), min_gap_(min_gap) {}

  // Waits until the next beat is due: `interval` after the previous Wait returned, or
  // `min_gap` after it once Soon() was called. False once stopped (at once, mid-wait too).
  [[nodiscard]] bool Wait();
  // Asks for the next beat early; calls before it is taken count once.
  void Soon();
  void Stop();

 private:
  const absl::Duration interval_;
  const absl::Duration min_gap_;
  absl::Mutex mu_;
  bool soon_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_beat_ ABSL_GUARDED_BY(mu_) = absl::Now();
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_HEARTBEAT_PACER_H_
