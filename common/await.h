// Waiting on an absl::Mutex condition for at most a duration, without sleeping when the
// duration leaves no time to wait.
//
// Abseil's Mutex::AwaitWithTimeout with a zero timeout queues a waiter and enters the kernel
// even when it will give up at once, and every later Unlock then has a waiter to wake. A
// pool polled with "try, don't wait" from two threads turned into a futex ping-pong that cost
// 4 KiB batches 96% of their rate (perf/RESULTS.md, session 28). Use this instead wherever
// the timeout may be zero.
//
//   absl::MutexLock lock(&mu_);
//   auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_.empty(); };
//   if (!AwaitAtMost(mu_, absl::Condition(&available), timeout)) return std::nullopt;
#ifndef SLUICE_COMMON_AWAIT_H_
#define SLUICE_COMMON_AWAIT_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sluice {

// Returns whether `condition` holds, waiting up to `timeout` for it (with `mu` released while
// waiting, as Mutex::Await does). A timeout of zero or less only evaluates the condition.
[[nodiscard]] inline bool AwaitAtMost(absl::Mutex& mu, const absl::Condition& condition,
                                      absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  if (condition.Eval()) return true;
  if (timeout <= absl::ZeroDuration()) return false;
  return mu.AwaitWithTimeout(condition, timeout);
}

}  // namespace sluice

#endif  // SLUICE_COMMON_AWAIT_H_
