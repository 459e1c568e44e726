#include "tools/read_command.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/client.h"
#include "control/processing_mode.h"
#include "engine/pipeline_text.h"
#include "engine/pipeline_validate.h"
#include "gpu/cuda_probe.h"
#include "tools/batch_output.h"
#include "tools/byte_size.h"
#include "tools/device_read.h"
#include "tools/exit_code.h"
#include "tools/read_watch.h"
#include "tools/worker_loss_notice.h"
#include "transport/progress_mode.h"

namespace sluice::tools {

namespace {

// Replaces the option's text with the number of bytes `parse` makes of it.
CLI::Validator ByteValidator(absl::StatusOr<size_t> (*parse)(const std::string&),
                             std::string description) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        absl::StatusOr<size_t> bytes = parse(text);
        if (!bytes.ok()) return std::string(bytes.status().message());
        text = std::to_string(*bytes);
        return "";
      },
      std::move(description));
}

}  // namespace

// Units as sluice-perf's sizes take them (these took none).
CLI::Validator ByteSize() { return ByteValidator(ParseByteSize, "BYTES (e.g. 16MiB)"); }

CLI::Validator ByteBound() { return ByteValidator(ParseByteBound, "BYTES (e.g. 256MiB, or 0)"); }

int Fail(const absl::Status& status, absl::string_view context) {
  std::cerr << "sluice" << (context.empty() ? "" : " ") << context << ": " << status.message()
            << "\n";
  return ExitCodeFor(status);
}

// The exit status of a read whose output could not be written. Whoever read a pipe has
// gone: quietly, as SIGPIPE would have ended the process. Anything else (a full disk) is an
// error, said; before, it too passed for a closed pipe, or went unseen at the end.
// SIGPIPE is ignored (sluice_main.cc), so a closed pipe's write fails with EPIPE. (Not the
// kind of file descriptor 1: `local` and `read` point it at stderr, private_stdout.h.)
int OutputFailure(const BatchSink& sink, absl::string_view command) {
  if (sink.write_errno() == EPIPE) return 128 + SIGPIPE;
  std::cerr << "sluice " << command << ": cannot write the output: "
            << (sink.write_errno() != 0 ? std::strerror(sink.write_errno()) : "write failed")
            << "\n";
  return 1;
}

absl::StatusOr<proto::ProcessingMode> ParseMode(const std::string& text) {
  absl::StatusOr<proto::ProcessingMode> mode = control::ParseProcessingMode(text);
  if (!mode.ok())
    return absl::InvalidArgumentError(absl::StrCat("--mode: ", mode.status().message()));
  return mode;
}

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
                      "; the static ones need a dispatcher started with --worker-addresses "
                      "(`sluice local` refuses them)"))
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
         "fetched, so the other readers of a shared job get the rest (default: all)")
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
  app->add_option("--slab-bytes", flags.slab_bytes,
                  "Largest batch the client accepts; its landing pool maps --max-outstanding + "
                  "--prefetch slabs of this size")
      ->transform(ByteSize())
      ->default_str(FormatByteSize(flags.slab_bytes));
  app->add_option("--device", flags.device,
                  "Land batches in the memory of this CUDA device (staged through pinned host "
                  "memory); they are copied back only to be printed")
      ->check(AtLeast(0));
  app->add_option("--progress", flags.progress,
                  "How the reader waits for a batch: 'caller' (it drives the transport and "
                  "receives the batch itself), 'thread' (the client's progress thread receives "
                  "it and wakes the reader), or 'auto' (caller on at most 2 usable CPUs, where "
                  "the hand-off costs most; thread on more, where receiving overlaps reading)")
      ->capture_default_str();
}

absl::Status CheckReadFlags(const ReadFlags& flags) {
  SLUICE_RETURN_IF_ERROR(ParseOutputFormat(flags.format).status());
  SLUICE_ASSIGN_OR_RETURN(proto::ProcessingMode mode, ParseMode(flags.mode));
  SLUICE_RETURN_IF_ERROR(ParseAndValidate(flags.pipeline, mode).status());
  if (absl::StatusOr<transport::ProgressMode> progress =
          transport::ParseProgressMode(flags.progress);
      !progress.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--progress ", progress.status().message()));
  }
  if (absl::StatusOr<size_t> bound = ParseByteBound(flags.max_bytes_in_flight); !bound.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-bytes-in-flight: ", bound.status().message()));
  }
  // The landing pool (transport::SlabPool::Create refuses it too, but only once connected).
  const int64_t landing_slabs = int64_t{flags.max_outstanding} + flags.prefetch;
  if (flags.slab_bytes > 0 &&
      landing_slabs > static_cast<int64_t>((size_t{1} << 48) / flags.slab_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-outstanding ", flags.max_outstanding, " + --prefetch ", flags.prefetch,
        " landing slabs of --slab-bytes ", flags.slab_bytes, " are more memory than any host has"));
  }
  if (flags.num_consumers > 0 && flags.consumer_index >= flags.num_consumers) {
    return absl::InvalidArgumentError(absl::StrCat("--consumer-index ", flags.consumer_index,
                                                   " must be below --num-consumers ",
                                                   flags.num_consumers));
  }
  // Before any job is joined: a reader fetches from the moment it joins, and what it had
  // fetched when the device then failed it would be lost to a shared job's other readers.
  if (flags.device >= 0) SLUICE_RETURN_IF_ERROR(gpu::RequireCudaDevice(flags.device, "--device"));
  return absl::OkStatus();
}

int ReadAll(absl::string_view command, const transport::Address& dispatcher, const ReadFlags& flags,
            absl::Duration timeout, const StopRequest& stop, std::ostream& data) {
  if (absl::Status checked = CheckReadFlags(flags); !checked.ok()) return Fail(checked, command);
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
    BatchSink empty(*format, data);
    empty.Finish();
    return empty.output_failed() ? OutputFailure(empty, command) : 0;
  }
  auto reader = (*client)->Read(*dataset, read_options);
  if (!reader.ok()) return Fail(reader.status(), command);
  // Said, or an empty read would look like an empty dataset.
  if ((*reader)->joined_a_finished_job()) {
    std::cerr << "sluice " << command << ": job '" << flags.job_name
              << "' had already finished: nothing more to read (a new --job-name reads the "
                 "dataset again)\n";
  }
  // The summary comes at the end: meanwhile a live line on a terminal, or a line every 30 s
  // in a log (JSON lines show the read as they come).
  ProgressDisplay shown;
  if (*format == OutputFormat::kSummary) {
    shown.kind = isatty(2) ? ProgressDisplay::Kind::kLiveLine : ProgressDisplay::Kind::kLogLines;
  }
  BatchSink sink(*format, data, shown, BatchNesting(*pipeline) > 0);
  if (flags.device >= 0) {
    absl::Status read = ReadThroughDevice(command, std::move(*reader), read_options, flags.device,
                                          flags.take, stop, sink);
    if (sink.output_failed()) return OutputFailure(sink, command);
    // Stopped by a signal, the read's error is that interruption: what it read is printed.
    if (!read.ok() && !IsReadInterruption(read)) return Fail(read, command);
    sink.Finish();
    if (sink.output_failed()) return OutputFailure(sink, command);
    return stop.exit_status();
  }
  ReadWatch watch(std::string(command), reader->get(), stop);
  // Coordinated consumers count rounds, so all stop at the same one even when some had to
  // skip a round whose worker died. A reader bounded by max_batches ends by itself after
  // them, and its last Next() reports what it got to the dispatcher: a lost worker's splits
  // are then re-issued without them.
  const bool ends_by_itself = read_options.max_batches > 0;
  for (int64_t taken = 0;
       (flags.take < 0 || taken < flags.take || ends_by_itself) && !stop.requested(); ++taken) {
    absl::StatusOr<std::optional<control::Batch>> batch = (*reader)->Next();
    if (!batch.ok() && IsReadInterruption(batch.status())) break;  // Ctrl-C, SIGTERM
    if (!batch.ok()) {
      watch.SaySkippedRecords();  // perhaps why the data looked wrong
      return Fail(batch.status(), command);
    }
    if (!batch->has_value()) break;
    watch.BatchArrived();
    if (coordinated && flags.take >= 0 && (*batch)->round() >= flags.take) break;
    sink.Add(**batch);
    if (sink.output_failed()) return OutputFailure(sink, command);
    if (coordinated) taken = (*batch)->round();
  }
  sink.Finish();
  if (sink.output_failed()) return OutputFailure(sink, command);
  watch.SaySkippedRecords();
  if (auto cut_short = CutShortNotice(*mode, (*reader)->tasks_lost())) {
    std::cerr << "sluice " << command << ": " << *cut_short << "\n";
  }
  return stop.exit_status();
}

}  // namespace sluice::tools
