// The `sluice` command: dispatcher, worker, read and local subcommands.
//
//   sluice dispatcher --port 5050
//   sluice worker --dispatcher ucx://head:5050
//   sluice read --dispatcher ucx://head:5050 --pipeline 'range(1000) | batch(10)' --format jsonl
//   sluice local --workers 2 --pipeline 'range(100000) | map(square) | batch(256)'
//
// Exit status: 0 done, 1 a runtime failure, 2 bad usage or input.
#include <signal.h>

#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex_checks.h"
#include "common/private_stdout.h"
#include "common/status_macros.h"
#include "control/client.h"
#include "control/local_cluster.h"
#include "control/processing_mode.h"
#include "engine/functions.h"
#include "engine/pipeline_text.h"
#include "engine/pipeline_validate.h"
#include "engine/plugin.h"
#include "tools/batch_output.h"
#include "tools/byte_size.h"
#include "tools/exit_code.h"
#include "tools/read_command.h"
#include "tools/service_commands.h"
#include "tools/status_output.h"
#include "tools/stop_request.h"
#include "transport/progress_mode.h"

namespace sluice::tools {
namespace {

absl::Status LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    SLUICE_RETURN_IF_ERROR(engine::LoadPlugin(path, &engine::GlobalFunctions()));
  }
  return absl::OkStatus();
}

// `sluice local --workers` at most this many times the usable CPUs.
constexpr int kLocalWorkersPerCpu = 64;

int Main(int argc, char** argv) {
  // Termination signals are taken by sigwait (dispatcher, worker) or a StopRequest (read,
  // local); block them before any thread starts. A closed stdout shows as a failed write.
  BlockTerminationSignals();
  signal(SIGPIPE, SIG_IGN);

  CLI::App app{
      "Sluice: a data-plane service for ML training (tf.data-service semantics, "
      "zero-copy batches over UCX)"};
  app.require_subcommand(1);
  // `sluice status --dispatcher X --timeout 1s`: the global options also after the command.
  app.fallthrough();
  std::string timeout_text = "10s";
  std::string scheme = "ucx";
  CLI::Option* transport_option =
      app.add_option("--transport", scheme,
                     "Transport for the dispatcher and local cluster: ucx or ofi (libfabric); "
                     "the others follow the scheme of the --dispatcher address they are given "
                     "(an address without one takes this)")
          ->check(CLI::IsMember({"ucx", "ofi"}))
          ->capture_default_str();
  app.add_option("--timeout", timeout_text,
                 "Bound on reaching a peer and on each control call (e.g. 10s, 500ms)")
      ->capture_default_str();

  CLI::App* dispatcher_cmd = app.add_subcommand("dispatcher", "Run a dispatcher");
  DispatcherFlags dispatcher_flags;
  AddDispatcherFlags(dispatcher_cmd, dispatcher_flags);

  CLI::App* worker_cmd = app.add_subcommand("worker", "Run a data worker");
  WorkerFlags worker_flags;
  AddWorkerFlags(worker_cmd, worker_flags);

  CLI::App* read_cmd = app.add_subcommand("read", "Read a pipeline through a running service");
  std::string read_dispatcher;
  ReadFlags read_flags;
  read_cmd->add_option("--dispatcher", read_dispatcher, "Dispatcher address ucx://HOST:PORT")
      ->required();
  AddReadFlags(read_cmd, read_flags);
  // `local` reads a demo pipeline by default; a read of a real cluster without one read that
  // demo into the cluster's workers.
  read_cmd->get_option("--pipeline")->required()->default_str("");

  CLI::App* status_cmd =
      app.add_subcommand("status", "Show a dispatcher's workers, datasets and jobs");
  std::string status_dispatcher;
  bool status_json = false;
  status_cmd->add_option("--dispatcher", status_dispatcher, "Dispatcher address ucx://HOST:PORT")
      ->required();
  status_cmd->add_flag("--json", status_json, "Print one JSON object");

  CLI::App* local_cmd =
      app.add_subcommand("local", "Run a dispatcher and workers in this process and read");
  int local_workers = 2;
  ReadFlags local_flags;
  local_cmd->add_option("--workers", local_workers, "Number of workers")
      ->check(AtLeast(1))
      ->capture_default_str();
  std::vector<std::string> local_plugins;
  std::vector<std::string> local_data_roots;
  local_cmd->add_option("--plugin", local_plugins,
                        "Shared library of custom functions to load (repeatable)");
  local_cmd
      ->add_option("--data-root", local_data_roots,
                   "Directory pipelines may read files from (repeatable)")
      ->check(CLI::ExistingDirectory);
  AddReadFlags(local_cmd, local_flags);
  // One size for both ends: the workers' slabs must hold what the reader's accept.
  local_cmd->get_option("--slab-bytes")
      ->description(
          "Largest batch: the size of the reader's landing slabs and of the workers' slabs "
          "(each worker registers 16 of them: 16 x this of memory)");

  // Shown as DURATION in --help: TEXT said nothing of the unit a bare number lacks.
  for (CLI::Option* duration :
       {app.get_option("--timeout"), dispatcher_cmd->get_option("--job-gc-timeout"),
        dispatcher_cmd->get_option("--client-timeout"),
        dispatcher_cmd->get_option("--worker-timeout"), dispatcher_cmd->get_option("--round-wait"),
        worker_cmd->get_option("--register-timeout")}) {
    duration->type_name("DURATION");
  }
  // A subcommand's --help lists only its own options; these are taken after it too.
  for (CLI::App* command : {dispatcher_cmd, worker_cmd, read_cmd, status_cmd, local_cmd}) {
    command->footer(
        absl::StrCat("Global options, also taken after the command: --transport ucx|ofi, --timeout "
                     "DURATION (default ",
                     timeout_text, "); see sluice --help"));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (const std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty()) {
      std::cerr << "sluice: unknown command '" << unknown
                << "'; the commands are dispatcher, worker, read, local and status (see --help)\n";
      return kUsageError;
    }
    int rc = app.exit(e);
    return rc == 0 ? 0 : kUsageError;
  }
  absl::StatusOr<absl::Duration> timeout = ParseDurationFlag("timeout", timeout_text);
  if (!timeout.ok()) return Fail(timeout.status(), "");

  const std::vector<std::string>& plugins = dispatcher_cmd->parsed() ? dispatcher_flags.plugins
                                            : worker_cmd->parsed()   ? worker_flags.plugins
                                                                     : local_plugins;
  const char* command = dispatcher_cmd->parsed() ? "dispatcher"
                        : worker_cmd->parsed()   ? "worker"
                                                 : "local";
  // A --plugin that cannot be loaded is the caller's input, as a pipeline that does not parse.
  if (absl::Status loaded = LoadPlugins(plugins); !loaded.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--plugin: ", loaded.message())), command);
  }
  if (dispatcher_cmd->parsed()) return RunDispatcher(dispatcher_flags, scheme);
  if (worker_cmd->parsed()) {
    return RunWorker(worker_flags, scheme, transport_option->count() > 0, *timeout);
  }
  if (read_cmd->parsed()) {
    absl::StatusOr<transport::Address> dispatcher =
        PeerAddress(read_dispatcher, scheme, transport_option->count() > 0);
    if (!dispatcher.ok()) return Fail(dispatcher.status(), "read");
    // Before any transport starts, so that no library message lands amid the batches.
    auto data = PrivateStdout::Take();
    if (!data.ok()) return Fail(data.status(), "read");
    StopRequest stop(kStopGrace);
    return ReadAll("read", *dispatcher, read_flags, *timeout, stop, (*data)->stream());
  }
  if (status_cmd->parsed()) {
    absl::StatusOr<transport::Address> dispatcher =
        PeerAddress(status_dispatcher, scheme, transport_option->count() > 0);
    if (!dispatcher.ok()) return Fail(dispatcher.status(), "status");
    auto data = PrivateStdout::Take();  // before the transport starts (private_stdout.h)
    if (!data.ok()) return Fail(data.status(), "status");
    control::ClientOptions options;
    options.dispatcher = *dispatcher;
    options.timeout = *timeout;
    auto client = control::Client::Connect(options);
    if (!client.ok()) return Fail(client.status(), "status");
    auto status = (*client)->GetStatus();
    if (!status.ok()) return Fail(status.status(), "status");
    PrintStatus(*status, status_json, (*data)->stream());
    return 0;
  }
  // local
  absl::StatusOr<proto::ProcessingMode> mode = ParseMode(local_flags.mode);
  if (!mode.ok()) return Fail(mode.status(), "local");
  if (control::IsStaticSharding(*mode)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
                    "--mode ", local_flags.mode,
                    " shards by a fixed worker list, which a local cluster's workers (on ports "
                    "chosen at start) have none of; use --mode dynamic or off here, or run "
                    "`sluice dispatcher --worker-addresses ...` and its workers")),
                "local");
  }
  if (absl::Status checked = CheckReadFlags(local_flags); !checked.ok()) {
    return Fail(checked, "local");
  }
  // Each worker polls its transport on its own thread: far more of them than CPUs starve
  // each other (300 on 2 CPUs had not started after a minute, 128 took 8 s).
  if (const int most = kLocalWorkersPerCpu * transport::UsableCpus(); local_workers > most) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
                    "--workers ", local_workers,
                    ": a local cluster runs every worker in this "
                    "process, and more than ",
                    kLocalWorkersPerCpu, " per usable CPU (", most,
                    " here) starve each other; run `sluice dispatcher` and `sluice worker` "
                    "processes on more hosts instead")),
                "local");
  }
  control::LocalClusterOptions options;
  options.num_workers = local_workers;
  const absl::Time starting = absl::Now();
  absl::Time next_notice = starting + absl::Seconds(2);
  options.on_worker_started = [&](int started) {
    if (const absl::Time now = absl::Now(); now >= next_notice && started < local_workers) {
      std::cerr << "sluice local: started " << started << " of " << local_workers << " workers"
                << std::endl;
      next_notice = now + absl::Seconds(2);
    }
  };
  options.scheme = scheme;
  options.worker.task.data_roots = local_data_roots;
  options.worker.slab_bytes = local_flags.slab_bytes;
  options.dispatcher.config.data_roots = local_data_roots;
  auto data = PrivateStdout::Take();  // before the transports start (private_stdout.h)
  if (!data.ok()) return Fail(data.status(), "local");
  StopRequest stop(kStopGrace);
  auto cluster = control::LocalCluster::Start(options);
  if (!cluster.ok()) return Fail(cluster.status(), "local");
  if (local_flags.format == "summary") {
    (*data)->stream() << "local cluster: dispatcher " << (*cluster)->dispatcher_address().ToString()
                      << ", " << local_workers << " workers; pipeline: " << local_flags.pipeline
                      << " (mode " << local_flags.mode << ")\n";
  }
  return ReadAll("local", (*cluster)->dispatcher_address(), local_flags, *timeout, stop,
                 (*data)->stream());
}

}  // namespace
}  // namespace sluice::tools

int main(int argc, char** argv) {
  sluice::ConfigureMutexChecksForProduction();
  return sluice::tools::Main(argc, argv);
}
