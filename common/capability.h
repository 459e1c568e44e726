// Whether this process holds a Linux capability in its effective set.
//
// Read from /proc/self/status (CapEff), so no libcap is needed. Used where a capability
// changes what a limit means: CAP_IPC_LOCK lifts RLIMIT_MEMLOCK for memory that RDMA pins.
//
//   if (!sluice::HasEffectiveCapability(CAP_IPC_LOCK)) { ... the memlock limit applies ... }
#ifndef SLUICE_COMMON_CAPABILITY_H_
#define SLUICE_COMMON_CAPABILITY_H_

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace sluice {

// False when the mask cannot be read (no /proc).
[[nodiscard]] inline bool HasEffectiveCapability(int capability) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "CapEff:")) continue;
    uint64_t mask = 0;
    return absl::SimpleHexAtoi(absl::StripAsciiWhitespace(rest), &mask) &&
           ((mask >> capability) & 1) != 0;
  }
  return false;
}

}  // namespace sluice

#endif  // SLUICE_COMMON_CAPABILITY_H_
