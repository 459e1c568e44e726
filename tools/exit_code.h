// Exit codes shared by `sluice` and `sluice-perf`, so that scripts can tell a command line
// they got wrong from a run that failed:
//   0  success;
//   1  a failure while running (a peer unreachable, a file unreadable, a client that failed);
//   2  a command line or input the command refused before it started (CLI11's own errors too);
//   128 + N  stopped by signal N (a closed pipe is 128 + SIGPIPE).
//
//   if (!size.ok()) return UsageFailure("sluice-perf transport", size.status().message());
#ifndef SLUICE_TOOLS_EXIT_CODE_H_
#define SLUICE_TOOLS_EXIT_CODE_H_

#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::tools {

inline constexpr int kRuntimeError = 1;
inline constexpr int kUsageError = 2;

// InvalidArgument is the caller's input; anything else happened while running. (A caller
// that knows an error to be its input's, such as a --dataset-id another pipeline holds,
// which is AlreadyExists, says so by turning it into InvalidArgument.)
[[nodiscard]] inline int ExitCodeFor(const absl::Status& status) {
  return absl::IsInvalidArgument(status) ? kUsageError : kRuntimeError;
}

// Prints "`prefix`: `message`" on stderr and returns kUsageError / kRuntimeError.
inline int UsageFailure(absl::string_view prefix, absl::string_view message) {
  std::cerr << prefix << ": " << message << "\n";
  return kUsageError;
}
inline int RuntimeFailure(absl::string_view prefix, absl::string_view message) {
  std::cerr << prefix << ": " << message << "\n";
  return kRuntimeError;
}

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_EXIT_CODE_H_
