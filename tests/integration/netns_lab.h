// Several "hosts" on one machine for multi-host tests: one network namespace per host, each
// with an eth0 on a private bridge (10.231.N.0/24), so processes in different hosts reach
// each other only over that network, as on a cluster. Traffic never leaves the machine.
//
// Needs root and iproute2; Create() says why when it cannot build the lab, and tests skip
// with that reason. Everything is removed when the lab goes (and labs left by a killed test
// process are removed by the next one).
//
//   absl::StatusOr<std::unique_ptr<NetnsLab>> lab = NetnsLab::Create(3);
//   Subprocess p((*lab)->Run(0, {"sluice", "dispatcher", "--host", "0.0.0.0"}));
//   (*lab)->ip(0)                  // "10.231.N.1"
//   (*lab)->SetLinkUp(1, false);   // host 1 drops off the network (no FIN, no RST)
#ifndef SLUICE_TESTS_INTEGRATION_NETNS_LAB_H_
#define SLUICE_TESTS_INTEGRATION_NETNS_LAB_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::testing {

class NetnsLab {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<NetnsLab>> Create(int hosts);
  ~NetnsLab();
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  [[nodiscard]] int hosts() const { return static_cast<int>(namespaces_.size()); }
  [[nodiscard]] std::string ip(int host) const;
  // `argv` prefixed so that it runs inside `host`'s namespace.
  [[nodiscard]] std::vector<std::string> Run(int host, const std::vector<std::string>& argv) const;
  // Takes `host`'s cable out (false) or puts it back (true).
  [[nodiscard]] absl::Status SetLinkUp(int host, bool up) const;

 private:
  NetnsLab(std::string tag, int subnet) : tag_(std::move(tag)), subnet_(subnet) {}
  [[nodiscard]] std::string bridge() const { return "slb" + tag_; }
  [[nodiscard]] std::string veth(int host) const;

  const std::string tag_;
  const int subnet_;
  std::vector<std::string> namespaces_;
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_INTEGRATION_NETNS_LAB_H_
