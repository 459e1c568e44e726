// The subcommands of `sluice-perf` (see sluice_perf_main.cc): flags and runners.
//
//   TransportFlags flags;
//   AddTransportFlags(app.add_subcommand("transport", "..."), flags);
//   return RunTransportCommand(flags);
#ifndef SLUICE_TOOLS_PERF_COMMANDS_H_
#define SLUICE_TOOLS_PERF_COMMANDS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace sluice::tools {

// Print "sluice-perf COMMAND: MESSAGE" on stderr and return the exit code of a failure while
// running (Fail) or of a bad command line (Usage): tools/exit_code.h.
int Fail(absl::string_view command, absl::string_view message);
int Usage(absl::string_view command, absl::string_view message);

struct TransportFlags {
  std::string transport = "ucx";
  std::string size = "1MiB";
  int64_t iterations = 2000;
  int window = 8;
  std::string max_bytes_in_flight = "4MiB";  // as `sluice read --max-bytes-in-flight`
  int64_t latency_iterations = 20000;
  std::string progress = "thread";
  std::string wait_spin = "auto";  // transport/spin_wait.h
  std::string ucx_peer_failure;    // "" keeps $SLUICE_UCX_PEER_FAILURE (else auto)
  bool json = false;
};

struct ServiceFlags {
  int workers = 1;
  int clients = 1;
  std::string batch_bytes = "1MiB";
  double seconds = 10;
  std::string mode = "off";  // tf.data's "ideal model speed" set-up
  std::string pipeline;      // default: a synthetic batch of --batch-bytes (see --pipeline)
  std::vector<std::string> data_roots;  // what --pipeline may read, for dispatcher and workers
  int max_outstanding = 8;
  std::string max_bytes_in_flight = "4MiB";  // as `sluice read --max-bytes-in-flight`
  int buffer_batches = 8;
  std::string sluice_binary;       // default: `sluice` beside this binary
  int device = -1;                 // >= 0: clients land batches in this CUDA device's memory
  std::string progress = "auto";   // how a client's reader waits, as `sluice read` does
  std::string wait_spin = "auto";  // transport/spin_wait.h
  bool coordinated = false;        // clients are the consumers of one coordinated read
  std::string step = "0";          // the consumer's busy time per batch (a trainer's step)
  bool json = false;
};

struct ServiceClientFlags {
  std::string dispatcher;
  std::string pipeline;
  std::string mode = "dynamic";
  std::string job_name = "sluice-perf";
  double seconds = 10;
  std::string slab_bytes = "16MiB";
  int max_outstanding = 8;
  std::string max_bytes_in_flight = "0";
  int device = -1;
  std::string progress = "thread";
  std::string wait_spin = "auto";
  int num_consumers = 0;  // > 0: consumer `consumer_index` of a coordinated read
  int consumer_index = 0;
  std::string step = "0";  // as ServiceFlags::step
};

struct SweepFlags {
  std::string sizes = "64KiB,1MiB,16MiB";
  std::string workers = "1";
  std::string transport = "ucx";
  double seconds = 5;
  int64_t bytes_per_point = int64_t{2} << 30;
  std::string out = "sluice-sweep";
  bool skip_perftest = false;
};

struct DoctorFlags {
  bool json = false;
  bool strict = false;  // exit 1 on any warning
};

void AddTransportFlags(CLI::App* app, TransportFlags& flags);
void AddServiceFlags(CLI::App* app, ServiceFlags& flags);
void AddServiceClientFlags(CLI::App* app, ServiceClientFlags& flags);
void AddSweepFlags(CLI::App* app, SweepFlags& flags);
void AddDoctorFlags(CLI::App* app, DoctorFlags& flags);

int RunTransportCommand(const TransportFlags& flags);
int RunServiceCommand(const ServiceFlags& flags);
int RunServiceClientCommand(const ServiceClientFlags& flags);
// --step of `service` and `service-client`: a finite duration of zero or more.
[[nodiscard]] absl::StatusOr<absl::Duration> ParseStep(const std::string& text);
int RunSweepCommand(const SweepFlags& flags);
int RunDoctorCommand(const DoctorFlags& flags);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_PERF_COMMANDS_H_
