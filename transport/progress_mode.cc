#include "transport/progress_mode.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

std::optional<int> CpusOfQuota(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  // Rounded up (1.5 CPUs' time keeps 2 busy at times), without overflow: the kernel takes
  // quotas far beyond INT_MAX periods.
  const int64_t cpus = quota / period + (quota % period != 0 ? 1 : 0);
  return static_cast<int>(std::clamp<int64_t>(cpus, 1, std::numeric_limits<int>::max()));
}

std::optional<int> CpusOfCgroupCpuMax(absl::string_view cpu_max) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(cpu_max), ' ', absl::SkipEmpty());
  int64_t quota = 0;
  int64_t period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &quota) ||
      !absl::SimpleAtoi(fields[1], &period)) {
    return std::nullopt;  // "max 100000": no quota
  }
  return CpusOfQuota(quota, period);
}

namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::optional<int> Smaller(std::optional<int> a, std::optional<int> b) {
  if (!a.has_value()) return b;
  if (!b.has_value()) return a;
  return std::min(*a, *b);
}

// The smallest quota from the cgroup's directory under `mount` up to the mount itself: a
// quota set on a parent (a systemd slice, a pod) binds its children, whose own file says
// "max". The path may be the host's, absent inside a container, whose own cgroup is then
// the mount's root, read last either way.
std::optional<int> QuotaUpFrom(const std::string& mount, absl::string_view path,
                               absl::FunctionRef<std::optional<int>(const std::string&)> read) {
  std::optional<int> smallest;
  std::string dir = absl::StrCat(mount, path == "/" ? "" : path);
  while (true) {
    smallest = Smaller(smallest, read(dir));
    if (dir.size() <= mount.size()) break;
    dir.resize(dir.rfind('/'));
    if (dir.size() < mount.size()) dir = mount;
  }
  return smallest;
}

std::optional<int> ReadCpuMax(const std::string& dir) {
  std::optional<std::string> text = ReadSmallFile(dir + "/cpu.max");
  return text.has_value() ? CpusOfCgroupCpuMax(*text) : std::nullopt;
}

std::optional<int> ReadCfsQuota(const std::string& dir) {
  std::optional<std::string> quota = ReadSmallFile(dir + "/cpu.cfs_quota_us");
  std::optional<std::string> period = ReadSmallFile(dir + "/cpu.cfs_period_us");
  int64_t q = 0;
  int64_t p = 0;
  if (!quota || !period || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*quota), &q) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(*period), &p)) {
    return std::nullopt;
  }
  return CpusOfQuota(q, p);
}

}  // namespace

std::optional<int> CgroupCpuQuota(absl::string_view proc_self_cgroup,
                                  const std::string& sysfs_cgroup) {
  // A v1 hierarchy with the cpu controller is where the quota is on a hybrid system (v1
  // controllers, the v2 tree at .../unified without them); v2's "0::" line is read only
  // when no v1 line names cpu.
  std::optional<int> v2;
  bool v1_cpu = false;
  std::optional<int> v1;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    if (parts[1].empty()) {  // v2: "0::/path"
      v2 = QuotaUpFrom(sysfs_cgroup, parts[2], ReadCpuMax);
      continue;
    }
    const std::vector<absl::string_view> controllers = absl::StrSplit(parts[1], ',');
    if (std::find(controllers.begin(), controllers.end(), "cpu") == controllers.end()) continue;
    v1_cpu = true;
    // Mounted under its controller list ("cpu,cpuacct"), often linked as "cpu" too.
    v1 = Smaller(QuotaUpFrom(absl::StrCat(sysfs_cgroup, "/", parts[1]), parts[2], ReadCfsQuota),
                 QuotaUpFrom(sysfs_cgroup + "/cpu", parts[2], ReadCfsQuota));
  }
  return v1_cpu ? v1 : v2;
}

namespace {

int AffinityCpus() {
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

}  // namespace

int UsableCpus() {
  // Read once: the quota does not change under a running process, in practice.
  static const std::optional<int> quota = [] {
    std::optional<std::string> cgroups = ReadSmallFile("/proc/self/cgroup");
    return cgroups.has_value() ? CgroupCpuQuota(*cgroups, "/sys/fs/cgroup") : std::nullopt;
  }();
  const int affinity = AffinityCpus();
  return quota.has_value() ? std::min(affinity, *quota) : affinity;
}

}  // namespace sluice::transport
