// A child process with captured output and bounded waits: used by the perf tools to run
// servers and by integration tests to run real `sluice` processes.
//
//   Subprocess p({"/path/sluice", "dispatcher", "--port", "0"});
//   std::string line = p.WaitForOutput("listening on", absl::Seconds(10));
//   int code = p.Wait(absl::Seconds(30));  // kills the child if it overruns
//
// The child is sent SIGTERM when its parent ends, however it ends (PR_SET_PDEATHSIG): make
// a Subprocess on a thread that lives as long as the child should, since Linux sends it
// when the thread that forked ends.
#ifndef SLUICE_COMMON_SUBPROCESS_H_
#define SLUICE_COMMON_SUBPROCESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sluice {

class Subprocess {
 public:
  explicit Subprocess(std::vector<std::string> argv);
  ~Subprocess();  // SIGKILLs a child that is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // The first stdout line containing `needle`; empty if none appeared within `timeout`, or
  // the child ended without writing one.
  std::string WaitForOutput(const std::string& needle, absl::Duration timeout);
  // Exit code; -signal if killed by a signal; kills and returns -9 on timeout.
  int Wait(absl::Duration timeout);
  // The exit code (as Wait) if the child has ended, else nullopt; never blocks.
  std::optional<int> TryWait();
  void Kill(int signal);

  [[nodiscard]] int pid() const { return pid_; }
  [[nodiscard]] std::string stdout_text() const;
  // The size of stdout so far, without reading it.
  [[nodiscard]] int64_t stdout_bytes() const;
  [[nodiscard]] std::string stderr_text() const;

 private:
  int pid_ = -1;
  std::optional<int> exit_code_;
  std::string stdout_path_;
  std::string stderr_path_;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_SUBPROCESS_H_
