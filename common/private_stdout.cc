#include "common/private_stdout.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<PrivateStdout>> PrivateStdout::Take() {
  std::cout.flush();
  std::fflush(stdout);
  // Close-on-exec: a child process (a perf run's server, its cluster) must not hold the
  // data stream open, or `| jq` would wait for the children as well.
  const int data_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
  if (data_fd < 0) {
    return absl::InternalError(absl::StrCat("copying stdout: ", std::strerror(errno)));
  }
  if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    const int error = errno;
    close(data_fd);
    return absl::InternalError(absl::StrCat("pointing stdout at stderr: ", std::strerror(error)));
  }
  return std::unique_ptr<PrivateStdout>(new PrivateStdout(data_fd));
}

PrivateStdout::PrivateStdout(int fd) : buffer_(fd, std::ios::out), stream_(&buffer_) {}

PrivateStdout::~PrivateStdout() { stream_.flush(); }

}  // namespace sluice
