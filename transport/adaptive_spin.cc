#include "transport/adaptive_spin.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "absl/time/clock.h"

namespace sluice::transport {

bool NoThreadWaitsForACpu(const char* loadavg, int cpus) {
  double one, five, fifteen;
  int runnable = 0;
  if (std::sscanf(loadavg, "%lf %lf %lf %d/", &one, &five, &fifteen, &runnable) != 4) {
    return true;
  }
  return runnable <= cpus;  // the caller itself is one of them
}

bool NoThreadWaitsForACpu() {
  int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char text[128] = {};
  ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return true;
  static const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return NoThreadWaitsForACpu(text, cpus);
}

AdaptiveSpin::AdaptiveSpin(absl::Duration base, absl::Duration max,
                           std::function<bool()> cores_to_spare)
    : base_(base),
      max_(std::max(base, max)),
      cores_to_spare_(std::move(cores_to_spare)),
      current_(base) {}

bool AdaptiveSpin::CoresToSpare() {
  if (cores_to_spare_) return cores_to_spare_();
  const absl::Time now = absl::Now();
  if (now - probed_at_ >= absl::Milliseconds(10)) {
    spare_ = NoThreadWaitsForACpu();
    probed_at_ = now;
  }
  return spare_;
}

void AdaptiveSpin::Slept(absl::Duration slept, bool woken_by_event) {
  if (woken_by_event && slept <= max_ && max_ > base_ && CoresToSpare()) {
    // Spinning current_ + slept would have caught this event without a wake-up; ask for
    // twice that much so that jitter in the gaps does not put the loop back to sleep.
    current_ = std::min(max_, std::max(2 * current_, 2 * (current_ + slept)));
    return;
  }
  current_ = std::max(base_, current_ / 2);
}

}  // namespace sluice::transport
