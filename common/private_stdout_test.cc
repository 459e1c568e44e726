// Data written to a PrivateStdout reaches the original stdout alone; what the process then
// prints on stdout (as UCX does) goes to stderr. Checked through pipes standing in for both.
#include "common/private_stdout.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

namespace sluice {
namespace {

// Everything readable from `fd` until its writers are closed.
std::string Drain(int fd) {
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) text.append(buffer, n);
  return text;
}

TEST(PrivateStdoutTest, DataGoesToTheOriginalStdoutAndLibraryOutputToStderr) {
  // Stand-ins for the terminal: fd 1 and fd 2 become pipes, restored at the end.
  int out_pipe[2];
  int err_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  ASSERT_EQ(pipe(err_pipe), 0);
  std::cout.flush();
  std::fflush(stdout);
  const int saved_out = dup(STDOUT_FILENO);
  const int saved_err = dup(STDERR_FILENO);
  ASSERT_GE(dup2(out_pipe[1], STDOUT_FILENO), 0);
  ASSERT_GE(dup2(err_pipe[1], STDERR_FILENO), 0);
  close(out_pipe[1]);
  close(err_pipe[1]);

  std::cout << "before ";  // still buffered when Take runs: it must reach the data
  {
    auto data = PrivateStdout::Take();
    ASSERT_TRUE(data.ok()) << data.status();
    (*data)->stream() << "{\"batch\":1}\n";
    std::printf("[UCX ERROR] as libraries print it\n");
    std::fflush(stdout);
    (*data)->stream() << "{\"batch\":2}\n";
  }

  std::fflush(stdout);
  dup2(saved_out, STDOUT_FILENO);
  dup2(saved_err, STDERR_FILENO);
  close(saved_out);
  close(saved_err);
  EXPECT_EQ(Drain(out_pipe[0]), "before {\"batch\":1}\n{\"batch\":2}\n");
  EXPECT_EQ(Drain(err_pipe[0]), "[UCX ERROR] as libraries print it\n");
  close(out_pipe[0]);
  close(err_pipe[0]);
}

}  // namespace
}  // namespace sluice
