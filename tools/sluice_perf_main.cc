// `sluice-perf`: measure Sluice's data path the way users tune it.
//
//   sluice-perf transport --transport ucx --size 1MiB --iterations 2000 --json
//   sluice-perf service --workers 1 --clients 1 --batch-bytes 1MiB --seconds 10 --json
//   sluice-perf sweep --sizes 64KiB,1MiB,16MiB --workers 1,2 --out perf/sweep
//   sluice-perf doctor [--json] [--strict]
//
// Each run starts its peers as real processes (this binary or `sluice`).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mutex_checks.h"
#include "common/subprocess.h"
#include "perf/transport_perf.h"
#include "tools/cli_checks.h"
#include "tools/perf_commands.h"

namespace sluice::tools {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

int Main(int argc, char** argv) {
  // libfabric's PSM provider (libinfinipath), loaded with this binary, sets handlers for
  // SIGINT and SIGTERM that exit(1): Ctrl-C or a job's SIGTERM ended a run with status 1 and
  // no word. Back to the defaults (status 128 + the signal; the children we started go with
  // us, by their parent-death signal).
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{"sluice-perf: bandwidth, latency and service throughput of Sluice"};
  app.require_subcommand(1);

  TransportFlags transport_flags;
  CLI::App* transport_cmd =
      app.add_subcommand("transport",
                         "One-way bandwidth of batch-sized messages and small-message latency "
                         "between two processes");
  AddTransportFlags(transport_cmd, transport_flags);

  CLI::App* server_cmd =
      app.add_subcommand("transport-server", "(internal) the peer of `transport`");
  server_cmd->group("");
  std::string server_scheme = "ucx";
  server_cmd->add_option("--transport", server_scheme);

  ServiceFlags service_flags;
  CLI::App* service_cmd = app.add_subcommand(
      "service", "Dispatcher + workers + clients as processes; clients read a cached batch");
  AddServiceFlags(service_cmd, service_flags);

  CLI::App* client_cmd = app.add_subcommand("service-client", "(internal) one reading client");
  client_cmd->group("");
  ServiceClientFlags client_flags;
  AddServiceClientFlags(client_cmd, client_flags);

  SweepFlags sweep_flags;
  CLI::App* sweep_cmd = app.add_subcommand(
      "sweep",
      "Transport and service bandwidth over sizes x workers, beside ucx_perftest; "
      "writes CSV and a PNG plot");
  AddSweepFlags(sweep_cmd, sweep_flags);

  DoctorFlags doctor_flags;
  CLI::App* doctor_cmd = app.add_subcommand(
      "doctor",
      "What this host gives Sluice's data path (shared memory, CMA, RDMA and memlock, huge "
      "pages, CPUs, /dev/shm, libfabric, GPUs) and what to change");
  AddDoctorFlags(doctor_cmd, doctor_flags);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (const std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty()) {
      std::cerr << "sluice-perf: unknown command '" << unknown
                << "'; the commands are transport, service, sweep and doctor (see --help)\n";
      return 2;
    }
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (server_cmd->parsed()) {
    signal(SIGTERM, OnSignal);
    signal(SIGINT, OnSignal);
    absl::Status status = perf::RunTransportPerfServer(
        transport::Address{server_scheme, "127.0.0.1", 0}, {},
        [](const transport::Address& a) { std::cout << "ready " << a.ToString() << std::endl; },
        [] { return g_stop.load(); });
    if (!status.ok()) {
      std::cerr << "sluice-perf transport-server: " << status.message() << "\n";
      return 1;
    }
    return 0;
  }
  if (transport_cmd->parsed()) return RunTransportCommand(transport_flags);
  if (service_cmd->parsed()) return RunServiceCommand(service_flags);
  if (client_cmd->parsed()) return RunServiceClientCommand(client_flags);
  if (doctor_cmd->parsed()) return RunDoctorCommand(doctor_flags);
  return RunSweepCommand(sweep_flags);
}

}  // namespace
}  // namespace sluice::tools

int main(int argc, char** argv) {
  sluice::ConfigureMutexChecksForProduction();
  return sluice::tools::Main(argc, argv);
}
