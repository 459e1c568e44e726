// The dispatcher service: DispatcherState behind the control channel.
//
// With `fault_tolerant`, every state change is journaled in `work_dir` and made durable
// before the call that caused it is answered; a dispatcher restarted on the same work dir
// recovers its datasets, jobs, tasks and split cursors and keeps its id, so workers and
// clients carry on.
//
//   DispatcherOptions options;
//   options.bind = {"ucx", "0.0.0.0", 5050};
//   options.work_dir = "/var/lib/sluice";
//   options.fault_tolerant = true;
//   absl::StatusOr<std::unique_ptr<Dispatcher>> d = Dispatcher::Start(options);
//   (*d)->address();  // the bound address, port resolved
#ifndef SLUICE_CONTROL_DISPATCHER_H_
#define SLUICE_CONTROL_DISPATCHER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"

#include "control/dispatcher_state.h"
#include "control/journal.h"
#include "transport/rpc.h"

namespace sluice::control {

struct DispatcherOptions {
  transport::Address bind{"ucx", "0.0.0.0", 0};
  DispatcherConfig config;
  transport::TransportOptions transport;
  // Where the journal and the dispatcher id live; needed by fault_tolerant.
  std::string work_dir;
  bool fault_tolerant = false;
  // Journal updates between snapshots (compaction keeps recovery short).
  int64_t compact_every_updates = 100000;
  // How the journal batches its writes (tests stretch max_delay to hold answers back).
  JournalOptions journal;
};

class Dispatcher {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Dispatcher>> Start(
      const DispatcherOptions& options);
  ~Dispatcher();

  [[nodiscard]] const transport::Address& address() const { return address_; }
  // The transport in one line (library, transports picked, who notices dead peers).
  [[nodiscard]] std::string transport_description() const { return rpc_->transport().Describe(); }
  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] DispatcherState& state() { return state_; }
  // What recovery found in the work dir ("" for a fresh or non-fault-tolerant dispatcher).
  [[nodiscard]] const std::string& recovery_summary() const { return recovery_summary_; }

 private:
  explicit Dispatcher(const DispatcherOptions& options);
  absl::Status OpenWorkDir(const DispatcherOptions& options);
  void RegisterHandlers();

  DispatcherState state_;
  // Declares silent workers lost (DispatcherState::CheckLiveness) every worker_timeout / 4.
  absl::Notification stop_;
  std::thread liveness_thread_;
  std::string id_;
  std::string recovery_summary_;
  transport::Address address_;
  // Null without fault tolerance. A journaled change is answered from the journal's commit
  // thread once durable, so ~Dispatcher stops serving, then lets the journal write what it
  // holds (answering those calls), and only then closes the endpoint.
  std::unique_ptr<JournalWriter> journal_;
  std::unique_ptr<transport::RpcEndpoint> rpc_;  // last: closes first, while state_ lives
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_DISPATCHER_H_
