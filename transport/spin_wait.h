// Brief polling for what another thread is about to do, before a waiter sleeps for it.
//
// A thread woken by another pays twice: a futex wake on the waker's side and a context
// switch on its own. On the 16-CPU H100 machine a reply handed from the progress thread to
// the caller waiting for it took 4.9 µs one way against 0.73 µs when the caller drove the
// transport itself, and a reader of 4 KiB batches slept once per batch (perf/RESULTS.md,
// session 28). Where CPUs are plentiful, a waiter that polls for a few tens of microseconds
// first catches what comes that soon and never sleeps. Where they are scarce the spin would
// take the CPU that the thread it waits for needs, so there is none by default (and
// progress_mode.h's `auto` lets the waiter drive the transport instead).
//
//   const absl::Duration spin = ResolveWaitSpin(options.wait_spin);  // once
//   if (!SpinUntil([&] { return done.load(std::memory_order_acquire); }, spin)) Sleep();
#ifndef SLUICE_TRANSPORT_SPIN_WAIT_H_
#define SLUICE_TRANSPORT_SPIN_WAIT_H_

#include <chrono>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace sluice::transport {

// Calls `progress` (it returns how many events it handled) until `quiet` passes without an
// event, or `at_most` in all. Before a hung-up peer's connection fails: a peer closing
// gracefully hangs up once its last sends went out, and those may not have been taken yet
// (over tcp they travel on another socket than the hang-up).
template <typename Progress>
void ProgressUntilQuiet(Progress&& progress, std::chrono::steady_clock::duration quiet,
                        std::chrono::steady_clock::duration at_most) {
  const auto start = std::chrono::steady_clock::now();
  auto last_event = start;
  for (auto now = start; now - last_event < quiet && now - start < at_most;
       now = std::chrono::steady_clock::now()) {
    if (progress() > 0) last_event = std::chrono::steady_clock::now();
  }
}

// The default spin where waiters may spin, and the most a waiter may be asked to spin (it
// sleeps after that; longer only burns a core).
inline constexpr absl::Duration kDefaultWaitSpin = absl::Microseconds(50);
inline constexpr absl::Duration kMaxWaitSpin = absl::Milliseconds(10);

// `requested` when set (zero: never spin; at most kMaxWaitSpin); else kDefaultWaitSpin on
// more usable CPUs than kMaxCpusForCallerProgress, and none on fewer. The CPUs are counted
// from the affinity mask: a container held to two CPUs' worth by a CPU quota but shown all
// the host's cores spins by default, and should set zero.
[[nodiscard]] absl::Duration ResolveWaitSpin(std::optional<absl::Duration> requested);

// "auto" (nullopt: ResolveWaitSpin decides) or a duration up to kMaxWaitSpin, e.g. "50us" or
// "0" (never spin); anything else is InvalidArgument.
[[nodiscard]] absl::StatusOr<std::optional<absl::Duration>> ParseWaitSpin(absl::string_view text);

// Tells the CPU this is a polling loop (a pause on x86: the sibling hyperthread runs on).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Polls `done` until it returns true (true) or `budget` has passed (false). Reads the clock
// once every 32 polls; `done` is called at least once, whatever the budget.
template <typename Done>
[[nodiscard]] bool SpinUntil(const Done& done, absl::Duration budget) {
  if (done()) return true;
  if (budget <= absl::ZeroDuration()) return false;
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(budget);
  for (unsigned polls = 1;; ++polls) {
    CpuRelax();
    if (done()) return true;
    if (polls % 32 == 0 && std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_SPIN_WAIT_H_
