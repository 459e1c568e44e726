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

#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
#include "tools/device_read.h"
#include "tools/exit_code.h"
#include "tools/status_output.h"
#include "tools/stop_request.h"
#include "tools/worker_loss_notice.h"
#include "transport/progress_mode.h"

namespace sluice::tools {
namespace {

struct ReadFlags {
  std::string pipeline = "range(1000000) | map(square) | batch(1024)";
  std::string mode = "dynamic";
  std::string job_name;
  std::string dataset_id;
  int num_consumers = 0;
  int consumer_index = 0;
  int64_t take = -1;
  std::string format = "summary";
  int max_outstanding = 4;
  std::string max_bytes_in_flight = "4MiB";  // ReadOptions::max_bytes_in_flight
  int test_disconnect_every = 0;
  int prefetch = 4;
  size_t slab_bytes = 16 << 20;
  int device = -1;  // >= 0: land batches in this CUDA device's memory
  // How the reading thread waits for a batch (TransportOptions::caller_driven_progress):
  // auto lets it receive the batches itself only where CPUs are scarce
  // (transport/progress_mode.h).
  std::string progress = "auto";
};

// A whole number of at least `min` (CLI11's PositiveNumber names a 300-digit bound).
CLI::Validator AtLeast(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t value = 0;
        if (!absl::SimpleAtoi(text, &value)) return "expects a whole number, got '" + text + "'";
        if (value < min) return absl::StrCat("must be at least ", min, ", got ", text);
        return "";
      },
      absl::StrCat(">= ", min));
}

// A positive byte count with an optional unit ("1MiB", "64KiB", "1048576"), turned into the
// number the option stores: sluice-perf's sizes took units and these did not.
CLI::Validator ByteSize() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<size_t> bytes = tools::ParseByteSize(text);
        if (!bytes.ok()) return std::string(bytes.status().message());
        if (*bytes == 0) return "must be at least 1 byte, got '" + text + "'";
        text = std::to_string(*bytes);
        return "";
      },
      "BYTES (e.g. 16MiB)");
}

int Fail(const absl::Status& status, absl::string_view context) {
  std::cerr << "sluice" << (context.empty() ? "" : " ") << context << ": " << status.message()
            << "\n";
  return ExitCodeFor(status);
}

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

absl::StatusOr<proto::ProcessingMode> ParseMode(const std::string& text) {
  absl::StatusOr<proto::ProcessingMode> mode = control::ParseProcessingMode(text);
  if (!mode.ok())
    return absl::InvalidArgumentError(absl::StrCat("--mode: ", mode.status().message()));
  return mode;
}

// Parses and validates locally so that a typo is reported before any connection is made.
absl::StatusOr<proto::PipelineDef> ParseAndValidate(const std::string& text,
                                                    proto::ProcessingMode mode) {
  SLUICE_ASSIGN_OR_RETURN(proto::PipelineDef def, engine::ParsePipeline(text));
  // Function names are checked by the dispatcher, which knows the plugins' functions.
  SLUICE_RETURN_IF_ERROR(engine::ValidatePipelineStructure(def));
  if (mode == proto::DYNAMIC) SLUICE_RETURN_IF_ERROR(engine::ValidateSplittable(def));
  return def;
}

void AddReadFlags(CLI::App* app, ReadFlags& flags) {
  app->add_option("--pipeline", flags.pipeline,
                  "Pipeline text, e.g. 'range(10000) | map(square) | batch(32)'")
      ->capture_default_str();
  app->add_option(
         "--mode", flags.mode,
         absl::StrCat("Processing mode (sharding policy): ", control::ProcessingModeChoices(),
                      "; the static ones need the dispatcher's --worker-addresses"))
      ->capture_default_str();
  app->add_option("--dataset-id", flags.dataset_id,
                  "Register the pipeline under this name (an error if it names another pipeline)")
      ->check(CLI::Validator(
          [](const std::string& id) {
            // Empty is what "no id" means: it would register under a generated id.
            return id.empty() ? std::string("an empty id is none; leave --dataset-id out")
                              : std::string();
          },
          "NAME"));
  app->add_option("--job-name", flags.job_name,
                  "Share a job with other clients that name it (default: a job of one's own)");
  app->add_option("--num-consumers", flags.num_consumers,
                  "Coordinated reads: consumers of the named, infinite job; each round gives every "
                  "consumer one batch, all from one worker")
      ->check(AtLeast(0));
  CLI::Option* consumer_index =
      app->add_option("--consumer-index", flags.consumer_index,
                      "Coordinated reads: this consumer's index in [0, --num-consumers)")
          ->check(AtLeast(0));
  consumer_index->needs("--num-consumers");
  app->add_option(
         "--take", flags.take,
         "Stop after this many batches (coordinated reads: rounds). No batch beyond them is "
         "fetched, so the other readers of a shared job get the rest")
      ->check(AtLeast(0));
  app->add_option("--format", flags.format, "Output: jsonl (one line per batch) or summary")
      ->capture_default_str();
  app->add_option("--max-outstanding", flags.max_outstanding, "Fetches in flight")
      ->check(AtLeast(1))
      ->capture_default_str();
  app->add_option("--max-bytes-in-flight", flags.max_bytes_in_flight,
                  "Fewer fetches in flight for large batches: at most this over the largest "
                  "batch seen (at least one per worker); 0: only --max-outstanding bounds them")
      ->capture_default_str();
  app->add_option("--prefetch", flags.prefetch, "Fetched batches waiting for the reader")
      ->check(AtLeast(1))
      ->capture_default_str();
  app->add_option("--test-disconnect-every", flags.test_disconnect_every,
                  "Fault injection: drop the connection to a worker after every N batches "
                  "(nothing may be lost or duplicated); 0: never")
      ->check(AtLeast(0));
  app->add_option("--slab-bytes", flags.slab_bytes, "Largest batch the client accepts")
      ->transform(ByteSize())
      ->capture_default_str();
  app->add_option("--device", flags.device,
                  "Land batches in the memory of this CUDA device (staged through pinned host "
                  "memory); they are copied back only to be printed");
  app->add_option("--progress", flags.progress,
                  "How the reader waits for a batch: 'caller' (it drives the transport and "
                  "receives the batch itself), 'thread' (the client's progress thread receives "
                  "it and wakes the reader), or 'auto' (caller on at most 2 usable CPUs, where "
                  "the hand-off costs most; thread on more, where receiving overlaps reading)")
      ->capture_default_str();
}

// How long a read asked to stop by a signal has to print what it read and let its job go.
constexpr absl::Duration kStopGrace = absl::Seconds(3);

// Reads a whole job and prints it on `data`. Shared by `read` and `local`. Stops early,
// with what it read printed and status 128 + the signal, when `stop` is requested, and with
// status 128 + SIGPIPE when `data` can no longer be written (`| head`).
int ReadAll(absl::string_view command, const transport::Address& dispatcher, const ReadFlags& flags,
            absl::Duration timeout, const StopRequest& stop, std::ostream& data) {
  absl::StatusOr<OutputFormat> format = ParseOutputFormat(flags.format);
  if (!format.ok()) return Fail(format.status(), command);
  absl::StatusOr<proto::ProcessingMode> mode = ParseMode(flags.mode);
  if (!mode.ok()) return Fail(mode.status(), command);
  absl::StatusOr<proto::PipelineDef> pipeline = ParseAndValidate(flags.pipeline, *mode);
  if (!pipeline.ok()) return Fail(pipeline.status(), command);

  absl::StatusOr<transport::ProgressMode> progress = transport::ParseProgressMode(flags.progress);
  if (!progress.ok()) {
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("--progress ", progress.status().message())),
        command);
  }
  absl::StatusOr<size_t> max_bytes_in_flight = tools::ParseByteBound(flags.max_bytes_in_flight);
  if (!max_bytes_in_flight.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--max-bytes-in-flight: ",
                                                        max_bytes_in_flight.status().message())),
                command);
  }
  control::ClientOptions client_options;
  client_options.dispatcher = dispatcher;
  client_options.timeout = timeout;
  client_options.transport.caller_driven_progress =
      transport::UsesCallerDrivenProgress(*progress, transport::UsableCpus());
  auto client = control::Client::Connect(client_options);
  if (!client.ok()) return Fail(client.status(), command);
  absl::StatusOr<std::string> dataset = (*client)->RegisterDataset(*pipeline, flags.dataset_id);
  if (!dataset.ok()) {
    // A --dataset-id another pipeline holds is the caller's input, as a taken --job-name is.
    return Fail(absl::IsAlreadyExists(dataset.status())
                    ? absl::InvalidArgumentError(dataset.status().message())
                    : dataset.status(),
                command);
  }
  control::ReadOptions read_options;
  read_options.mode = *mode;
  read_options.job_name = flags.job_name;
  read_options.num_consumers = flags.num_consumers;
  read_options.consumer_index = flags.consumer_index;
  read_options.max_outstanding_requests = flags.max_outstanding;
  read_options.max_bytes_in_flight = *max_bytes_in_flight;
  read_options.prefetch_batches = flags.prefetch;
  read_options.slab_bytes = flags.slab_bytes;
  read_options.disconnect_every_batches = flags.test_disconnect_every;
  // Coordinated consumers take rounds; the others fetch no batch beyond --take, which of a
  // shared job would be lost to its other readers.
  const bool coordinated = flags.num_consumers > 0;
  if (!coordinated && flags.take > 0) read_options.max_batches = flags.take;
  read_options.on_worker_awaited = [command = std::string(command)](const std::string& worker) {
    std::cerr << "sluice " << command << ": " << WorkerAwaitedNotice(worker) << "\n";
  };
  read_options.on_worker_lost = [command = std::string(command), mode = *mode,
                                 coordinated](const std::string& worker) {
    std::cerr << "sluice " << command << ": " << WorkerLostNotice(mode, coordinated, worker)
              << "\n";
  };
  if (flags.take == 0) {
    // No reader: it would fetch batches of a shared job (max_batches 0 is no bound).
    BatchSink(*format, data, false).Finish();
    return 0;
  }
  auto reader = (*client)->Read(*dataset, read_options);
  if (!reader.ok()) return Fail(reader.status(), command);
  // Said, or an empty read would look like an empty dataset.
  if ((*reader)->joined_a_finished_job()) {
    std::cerr << "sluice " << command << ": job '" << flags.job_name
              << "' had already finished: nothing more to read (a new --job-name reads the "
                 "dataset again)\n";
  }
  BatchSink sink(*format, data, *format == OutputFormat::kSummary && isatty(2));
  if (flags.device >= 0) {
    absl::Status read =
        ReadThroughDevice(std::move(*reader), read_options, flags.device, flags.take, stop, sink);
    if (sink.output_failed()) return 128 + SIGPIPE;
    if (!read.ok()) return Fail(read, command);
    sink.Finish();
    return stop.exit_status();
  }
  // Coordinated consumers count rounds, so all stop at the same one even when some had to
  // skip a round whose worker died. A reader bounded by max_batches ends by itself after
  // them, and its last Next() reports what it got to the dispatcher: a lost worker's splits
  // are then re-issued without them.
  const bool ends_by_itself = read_options.max_batches > 0;
  for (int64_t taken = 0;
       (flags.take < 0 || taken < flags.take || ends_by_itself) && !stop.requested(); ++taken) {
    absl::StatusOr<std::optional<control::Batch>> batch = (*reader)->Next();
    if (!batch.ok()) return Fail(batch.status(), command);
    if (!batch->has_value()) break;
    if (coordinated && flags.take >= 0 && (*batch)->round() >= flags.take) break;
    sink.Add(**batch);
    // Whoever read the output has gone: quietly, as a process SIGPIPE ends would.
    if (sink.output_failed()) return 128 + SIGPIPE;
    if (coordinated) taken = (*batch)->round();
  }
  sink.Finish();
  if (auto cut_short = CutShortNotice(*mode, (*reader)->tasks_lost())) {
    std::cerr << "sluice " << command << ": " << *cut_short << "\n";
  }
  return stop.exit_status();
}

absl::Status LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    SLUICE_RETURN_IF_ERROR(engine::LoadPlugin(path, &engine::GlobalFunctions()));
  }
  return absl::OkStatus();
}

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
      ->capture_default_str();
  worker_cmd->add_option("--slabs", worker_options.num_slabs, "Registered slabs in the pool")
      ->check(AtLeast(1))
      ->capture_default_str();
  worker_cmd
      ->add_option("--buffer-batches", worker_options.task.buffer_batches,
                   "Finished batches buffered per task")
      ->check(AtLeast(1))
      ->capture_default_str();
  std::vector<std::string> worker_plugins;
  worker_cmd->add_option("--plugin", worker_plugins,
                         "Shared library of custom functions to load (repeatable)");
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
  if (absl::Status loaded = LoadPlugins(plugins); !loaded.ok()) return Fail(loaded, "");
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
    auto worker = control::Worker::Start(worker_options);
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
  control::LocalClusterOptions options;
  options.num_workers = local_workers;
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
