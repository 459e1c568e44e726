// Subprocess against real children (/bin/sh): exit codes, signals, bounded waits and output.
#include "common/subprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

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
