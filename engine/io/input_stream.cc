#include "engine/io/input_stream.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/io/data_roots.h"

namespace sluice::engine {
namespace {

// Coded by the errno (EACCES PermissionDenied, EMFILE ResourceExhausted, EIO Unknown, ...):
// never Unavailable for a file the worker cannot read, which reads as a worker out of reach.
absl::Status IoError(std::string_view what, const std::string& path, int error) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(AbslView(what), " '", path, "' failed: ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileInputStream>> FileInputStream::Open(
    std::string_view path, std::span<const std::string> roots) {
  SLUICE_ASSIGN_OR_RETURN(std::string canonical, ResolveDataPath(path, roots));
  // O_NONBLOCK: opening a FIFO must not hang (it is then refused as not regular).
  const int fd = ::open(canonical.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat("'", AbslView(path), "' does not exist"));
    }
    return IoError("opening", canonical, error);
  }
  std::unique_ptr<FileInputStream> file(new FileInputStream(fd, canonical));
  // What was opened may differ from what was resolved if a path component was swapped
  // for a symlink in between; /proc names the file really opened.
  char real[PATH_MAX];
  const std::string link = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t len = ::readlink(link.c_str(), real, sizeof(real) - 1);
  if (len > 0) {
    real[len] = '\0';
    SLUICE_RETURN_IF_ERROR(CheckInsideDataRoots(real, roots));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return IoError("stat of", canonical, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("expected a regular file, but '", AbslView(path), "' is not one"));
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return file;
}

FileInputStream::~FileInputStream() { ::close(fd_); }

absl::StatusOr<size_t> FileInputStream::Read(char* dest, size_t n) {
  while (true) {
    const ssize_t got = ::read(fd_, dest, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EINTR) return IoError("reading", path_, errno);
  }
}

absl::StatusOr<std::string> FileInputStream::ReadPrefix(size_t n) const {
  std::string out(n, '\0');
  size_t have = 0;
  while (have < n) {
    const ssize_t got = ::pread(fd_, out.data() + have, n - have, static_cast<off_t>(have));
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError("reading", path_, errno);
    }
    have += static_cast<size_t>(got);
  }
  out.resize(have);
  return out;
}

}  // namespace sluice::engine
