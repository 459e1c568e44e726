// How long a progress loop keeps polling after its last event before it sleeps, adapted to
// the traffic it sees and to the CPUs it shares.
//
// Polling costs a core; sleeping costs a wake-up (an epoll return, and on shared memory a
// signal the peer must send) of tens of microseconds. A fixed spin is wrong for one of two
// patterns: streaming 1 MiB batches over shm, events come ~100 µs apart, so a 50 µs spin
// slept before nearly every request (1.4 context switches per message, measured), while a
// long spin burns a core other threads are waiting for (on 2 vCPUs a 1 ms ceiling nearly
// doubled the run time of multi-process tests).
//
// AdaptiveSpin starts at `base`. Each time the loop was woken soon after it went to sleep
// (the event came within `max`) it grows to twice the gap it just missed, but only while
// no thread is waiting for a CPU (`cores_to_spare`, by default /proc/loadavg's count of
// runnable threads against the CPUs, read at most every 10 ms). Once sleeps run longer
// than `max` (traffic stopped), or the CPUs are oversubscribed, it halves back to `base`.
//
//   AdaptiveSpin spin(absl::Microseconds(50), absl::Microseconds(200));
//   ... poll until nothing happened for spin.current(), then sleep ...
//   spin.Slept(how_long, /*woken_by_event=*/n > 0);
#ifndef SLUICE_TRANSPORT_ADAPTIVE_SPIN_H_
#define SLUICE_TRANSPORT_ADAPTIVE_SPIN_H_

#include <functional>

#include "absl/time/time.h"

namespace sluice::transport {

// True when no runnable thread of this machine waits for a CPU (from /proc/loadavg); true
// as well when that cannot be read.
[[nodiscard]] bool NoThreadWaitsForACpu();
// The same from the text of /proc/loadavg ("0.52 0.58 0.59 3/912 12345": 3 runnable).
[[nodiscard]] bool NoThreadWaitsForACpu(const char* loadavg, int cpus);

class AdaptiveSpin {
 public:
  // `max` below `base` is raised to `base` (a fixed spin). `cores_to_spare` is asked before
  // growing; tests pass their own.
  AdaptiveSpin(absl::Duration base, absl::Duration max,
               std::function<bool()> cores_to_spare = nullptr);

  [[nodiscard]] absl::Duration current() const { return current_; }

  // After a sleep of `slept` that ended by an event (`woken_by_event`) or by its timeout.
  void Slept(absl::Duration slept, bool woken_by_event);

 private:
  bool CoresToSpare();

  const absl::Duration base_;
  const absl::Duration max_;
  const std::function<bool()> cores_to_spare_;
  absl::Duration current_;
  // The default probe's last answer, and when it was read.
  bool spare_ = true;
  absl::Time probed_at_ = absl::InfinitePast();
};

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_ADAPTIVE_SPIN_H_
