// Names the calling thread, so that `top -H`, `perf` and gdb tell a process's threads apart
// (a Sluice worker runs a progress thread, handler threads, a producer per task, ...).
//
//   std::thread t([] { SetCurrentThreadName("sluice-ucx"); Loop(); });
#ifndef SLUICE_COMMON_THREAD_NAME_H_
#define SLUICE_COMMON_THREAD_NAME_H_

#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

// Linux keeps 15 characters of a thread's name; longer names are cut to that.
void SetCurrentThreadName(absl::string_view name);
// The calling thread's name, as the kernel keeps it.
[[nodiscard]] std::string CurrentThreadName();

}  // namespace sluice

#endif  // SLUICE_COMMON_THREAD_NAME_H_
