// Which thread receives a reply: the transport's progress thread, or the thread that waits
// for it (TransportOptions::caller_driven_progress), and the rule that chooses for `auto`.
//
// A reader that drives the transport itself saves the hand-off from the progress thread
// (a futex wake and a context switch per batch). That pays when CPUs are scarce: on two,
// the hand-off's threads compete with the peer's for the same cores. With more CPUs the
// progress thread receives the next batch on its own core while the reader consumes this
// one, and driving from the reader serialises the two (perf/RESULTS.md, session 23: 64 KiB
// batches 1.38x faster caller-driven on 2 CPUs of a 16-CPU machine, 0.89x on 4 and 1.01x
// on all 16, with a p99 fetch time up to 10x longer).
//
//   absl::StatusOr<ProgressMode> mode = ParseProgressMode(flag);  // "auto", "caller", "thread"
//   options.transport.caller_driven_progress = UsesCallerDrivenProgress(*mode, UsableCpus());
#ifndef SLUICE_TRANSPORT_PROGRESS_MODE_H_
#define SLUICE_TRANSPORT_PROGRESS_MODE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::transport {

enum class ProgressMode {
  kAuto,    // kCaller on at most kMaxCpusForCallerProgress usable CPUs, else kThread
  kThread,  // the progress thread receives and wakes the waiting thread
  kCaller,  // the waiting thread drives the transport and receives itself
};

// The most CPUs on which kAuto lets the waiting thread drive.
inline constexpr int kMaxCpusForCallerProgress = 2;

// "auto", "thread" or "caller"; anything else is InvalidArgument, naming the choices.
[[nodiscard]] absl::StatusOr<ProgressMode> ParseProgressMode(absl::string_view text);
[[nodiscard]] absl::string_view ProgressModeName(ProgressMode mode);

// Whether a thread waiting under `mode` drives the transport, on `usable_cpus` CPUs.
[[nodiscard]] bool UsesCallerDrivenProgress(ProgressMode mode, int usable_cpus);

// The CPUs the calling thread may run on: its affinity mask (so `taskset` and cgroup
// cpusets count), and no more than a cgroup CPU quota allows (a container given 2 CPUs'
// time on a 96-CPU host has 2); at least 1.
[[nodiscard]] int UsableCpus();

// The CPUs a CPU quota of `quota` per `period` allows, rounded up (150000 per 100000: 2);
// nullopt for no quota (a quota or period that is not positive).
[[nodiscard]] std::optional<int> CpusOfQuota(int64_t quota, int64_t period);
// As CpusOfQuota, from cgroup v2's cpu.max text ("200000 100000"; "max 100000": none).
[[nodiscard]] std::optional<int> CpusOfCgroupCpuMax(absl::string_view cpu_max);
// The CPUs the cgroup quotas of a process allow: `proc_self_cgroup` is its
// /proc/self/cgroup, `sysfs_cgroup` where cgroups are mounted (/sys/fs/cgroup). The
// smallest quota from its cgroup up to the root counts; nullopt for none.
[[nodiscard]] std::optional<int> CgroupCpuQuota(absl::string_view proc_self_cgroup,
                                                const std::string& sysfs_cgroup);

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_PROGRESS_MODE_H_
