// `sluice-perf service-client`: one client process of `sluice-perf service`, which reads
// for the given time and prints what it measured as one JSON object on stdout.
//
//   sluice-perf service-client --dispatcher ucx://127.0.0.1:5050 --pipeline '...' --json
#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/private_stdout.h"
#include "common/status_macros.h"
#include "control/client.h"
#include "engine/pipeline_text.h"
#include "gpu/control_batch_source.h"
#include "gpu/device_batch_reader.h"
#include "nlohmann/json.hpp"
#include "tools/byte_size.h"
#include "tools/exit_code.h"
#include "tools/perf_commands.h"
#include "transport/progress_mode.h"
#include "transport/spin_wait.h"

namespace sluice::tools {
namespace {

double Percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  size_t k = static_cast<size_t>(p * static_cast<double>(values.size() - 1));
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(k), values.end());
  return values[k];
}

// What one client saw between the end of its warm-up and the end of its time.
struct Measured {
  int64_t batches = 0;
  int64_t bytes = 0;
  double seconds = 0;
  std::vector<double> latencies_us;
  // Time spent inside Next(), waiting for input: with a --step, the share of the window the
  // consumer was held up by Sluice rather than by its own work.
  double waited_seconds = 0;
  // Batches by the worker that served them (host landing only; device batches do not say).
  absl::flat_hash_map<std::string, int64_t> batches_by_worker;
};

// One batch as `next` saw it: its size, its latency (what p50/p99 time), how long Next()
// took to hand it over, and the worker that served it (null: not known).
struct Got {
  size_t bytes = 0;
  double latency_us = 0;
  absl::Duration waited;
  const std::string* worker = nullptr;  // valid until the next call of `next`
};

// The consumer's work on a batch it holds (--step): the CPU stays busy, as a trainer's input
// thread is while it decodes or launches a step, so a reader that drives its own transport
// cannot drive it meanwhile.
void Step(absl::Duration step) {
  if (step <= absl::ZeroDuration()) return;
  const absl::Time until = absl::Now() + step;
  while (absl::Now() < until) {
  }
}

// Where the measured part starts and ends: callers read their counters there, while the
// reader (and, with --device, its prefetched copies) is still alive.
struct Window {
  std::function<void()> opens;
  std::function<void()> closes;
};

// Warm-up batches are not counted: connections, first splits, and the first use of each
// landing slab (page faults; with --device, its cudaHostRegister). `next` returns what it got
// (nullopt at the end), after the consumer's step on it.
template <typename NextFn>
absl::StatusOr<Measured> Measure(NextFn next, int warm_up, absl::Duration duration,
                                 const Window& window) {
  for (int i = 0; i < warm_up; ++i) {
    SLUICE_ASSIGN_OR_RETURN(auto batch, next());
    if (!batch.has_value()) break;
  }
  window.opens();
  Measured m;
  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  while (absl::Now() < end) {
    SLUICE_ASSIGN_OR_RETURN(auto batch, next());
    if (!batch.has_value()) break;
    // Only batches that came within the time: a coordinated consumer whose peers stopped
    // first waits out the round wait for its next round, which is not the data path's time.
    if (absl::Now() > end) break;
    ++m.batches;
    m.bytes += static_cast<int64_t>(batch->bytes);
    m.latencies_us.push_back(batch->latency_us);
    m.waited_seconds += absl::ToDoubleSeconds(batch->waited);
    if (batch->worker != nullptr) ++m.batches_by_worker[*batch->worker];
  }
  m.seconds = absl::ToDoubleSeconds(std::min(absl::Now(), end) - start);
  window.closes();
  return m;
}

// Host landing: the latency is each batch's fetch, from request to landed payload.
absl::StatusOr<Measured> ReadOnHost(control::BatchReader& reader, int warm_up,
                                    absl::Duration duration, absl::Duration step,
                                    const Window& window) {
  // The last batch's worker, kept past the batch (whose slab goes back at once).
  std::string worker;
  auto next = [&]() -> absl::StatusOr<std::optional<Got>> {
    const absl::Time asked = absl::Now();
    SLUICE_ASSIGN_OR_RETURN(std::optional<control::Batch> batch, reader.Next());
    if (!batch) return std::optional<Got>();
    const Got got{.bytes = batch->view().bytes().size(),
                  .latency_us = absl::ToDoubleMicroseconds(batch->fetch_latency()),
                  .waited = absl::Now() - asked,
                  .worker = &worker};
    if (worker != batch->worker()) worker = batch->worker();  // allocates only on a change
    Step(step);
    return got;
  };
  return Measure(next, warm_up, duration, window);
}

// Device landing, as a trainer linking Sluice gets it (gpu::DeviceBatchReader): the latency
// is how long Next() waited for a batch in device memory. Each batch is held for the step,
// then dropped, as if the training step had consumed it.
absl::StatusOr<Measured> ReadIntoDevice(std::unique_ptr<control::BatchReader> reader,
                                        const control::ReadOptions& read_options, int device,
                                        int warm_up, absl::Duration duration, absl::Duration step,
                                        const Window& window, uint64_t* bytes_to_device) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<gpu::DeviceBatchReader> device_reader,
                          gpu::ReadIntoDevice(std::move(reader), read_options, device));
  uint64_t copied_before = 0;
  auto next = [&]() -> absl::StatusOr<std::optional<Got>> {
    const absl::Time asked = absl::Now();
    SLUICE_ASSIGN_OR_RETURN(std::optional<gpu::DeviceBatch> batch, device_reader->Next());
    if (!batch) return std::optional<Got>();
    const absl::Duration waited = absl::Now() - asked;
    Step(step);
    return Got{
        .bytes = batch->size(), .latency_us = absl::ToDoubleMicroseconds(waited), .waited = waited};
  };
  const Window device_window{
      .opens =
          [&] {
            copied_before = device_reader->stats().copies.bytes_copied_to_device;
            window.opens();
          },
      .closes =
          [&] {
            *bytes_to_device = device_reader->stats().copies.bytes_copied_to_device - copied_before;
            window.closes();
          }};
  return Measure(next, warm_up, duration, device_window);
}

}  // namespace

// --step: a duration of zero or more.
absl::StatusOr<absl::Duration> ParseStep(const std::string& text) {
  absl::Duration step;
  if (!absl::ParseDuration(text, &step) || step < absl::ZeroDuration() ||
      step == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--step must be a finite duration of zero or more, such as 200us or 1.5ms; got '", text,
        "'"));
  }
  return step;
}

void AddServiceClientFlags(CLI::App* app, ServiceClientFlags& flags) {
  app->add_option("--dispatcher", flags.dispatcher)->required();
  app->add_option("--pipeline", flags.pipeline)->required();
  app->add_option("--mode", flags.mode);
  app->add_option("--job-name", flags.job_name);
  app->add_option("--seconds", flags.seconds);
  app->add_option("--slab-bytes", flags.slab_bytes);
  app->add_option("--max-outstanding", flags.max_outstanding);
  app->add_option("--max-bytes-in-flight", flags.max_bytes_in_flight);
  app->add_option("--device", flags.device);
  app->add_option("--progress", flags.progress);
  app->add_option("--wait-spin", flags.wait_spin);
  app->add_option("--num-consumers", flags.num_consumers);
  app->add_option("--consumer-index", flags.consumer_index);
  app->add_option("--step", flags.step);
}

int RunServiceClientCommand(const ServiceClientFlags& flags) {
  absl::StatusOr<transport::Address> address = transport::ParseAddress(flags.dispatcher);
  if (!address.ok()) return Usage("service-client", address.status().message());
  absl::StatusOr<size_t> slab_bytes = ParseByteSize(flags.slab_bytes);
  if (!slab_bytes.ok()) return Usage("service-client", slab_bytes.status().message());
  absl::StatusOr<size_t> max_bytes_in_flight = ParseByteBound(flags.max_bytes_in_flight);
  if (!max_bytes_in_flight.ok()) {
    return Usage("service-client", max_bytes_in_flight.status().message());
  }
  absl::StatusOr<proto::PipelineDef> pipeline = engine::ParsePipeline(flags.pipeline);
  if (!pipeline.ok()) return Usage("service-client", pipeline.status().message());
  absl::StatusOr<absl::Duration> step = ParseStep(flags.step);
  if (!step.ok()) return Usage("service-client", step.status().message());
  // The parent parses this process's stdout as JSON: no library message may land in it.
  auto data = PrivateStdout::Take();
  if (!data.ok()) return Fail("service-client", data.status().message());
  control::ClientOptions options;
  options.dispatcher = *address;
  absl::StatusOr<transport::ProgressMode> progress = transport::ParseProgressMode(flags.progress);
  if (!progress.ok()) {
    return Usage("service-client", absl::StrCat("--progress ", progress.status().message()));
  }
  options.transport.caller_driven_progress =
      transport::UsesCallerDrivenProgress(*progress, transport::UsableCpus());
  absl::StatusOr<std::optional<absl::Duration>> wait_spin =
      transport::ParseWaitSpin(flags.wait_spin);
  if (!wait_spin.ok()) {
    return Usage("service-client", absl::StrCat("--wait-spin: ", wait_spin.status().message()));
  }
  options.transport.wait_spin = *wait_spin;
  auto client = control::Client::Connect(options);
  if (!client.ok()) return Fail("service-client", client.status().message());
  auto dataset = (*client)->RegisterDataset(*pipeline);
  if (!dataset.ok()) {
    return absl::IsInvalidArgument(dataset.status())
               ? Usage("service-client", dataset.status().message())
               : Fail("service-client", dataset.status().message());
  }
  control::ReadOptions read;
  read.mode = flags.mode == "off" ? proto::OFF : proto::DYNAMIC;
  read.job_name = flags.job_name;
  read.slab_bytes = *slab_bytes;
  read.max_outstanding_requests = flags.max_outstanding;
  read.max_bytes_in_flight = *max_bytes_in_flight;
  read.num_consumers = flags.num_consumers;
  read.consumer_index = flags.consumer_index;
  auto reader = (*client)->Read(*dataset, read);
  // The dispatcher refusing the job (a finite pipeline read in coordinated rounds) is the
  // command line's fault, and the parent passes the 2 on.
  if (!reader.ok()) {
    return absl::IsInvalidArgument(reader.status())
               ? Usage("service-client", reader.status().message())
               : Fail("service-client", reader.status().message());
  }

  // Counters over the measured window only. The window closes while the reader lives (with
  // --device, inside the device reader that owns it).
  uint64_t received = 0;
  uint64_t copied = 0;
  int64_t driven_waits = 0;
  const control::BatchReader* raw_reader = reader->get();
  const Window window{.opens =
                          [&] {
                            received = (*client)->transport_stats().payload_bytes_received;
                            copied = (*client)->transport_stats().payload_bytes_copied;
                            driven_waits = raw_reader->driven_waits();
                          },
                      .closes =
                          [&] {
                            received =
                                (*client)->transport_stats().payload_bytes_received - received;
                            copied = (*client)->transport_stats().payload_bytes_copied - copied;
                            driven_waits = raw_reader->driven_waits() - driven_waits;
                          }};
  // Every landing slab (max_outstanding + prefetch of them) and the device reader's
  // prefetched buffers used once before the window opens.
  const int warm_up = read.max_outstanding_requests + read.prefetch_batches + 4;
  uint64_t bytes_to_device = 0;
  absl::StatusOr<Measured> measured =
      flags.device < 0
          ? ReadOnHost(**reader, warm_up, absl::Seconds(flags.seconds), *step, window)
          : ReadIntoDevice(*std::move(reader), read, flags.device, warm_up,
                           absl::Seconds(flags.seconds), *step, window, &bytes_to_device);
  if (!measured.ok()) return Fail("service-client", measured.status().message());
  nlohmann::json out = {
      {"batches", measured->batches},
      {"bytes", measured->bytes},
      {"seconds", measured->seconds},
      {"waited_seconds", measured->waited_seconds},
      {"batches_by_worker", measured->batches_by_worker},
      {"p50_us", Percentile(measured->latencies_us, 0.5)},
      {"p99_us", Percentile(measured->latencies_us, 0.99)},
      {"transport_bytes_received", received},
      {"transport_bytes_copied", copied},
      // Since the client connected, as the workers' counters run.
      {"transport_bytes_copied_in_run", (*client)->transport_stats().payload_bytes_copied.load()},
      {"bytes_copied_to_device", bytes_to_device},
      {"driven_waits", driven_waits}};
  (*data)->stream() << out.dump() << std::endl;
  return 0;
}

}  // namespace sluice::tools
