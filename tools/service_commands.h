// `sluice dispatcher` and `sluice worker`: the two roles that serve until SIGINT or
// SIGTERM, their flags and their runs; and what every subcommand shares in reading its
// peers' addresses and durations.
//
//   DispatcherFlags flags;
//   AddDispatcherFlags(app.add_subcommand("dispatcher", "Run a dispatcher"), flags);
//   app.parse(argc, argv);
//   return RunDispatcher(flags, /*scheme=*/"ucx");
#ifndef SLUICE_TOOLS_SERVICE_COMMANDS_H_
#define SLUICE_TOOLS_SERVICE_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "control/worker.h"
#include "transport/address.h"

namespace sluice::tools {

// A peer's address: its scheme names the transport, and one without a scheme takes
// --transport's (`scheme`). A --transport given explicitly that the scheme contradicts is
// refused: it was silently ignored.
[[nodiscard]] absl::StatusOr<transport::Address> PeerAddress(const std::string& text,
                                                             const std::string& scheme,
                                                             bool transport_given);

// A positive duration (10s, 500ms), or InvalidArgument naming --`name`.
[[nodiscard]] absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& name,
                                                               const std::string& text);

struct DispatcherFlags {
  int port = 5050;
  std::string host = "0.0.0.0";
  int64_t elements_per_split = 256;
  std::vector<std::string> plugins;  // loaded by the caller, before the run
  std::vector<std::string> data_roots;
  std::string work_dir;
  bool fault_tolerant = false;
  std::string worker_timeout = "10s";
  std::string round_wait;  // empty: derived from --worker-timeout
  std::string job_gc_timeout = "5m";
  std::string client_timeout = "1m";
  std::vector<std::string> worker_addresses;
};

void AddDispatcherFlags(CLI::App* command, DispatcherFlags& flags);
// Serves until SIGINT or SIGTERM (blocked by the caller); returns the exit status.
[[nodiscard]] int RunDispatcher(const DispatcherFlags& flags, const std::string& scheme);

struct WorkerFlags {
  std::string dispatcher;
  int port = 0;
  std::string host = "0.0.0.0";
  std::string advertise_host;
  control::WorkerOptions options;    // those set by flags; the rest are filled in by the run
  std::vector<std::string> plugins;  // loaded by the caller, before the run
  std::string register_timeout = "5m";
};

void AddWorkerFlags(CLI::App* command, WorkerFlags& flags);
// Registers (waiting up to --register-timeout for the dispatcher), then serves until SIGINT
// or SIGTERM (blocked by the caller); returns the exit status. `transport_given`: --transport
// was on the command line.
[[nodiscard]] int RunWorker(const WorkerFlags& flags, const std::string& scheme,
                            bool transport_given, absl::Duration timeout);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_SERVICE_COMMANDS_H_
