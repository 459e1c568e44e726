// Ctrl-C and SIGTERM for commands that run until their work is done (`sluice read`,
// `sluice local`). The first signal asks the work to stop at its next step, so that it can
// print what it read and let its job go; if it has not stopped within `grace` (a reader
// waiting on a worker that does not answer), or a second signal comes (half a second or
// more after the first: `timeout` signals the process and its group at once), the process
// exits at once with status 128 + the signal.
//
//   BlockTerminationSignals();            // first thing in main: no thread may take them
//   StopRequest stop(absl::Seconds(3));   // watches for them on a thread of its own
//   while (!stop.requested() && ReadOne()) {}
//   return stop.requested() ? stop.exit_status() : 0;
#ifndef SLUICE_TOOLS_STOP_REQUEST_H_
#define SLUICE_TOOLS_STOP_REQUEST_H_

#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/time/time.h"

namespace sluice::tools {

// Blocks SIGINT and SIGTERM in the calling thread and in every thread it starts later, so
// that they wait for sigwait (a dispatcher or worker) or a StopRequest.
void BlockTerminationSignals();

// SIGINT and SIGTERM, for sigwait and sigtimedwait once they are blocked.
[[nodiscard]] sigset_t TerminationSignals();

class StopRequest {
 public:
  explicit StopRequest(absl::Duration grace);
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  [[nodiscard]] bool requested() const { return signal_.load(std::memory_order_acquire) != 0; }
  // 128 + the signal that asked to stop (130 for SIGINT); 0 while none did.
  [[nodiscard]] int exit_status() const {
    const int signal = signal_.load(std::memory_order_acquire);
    return signal == 0 ? 0 : 128 + signal;
  }

 private:
  void Watch();

  const absl::Duration grace_;
  std::atomic<int> signal_{0};
  std::atomic<bool> done_{false};
  std::thread watcher_;
};

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_STOP_REQUEST_H_
