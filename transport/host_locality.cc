#include "transport/host_locality.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice::transport {
namespace {

// The namespace's inode (what `readlink /proc/self/ns/ipc` prints in brackets), or 0.
ino_t NamespaceInode(const char* path) {
  struct stat info {};
  return stat(path, &info) == 0 ? info.st_ino : 0;
}

}  // namespace

std::string HostLocality() {
  // boot_id changes at every boot and differs between machines, unlike the hostname, which
  // containers and cloned images share.
  std::ifstream boot_id_file("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!std::getline(boot_id_file, boot_id)) return "";
  boot_id = std::string(absl::StripAsciiWhitespace(boot_id));
  ino_t ipc = NamespaceInode("/proc/self/ns/ipc");
  ino_t mnt = NamespaceInode("/proc/self/ns/mnt");
  ino_t pid = NamespaceInode("/proc/self/ns/pid");
  if (boot_id.empty() || ipc == 0 || mnt == 0 || pid == 0) return "";
  return absl::StrCat(boot_id, ";ipc=", ipc, ";mnt=", mnt, ";pid=", pid);
}

}  // namespace sluice::transport
