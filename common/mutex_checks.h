// Turns off Abseil's mutex deadlock detection in production binaries.
//
// Debian builds Abseil without NDEBUG, so every absl::Mutex acquisition records lock order
// in a global graph (GraphCycles), which showed up at a few percent of a busy polling loop's
// profile. Tests keep the checks (they are how lock-order bugs are found); the `sluice` and
// `sluice-perf` binaries drop them unless SLUICE_MUTEX_DEADLOCK_CHECKS=1.
//
//   int main(int argc, char** argv) {
//     sluice::ConfigureMutexChecksForProduction();
//     ...
#ifndef SLUICE_COMMON_MUTEX_CHECKS_H_
#define SLUICE_COMMON_MUTEX_CHECKS_H_

#include <cstdlib>
#include <string_view>

#include "absl/synchronization/mutex.h"

namespace sluice {

inline void ConfigureMutexChecksForProduction() {
  const char* keep = std::getenv("SLUICE_MUTEX_DEADLOCK_CHECKS");
  if (keep != nullptr && std::string_view(keep) == "1") return;
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace sluice

#endif  // SLUICE_COMMON_MUTEX_CHECKS_H_
