// The `sluice` command: dispatcher, worker, read and local subcommands.
//
//   sluice dispatcher --port 5050
//   sluice worker --dispatcher ucx://head:5050
//   sluice read --dispatcher ucx://head:5050 --pipeline 'range(1000) | batch(10)' --format jsonl
//   sluice local --workers 2 --pipeline 'range(100000) | map(square) | batch(256)'
//
// Exit status: 0 done, 1 a runtime failure, 2 bad usage or input.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex_checks.h"
#include "common/private_stdout.h"
#include "common/status_macros.h"
#include "control/client.h"
#include "control/dispatcher.h"
#include "control/local_cluster.h"
#include "control/processing_mode.h"
#include "control/worker.h"
#include "engine/functions.h"
#include "engine/pipeline_text.h"
#include "engine/pipeline_validate.h"
#include "engine/plugin.h"
#include "tools/batch_output.h"
#include "tools/byte_size.h"
#include "tools/exit_code.h"
#include "tools/read_command.h"
#include "tools/status_output.h"
#include "tools/stop_request.h"
#include "transport/progress_mode.h"

namespace sluice::tools {
namespace {

// A peer's address: its scheme names the transport, and one without a scheme takes
// --transport's. A --transport given explicitly that the scheme contradicts is refused: it
// was silently ignored.
absl::StatusOr<transport::Address> PeerAddress(const std::string& text, const std::string& scheme,
                                               bool transport_given) {
  absl::StatusOr<transport::Address> address = transport::ParseAddress(text, scheme);
  if (address.ok() && transport_given && address->scheme != scheme) {
    return absl::InvalidArgumentError(
        absl::StrCat("--transport ", scheme, " contradicts the address ", text,
                     ", whose scheme names the transport; drop --transport, or give a "
                     "dispatcher address that starts with ",
                     scheme, "://"));
  }
  return address;
}

absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& name, const std::string& text) {
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " expects a positive duration like 10s or 500ms, got '", text, "'"));
  }
  return d;
}

absl::Status LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    SLUICE_RETURN_IF_ERROR(engine::LoadPlugin(path, &engine::GlobalFunctions()));
  }
  return absl::OkStatus();
}

// `sluice local --workers` at most this many times the usable CPUs.
constexpr int kLocalWorkersPerCpu = 64;

// Blocks until SIGINT or SIGTERM.
void WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int signal = 0;
  sigwait(&set, &signal);
}

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
  int dispatcher_port = 5050;
  std::string dispatcher_host = "0.0.0.0";
  int64_t elements_per_split = 256;
  dispatcher_cmd->add_option("--port", dispatcher_port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  dispatcher_cmd->add_option("--host", dispatcher_host, "Address to bind")->capture_default_str();
  dispatcher_cmd
      ->add_option("--elements-per-split", elements_per_split,
                   "DYNAMIC split size in source elements")
      ->check(AtLeast(1))
      ->capture_default_str();

  std::vector<std::string> dispatcher_plugins;
  std::vector<std::string> dispatcher_data_roots;
  dispatcher_cmd->add_option("--plugin", dispatcher_plugins,
                             "Shared library of custom functions to load (repeatable)");
  dispatcher_cmd
      ->add_option("--data-root", dispatcher_data_roots,
                   "Directory DYNAMIC list_files may glob (repeatable)")
      ->check(CLI::ExistingDirectory);
  std::string work_dir;
  bool fault_tolerant = false;
  std::string worker_timeout = "10s";
  std::string round_wait;  // empty: derived from --worker-timeout
  std::string job_gc_timeout = "5m";
  std::string client_timeout = "1m";
  dispatcher_cmd
      ->add_option("--job-gc-timeout", job_gc_timeout,
                   "A job whose clients all left (or went silent) this long is garbage-collected")
      ->capture_default_str();
  dispatcher_cmd
      ->add_option("--client-timeout", client_timeout,
                   "A client silent this long (killed, or cut off) no longer counts as a "
                   "reader: lost workers' splits stop waiting for its report, workers let go "
                   "of the batches they keep for it, and a job it alone read is collected "
                   "--job-gc-timeout later. At least 1s (clients report every 100 ms)")
      ->capture_default_str();
  dispatcher_cmd
      ->add_option("--worker-timeout", worker_timeout,
                   "A worker silent this long is lost: its tasks end and the DYNAMIC splits it "
                   "held are re-issued to live workers, minus what clients already received")
      ->capture_default_str();
  dispatcher_cmd->add_option(
      "--round-wait", round_wait,
      "Coordinated reads: how long a worker's round waits for a consumer that has "
      "not asked for it before going on without it (default 1.5 x "
      "--worker-timeout + 1s: long enough for rounds to stay aligned across a "
      "lost worker). A consumer that dies holds the others up this long once");
  dispatcher_cmd->add_option("--work-dir", work_dir,
                             "Directory for the journal and the dispatcher id (fault tolerance)");
  dispatcher_cmd->add_flag("--fault-tolerant", fault_tolerant,
                           "Journal every state change in --work-dir before acknowledging it; a "
                           "restart on the same --work-dir recovers jobs and split cursors");
  std::vector<std::string> worker_addresses;
  dispatcher_cmd
      ->add_option("--worker-addresses", worker_addresses,
                   "Fixed worker list for static sharding (file, data, file_or_data, hint): "
                   "HOST:PORT or HOST entries, comma-separated; a worker's index is its "
                   "position, unlisted workers are refused")
      ->delimiter(',');

  CLI::App* worker_cmd = app.add_subcommand("worker", "Run a data worker");
  std::string worker_dispatcher;
  int worker_port = 0;
  std::string worker_host = "0.0.0.0";
  std::string advertise_host;
  control::WorkerOptions worker_options;
  worker_cmd->add_option("--dispatcher", worker_dispatcher, "Dispatcher address ucx://HOST:PORT")
      ->required();
  worker_cmd->add_option("--port", worker_port, "Port to serve on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  worker_cmd->add_option("--host", worker_host, "Address to bind")->capture_default_str();
  worker_cmd->add_option("--advertise-host", advertise_host,
                         "Host clients should use (default: the IP facing the dispatcher)");
  worker_cmd->add_option("--slab-bytes", worker_options.slab_bytes, "Largest batch")
      ->transform(ByteSize())
      ->default_str(FormatByteSize(worker_options.slab_bytes));
  worker_cmd->add_option("--slabs", worker_options.num_slabs, "Registered slabs in the pool")
      ->check(AtLeast(1))
      ->capture_default_str();
  worker_cmd
      ->add_option("--buffer-batches", worker_options.task.buffer_batches,
                   "Finished batches buffered per task")
      ->check(AtLeast(1))
      ->capture_default_str();
  worker_cmd
      ->add_option("--spill-bytes", worker_options.max_spilled_bytes,
                   "Heap the buffers of readers that stopped may move to, freeing their slabs "
                   "for other jobs (0: they keep their slabs)")
      ->transform(ByteBound())
      ->default_str(FormatByteSize(worker_options.max_spilled_bytes));
  std::vector<std::string> worker_plugins;
  worker_cmd->add_option("--plugin", worker_plugins,
                         "Shared library of custom functions to load (repeatable)");
  std::string register_timeout_text = "5m";
  worker_cmd
      ->add_option("--register-timeout", register_timeout_text,
                   "How long to keep trying a dispatcher that is not up yet before giving up "
                   "(0s: fail at the first try)")
      ->capture_default_str();
  worker_cmd
      ->add_option("--data-root", worker_options.task.data_roots,
                   "Directory pipelines may read files from (repeatable; none: no files)")
      ->check(CLI::ExistingDirectory);

  CLI::App* read_cmd = app.add_subcommand("read", "Read a pipeline through a running service");
  std::string read_dispatcher;
  ReadFlags read_flags;
  read_cmd->add_option("--dispatcher", read_dispatcher, "Dispatcher address ucx://HOST:PORT")
      ->required();
  AddReadFlags(read_cmd, read_flags);

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
    int rc = app.exit(e);
    return rc == 0 ? 0 : kUsageError;
  }
  absl::StatusOr<absl::Duration> timeout = ParseDurationFlag("timeout", timeout_text);
  if (!timeout.ok()) return Fail(timeout.status(), "");

  const std::vector<std::string>& plugins = dispatcher_cmd->parsed() ? dispatcher_plugins
                                            : worker_cmd->parsed()   ? worker_plugins
                                                                     : local_plugins;
  const char* command = dispatcher_cmd->parsed() ? "dispatcher"
                        : worker_cmd->parsed()   ? "worker"
                                                 : "local";
  // A --plugin that cannot be loaded is the caller's input, as a pipeline that does not parse.
  if (absl::Status loaded = LoadPlugins(plugins); !loaded.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--plugin: ", loaded.message())), command);
  }
  if (dispatcher_cmd->parsed()) {
    control::DispatcherOptions options;
    options.config.data_roots = dispatcher_data_roots;
    options.config.worker_addresses = worker_addresses;
    options.work_dir = work_dir;
    absl::StatusOr<absl::Duration> parsed_worker_timeout =
        ParseDurationFlag("worker-timeout", worker_timeout);
    if (!parsed_worker_timeout.ok()) return Fail(parsed_worker_timeout.status(), "dispatcher");
    options.config.worker_timeout = *parsed_worker_timeout;
    if (!round_wait.empty()) {
      absl::StatusOr<absl::Duration> parsed_round_wait =
          ParseDurationFlag("round-wait", round_wait);
      if (!parsed_round_wait.ok()) return Fail(parsed_round_wait.status(), "dispatcher");
      options.config.round_wait = *parsed_round_wait;
    }
    absl::StatusOr<absl::Duration> parsed_gc = ParseDurationFlag("job-gc-timeout", job_gc_timeout);
    if (!parsed_gc.ok()) return Fail(parsed_gc.status(), "dispatcher");
    options.config.job_gc_timeout = *parsed_gc;
    absl::StatusOr<absl::Duration> parsed_client_timeout =
        ParseDurationFlag("client-timeout", client_timeout);
    if (!parsed_client_timeout.ok()) return Fail(parsed_client_timeout.status(), "dispatcher");
    if (*parsed_client_timeout < absl::Seconds(1)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
                      "--client-timeout must be at least 1s (clients report every 100 ms, "
                      "and a live client taken for gone loses what workers kept for it); got ",
                      client_timeout)),
                  "dispatcher");
    }
    options.config.client_timeout = *parsed_client_timeout;
    options.fault_tolerant = fault_tolerant;
    if (fault_tolerant && work_dir.empty()) {
      return Fail(absl::InvalidArgumentError("--fault-tolerant needs --work-dir"), "dispatcher");
    }
    // Alone it did nothing: a restart on a journaled directory came up empty, silently.
    if (!fault_tolerant && !work_dir.empty()) {
      return Fail(absl::InvalidArgumentError(
                      "--work-dir is used only with --fault-tolerant (journal every state "
                      "change there and recover it on restart); add --fault-tolerant"),
                  "dispatcher");
    }
    options.bind =
        transport::Address{scheme, dispatcher_host, static_cast<uint16_t>(dispatcher_port)};
    options.config.elements_per_split = elements_per_split;
    auto dispatcher = control::Dispatcher::Start(options);
    if (!dispatcher.ok()) return Fail(dispatcher.status(), "dispatcher");
    if (!(*dispatcher)->recovery_summary().empty()) {
      std::cout << "sluice dispatcher " << (*dispatcher)->recovery_summary() << std::endl;
    }
    std::cout << "sluice dispatcher listening on " << (*dispatcher)->address().ToString() << " (id "
              << (*dispatcher)->id() << ")" << std::endl;
    // 0.0.0.0 is where it listens, not an address a worker can be given.
    if (const std::string host = (*dispatcher)->address().host;
        host == "0.0.0.0" || host == "::" || host.empty()) {
      char name[256] = {};
      if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
        transport::Address reachable = (*dispatcher)->address();
        reachable.host = name;
        std::cout << "sluice dispatcher: on every interface; give workers and clients "
                  << "--dispatcher " << reachable.ToString() << " (or this host's IP)" << std::endl;
      }
    }
    std::cout << "sluice dispatcher transport: " << (*dispatcher)->transport_description()
              << std::endl;
    WaitForTerminationSignal();
    return 0;
  }
  if (worker_cmd->parsed()) {
    absl::StatusOr<transport::Address> dispatcher =
        PeerAddress(worker_dispatcher, scheme, transport_option->count() > 0);
    if (!dispatcher.ok()) return Fail(dispatcher.status(), "worker");
    worker_options.dispatcher = *dispatcher;
    worker_options.bind =
        transport::Address{dispatcher->scheme, worker_host, static_cast<uint16_t>(worker_port)};
    worker_options.advertise_host = advertise_host;
    worker_options.dispatcher_timeout = *timeout;
    absl::Duration register_timeout;
    if (!absl::ParseDuration(register_timeout_text, &register_timeout) ||
        register_timeout < absl::ZeroDuration()) {
      return Fail(absl::InvalidArgumentError(
                      absl::StrCat("--register-timeout expects a duration like 5m or 0s, got '",
                                   register_timeout_text, "'")),
                  "worker");
    }
    worker_options.register_timeout = register_timeout;
    int stopped_by = 0;
    // From the first failed try, as Worker::Start counts register_timeout.
    absl::Time waiting_since = absl::InfinitePast();
    absl::Time next_notice = absl::InfinitePast();
    worker_options.on_register_retry = [&](const absl::Status& why) {
      const absl::Time now = absl::Now();
      const bool first = waiting_since == absl::InfinitePast();
      if (first) waiting_since = now;
      if (now >= next_notice) {
        const absl::Duration left =
            std::max(absl::ZeroDuration(), register_timeout - (now - waiting_since));
        std::cerr << "sluice worker: " << (first ? "" : "still ")
                  << "waiting for the dispatcher at " << dispatcher->ToString() << " ("
                  << why.message() << "); giving up "
                  << absl::FormatDuration(absl::Trunc(left, absl::Seconds(1)))
                  << " from now (--register-timeout)" << std::endl;
        next_notice = now + absl::Seconds(30);
      }
      // A second between tries that Ctrl-C or SIGTERM cuts short (they are blocked here,
      // for sigwait); a wait another signal interrupts (EINTR) goes on for the rest.
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGINT);
      sigaddset(&set, SIGTERM);
      const absl::Time until = now + absl::Seconds(1);
      for (absl::Time at = now; at < until; at = absl::Now()) {
        const timespec rest = absl::ToTimespec(until - at);
        const int signal = sigtimedwait(&set, nullptr, &rest);
        if (signal > 0) {
          stopped_by = signal;
          return false;
        }
        if (errno != EINTR) break;  // EAGAIN: the second passed
      }
      return true;
    };
    auto worker = control::Worker::Start(worker_options);
    if (stopped_by != 0) return 128 + stopped_by;
    if (!worker.ok()) return Fail(worker.status(), "worker");
    std::cout << "sluice worker serving at " << (*worker)->address() << std::endl;
    std::cout << "sluice worker transport: " << (*worker)->transport_description() << std::endl;
    WaitForTerminationSignal();
    return 0;
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
  if (auto p = ParseAndValidate(local_flags.pipeline, *mode); !p.ok()) {
    return Fail(p.status(), "local");
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
