#include "transport/progress_mode.h"

#include <sched.h>

#include <thread>

#include "absl/strings/str_cat.h"

namespace sluice::transport {

absl::StatusOr<ProgressMode> ParseProgressMode(absl::string_view text) {
  if (text == "auto") return ProgressMode::kAuto;
  if (text == "thread") return ProgressMode::kThread;
  if (text == "caller") return ProgressMode::kCaller;
  return absl::InvalidArgumentError(
      absl::StrCat("must be auto, caller or thread, got '", text, "'"));
}

absl::string_view ProgressModeName(ProgressMode mode) {
  switch (mode) {
    case ProgressMode::kAuto:
      return "auto";
    case ProgressMode::kThread:
      return "thread";
    case ProgressMode::kCaller:
      return "caller";
  }
  return "unknown";
}

bool UsesCallerDrivenProgress(ProgressMode mode, int usable_cpus) {
  switch (mode) {
    case ProgressMode::kAuto:
      return usable_cpus <= kMaxCpusForCallerProgress;
    case ProgressMode::kThread:
      return false;
    case ProgressMode::kCaller:
      return true;
  }
  return false;
}

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  // More CPUs than a cpu_set_t holds (1024), or no answer: what the machine has.
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? static_cast<int>(hardware) : 1;
}

}  // namespace sluice::transport
