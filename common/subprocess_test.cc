// Subprocess against real children (/bin/sh): exit codes, signals, bounded waits and output.
#include "common/subprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace sluice {
namespace {

using ::testing::HasSubstr;

TEST(SubprocessTest, TryWaitSaysNothingUntilTheChildEndsThenItsExitCode) {
  Subprocess sleeper({"/bin/sh", "-c", "echo started; sleep 0.3; exit 3"});
  EXPECT_EQ(sleeper.TryWait(), std::nullopt);
  EXPECT_THAT(sleeper.WaitForOutput("started", absl::Seconds(10)), HasSubstr("started"));
  EXPECT_GT(sleeper.stdout_bytes(), 0);
  std::optional<int> code;
  for (absl::Time deadline = absl::Now() + absl::Seconds(10); !code && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(20));
    code = sleeper.TryWait();
  }
  EXPECT_EQ(code, 3);
  EXPECT_EQ(sleeper.TryWait(), 3);  // Reaped once, remembered.
  EXPECT_EQ(sleeper.Wait(absl::Seconds(1)), 3);
}

// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
bool Ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string fields;
  if (!std::getline(stat, fields)) return true;
  const size_t state = fields.rfind(')');  // "pid (comm) S ...": the state follows the name
  return state == std::string::npos || fields.substr(state + 2, 1) == "Z";
}

// A parent killed outright (SIGKILL, as a script's timeout does) takes its child with it:
// a perf run's server, or a test's dispatcher, was left running, holding ports and CPUs.
TEST(SubprocessTest, AChildEndsWithItsParent) {
  char dir_template[] = "/tmp/sluice-subprocess-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    setenv("TMPDIR", dir.c_str(), 1);  // its output files, removed below
    Subprocess child({"/bin/sleep", "60"});
    const pid_t pid = child.pid();
    (void)!write(pipe_fds[1], &pid, sizeof(pid));
    pause();
    _exit(0);
  }
  pid_t child = -1;
  const ssize_t got = read(pipe_fds[0], &child, sizeof(child));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  const bool running_before = got == static_cast<ssize_t>(sizeof(child)) && !Ended(child);
  // Killed before any assertion can return, so that no test leaves it behind.
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  ASSERT_TRUE(running_before) << "the child never ran";
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!Ended(child) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(Ended(child)) << "the child outlived its parent";
  if (!Ended(child)) kill(child, SIGKILL);
  (void)!std::system(("rm -rf " + dir).c_str());
}

TEST(SubprocessTest, AKilledChildReportsItsSignal) {
  Subprocess child({"/bin/sh", "-c", "sleep 30"});
  child.Kill(SIGKILL);
  EXPECT_EQ(child.Wait(absl::Seconds(10)), -SIGKILL);
}

TEST(SubprocessTest, WaitKillsAChildThatOverruns) {
  Subprocess child({"/bin/sh", "-c", "sleep 30"});
  const absl::Time start = absl::Now();
  EXPECT_EQ(child.Wait(absl::Milliseconds(200)), -9);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(child.stdout_bytes(), 0);
}

}  // namespace
}  // namespace sluice
