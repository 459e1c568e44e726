#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace sluice {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const char* tag) {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir ? dir : "/tmp") + "/sluice-" + tag + "-XXXXXX";
  int fd = mkstemp(pattern.data());
  if (fd >= 0) close(fd);
  return pattern;
}

}  // namespace

Subprocess::Subprocess(std::vector<std::string> argv)
    : stdout_path_(TempPath("out")), stderr_path_(TempPath("err")) {
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Ended with its parent, however that ends (SIGKILL, a script's timeout, a crash): a
    // child left running held ports and CPUs (a perf run's server, a test's dispatcher).
    // Sent when the forking thread ends: no Subprocess is made on a thread that ends first.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the parent went before the line above
    int out = open(stdout_path_.c_str(), O_WRONLY | O_TRUNC);
    int err = open(stderr_path_.c_str(), O_WRONLY | O_TRUNC);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

Subprocess::~Subprocess() {
  if (!exit_code_ && pid_ > 0) {
    Kill(SIGKILL);
    Wait(absl::Seconds(10));
  }
  unlink(stdout_path_.c_str());
  unlink(stderr_path_.c_str());
}

std::string Subprocess::WaitForOutput(const std::string& needle, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    // Asked before reading: a child that has ended wrote everything it will.
    const bool ended = TryWait().has_value();
    std::istringstream lines(ReadFile(stdout_path_));
    for (std::string line; std::getline(lines, line);) {
      if (line.find(needle) != std::string::npos) return line;
    }
    if (ended) return "";  // not waited out: a worker that failed to start says so at once
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

int Subprocess::Wait(absl::Duration timeout) {
  if (exit_code_) return *exit_code_;
  absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      exit_code_ = -9;
      return *exit_code_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return *exit_code_;
}

std::optional<int> Subprocess::TryWait() {
  if (exit_code_) return exit_code_;
  if (pid_ <= 0) return std::nullopt;  // never started: waitpid(-1) would reap another child
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return exit_code_;
}

void Subprocess::Kill(int signal) {
  if (pid_ > 0 && !exit_code_) kill(pid_, signal);
}

std::string Subprocess::stdout_text() const { return ReadFile(stdout_path_); }
int64_t Subprocess::stdout_bytes() const {
  struct stat st {};
  return stat(stdout_path_.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}
std::string Subprocess::stderr_text() const { return ReadFile(stderr_path_); }

}  // namespace sluice
