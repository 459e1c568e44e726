// The dispatcher service: DispatcherState behind the control channel.
//
//   DispatcherOptions options;
//   options.bind = {"ucx", "0.0.0.0", 5050};
//   absl::StatusOr<std::unique_ptr<Dispatcher>> d = Dispatcher::Start(options);
//   (*d)->address();  // the bound address, port resolved
#ifndef SLUICE_CONTROL_DISPATCHER_H_
#define SLUICE_CONTROL_DISPATCHER_H_

#include <memory>
#include <string>

#include "control/dispatcher_state.h"
#include "transport/rpc.h"

namespace sluice::control {

struct DispatcherOptions {
  transport::Address bind{"ucx", "0.0.0.0", 0};
  DispatcherConfig config;
  transport::TransportOptions transport;
};

class Dispatcher {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Dispatcher>> Start(
      const DispatcherOptions& options);

  [[nodiscard]] const transport::Address& address() const { return address_; }
  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] DispatcherState& state() { return state_; }

 private:
  explicit Dispatcher(const DispatcherOptions& options);

  DispatcherState state_;
  std::string id_;
  transport::Address address_;
  std::unique_ptr<transport::RpcEndpoint> rpc_;  // last: stops first, while state_ lives
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_DISPATCHER_H_
