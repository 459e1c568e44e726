// A child process for integration tests: real `sluice` binaries, real pipes, bounded waits.
//
//   Subprocess p({"/path/sluice", "dispatcher", "--port", "0"});
//   std::string line = p.WaitForOutput("listening on", absl::Seconds(10));
//   int code = p.Wait(absl::Seconds(30));  // kills the child if it overruns
#ifndef SLUICE_TESTS_INTEGRATION_SUBPROCESS_H_
#define SLUICE_TESTS_INTEGRATION_SUBPROCESS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sluice::testing {

class Subprocess {
 public:
  explicit Subprocess(std::vector<std::string> argv);
  ~Subprocess();  // SIGKILLs a child that is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // The first stdout line containing `needle`; empty if none appeared within `timeout`.
  std::string WaitForOutput(const std::string& needle, absl::Duration timeout);
  // Exit code; -signal if killed by a signal; kills and returns -9 on timeout.
  int Wait(absl::Duration timeout);
  void Kill(int signal);

  [[nodiscard]] std::string stdout_text() const;
  [[nodiscard]] std::string stderr_text() const;

 private:
  int pid_ = -1;
  std::optional<int> exit_code_;
  std::string stdout_path_;
  std::string stderr_path_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_INTEGRATION_SUBPROCESS_H_
