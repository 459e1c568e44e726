// How long a progress loop keeps polling after its last event before it sleeps, adapted to
// the traffic it sees.
//
// Polling costs a core; sleeping costs a wake-up (an epoll return, and on shared memory a
// signal the peer must send) of tens of microseconds. A fixed spin is wrong for one of two
// patterns: streaming 1 MiB batches over shm, events come ~100 µs apart, so a 50 µs spin
// slept before nearly every request (1.4 context switches per message, measured), while a
// 1 ms spin burns a core after every lone control call. AdaptiveSpin starts at `base` and,
// each time the loop was woken soon after it went to sleep (the event came within `max`),
// grows to twice the gap it just missed; once sleeps run longer than `max` (traffic
// stopped), it halves back toward `base`.
//
//   AdaptiveSpin spin(absl::Microseconds(50), absl::Milliseconds(1));
//   ... poll until nothing happened for spin.current(), then sleep ...
//   spin.Slept(how_long, /*woken_by_event=*/n > 0);
#ifndef SLUICE_TRANSPORT_ADAPTIVE_SPIN_H_
#define SLUICE_TRANSPORT_ADAPTIVE_SPIN_H_

#include "absl/time/time.h"

namespace sluice::transport {

class AdaptiveSpin {
 public:
  // `max` below `base` is raised to `base` (a fixed spin).
  AdaptiveSpin(absl::Duration base, absl::Duration max);

  [[nodiscard]] absl::Duration current() const { return current_; }

  // After a sleep of `slept` that ended by an event (`woken_by_event`) or by its timeout.
  void Slept(absl::Duration slept, bool woken_by_event);

 private:
  const absl::Duration base_;
  const absl::Duration max_;
  absl::Duration current_;
};

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_ADAPTIVE_SPIN_H_
