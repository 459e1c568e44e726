#include "tools/stop_request.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/time/clock.h"

namespace sluice::tools {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

StopRequest::StopRequest(absl::Duration grace) : grace_(grace), watcher_([this] { Watch(); }) {}

StopRequest::~StopRequest() {
  done_.store(true, std::memory_order_release);
  watcher_.join();
}

void StopRequest::Watch() {
  const sigset_t set = TerminationSignals();
  // Looks every 100 ms whether its owner is done: a thread in sigwait could only be woken
  // by one of the very signals it waits for.
  constexpr timespec kLook = {0, 100'000'000};
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time first_at = absl::InfinitePast();
  constexpr absl::Duration kSameRequestWithin = absl::Milliseconds(500);
  while (!done_.load(std::memory_order_acquire)) {
    const int signal = sigtimedwait(&set, nullptr, &kLook);
    if (signal < 0) {
      // Its owner finished meanwhile (its status stands): nothing to cut short.
      if (done_.load(std::memory_order_acquire)) break;
      if (errno == EAGAIN && absl::Now() >= deadline) {
        const int first = signal_.load();
        std::fprintf(stderr, "sluice: still running %s after %s; exiting\n",
                     absl::FormatDuration(grace_).c_str(), strsignal(first));
        _exit(128 + first);
      }
      continue;
    }
    if (requested()) {
      // GNU timeout, and a shell's job control, signal the process and its group: the same
      // request arrives twice at once. Only a signal sent later is the user insisting.
      if (absl::Now() - first_at < kSameRequestWithin) continue;
      std::fprintf(stderr, "sluice: %s again; exiting now\n", strsignal(signal));
      _exit(128 + signal);
    }
    std::fprintf(stderr, "\nsluice: %s: stopping (once more to exit at once)\n", strsignal(signal));
    first_at = absl::Now();
    deadline = first_at + grace_;
    signal_.store(signal, std::memory_order_release);
  }
}

}  // namespace sluice::tools
