#include "transport/progress_baton.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>

namespace sluice::transport {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int* FutexWord(std::atomic<uint32_t>* word) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<int*>(word);
}

}  // namespace

ProgressBaton::ProgressBaton(absl::Duration linger)
    : linger_(std::clamp(linger, absl::Microseconds(10), absl::Milliseconds(10))),
      max_away_(std::max(absl::Milliseconds(10), 10 * linger_)),
      max_look_every_(std::max(absl::Milliseconds(1), linger_)) {}

void ProgressBaton::SleepUntilReturnedOr(uint32_t returns_seen, absl::Duration timeout) {
  timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, FutexWord(&returns_), FUTEX_WAIT_PRIVATE, returns_seen, &ts, nullptr, 0);
}

void ProgressBaton::WakeParked() {
  syscall(SYS_futex, FutexWord(&returns_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

bool ProgressBaton::ParkIfAsked() {
  if (!asked_.load(std::memory_order_acquire)) return false;
  const int64_t parked_at = NowNs();
  const int64_t max_away_ns = absl::ToInt64Nanoseconds(max_away_);
  const int64_t linger_ns = absl::ToInt64Nanoseconds(linger_);
  // Lend() only counts (no clock read on the caller's path); the linger runs from when this
  // thread first sees the count change. The first caller gets a whole linger to take it.
  uint32_t lends_seen = lends_.load(std::memory_order_acquire);
  int64_t lent_since = parked_at;
  // Each look is a wake-up, a context switch on a core that a polling caller or its peer
  // needs, so the looks thin out while the baton stays with callers: once a linger, then
  // twice as long each time, up to max_look_every_. On a paravirtualised VM a look every
  // 200 µs cost an 8-byte shm round trip about 20 % (perf/RESULTS.md, session 20).
  const int64_t max_look_every_ns = absl::ToInt64Nanoseconds(max_look_every_);
  int64_t look_every_ns = linger_ns;
  state_.store(kLent, std::memory_order_seq_cst);
  auto back = [this] {
    want_back_.store(false, std::memory_order_relaxed);
    return true;
  };
  while (true) {
    // Read before the state: a Return() after this changes it, and the sleep does not start.
    const uint32_t returns_seen = returns_.load(std::memory_order_acquire);
    int32_t state = state_.load(std::memory_order_acquire);
    if (state == kThread) return back();  // Return()ed
    const int64_t now = NowNs();
    const bool away_too_long = now - parked_at >= max_away_ns;
    if (state == kLent) {
      if (const uint32_t lends = lends_.load(std::memory_order_acquire); lends != lends_seen) {
        lends_seen = lends;
        lent_since = now;
      }
      const int64_t idle_ns = now - lent_since;
      if (idle_ns >= linger_ns || away_too_long) {
        // A caller that takes the baton at this moment wins the race or retries.
        if (state_.compare_exchange_strong(state, kThread, std::memory_order_acq_rel)) {
          return back();
        }
        continue;
      }
      SleepUntilReturnedOr(returns_seen,
                           absl::Nanoseconds(std::max(linger_ns - idle_ns, look_every_ns)));
    } else {
      // Held. A caller that holds it through slow replies lends it only between two calls,
      // for too short a moment for a look to see: past max_away, the next Lend() returns it.
      if (away_too_long) want_back_.store(true, std::memory_order_seq_cst);
      SleepUntilReturnedOr(returns_seen, absl::Nanoseconds(look_every_ns));
    }
    look_every_ns = std::min(2 * look_every_ns, max_look_every_ns);
    parked_looks_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool ProgressBaton::TryTake(absl::FunctionRef<void()> wake, absl::Duration wait) {
  if (claimed_.exchange(true, std::memory_order_acquire)) return false;
  // The clock is read only once the baton is not there for the taking (the common case in a
  // loop of calls is a baton lent by the previous call).
  int64_t deadline = 0;
  bool woke = false;
  for (int spins = 0;; ++spins) {
    int32_t lent = kLent;
    if (state_.compare_exchange_weak(lent, kHeld, std::memory_order_acq_rel)) break;
    if (!asked_.load(std::memory_order_relaxed)) asked_.store(true, std::memory_order_seq_cst);
    if (!woke) {
      wake();
      woke = true;
      deadline = NowNs() + absl::ToInt64Nanoseconds(wait);
    }
    if (NowNs() > deadline) {
      asked_.store(false, std::memory_order_relaxed);
      claimed_.store(false, std::memory_order_release);
      return false;
    }
    if (spins > 64) std::this_thread::yield();
  }
  asked_.store(false, std::memory_order_relaxed);
  holder_.store(std::this_thread::get_id(), std::memory_order_release);
  return true;
}

bool ProgressBaton::TryTakeLent() {
  // A plain load first: the usual answer, with the progress thread running, is no.
  if (state_.load(std::memory_order_relaxed) != kLent) return false;
  if (claimed_.exchange(true, std::memory_order_acquire)) return false;
  int32_t lent = kLent;
  // The parked thread may take it back at this moment: one of the two exchanges wins.
  if (!state_.compare_exchange_strong(lent, kHeld, std::memory_order_acq_rel)) {
    claimed_.store(false, std::memory_order_release);
    return false;
  }
  holder_.store(std::this_thread::get_id(), std::memory_order_release);
  return true;
}

void ProgressBaton::Lend() {
  if (want_back_.load(std::memory_order_relaxed)) {
    Return();
    return;
  }
  holder_.store(std::thread::id(), std::memory_order_relaxed);
  lends_.fetch_add(1, std::memory_order_relaxed);
  state_.store(kLent, std::memory_order_release);
  claimed_.store(false, std::memory_order_release);
}

void ProgressBaton::Return() {
  holder_.store(std::thread::id(), std::memory_order_relaxed);
  state_.store(kThread, std::memory_order_release);
  claimed_.store(false, std::memory_order_release);
  returns_.fetch_add(1, std::memory_order_acq_rel);
  WakeParked();
}

}  // namespace sluice::transport
