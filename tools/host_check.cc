#include "tools/host_check.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/capability.h"
#include "control/worker.h"
#include "gpu/cuda_probe.h"
#include "gpu/ucx_memory_probe.h"
#include "transport/progress_mode.h"
#include "transport/ucx/ucx_handles.h"

#ifdef SLUICE_HAVE_LIBFABRIC
#include <rdma/fabric.h>

#include "transport/ofi/ofi_domain.h"
#endif

namespace sluice::tools {
namespace {

namespace fs = std::filesystem;

std::string ReadLine(const char* path) {
  std::string line;
  std::getline(std::ifstream(path), line);
  return line;
}

bool Has(const std::vector<std::string>& names, absl::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// UCT's RDMA transports: rc_verbs, rc_mlx5, dc_mlx5, ud_verbs, ud_mlx5.
bool IsRdmaTransport(absl::string_view name) {
  return absl::StartsWith(name, "rc_") || absl::StartsWith(name, "dc_") ||
         absl::StartsWith(name, "ud_");
}

// The transports that copy a large same-host message once, from the sender's memory.
bool IsSingleCopyTransport(absl::string_view name) {
  return name == "cma" || name == "knem" || name == "xpmem";
}

// "8MiB", "23.5GiB", "512B", "unlimited".
std::string Bytes(uint64_t bytes) {
  if (bytes == kUnlimited) return "unlimited";
  for (auto [unit, shift] : {std::pair{"GiB", 30}, {"MiB", 20}, {"KiB", 10}}) {
    const uint64_t one = uint64_t{1} << shift;
    if (bytes < one) continue;
    if (bytes % one == 0) return absl::StrCat(bytes / one, unit);
    return absl::StrFormat("%.1f%s", static_cast<double>(bytes) / one, unit);
  }
  return absl::StrCat(bytes, "B");
}

UcxFacts GatherUcx() {
  UcxFacts facts;
  facts.version = ucp_get_version_string();
  if (const char* tls = std::getenv("UCX_TLS"); tls != nullptr) facts.tls = tls;
  auto context = transport::ucx::UcxContext::Create("");
  if (!context.ok()) {
    facts.error = std::string(context.status().message());
    return facts;
  }
  facts.transports = (*context)->transports();
  absl::StatusOr<gpu::UcxMemoryTypes> types = gpu::QueryUcxMemoryTypes((*context)->get());
  if (types.ok()) {
    facts.memory_types = types->ToString();
    facts.cuda_memory = types->cuda();
  } else {
    facts.memory_types = absl::StrCat("unknown (", types.status().message(), ")");
  }
  return facts;
}

CmaFacts GatherCma() {
  CmaFacts facts;
  uint64_t source = 42, target = 0;
  iovec local{&target, sizeof(target)};
  iovec remote{&source, sizeof(source)};
  const ssize_t read = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  facts.syscall_permitted = read == static_cast<ssize_t>(sizeof(source)) && target == source;
  if (!facts.syscall_permitted) {
    facts.refusal = read < 0 ? std::strerror(errno) : "short read";
  }
  int scope = -1;
  if (absl::SimpleAtoi(ReadLine("/proc/sys/kernel/yama/ptrace_scope"), &scope)) {
    facts.yama_ptrace_scope = scope;
  }
  return facts;
}

OfiFacts GatherOfi() {
  OfiFacts facts;
#ifdef SLUICE_HAVE_LIBFABRIC
  facts.built = true;
  const uint32_t version = fi_version();
  facts.version = absl::StrCat(FI_MAJOR(version), ".", FI_MINOR(version));
  for (const char* provider : {"tcp;ofi_rxm", "shm"}) {
    auto domain = transport::ofi::OfiDomain::Open(provider);
    facts.providers.push_back(
        {provider, domain.ok() ? "" : std::string(domain.status().message())});
  }
#endif
  return facts;
}

uint64_t Limit(rlim_t value) { return value == RLIM_INFINITY ? kUnlimited : value; }

Finding Ucx(const UcxFacts& ucx) {
  const std::string tls = ucx.tls.empty() ? "UCX_TLS unset" : absl::StrCat("UCX_TLS=", ucx.tls);
  if (!ucx.error.empty()) {
    return {"ucx", Severity::kWarn,
            absl::StrCat("UCX ", ucx.version, " (", tls, ") opened no context: ", ucx.error),
            "check UCX_TLS against `ucx_info -d`, or unset it"};
  }
  return {"ucx", Severity::kOk,
          absl::StrCat("UCX ", ucx.version, " (", tls, "): ", absl::StrJoin(ucx.transports, ","),
                       "; moves ", ucx.memory_types, " memory"),
          ""};
}

Finding SharedMemory(const UcxFacts& ucx) {
  if (Has(ucx.transports, "posix") || Has(ucx.transports, "sysv")) {
    return {"shared_memory", Severity::kOk,
            "same-host workers and readers exchange batches through shared memory", ""};
  }
  return {
      "shared_memory", Severity::kWarn,
      "UCX has no shared-memory transport (posix, sysv): same-host batches go through the "
      "network stack, several times slower",
      transport::ucx::TlsMayInclude(ucx.tls, "posix") ||
              transport::ucx::TlsMayInclude(ucx.tls, "sysv")
          ? "UCX found none: check that /dev/shm is a writable tmpfs"
          : absl::StrCat("UCX_TLS=", ucx.tls, " leaves them out: add posix,sysv,cma or unset it")};
}

Finding Cma(const HostFacts& facts) {
  const auto& transports = facts.ucx.transports;
  std::vector<std::string> single_copy;
  for (const std::string& t : transports) {
    if (IsSingleCopyTransport(t)) single_copy.push_back(t);
  }
  if (!single_copy.empty()) {
    return {"cma", Severity::kOk,
            absl::StrCat("large same-host batches are copied once, straight from the worker's "
                         "slab (",
                         absl::StrJoin(single_copy, ","), ")"),
            ""};
  }
  if (!Has(transports, "posix") && !Has(transports, "sysv")) {
    return {"cma", Severity::kNote, "no shared memory, so no single-copy transport either", ""};
  }
  // Measured under tests/tools/deny_cma on the reference VM (perf/RESULTS.md, session 26).
  const bool over_tcp = transport::ucx::UcxContext::SameHostPeersUseTcp(transports);
  Finding finding{
      "cma", Severity::kWarn,
      over_tcp ? "no single-copy transport (cma, knem, xpmem): UCX 1.13 then carries "
                 "same-host batches over tcp on loopback (1 MiB: 3.7-4.3 GB/s against 15-16.7 "
                 "with CMA on the reference VM; small ones too, under UCX's peer watch)"
               : "no single-copy transport (cma, knem, xpmem): large same-host batches are "
                 "copied twice, through shared-memory bounce buffers",
      ""};
  const CmaFacts& cma = facts.cma;
  if (!transport::ucx::TlsMayInclude(facts.ucx.tls, "cma")) {
    finding.advice = absl::StrCat("UCX_TLS=", facts.ucx.tls, " leaves out cma: add it");
    return finding;
  }
  if (!cma.syscall_permitted) {
    // The kernel always lets a process read its own memory: only a seccomp filter or a
    // security module refuses that.
    finding.advice = absl::StrCat(
        "process_vm_readv is refused even on this process's own memory (", cma.refusal,
        "): a seccomp filter (containers) or a security module; allow the syscall for the "
        "worker and reader processes (Docker: a seccomp profile permitting it, or "
        "--cap-add SYS_PTRACE where the profile ties it to that capability)");
  } else if (cma.yama_ptrace_scope == 2) {
    finding.advice =
        "kernel.yama.ptrace_scope is 2: set it to 1 (UCX then allows its own peers) or give "
        "the worker and reader processes CAP_SYS_PTRACE";
  } else if (cma.yama_ptrace_scope >= 3) {
    finding.advice = absl::StrCat("kernel.yama.ptrace_scope is ", cma.yama_ptrace_scope,
                                  ": cross-memory attach is off until reboot; set "
                                  "kernel.yama.ptrace_scope=1 in /etc/sysctl.d and reboot");
  } else {
    finding.advice = "UCX did not open cma: `UCX_LOG_LEVEL=debug ucx_info -d` says why";
  }
  if (over_tcp) {
    absl::StrAppend(&finding.advice,
                    "; meanwhile, where every peer is on this host, UCX_TLS=posix,sysv,self "
                    "keeps large batches in shared memory (9.6-14.3 GB/s there)");
  }
  return finding;
}

Finding Rdma(const HostFacts& facts) {
  std::vector<std::string> rdma;
  for (const std::string& t : facts.ucx.transports) {
    if (IsRdmaTransport(t)) rdma.push_back(t);
  }
  const std::string devices = absl::StrJoin(facts.rdma_devices, ",");
  if (rdma.empty()) {
    if (facts.rdma_devices.empty()) {
      return {"rdma", Severity::kNote,
              "no RDMA device: batches between hosts go over tcp (RLIMIT_MEMLOCK does not "
              "matter)",
              ""};
    }
    return {
        "rdma", Severity::kWarn,
        absl::StrCat("RDMA devices (", devices,
                     ") but UCX opened no RDMA transport: batches between hosts go over tcp"),
        !facts.ucx.tls.empty()
            ? absl::StrCat("UCX_TLS=", facts.ucx.tls, " leaves them out: add rc,ud (or unset it)")
            : "install this NIC's verbs provider (Debian: ibverbs-providers) and check "
              "`ucx_info -d`"};
  }
  const std::string summary = absl::StrCat("RDMA (", absl::StrJoin(rdma, ","),
                                           "): batches between hosts are read "
                                           "straight into the reader's registered slabs");
  const uint64_t needed = DefaultWorkerPoolBytes();
  if (facts.cap_ipc_lock) {
    return {"rdma", Severity::kOk,
            absl::StrCat(summary, "; CAP_IPC_LOCK lifts RLIMIT_MEMLOCK (",
                         Bytes(facts.memlock_soft_bytes), ")"),
            ""};
  }
  if (facts.memlock_soft_bytes != kUnlimited && facts.memlock_soft_bytes < needed) {
    return {"rdma", Severity::kWarn,
            absl::StrCat(summary, "; but RLIMIT_MEMLOCK is ", Bytes(facts.memlock_soft_bytes),
                         " and RDMA pins every registered pool (a worker's default one is ",
                         Bytes(needed), "), so registering it can fail"),
            "raise the limit for the worker and reader processes: `ulimit -l unlimited`, "
            "LimitMEMLOCK=infinity in a systemd unit, `--ulimit memlock=-1` for Docker"};
  }
  return {"rdma", Severity::kOk,
          absl::StrCat(summary, "; RLIMIT_MEMLOCK ", Bytes(facts.memlock_soft_bytes)), ""};
}

Finding HugePages(const HugePageFacts& thp) {
  if (thp.enabled.empty()) {
    return {"huge_pages", Severity::kNote,
            "this kernel has no transparent huge pages: slab pools stay on base pages", ""};
  }
  if (thp.off_by_environment) {
    return {"huge_pages", Severity::kNote,
            "SLUICE_HUGE_PAGES=off: slab pools stay on base pages (huge pages made 1 MiB "
            "batches over shared memory 1.6-2.9x faster)",
            ""};
  }
  if (thp.enabled == "never") {
    return {"huge_pages", Severity::kWarn,
            "transparent huge pages are off ('never'): slab pools stay on base pages (huge pages "
            "made 1 MiB batches over shared memory 1.6-2.9x faster: perf/RESULTS.md, session 25)",
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (as root; Sluice "
            "asks for huge pages only for its pools)"};
  }
  return {"huge_pages", Severity::kOk,
          absl::StrCat("slab pools on transparent huge pages (enabled '", thp.enabled,
                       "', defrag '", thp.defrag, "')"),
          ""};
}

Finding Progress(const HostFacts& facts) {
  return {"progress", Severity::kOk,
          absl::StrCat(facts.usable_cpus, " usable CPU", facts.usable_cpus == 1 ? "" : "s",
                       ": --progress auto lets ",
                       facts.caller_progress
                           ? "a reading thread receive its own batches (caller)"
                           : "a progress thread receive batches while readers consume (thread)"),
          ""};
}

Finding DevShm(const HostFacts& facts) {
  // libfabric's shm provider maps 16 MiB per endpoint there; UCX's posix transport a few.
  constexpr uint64_t kLeast = 64 << 20;
  if (!facts.dev_shm_present) {
    return {"dev_shm", Severity::kWarn, "no /dev/shm: UCX's posix transport has nowhere to map",
            "mount a tmpfs on /dev/shm"};
  }
  const std::string sizes = absl::StrCat(Bytes(facts.dev_shm_free_bytes), " free of ",
                                         Bytes(facts.dev_shm_total_bytes), " in /dev/shm");
  if (facts.dev_shm_free_bytes < kLeast) {
    return {"dev_shm", Severity::kWarn,
            absl::StrCat("only ", sizes,
                         ": libfabric's shm provider maps 16 MiB there per endpoint, UCX's "
                         "posix transport a few MiB per process"),
            "give it more (Docker: --shm-size=1g; Kubernetes: an emptyDir with medium Memory)"};
  }
  return {"dev_shm", Severity::kOk, sizes, ""};
}

Finding Libfabric(const OfiFacts& ofi) {
  if (!ofi.built) {
    return {"libfabric", Severity::kNote, "built without libfabric: ofi:// is unavailable", ""};
  }
  std::vector<std::string> usable, not_usable;
  for (const OfiProviderFacts& p : ofi.providers) {
    if (p.error.empty()) {
      usable.push_back(p.name);
    } else {
      not_usable.push_back(absl::StrCat(p.name, ": ", p.error));
    }
  }
  std::string summary = absl::StrCat("libfabric ", ofi.version, ": ofi:// over ",
                                     usable.empty() ? "no provider" : absl::StrJoin(usable, ", "));
  if (!not_usable.empty()) absl::StrAppend(&summary, "; not ", absl::StrJoin(not_usable, "; "));
  return {"libfabric", not_usable.empty() ? Severity::kOk : Severity::kNote, summary, ""};
}

Finding Gpu(const HostFacts& facts) {
  const CudaFacts& cuda = facts.cuda;
  if (!cuda.built) {
    return {"gpu", Severity::kNote, "built without CUDA: --device is unavailable", ""};
  }
  if (!cuda.available) return {"gpu", Severity::kNote, absl::StrCat("no GPU: ", cuda.reason), ""};
  return {"gpu", Severity::kOk,
          absl::StrCat(cuda.reason,
                       "; --device batches are staged through pinned host memory "
                       "and copied on CUDA streams",
                       facts.ucx.cuda_memory ? " (this UCX moves CUDA memory too)"
                                             : " (this UCX moves host memory only)"),
          ""};
}

}  // namespace

absl::string_view SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kOk:
      return "ok";
    case Severity::kNote:
      return "note";
    case Severity::kWarn:
      return "warn";
  }
  return "?";
}

std::string SelectedKernelChoice(absl::string_view text) {
  const size_t open = text.find('[');
  const size_t close = text.find(']', open == absl::string_view::npos ? 0 : open);
  if (open == absl::string_view::npos || close == absl::string_view::npos) {
    return std::string(absl::StripAsciiWhitespace(text));
  }
  return std::string(text.substr(open + 1, close - open - 1));
}

uint64_t DefaultWorkerPoolBytes() {
  const control::WorkerOptions defaults;
  return uint64_t{defaults.slab_bytes} * defaults.num_slabs;
}

HostFacts GatherHostFacts() {
  HostFacts facts;
  facts.ucx = GatherUcx();
  facts.cma = GatherCma();
  facts.huge_pages.enabled =
      SelectedKernelChoice(ReadLine("/sys/kernel/mm/transparent_hugepage/enabled"));
  facts.huge_pages.defrag =
      SelectedKernelChoice(ReadLine("/sys/kernel/mm/transparent_hugepage/defrag"));
  const char* huge = std::getenv("SLUICE_HUGE_PAGES");
  facts.huge_pages.off_by_environment = huge != nullptr && absl::EqualsIgnoreCase(huge, "off");
  rlimit memlock{};
  if (getrlimit(RLIMIT_MEMLOCK, &memlock) == 0) {
    facts.memlock_soft_bytes = Limit(memlock.rlim_cur);
    facts.memlock_hard_bytes = Limit(memlock.rlim_max);
  }
  facts.cap_ipc_lock = HasEffectiveCapability(CAP_IPC_LOCK);
  struct statvfs shm {};
  if (statvfs("/dev/shm", &shm) == 0) {
    facts.dev_shm_present = true;
    facts.dev_shm_total_bytes = uint64_t{shm.f_blocks} * shm.f_frsize;
    facts.dev_shm_free_bytes = uint64_t{shm.f_bavail} * shm.f_frsize;
  }
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator("/sys/class/infiniband", ignored)) {
    facts.rdma_devices.push_back(entry.path().filename().string());
  }
  std::sort(facts.rdma_devices.begin(), facts.rdma_devices.end());
  facts.usable_cpus = transport::UsableCpus();
  facts.caller_progress =
      transport::UsesCallerDrivenProgress(transport::ProgressMode::kAuto, facts.usable_cpus);
  facts.ofi = GatherOfi();
  facts.cuda.built = gpu::BuiltWithCuda();
  const gpu::CudaAvailability cuda = gpu::ProbeCuda();
  facts.cuda.available = cuda.available;
  facts.cuda.device_count = cuda.device_count;
  facts.cuda.reason = cuda.reason;
  return facts;
}

std::vector<Finding> AssessHost(const HostFacts& facts) {
  return {Ucx(facts.ucx), SharedMemory(facts.ucx),     Cma(facts),
          Rdma(facts),    HugePages(facts.huge_pages), Progress(facts),
          DevShm(facts),  Libfabric(facts.ofi),        Gpu(facts)};
}

nlohmann::json HostReportJson(const HostFacts& facts, const std::vector<Finding>& findings) {
  auto limit = [](uint64_t bytes) -> nlohmann::json {
    if (bytes == kUnlimited) return "unlimited";
    return bytes;
  };
  nlohmann::json out;
  int warnings = 0;
  out["findings"] = nlohmann::json::array();
  for (const Finding& f : findings) {
    if (f.severity == Severity::kWarn) ++warnings;
    out["findings"].push_back({{"topic", f.topic},
                               {"severity", std::string(SeverityName(f.severity))},
                               {"summary", f.summary},
                               {"advice", f.advice}});
  }
  out["warnings"] = warnings;
  nlohmann::json ofi_providers = nlohmann::json::array();
  for (const OfiProviderFacts& p : facts.ofi.providers) {
    ofi_providers.push_back({{"name", p.name}, {"usable", p.error.empty()}, {"error", p.error}});
  }
  out["facts"] = {
      {"ucx",
       {{"version", facts.ucx.version},
        {"tls", facts.ucx.tls},
        {"transports", facts.ucx.transports},
        {"memory_types", facts.ucx.memory_types},
        {"error", facts.ucx.error}}},
      {"cma",
       {{"syscall_permitted", facts.cma.syscall_permitted},
        {"refusal", facts.cma.refusal},
        {"yama_ptrace_scope", facts.cma.yama_ptrace_scope}}},
      {"transparent_huge_pages",
       {{"enabled", facts.huge_pages.enabled},
        {"defrag", facts.huge_pages.defrag},
        {"off_by_environment", facts.huge_pages.off_by_environment}}},
      {"memlock_soft_bytes", limit(facts.memlock_soft_bytes)},
      {"memlock_hard_bytes", limit(facts.memlock_hard_bytes)},
      {"cap_ipc_lock", facts.cap_ipc_lock},
      {"dev_shm",
       {{"present", facts.dev_shm_present},
        {"total_bytes", facts.dev_shm_total_bytes},
        {"free_bytes", facts.dev_shm_free_bytes}}},
      {"rdma_devices", facts.rdma_devices},
      {"usable_cpus", facts.usable_cpus},
      {"progress", facts.caller_progress ? "caller" : "thread"},
      {"libfabric",
       {{"built", facts.ofi.built}, {"version", facts.ofi.version}, {"providers", ofi_providers}}},
      {"cuda",
       {{"built", facts.cuda.built},
        {"available", facts.cuda.available},
        {"device_count", facts.cuda.device_count},
        {"reason", facts.cuda.reason}}},
  };
  return out;
}

}  // namespace sluice::tools
