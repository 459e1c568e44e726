// What a host gives Sluice's data path, and what to change: the checks behind
// `sluice-perf doctor`.
//
// Gathering reads the host once (UCX's transports under the current UCX_TLS, whether the
// kernel lets processes read each other's memory, transparent huge pages, RLIMIT_MEMLOCK,
// /dev/shm, RDMA devices, libfabric providers, CUDA). Assessing is a pure function of those
// facts: each finding names a topic, says what it means for batches, and what to change when
// it is a warning. The rules are the ones the measurements in perf/RESULTS.md taught (huge
// pages more than doubled 1 MiB batches over shared memory; without CMA UCX sends large
// same-host batches over loopback tcp; RDMA pins every registered pool).
//
//   HostFacts facts = GatherHostFacts();
//   for (const Finding& f : AssessHost(facts)) {
//     if (f.severity == Severity::kWarn) std::cerr << f.topic << ": " << f.advice << "\n";
//   }
#ifndef SLUICE_TOOLS_HOST_CHECK_H_
#define SLUICE_TOOLS_HOST_CHECK_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace sluice::tools {

inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

struct UcxFacts {
  std::string version;                  // ucp_get_version_string()
  std::string tls;                      // $UCX_TLS; empty when unset
  std::vector<std::string> transports;  // what a context opened under it, e.g. "posix", "rc_mlx5"
  std::string memory_types;             // what it moves, e.g. "host" or "host,cuda"
  bool cuda_memory = false;
  std::string error;  // not empty: no context could be made, and the rest is unknown
};

struct CmaFacts {
  // process_vm_readv of this process's own memory worked (a seccomp filter refuses it).
  bool syscall_permitted = false;
  std::string refusal;         // strerror when it did not
  int yama_ptrace_scope = -1;  // /proc/sys/kernel/yama/ptrace_scope; -1 without Yama
};

struct HugePageFacts {
  std::string enabled;  // the kernel's choice: "always", "madvise", "never"; empty: no THP
  std::string defrag;   // likewise for /sys/kernel/mm/transparent_hugepage/defrag
  bool off_by_environment = false;  // SLUICE_HUGE_PAGES=off
};

struct OfiProviderFacts {
  std::string name;   // "tcp;ofi_rxm", "shm"
  std::string error;  // empty: Sluice can open a domain on it
};

struct OfiFacts {
  bool built = false;
  std::string version;  // e.g. "1.17"
  std::vector<OfiProviderFacts> providers;
};

struct CudaFacts {
  bool built = false;
  bool available = false;
  int device_count = 0;
  std::string reason;  // gpu::ProbeCuda()'s
};

struct HostFacts {
  UcxFacts ucx;
  CmaFacts cma;
  HugePageFacts huge_pages;
  uint64_t memlock_soft_bytes = 0;  // RLIMIT_MEMLOCK; kUnlimited for RLIM_INFINITY
  uint64_t memlock_hard_bytes = 0;
  bool cap_ipc_lock = false;  // the limit does not apply (root has it)
  bool dev_shm_present = false;
  uint64_t dev_shm_total_bytes = 0;
  uint64_t dev_shm_free_bytes = 0;
  std::vector<std::string> rdma_devices;  // /sys/class/infiniband
  int usable_cpus = 1;
  bool caller_progress = false;  // what --progress auto chooses on usable_cpus
  OfiFacts ofi;
  CudaFacts cuda;
};

enum class Severity {
  kOk,    // as fast as Sluice can be here
  kNote,  // worth knowing; nothing to change for the common case
  kWarn,  // batches are slower, or will fail, until something changes
};

[[nodiscard]] absl::string_view SeverityName(Severity severity);  // "ok", "note", "warn"

struct Finding {
  std::string topic;  // ucx, shared_memory, cma, rdma, huge_pages, progress, dev_shm,
                      // libfabric, gpu
  Severity severity = Severity::kOk;
  std::string summary;  // what it means for batches
  std::string advice;   // what to change; empty unless kWarn
};

// The selected word of a sysfs choice such as "always [madvise] never" ("madvise"); the text
// itself, trimmed, when nothing is bracketed.
[[nodiscard]] std::string SelectedKernelChoice(absl::string_view text);

// The bytes a worker pins with its default pool (WorkerOptions' slabs x slab bytes).
[[nodiscard]] uint64_t DefaultWorkerPoolBytes();

// Reads this host (starts and closes a UCX context, opens libfabric domains, probes CUDA).
[[nodiscard]] HostFacts GatherHostFacts();

// One finding per topic, in the order of the topics above.
[[nodiscard]] std::vector<Finding> AssessHost(const HostFacts& facts);

// {"warnings": N, "findings": [{topic, severity, summary, advice}], "facts": {...}}
[[nodiscard]] nlohmann::json HostReportJson(const HostFacts& facts,
                                            const std::vector<Finding>& findings);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_HOST_CHECK_H_
