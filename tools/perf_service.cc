// `sluice-perf service`: a dispatcher, workers and clients (`sluice-perf service-client`,
// perf_service_client.cc) as processes, and what they measured.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/private_stdout.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "control/client.h"
#include "gpu/cuda_probe.h"
#include "nlohmann/json.hpp"
#include "tools/byte_size.h"
#include "tools/cli_checks.h"
#include "tools/exit_code.h"
#include "tools/perf_commands.h"
#include "transport/progress_mode.h"
#include "transport/slab_pool.h"
#include "transport/spin_wait.h"

namespace sluice::tools {
namespace {

std::string SiblingBinary(const std::string& name) {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  std::string self = n > 0 ? std::string(path, static_cast<size_t>(n)) : "";
  size_t slash = self.rfind('/');
  return slash == std::string::npos ? name : self.substr(0, slash + 1) + name;
}

// Waits for every client to end (each reads `seconds` after its warm-up), at most a minute
// past that, or for one to fail, with a live line on a terminal.
void WaitForClients(std::vector<std::unique_ptr<Subprocess>>& clients, double seconds,
                    absl::Time start) {
  const absl::Time give_up = start + absl::Seconds(seconds + 60);
  const bool live = isatty(2);
  while (absl::Now() < give_up) {
    size_t running = 0;
    bool failed = false;
    for (auto& client : clients) {
      const std::optional<int> code = client->TryWait();
      running += code.has_value() ? 0 : 1;
      failed = failed || (code.has_value() && *code != 0);
    }
    // One that failed is said now: coordinated consumers would wait on its rounds.
    if (running == 0 || failed) break;
    if (live) {
      std::cerr << absl::StrFormat("\rservice: %.0f s of %.0f, %d of %d clients reading\033[K",
                                   absl::ToDoubleSeconds(absl::Now() - start), seconds, running,
                                   clients.size())
                << std::flush;
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  if (live) std::cerr << "\r\033[K" << std::flush;
  // Whoever is still running past the minute is killed; its Wait says so.
}

// The fields a client's JSON result must have, of the types read from it.
absl::Status CheckClientResult(const nlohmann::json& r) {
  if (r.is_discarded() || !r.is_object()) return absl::InvalidArgumentError("not a JSON object");
  for (const char* field : {"batches", "bytes", "transport_bytes_copied_in_run",
                            "bytes_copied_to_device", "driven_waits"}) {
    if (!r.contains(field) || !r[field].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat("no integer '", field, "'"));
    }
  }
  for (const char* field : {"seconds", "waited_seconds", "p50_us", "p99_us"}) {
    if (!r.contains(field) || !r[field].is_number()) {
      return absl::InvalidArgumentError(absl::StrCat("no number '", field, "'"));
    }
  }
  if (!r.contains("batches_by_worker") || !r["batches_by_worker"].is_object()) {
    return absl::InvalidArgumentError("no object 'batches_by_worker'");
  }
  for (const auto& [worker, count] : r["batches_by_worker"].items()) {
    if (!count.is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat("a count for ", worker, " is no integer"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddServiceFlags(CLI::App* app, ServiceFlags& flags) {
  app->add_option("--workers", flags.workers, "Worker processes")->capture_default_str();
  app->add_option("--clients", flags.clients, "Client processes")->capture_default_str();
  app->add_option("--batch-bytes", flags.batch_bytes,
                  "Bytes of tensor data per synthetic batch; with --pipeline, the largest batch "
                  "it may make (it sizes the slabs), and the figures report the mean batch")
      ->capture_default_str();
  app->add_option("--seconds", flags.seconds, "How long clients read")->capture_default_str();
  app->add_option("--mode", flags.mode, "Sharding: off or dynamic")->capture_default_str();
  app->add_option("--pipeline", flags.pipeline,
                  "Pipeline to serve (default: off, one cached synthetic batch, repeated; "
                  "dynamic, each batch made from its own split of a range, which measures "
                  "batch assembly too)");
  app->add_option("--data-root", flags.data_roots,
                  "Directory --pipeline may read files from (repeatable), given to the "
                  "dispatcher and the workers")
      ->check(CLI::ExistingDirectory);
  app->add_option("--max-bytes-in-flight", flags.max_bytes_in_flight,
                  "As `sluice read --max-bytes-in-flight`: fewer fetches in flight for large "
                  "batches (0: --max-outstanding alone)")
      ->capture_default_str();
  app->add_option("--max-outstanding", flags.max_outstanding, "Fetches in flight per client")
      ->check(AtLeast(1))
      ->capture_default_str();
  app->add_option("--buffer-batches", flags.buffer_batches, "Worker buffer per task")
      ->check(AtLeast(1))
      ->capture_default_str();
  app->add_option("--sluice-binary", flags.sluice_binary,
                  "The `sluice` binary (default: beside this one)");
  app->add_option("--device", flags.device,
                  "Clients land batches in the memory of this CUDA device, staged through "
                  "pinned host memory as `sluice read --device` does; p50/p99 then time the "
                  "wait for each batch in device memory (-1: host memory)")
      ->check(AtLeast(-1))
      ->capture_default_str();
  app->add_option("--progress", flags.progress,
                  "How each client's reader waits for a batch, as `sluice read --progress`: "
                  "'thread' (the client's progress thread receives it and wakes the reader), "
                  "'caller' (the reader drives the transport and receives it itself), or 'auto' "
                  "(caller on at most 2 usable CPUs, else thread); the JSON's 'progress' says "
                  "which ran")
      ->capture_default_str();
  app->add_option("--wait-spin", flags.wait_spin,
                  "How long a reader whose progress thread receives polls for a batch before "
                  "it sleeps: 'auto' (50us on more than 2 usable CPUs, else 0) or a duration "
                  "(0: never); the JSON's 'wait_spin_us' says which ran")
      ->capture_default_str();
  app->add_flag("--coordinated", flags.coordinated,
                "The clients read one job in coordinated rounds, as `sluice read "
                "--num-consumers` (one consumer per client): each round gives every client "
                "one batch, all from one worker. Needs --mode off and an infinite pipeline");
  app->add_option("--step", flags.step,
                  "The consumer's work per batch, a duration (e.g. 200us): each client keeps "
                  "its CPU busy this long while it holds a batch, as a trainer's input thread "
                  "does, and the JSON's 'input_wait_fraction' says how much of the time it "
                  "still waited for input (0: read as fast as possible, tf.data's ideal model "
                  "speed)")
      ->capture_default_str();
  app->add_flag("--json", flags.json, "Print one JSON object");
}

int RunServiceCommand(const ServiceFlags& flags) {
  absl::StatusOr<size_t> batch_bytes = ParseByteSize(flags.batch_bytes);
  if (!batch_bytes.ok()) {
    return Usage("service", absl::StrCat("--batch-bytes: ", batch_bytes.status().message()));
  }
  if (flags.workers < 1 || flags.clients < 1) {
    return Usage("service", absl::StrCat("--workers and --clients must be >= 1, got ",
                                         flags.workers, " and ", flags.clients));
  }
  // Not `seconds <= 0`: NaN passes it, and the run then never ends.
  if (!(flags.seconds > 0) || !std::isfinite(flags.seconds)) {
    return Usage("service", absl::StrCat("--seconds must be finite and > 0, got ", flags.seconds));
  }
  if (flags.mode != "off" && flags.mode != "dynamic") {
    return Usage("service", absl::StrCat("--mode must be off or dynamic, got '", flags.mode, "'"));
  }
  if (flags.coordinated && flags.mode != "off") {
    // DYNAMIC's synthetic pipeline is finite (a range long enough for the run), and
    // coordinated reads need an infinite one.
    return Usage("service", "--coordinated needs --mode off");
  }
  absl::StatusOr<size_t> max_bytes_in_flight = ParseByteBound(flags.max_bytes_in_flight);
  if (!max_bytes_in_flight.ok()) {
    return Usage("service",
                 absl::StrCat("--max-bytes-in-flight: ", max_bytes_in_flight.status().message()));
  }
  absl::StatusOr<std::optional<absl::Duration>> wait_spin =
      transport::ParseWaitSpin(flags.wait_spin);
  if (!wait_spin.ok()) {
    return Usage("service", absl::StrCat("--wait-spin: ", wait_spin.status().message()));
  }
  absl::StatusOr<absl::Duration> step = ParseStep(flags.step);
  if (!step.ok()) return Usage("service", step.status().message());
  // A step as long as the window measures the warm-up at best (and each client's warm-up
  // takes a dozen steps).
  if (*step * 20 > absl::Seconds(flags.seconds)) {
    return Usage("service",
                 absl::StrCat("--step ", absl::FormatDuration(*step), " is too long for --seconds ",
                              flags.seconds, ": give at least 20 steps' time"));
  }
  absl::StatusOr<transport::ProgressMode> progress = transport::ParseProgressMode(flags.progress);
  if (!progress.ok()) {
    return Usage("service", absl::StrCat("--progress ", progress.status().message()));
  }
  // Resolved here, so that the clients run, and the JSON reports, one choice.
  const std::string progress_used(transport::ProgressModeName(
      transport::UsesCallerDrivenProgress(*progress, transport::UsableCpus())
          ? transport::ProgressMode::kCaller
          : transport::ProgressMode::kThread));
  if (flags.device >= 0) {
    // Said before a cluster starts: without a usable GPU the run would measure nothing.
    absl::Status cuda = gpu::RequireCudaDevice(flags.device, "--device");
    if (!cuda.ok()) return Fail("service", cuda.message());
  }
  // With --json, stdout carries the one JSON object and nothing a library prints (this
  // process runs UCX for its status query).
  std::unique_ptr<PrivateStdout> json_out;
  if (flags.json) {
    auto taken = PrivateStdout::Take();
    if (!taken.ok()) return Fail("service", taken.status().message());
    json_out = std::move(*taken);
  }
  const std::string sluice =
      flags.sluice_binary.empty() ? SiblingBinary("sluice") : flags.sluice_binary;
  // Said up front: a dispatcher that cannot be started has no output to show.
  if (access(sluice.c_str(), X_OK) != 0) {
    return Fail("service",
                absl::StrCat("cannot run the sluice binary ", sluice, ": ", std::strerror(errno),
                             " (build it beside sluice-perf, or pass --sluice-binary)"));
  }
  const int64_t elements = std::max<int64_t>(1, static_cast<int64_t>(*batch_bytes / 8));
  // tf.data's "ideal model speed" set-up: one batch made once, then served forever. DYNAMIC
  // sharding refuses cache() (it would replay the first repetition's splits), so there each
  // batch is made from its own split of a range too long to run out within the run.
  const int64_t dynamic_batches =
      std::max<int64_t>(1000000, static_cast<int64_t>(flags.seconds * 100000));
  const std::string pipeline =
      !flags.pipeline.empty() ? flags.pipeline
      : flags.mode == "off"
          ? absl::StrCat("range(", elements, ") | batch(", elements,
                         ") | take(1) | cache() | repeat()")
          : absl::StrCat("range(", elements * dynamic_batches, ") | batch(", elements, ")");
  const size_t slab_bytes = *batch_bytes + (64 << 10);  // room for the batch header

  std::vector<std::string> dispatcher_argv = {sluice, "dispatcher", "--port",
                                              "0",    "--host",     "127.0.0.1"};
  if (flags.pipeline.empty() && flags.mode == "dynamic") {
    // One split per synthetic batch: the default 256 elements would cost a 1 MiB batch 512
    // GetSplit calls, which measures the dispatcher, not the data path.
    dispatcher_argv.insert(dispatcher_argv.end(),
                           {"--elements-per-split", std::to_string(elements)});
  }
  std::vector<std::string> root_args;
  for (const std::string& root : flags.data_roots)
    root_args.insert(root_args.end(), {"--data-root", root});
  dispatcher_argv.insert(dispatcher_argv.end(), root_args.begin(), root_args.end());
  Subprocess dispatcher(dispatcher_argv);
  std::string line = dispatcher.WaitForOutput("listening on", absl::Seconds(20));
  if (line.empty()) return Fail("service", "dispatcher did not start: " + dispatcher.stderr_text());
  const size_t at = line.find("ucx://");
  if (at == std::string::npos) {
    return Fail("service",
                "the dispatcher names no ucx:// address (is --sluice-binary a sluice "
                "of this version?): " +
                    line);
  }
  const std::string address = line.substr(at, line.find(' ', at) - at);
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int i = 0; i < flags.workers; ++i) {
    std::vector<std::string> worker_argv = {sluice,
                                            "worker",
                                            "--dispatcher",
                                            address,
                                            "--host",
                                            "127.0.0.1",
                                            "--advertise-host",
                                            "127.0.0.1",
                                            "--slab-bytes",
                                            std::to_string(slab_bytes),
                                            "--slabs",
                                            std::to_string(flags.buffer_batches + 8),
                                            "--buffer-batches",
                                            std::to_string(flags.buffer_batches)};
    worker_argv.insert(worker_argv.end(), root_args.begin(), root_args.end());
    workers.push_back(std::make_unique<Subprocess>(worker_argv));
    if (workers.back()->WaitForOutput("serving at", absl::Seconds(20)).empty()) {
      return Fail("service", "worker did not start: " + workers.back()->stderr_text());
    }
  }
  std::vector<std::unique_ptr<Subprocess>> clients;
  for (int i = 0; i < flags.clients; ++i) {
    std::vector<std::string> argv = {SiblingBinary("sluice-perf"),
                                     "service-client",
                                     "--dispatcher",
                                     address,
                                     "--pipeline",
                                     pipeline,
                                     "--mode",
                                     flags.mode,
                                     "--seconds",
                                     absl::StrCat(flags.seconds),
                                     "--slab-bytes",
                                     std::to_string(slab_bytes),
                                     "--max-outstanding",
                                     std::to_string(flags.max_outstanding),
                                     "--max-bytes-in-flight",
                                     std::to_string(*max_bytes_in_flight),
                                     "--device",
                                     std::to_string(flags.device),
                                     "--progress",
                                     progress_used,
                                     "--wait-spin",
                                     flags.wait_spin,
                                     "--step",
                                     absl::FormatDuration(*step)};
    if (flags.coordinated) {
      argv.insert(argv.end(), {"--num-consumers", std::to_string(flags.clients), "--consumer-index",
                               std::to_string(i)});
    }
    clients.push_back(std::make_unique<Subprocess>(argv));
  }
  absl::Time start = absl::Now();
  int64_t batches = 0, bytes = 0, client_copied = 0, to_device = 0, driven_waits = 0;
  absl::flat_hash_map<std::string, int64_t> batches_by_worker;  // in the measured windows
  double seconds = 0, p50 = 0, p99 = 0, waited = 0, read_seconds = 0;
  WaitForClients(clients, flags.seconds, start);
  // The one that failed first, not one still reading that the loop below would kill.
  for (auto& client : clients) {
    const std::optional<int> code = client->TryWait();
    if (code == kUsageError) {
      return Usage("service", "a client's request was refused: " + client->stderr_text());
    }
    if (code.has_value() && *code != 0) {
      return Fail("service", "a client failed: " + client->stderr_text());
    }
  }
  for (auto& client : clients) {
    int code = client->Wait(absl::Seconds(1));
    if (code == kUsageError) {
      return Usage("service", "a client's request was refused: " + client->stderr_text());
    }
    if (code != 0) return Fail("service", "a client failed: " + client->stderr_text());
    const nlohmann::json r = nlohmann::json::parse(client->stdout_text(), nullptr, false);
    if (absl::Status read = CheckClientResult(r); !read.ok()) {
      return Fail("service", absl::StrCat("a client's result cannot be read (", read.message(),
                                          "): ", client->stdout_text()));
    }
    batches += r["batches"].get<int64_t>();
    bytes += r["bytes"].get<int64_t>();
    client_copied += r["transport_bytes_copied_in_run"].get<int64_t>();
    to_device += r["bytes_copied_to_device"].get<int64_t>();
    driven_waits += r["driven_waits"].get<int64_t>();
    for (const auto& [worker, count] : r["batches_by_worker"].items()) {
      batches_by_worker[worker] += count.get<int64_t>();
    }
    seconds = std::max(seconds, r["seconds"].get<double>());
    read_seconds += r["seconds"].get<double>();
    waited += r["waited_seconds"].get<double>();
    p50 = std::max(p50, r["p50_us"].get<double>());  // the slowest client's percentiles
    p99 = std::max(p99, r["p99_us"].get<double>());
  }
  // A pipeline that ends (no repeat()) can run out before or during the measured window.
  if (batches == 0) {
    return Fail("service",
                "no batch came within the measured window: the pipeline ended during the "
                "warm-up; give one that repeats (e.g. '... | repeat()')");
  }
  if (seconds < 0.9 * flags.seconds) {
    std::cerr << absl::StrFormat(
        "sluice-perf service: the pipeline ended after %.2f s of the %.2f s asked; the figures "
        "cover %d batches\n",
        seconds, flags.seconds, batches);
  }
  // Worker counters arrive with heartbeats; let one more pass.
  absl::SleepFor(absl::Milliseconds(400));
  control::ClientOptions options;
  options.dispatcher = *transport::ParseAddress(address);
  auto status_client = control::Client::Connect(options);
  if (!status_client.ok()) return Fail("service", status_client.status().message());
  auto status = (*status_client)->GetStatus();
  if (!status.ok()) return Fail("service", status.status().message());
  int64_t assembled = 0, worker_copied = 0, kept_released = 0, slab_waits = 0;
  std::vector<int64_t> per_worker;
  for (const proto::WorkerStatus& w : status->workers()) {
    // The assembly of batches served: those still in the workers' buffers were made for
    // readers that stopped.
    assembled += w.stats().bytes_assembled() - w.stats().bytes_assembled_unserved();
    // A stopped reader's buffer moved to the heap is copied once more.
    worker_copied += w.stats().transport_bytes_copied() + w.stats().bytes_spilled();
    kept_released += w.stats().kept_batches_released();
    slab_waits += w.stats().slab_waits();
    // The clients' measured windows; device batches do not name their worker, so with
    // --device the whole run's (the warm-up included).
    per_worker.push_back(flags.device < 0 ? batches_by_worker[w.address()]
                                          : w.stats().batches_served());
  }
  // Over the whole run, the warm-up included, on both sides of the ratio.
  int64_t served_total = 0;
  for (const proto::WorkerStatus& w : status->workers()) served_total += w.stats().bytes_served();
  double copied_per_byte = served_total > 0
                               ? static_cast<double>(assembled + worker_copied + client_copied) /
                                     static_cast<double>(served_total)
                               : 0;
  // A --pipeline's batches are what it makes: their mean, not --batch-bytes (the bound).
  const int64_t batch_size = flags.pipeline.empty() ? static_cast<int64_t>(*batch_bytes)
                                                    : bytes / std::max<int64_t>(1, batches);
  nlohmann::json result = {
      {"workers", flags.workers},
      {"clients", flags.clients},
      {"batch_bytes", batch_size},
      {"batch_bytes_measured", !flags.pipeline.empty()},
      {"mode", flags.mode},
      {"coordinated", flags.coordinated},
      // -1: batches landed in host memory.
      {"device", flags.device},
      // What p50_us and p99_us time: each fetch, from request to landed
      // payload; with --device, the reader's wait for a batch in device
      // memory.
      {"latency_kind", flags.device >= 0 ? "device_wait" : "fetch"},
      // How readers waited (--progress, with auto resolved), and the
      // share of batches a reader received on its own thread, driving
      // the transport.
      {"progress", progress_used},
      {"progress_requested", flags.progress},
      // The clients' spin, as they resolve it on this host (a caller that drives does not
      // sleep for a batch, so it does not spin either).
      {"wait_spin_us", progress_used == "caller"
                           ? 0.0
                           : absl::ToDoubleMicroseconds(transport::ResolveWaitSpin(*wait_spin))},
      {"max_outstanding", flags.max_outstanding},
      {"max_bytes_in_flight", *max_bytes_in_flight},
      {"driven_waits_per_batch",
       batches > 0 ? static_cast<double>(driven_waits) / static_cast<double>(batches) : 0},
      {"seconds", seconds},
      {"batches_per_s", batches / seconds},
      {"bandwidth_mb_s", bytes / seconds / 1e6},
      {"p50_us", p50},
      {"p99_us", p99},
      {"copied_bytes_per_delivered_byte", copied_per_byte},
      {"per_worker_batches", per_worker},
      // --step, and the share of the clients' time spent in Next() rather than in their
      // step: near 0, input keeps up with the consumer; near 1 with a step of 0.
      {"step_us", absl::ToDoubleMicroseconds(*step)},
      {"input_wait_fraction", read_seconds > 0 ? waited / read_seconds : 0},
      // Every process's slab pools (they inherit SLUICE_HUGE_PAGES).
      {"huge_pages", transport::DefaultPoolsUseHugePages()},
      // Batches workers let go unacknowledged: above 0, a broken
      // connection could have lost one (raise the workers' --slabs).
      {"kept_batches_released", kept_released},
      // 100 ms waits of workers' pipelines for a free slab: above 0, the pool (--slabs) held
      // the pipeline back, not the readers.
      {"slab_waits", slab_waits}};
  if (flags.device >= 0) {
    // The staging copy from the pinned landing slab to the device, by the GPU's copy engine
    // (not the CPU, so not in copied_bytes_per_delivered_byte).
    result["bytes_copied_to_device_per_delivered_byte"] =
        bytes > 0 ? static_cast<double>(to_device) / static_cast<double>(bytes) : 0;
  }
  if (flags.json) {
    json_out->stream() << result.dump() << std::endl;
  } else {
    std::cout << absl::StrFormat(
        "%d worker(s) -> %d client(s)%s%s, %s%s batches, %s: %.1f batches/s, %.1f MB/s, %s p50 "
        "%.0f us p99 %.0f us, %.2f bytes copied per byte delivered, %d kept batches let go, %d "
        "slab waits\n",
        flags.workers, flags.clients, flags.coordinated ? " in coordinated rounds" : "",
        flags.device >= 0 ? absl::StrCat(" (CUDA device ", flags.device, ")") : "",
        flags.pipeline.empty() ? "" : "mean ", FormatByteSize(static_cast<size_t>(batch_size)),
        flags.mode, batches / seconds, bytes / seconds / 1e6, flags.device >= 0 ? "wait" : "fetch",
        p50, p99, copied_per_byte, kept_released, slab_waits);
    if (*step > absl::ZeroDuration()) {
      std::cout << absl::StrFormat(
          "with a %s step per batch, the clients waited for input %.1f%% of the time\n",
          absl::FormatDuration(*step), 100 * result["input_wait_fraction"].get<double>());
    }
  }
  return 0;
}

}  // namespace sluice::tools
