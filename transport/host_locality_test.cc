// HostLocality on this machine, and in a child process given its own IPC namespace.
#include "transport/host_locality.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace sluice::transport {
namespace {

using ::testing::HasSubstr;

TEST(HostLocalityTest, IsStableAndNamesTheNamespaces) {
  const std::string mine = HostLocality();
  ASSERT_FALSE(mine.empty()) << "this machine has /proc";
  EXPECT_EQ(HostLocality(), mine);
  EXPECT_THAT(mine, HasSubstr(";ipc="));
  EXPECT_THAT(mine, HasSubstr(";mnt="));
  EXPECT_THAT(mine, HasSubstr(";pid="));
}

// The locality a forked child reports through a pipe, optionally from a new IPC namespace;
// `*prepared` says whether entering it worked.
std::string LocalityInChild(bool new_ipc_namespace, bool* prepared) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    char ok = 1;
    if (new_ipc_namespace && unshare(CLONE_NEWIPC) != 0) ok = 0;
    std::string locality = HostLocality();
    (void)!write(fds[1], &ok, 1);
    (void)!write(fds[1], locality.data(), locality.size());
    _exit(0);
  }
  close(fds[1]);
  char ok = 0;
  std::string locality;
  if (read(fds[0], &ok, 1) == 1) {
    char buffer[512];
    for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) locality.append(buffer, n);
  }
  close(fds[0]);
  waitpid(child, nullptr, 0);
  *prepared = ok == 1;
  return locality;
}

TEST(HostLocalityTest, AForkedChildMatchesUntilItLeavesTheIpcNamespace) {
  bool prepared = false;
  EXPECT_EQ(LocalityInChild(/*new_ipc_namespace=*/false, &prepared), HostLocality());
  ASSERT_TRUE(prepared);
  const std::string isolated = LocalityInChild(/*new_ipc_namespace=*/true, &prepared);
  if (!prepared) GTEST_SKIP() << "unshare(CLONE_NEWIPC) needs root: " << std::strerror(EPERM);
  // sysv segments of one IPC namespace are invisible from another: not the same locality.
  EXPECT_NE(isolated, HostLocality());
  EXPECT_FALSE(isolated.empty());
}

}  // namespace
}  // namespace sluice::transport
