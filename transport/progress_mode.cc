#include "transport/progress_mode.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

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
  return static_cast<int>(std::max<int64_t>(1, (quota + period - 1) / period));
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
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

// This process's cgroup quota, v2 (cpu.max) or v1 (cpu.cfs_quota_us, cpu.cfs_period_us).
// The path /proc/self/cgroup names may be the host's, absent inside a container, whose own
// cgroup is then the mount's root: both are tried.
std::optional<int> CgroupCpuQuota() {
  const std::optional<std::string> cgroups = ReadSmallFile("/proc/self/cgroup");
  if (!cgroups.has_value()) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(*cgroups, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    const std::string path(parts[2] == "/" ? "" : parts[2]);
    if (parts[1].empty()) {  // v2: "0::/path"
      for (const std::string& dir :
           {absl::StrCat("/sys/fs/cgroup", path), std::string("/sys/fs/cgroup")}) {
        if (auto text = ReadSmallFile(dir + "/cpu.max")) return CpusOfCgroupCpuMax(*text);
      }
      continue;
    }
    const std::vector<absl::string_view> controllers = absl::StrSplit(parts[1], ',');
    if (std::find(controllers.begin(), controllers.end(), "cpu") == controllers.end()) continue;
    for (const std::string& mount :
         {absl::StrCat("/sys/fs/cgroup/", parts[1]), std::string("/sys/fs/cgroup/cpu")}) {
      for (const std::string& dir : {mount + path, mount}) {
        auto quota = ReadSmallFile(dir + "/cpu.cfs_quota_us");
        auto period = ReadSmallFile(dir + "/cpu.cfs_period_us");
        int64_t q = 0;
        int64_t p = 0;
        if (quota && period && absl::SimpleAtoi(absl::StripAsciiWhitespace(*quota), &q) &&
            absl::SimpleAtoi(absl::StripAsciiWhitespace(*period), &p)) {
          return CpusOfQuota(q, p);
        }
      }
    }
  }
  return std::nullopt;
}

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
  static const std::optional<int> quota = CgroupCpuQuota();
  const int affinity = AffinityCpus();
  return quota.has_value() ? std::min(affinity, *quota) : affinity;
}

}  // namespace sluice::transport
