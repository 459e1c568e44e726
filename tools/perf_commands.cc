#include "tools/perf_commands.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/private_stdout.h"
#include "common/subprocess.h"
#include "perf/transport_perf.h"
#include "tools/byte_size.h"
#include "tools/cli_checks.h"
#include "tools/exit_code.h"
#include "transport/progress_mode.h"
#include "transport/spin_wait.h"

namespace sluice::tools {

int Fail(absl::string_view command, absl::string_view message) {
  return RuntimeFailure(absl::StrCat("sluice-perf ", command), message);
}

int Usage(absl::string_view command, absl::string_view message) {
  return UsageFailure(absl::StrCat("sluice-perf ", command), message);
}

namespace {

std::string SelfBinary() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "sluice-perf";
}

// A progress line on stderr for runs longer than a couple of seconds.
std::function<void(double)> ProgressLine(std::string label) {
  auto start = absl::Now();
  return [label, start](double fraction) {
    if (absl::Now() - start < absl::Seconds(2) || !isatty(2)) return;
    std::cerr << absl::StrFormat("\r%s: %3.0f%%\033[K", label, fraction * 100) << std::flush;
  };
}

}  // namespace

void AddTransportFlags(CLI::App* app, TransportFlags& flags) {
  app->add_option("--transport", flags.transport, "ucx or ofi")->capture_default_str();
  app->add_option("--size", flags.size, "Payload bytes per message (e.g. 1MiB)")
      ->capture_default_str();
  app->add_option("--iterations", flags.iterations, "Messages in the bandwidth run")
      ->check(AtLeast(1))
      ->capture_default_str();
  app->add_option("--window", flags.window, "Requests in flight")
      ->check(AtLeast(1))
      ->capture_default_str();
  app->add_option("--max-bytes-in-flight", flags.max_bytes_in_flight,
                  "Fewer requests in flight for large messages, as `sluice read` bounds its "
                  "fetches: at most this over --size (at least 1); 0: --window alone")
      ->capture_default_str();
  app->add_option("--latency-iterations", flags.latency_iterations,
                  "8-byte round trips in the latency runs, by RPC and by bare message (0: skip)")
      ->check(AtLeast(0))
      ->capture_default_str();
  app->add_option("--progress", flags.progress,
                  "How the client waits for a reply: 'thread' (its progress thread wakes it), "
                  "'caller' (it drives the transport itself while it waits), or 'auto' (caller "
                  "on at most 2 usable CPUs); the JSON's 'progress' says which ran")
      ->capture_default_str();
  app->add_option("--wait-spin", flags.wait_spin,
                  "How long the client, when its progress thread receives, polls for a reply "
                  "before it sleeps: 'auto' (50us on more than 2 usable CPUs, else 0) or a "
                  "duration (0: never); the JSON's 'wait_spin_us' says which ran")
      ->capture_default_str();
  app->add_option("--ucx-peer-failure", flags.ucx_peer_failure,
                  "Who notices a dead UCX peer (both processes): auto (local where UCX has "
                  "shared memory and tcp, socket where only shared memory, else ucx), ucx "
                  "(UCP_ERR_HANDLING_MODE_PEER), socket (Sluice's bootstrap socket; keeps UCX "
                  "1.13's zero-copy tcp rendezvous) or local (the socket for same-host peers, "
                  "which then keep shared memory). Default: $SLUICE_UCX_PEER_FAILURE, else auto");
  app->add_flag("--json", flags.json, "Print one JSON object");
}

int RunTransportCommand(const TransportFlags& flags) {
  absl::StatusOr<size_t> size = ParseByteSize(flags.size);
  if (!size.ok()) return Usage("transport", absl::StrCat("--size: ", size.status().message()));
  if (flags.transport != "ucx" && flags.transport != "ofi") {
    return Usage("transport", "--transport must be ucx or ofi, got '" + flags.transport + "'");
  }
  absl::StatusOr<transport::ProgressMode> progress = transport::ParseProgressMode(flags.progress);
  if (!progress.ok()) {
    return Usage("transport", absl::StrCat("--progress ", progress.status().message()));
  }
  absl::StatusOr<std::optional<absl::Duration>> wait_spin =
      transport::ParseWaitSpin(flags.wait_spin);
  if (!wait_spin.ok()) {
    return Usage("transport", absl::StrCat("--wait-spin: ", wait_spin.status().message()));
  }
  absl::StatusOr<size_t> max_bytes_in_flight = ParseByteBound(flags.max_bytes_in_flight);
  if (!max_bytes_in_flight.ok()) {
    return Usage("transport",
                 absl::StrCat("--max-bytes-in-flight: ", max_bytes_in_flight.status().message()));
  }
  if (!flags.ucx_peer_failure.empty()) {
    if (flags.ucx_peer_failure != "auto" && flags.ucx_peer_failure != "ucx" &&
        flags.ucx_peer_failure != "socket" && flags.ucx_peer_failure != "local") {
      return Usage("transport", "--ucx-peer-failure must be auto, ucx, socket or local, got '" +
                                    flags.ucx_peer_failure + "'");
    }
    // Through the environment, so that the server process makes the same choice.
    setenv("SLUICE_UCX_PEER_FAILURE", flags.ucx_peer_failure.c_str(), 1);
  }
  // With --json, stdout carries the one JSON object and nothing a library prints.
  std::unique_ptr<PrivateStdout> json_out;
  if (flags.json) {
    auto taken = PrivateStdout::Take();
    if (!taken.ok()) return Fail("transport", taken.status().message());
    json_out = std::move(*taken);
  }
  Subprocess server({SelfBinary(), "transport-server", "--transport", flags.transport});
  std::string ready = server.WaitForOutput("ready ", absl::Seconds(20));
  if (ready.empty()) return Fail("transport", "server did not start: " + server.stderr_text());
  absl::StatusOr<transport::Address> address = transport::ParseAddress(ready.substr(6));
  if (!address.ok()) return Fail("transport", address.status().message());

  perf::TransportPerfOptions options;
  options.size = *size;
  options.iterations = flags.iterations;
  options.window = flags.window;
  if (*max_bytes_in_flight > 0 && flags.window > 0) {
    options.window = static_cast<int>(
        std::clamp<size_t>(*max_bytes_in_flight / *size, 1, static_cast<size_t>(flags.window)));
  }
  options.latency_iterations = flags.latency_iterations;
  options.transport.caller_driven_progress =
      transport::UsesCallerDrivenProgress(*progress, transport::UsableCpus());
  options.transport.wait_spin = *wait_spin;
  options.progress = ProgressLine("transport");
  absl::StatusOr<perf::TransportPerfResult> result =
      perf::RunTransportPerfClient(*address, options);
  server.Kill(SIGTERM);
  server.Wait(absl::Seconds(10));
  // The progress line goes, so that nothing after it lands at its end.
  if (isatty(2)) std::cerr << "\r\033[K" << std::flush;
  if (!result.ok()) return Fail("transport", result.status().message());
  if (flags.json) {
    json_out->stream() << result->ToJson().dump() << std::endl;
  } else {
    const std::string latency =
        result->latency_measured
            ? absl::StrFormat(
                  "8-byte latency %.2f us one-way by RPC (%.2f us round trip), "
                  "%.2f us by bare message (%.2f us)",
                  result->latency_us, result->round_trip_us, result->message_latency_us,
                  result->message_round_trip_us)
            : std::string("latency not measured (--latency-iterations 0)");
    std::cout << absl::StrFormat(
        "%s (%s, %s progress) %s x %d: %.1f MB/s; %s; %d payload bytes copied on receive\n%s\n",
        result->transport,
        result->transport == "ofi" ? "provider " + result->ofi_provider
                                   : "UCX_TLS=" + result->ucx_tls,
        result->progress, FormatByteSize(result->size), result->iterations, result->bandwidth_mb_s,
        latency, result->payload_bytes_copied, result->transport_description);
  }
  return 0;
}

}  // namespace sluice::tools
