#include "transport/ofi/shm_names.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace sluice::transport::ofi {
namespace {

// The pid in "sluice_<pid>_<nonce>", or 0 when `name` is not such a name.
pid_t PidOf(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kShmNamePrefix)) return 0;
  const size_t underscore = name.find('_');
  if (underscore == absl::string_view::npos || underscore + 1 == name.size()) return 0;
  int32_t pid = 0;
  if (!absl::SimpleAtoi(name.substr(0, underscore), &pid) || pid <= 0) return 0;
  return pid;
}

bool ProcessIsGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

std::string UniqueShmEndpointName() {
  static thread_local std::mt19937_64 bits{std::random_device{}()};
  return absl::StrFormat("%s%d_%016x", kShmNamePrefix, getpid(), bits());
}

int RemoveStaleShmRegions(const std::string& dir) {
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = readdir(listing)) {
    const pid_t pid = PidOf(entry->d_name);
    if (pid == 0 || !ProcessIsGone(pid)) continue;
    const std::string path = absl::StrCat(dir, "/", entry->d_name);
    struct stat info;
    if (lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != geteuid()) {
      continue;
    }
    if (unlink(path.c_str()) == 0) ++removed;
  }
  closedir(listing);
  return removed;
}

}  // namespace sluice::transport::ofi
