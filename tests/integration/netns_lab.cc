#include "tests/integration/netns_lab.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sluice::testing {
namespace {

constexpr char kPrefix[] = "sluice_lab_";

// Runs `ip` with `args`; its output on failure.
absl::Status Ip(const std::vector<std::string>& args) {
  std::string command = "ip";
  for (const std::string& arg : args) absl::StrAppend(&command, " ", arg);
  absl::StrAppend(&command, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError("popen failed");
  std::string output;
  char chunk[256];
  while (size_t n = fread(chunk, 1, sizeof(chunk), pipe)) output.append(chunk, n);
  const int status = pclose(pipe);
  if (status != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("`", command, "` failed: ", absl::StripAsciiWhitespace(output)));
  }
  return absl::OkStatus();
}

std::string IpOutput(const std::string& args) {
  FILE* pipe = popen(("ip " + args + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return "";
  std::string output;
  char chunk[256];
  while (size_t n = fread(chunk, 1, sizeof(chunk), pipe)) output.append(chunk, n);
  pclose(pipe);
  return output;
}

// Labs whose test process died without cleaning up: "sluice_lab_<pid>_<host>".
void RemoveAbandonedLabs() {
  for (absl::string_view line : absl::StrSplit(IpOutput("netns list"), '\n')) {
    absl::string_view name = line.substr(0, line.find(' '));
    if (!absl::ConsumePrefix(&name, kPrefix)) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(name.substr(0, name.find('_')), &pid)) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    (void)Ip({"netns", "del", absl::StrCat(kPrefix, name)});
    (void)Ip({"link", "del", absl::StrCat("slb", pid % 100000)});
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<NetnsLab>> NetnsLab::Create(int hosts) {
  if (geteuid() != 0) return absl::FailedPreconditionError("network namespaces need root");
  RemoveAbandonedLabs();
  const int pid = getpid();
  std::unique_ptr<NetnsLab> lab(new NetnsLab(std::to_string(pid % 100000), 20 + pid % 200));
  if (absl::Status s = Ip({"link", "add", lab->bridge(), "type", "bridge"}); !s.ok()) return s;
  if (absl::Status s = Ip({"link", "set", lab->bridge(), "up"}); !s.ok()) return s;
  for (int h = 0; h < hosts; ++h) {
    const std::string ns = absl::StrCat(kPrefix, pid, "_", h);
    if (absl::Status s = Ip({"netns", "add", ns}); !s.ok()) return s;
    lab->namespaces_.push_back(ns);
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"link", "add", lab->veth(h), "type", "veth", "peer", "name", "eth0", "netns", ns},
             {"link", "set", lab->veth(h), "master", lab->bridge(), "up"},
             {"-n", ns, "addr", "add", lab->ip(h) + "/24", "dev", "eth0"},
             {"-n", ns, "link", "set", "eth0", "up"},
             {"-n", ns, "link", "set", "lo", "up"}}) {
      if (absl::Status s = Ip(args); !s.ok()) return s;
    }
  }
  return lab;
}

NetnsLab::~NetnsLab() {
  for (int h = 0; h < hosts(); ++h) (void)Ip({"link", "del", veth(h)});
  for (const std::string& ns : namespaces_) (void)Ip({"netns", "del", ns});
  (void)Ip({"link", "del", bridge()});
}

std::string NetnsLab::veth(int host) const { return absl::StrCat("slv", tag_, "_", host); }

std::string NetnsLab::ip(int host) const { return absl::StrCat("10.231.", subnet_, ".", host + 1); }

std::vector<std::string> NetnsLab::Run(int host, const std::vector<std::string>& argv) const {
  // Subprocess execs without a PATH search.
  static const std::string ip_binary = [] {
    for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (access(path, X_OK) == 0) return std::string(path);
    }
    return std::string("/usr/sbin/ip");
  }();
  std::vector<std::string> wrapped = {ip_binary, "netns", "exec", namespaces_.at(host)};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

absl::Status NetnsLab::SetLinkUp(int host, bool up) const {
  return Ip({"link", "set", veth(host), up ? "up" : "down"});
}

}  // namespace sluice::testing
