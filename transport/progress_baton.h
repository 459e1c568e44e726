// Who drives a transport's progress engine: its progress thread, or a caller that waits for
// a reply and drives the engine itself meanwhile.
//
// A synchronous call that sleeps until the progress thread wakes it pays a thread hop per
// reply (several microseconds on a busy host, and a third runnable thread on a two-core
// machine). With the baton, the caller takes over the engine, sends, and polls for its own
// reply, as ucx_perftest's ping-pong does. Exactly one thread holds the baton at a time,
// so a UCS_THREAD_MODE_SERIALIZED worker stays serialised.
//
// The handover: the caller asks (and wakes the progress thread if it sleeps); the progress
// thread, at the top of its loop, sees the request and parks. When the caller is done it
// gives the baton back in one of two ways:
//   - Lend(): its call completed. The parked thread takes the baton back once it saw no
//     call for a `linger`, unless another call takes it first, so a tight loop of calls
//     hands over once, not once per call. It looks every linger at first, then twice as
//     long after each look that found the baton with callers, up to max(1 ms, linger).
//     Nothing progresses the engine while the baton is lent: up to two such looks once the
//     calls stop.
//   - Return(): it stopped waiting before its reply came; the thread resumes now.
// However busy the callers, the thread takes the baton back at the first lend after
// max(10 ms, 10 × linger) away (that Lend() acts as a Return() when the thread asked for it
// meanwhile), for one turn of its own (sockets, accepts, ticks) before the next hand-over.
//
//   ProgressBaton baton(absl::Microseconds(200));
//   // progress thread, every loop turn:   if (baton.ParkIfAsked()) continue;
//   // caller:
//   if (baton.TryTake([&] { WakeProgressThread(); }, absl::Milliseconds(1))) {
//     while (!replied) Progress();
//     baton.Lend();
//   }
#ifndef SLUICE_TRANSPORT_PROGRESS_BATON_H_
#define SLUICE_TRANSPORT_PROGRESS_BATON_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"

namespace sluice::transport {

class ProgressBaton {
 public:
  // `linger` is clamped to [10 µs, 10 ms].
  explicit ProgressBaton(absl::Duration linger);
  ProgressBaton(const ProgressBaton&) = delete;
  ProgressBaton& operator=(const ProgressBaton&) = delete;

  // Progress thread. Cheap when nobody asked. When a caller asked: hands the baton over and
  // blocks until it is back (see the file comment); returns true then.
  bool ParkIfAsked();
  // Progress thread: a caller is waiting for the baton (do not go to sleep).
  [[nodiscard]] bool asked() const { return asked_.load(std::memory_order_seq_cst); }

  // Caller. Takes the baton, calling `wake` once if the progress thread has to be woken to
  // see the request. False when another caller holds it, or the progress thread did not
  // hand over within `wait` (it is busy in a long callback).
  [[nodiscard]] bool TryTake(absl::FunctionRef<void()> wake, absl::Duration wait);
  // Caller. Takes the baton only if it is lent right now: never wakes or waits for the
  // progress thread. For a short piece of work (a send) that should not wait for the next
  // call or the parked thread's next look; give it back with Lend().
  [[nodiscard]] bool TryTakeLent();
  // Holder: done, the call completed. See the file comment.
  void Lend();
  // Holder: done without a reply; the progress thread resumes at once.
  void Return();
  // Holder: the parked thread has been away for max_away and wants the baton back (the
  // holder should not keep it for long waits; its Lend() returns it).
  [[nodiscard]] bool wants_back() const { return want_back_.load(std::memory_order_relaxed); }
  // How often the parked thread woke to look at the baton (for tests).
  [[nodiscard]] uint64_t parked_looks() const {
    return parked_looks_.load(std::memory_order_relaxed);
  }
  // True on the thread that holds the baton.
  [[nodiscard]] bool HeldByThisThread() const {
    return holder_.load(std::memory_order_acquire) == std::this_thread::get_id();
  }

 private:
  enum State : int32_t { kThread = 0, kLent = 1, kHeld = 2 };

  // The parked thread sleeps on returns_, not on state_: state_ flips twice per call (take,
  // lend), and a futex on it failed with EAGAIN on nearly every flip, so the "parked"
  // thread spun through syscalls (2.5 per round trip, measured) on a core the caller needed.
  // returns_ changes only in Return().
  void SleepUntilReturnedOr(uint32_t returns_seen, absl::Duration timeout);
  void WakeParked();

  const absl::Duration linger_;
  const absl::Duration max_away_;
  const absl::Duration max_look_every_;
  std::atomic<int32_t> state_{kThread};
  std::atomic<uint32_t> returns_{0};
  std::atomic<bool> asked_{false};
  std::atomic<bool> claimed_{false};  // one caller at a time
  std::atomic<std::thread::id> holder_{};
  std::atomic<uint32_t> lends_{0};  // counts Lend()s, read by the parked thread
  std::atomic<uint64_t> parked_looks_{0};
  std::atomic<bool> want_back_{false};  // see wants_back()
};

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_PROGRESS_BATON_H_
