#include "tools/service_commands.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "control/dispatcher.h"
#include "tools/byte_size.h"
#include "tools/cli_checks.h"
#include "tools/read_command.h"
#include "tools/stop_request.h"

namespace sluice::tools {
namespace {

// Blocks until SIGINT or SIGTERM.
void WaitForTerminationSignal() {
  const sigset_t set = TerminationSignals();
  int signal = 0;
  sigwait(&set, &signal);
}

}  // namespace

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

void AddDispatcherFlags(CLI::App* command, DispatcherFlags& flags) {
  command->add_option("--port", flags.port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command->add_option("--host", flags.host, "Address to bind")->capture_default_str();
  command
      ->add_option("--elements-per-split", flags.elements_per_split,
                   "DYNAMIC split size in source elements")
      ->check(AtLeast(1))
      ->capture_default_str();

  command->add_option("--plugin", flags.plugins,
                      "Shared library of custom functions to load (repeatable)");
  command
      ->add_option("--data-root", flags.data_roots,
                   "Directory DYNAMIC list_files may glob (repeatable)")
      ->check(CLI::ExistingDirectory);
  command
      ->add_option("--job-gc-timeout", flags.job_gc_timeout,
                   "A job whose clients all left (or went silent) this long is garbage-collected")
      ->capture_default_str();
  command
      ->add_option("--client-timeout", flags.client_timeout,
                   "A client silent this long (killed, or cut off) no longer counts as a "
                   "reader: lost workers' splits stop waiting for its report, workers let go "
                   "of the batches they keep for it, and a job it alone read is collected "
                   "--job-gc-timeout later. At least 1s (clients report every 100 ms)")
      ->capture_default_str();
  command
      ->add_option("--worker-timeout", flags.worker_timeout,
                   "A worker silent this long is lost: its tasks end and the DYNAMIC splits it "
                   "held are re-issued to live workers, minus what clients already received")
      ->capture_default_str();
  command->add_option("--round-wait", flags.round_wait,
                      "Coordinated reads: how long a worker's round waits for a consumer that has "
                      "not asked for it before going on without it (default 1.5 x "
                      "--worker-timeout + 1s: long enough for rounds to stay aligned across a "
                      "lost worker). A consumer that dies holds the others up this long once");
  command->add_option("--work-dir", flags.work_dir,
                      "Directory for the journal and the dispatcher id (fault tolerance)");
  command->add_flag("--fault-tolerant", flags.fault_tolerant,
                    "Journal every state change in --work-dir before acknowledging it; a "
                    "restart on the same --work-dir recovers jobs and split cursors");
  command
      ->add_option("--worker-addresses", flags.worker_addresses,
                   "Fixed worker list for static sharding (file, data, file_or_data, hint): "
                   "HOST:PORT or HOST entries, comma-separated; a worker's index is its "
                   "position, unlisted workers are refused")
      ->delimiter(',');
}

int RunDispatcher(const DispatcherFlags& flags, const std::string& scheme) {
  control::DispatcherOptions options;
  options.config.data_roots = flags.data_roots;
  options.config.worker_addresses = flags.worker_addresses;
  options.work_dir = flags.work_dir;
  absl::StatusOr<absl::Duration> parsed_worker_timeout =
      ParseDurationFlag("worker-timeout", flags.worker_timeout);
  if (!parsed_worker_timeout.ok()) return Fail(parsed_worker_timeout.status(), "dispatcher");
  options.config.worker_timeout = *parsed_worker_timeout;
  if (!flags.round_wait.empty()) {
    absl::StatusOr<absl::Duration> parsed_round_wait =
        ParseDurationFlag("round-wait", flags.round_wait);
    if (!parsed_round_wait.ok()) return Fail(parsed_round_wait.status(), "dispatcher");
    options.config.round_wait = *parsed_round_wait;
  }
  absl::StatusOr<absl::Duration> parsed_gc =
      ParseDurationFlag("job-gc-timeout", flags.job_gc_timeout);
  if (!parsed_gc.ok()) return Fail(parsed_gc.status(), "dispatcher");
  options.config.job_gc_timeout = *parsed_gc;
  absl::StatusOr<absl::Duration> parsed_client_timeout =
      ParseDurationFlag("client-timeout", flags.client_timeout);
  if (!parsed_client_timeout.ok()) return Fail(parsed_client_timeout.status(), "dispatcher");
  if (*parsed_client_timeout < absl::Seconds(1)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
                    "--client-timeout must be at least 1s (clients report every 100 ms, "
                    "and a live client taken for gone loses what workers kept for it); got ",
                    flags.client_timeout)),
                "dispatcher");
  }
  options.config.client_timeout = *parsed_client_timeout;
  options.fault_tolerant = flags.fault_tolerant;
  if (flags.fault_tolerant && flags.work_dir.empty()) {
    return Fail(absl::InvalidArgumentError("--fault-tolerant needs --work-dir"), "dispatcher");
  }
  // Alone it did nothing: a restart on a journaled directory came up empty, silently.
  if (!flags.fault_tolerant && !flags.work_dir.empty()) {
    return Fail(absl::InvalidArgumentError(
                    "--work-dir is used only with --fault-tolerant (journal every state "
                    "change there and recover it on restart); add --fault-tolerant"),
                "dispatcher");
  }
  options.bind = transport::Address{scheme, flags.host, static_cast<uint16_t>(flags.port)};
  options.config.elements_per_split = flags.elements_per_split;
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

void AddWorkerFlags(CLI::App* command, WorkerFlags& flags) {
  command->add_option("--dispatcher", flags.dispatcher, "Dispatcher address ucx://HOST:PORT")
      ->required();
  command->add_option("--port", flags.port, "Port to serve on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command->add_option("--host", flags.host, "Address to bind")->capture_default_str();
  command
      ->add_option("--advertise-host", flags.advertise_host,
                   "Host clients should use (default: the IP facing the dispatcher)")
      ->check(HostName());
  command->add_option("--slab-bytes", flags.options.slab_bytes, "Largest batch")
      ->transform(ByteSize())
      ->default_str(FormatByteSize(flags.options.slab_bytes));
  command->add_option("--slabs", flags.options.num_slabs, "Registered slabs in the pool")
      ->check(AtLeast(1))
      ->capture_default_str();
  command
      ->add_option("--buffer-batches", flags.options.task.buffer_batches,
                   "Finished batches buffered per task")
      ->check(AtLeast(1))
      ->capture_default_str();
  command
      ->add_option("--spill-bytes", flags.options.max_spilled_bytes,
                   "Heap the buffers of readers that stopped may move to, freeing their slabs "
                   "for other jobs (0: they keep their slabs)")
      ->transform(ByteBound())
      ->default_str(FormatByteSize(flags.options.max_spilled_bytes));
  command->add_option("--plugin", flags.plugins,
                      "Shared library of custom functions to load (repeatable)");
  command
      ->add_option("--register-timeout", flags.register_timeout,
                   "How long to keep trying a dispatcher that is not up yet before giving up "
                   "(0s: fail at the first try)")
      ->capture_default_str();
  command
      ->add_option("--data-root", flags.options.task.data_roots,
                   "Directory pipelines may read files from (repeatable; none: no files)")
      ->check(CLI::ExistingDirectory);
}

int RunWorker(const WorkerFlags& flags, const std::string& scheme, bool transport_given,
              absl::Duration timeout) {
  control::WorkerOptions options = flags.options;
  absl::StatusOr<transport::Address> dispatcher =
      PeerAddress(flags.dispatcher, scheme, transport_given);
  if (!dispatcher.ok()) return Fail(dispatcher.status(), "worker");
  options.dispatcher = *dispatcher;
  options.bind =
      transport::Address{dispatcher->scheme, flags.host, static_cast<uint16_t>(flags.port)};
  options.advertise_host = flags.advertise_host;
  options.dispatcher_timeout = timeout;
  absl::Duration register_timeout;
  if (!absl::ParseDuration(flags.register_timeout, &register_timeout) ||
      register_timeout < absl::ZeroDuration()) {
    return Fail(absl::InvalidArgumentError(
                    absl::StrCat("--register-timeout expects a duration like 5m or 0s, got '",
                                 flags.register_timeout, "'")),
                "worker");
  }
  options.register_timeout = register_timeout;
  int stopped_by = 0;
  // From the first failed try, as Worker::Start counts register_timeout.
  absl::Time waiting_since = absl::InfinitePast();
  absl::Time next_notice = absl::InfinitePast();
  options.on_register_retry = [&](const absl::Status& why) {
    const absl::Time now = absl::Now();
    const bool first = waiting_since == absl::InfinitePast();
    if (first) waiting_since = now;
    if (now >= next_notice) {
      const absl::Duration left =
          std::max(absl::ZeroDuration(), register_timeout - (now - waiting_since));
      std::cerr << "sluice worker: " << (first ? "" : "still ") << "waiting for the dispatcher at "
                << dispatcher->ToString() << " (" << why.message() << "); giving up "
                << absl::FormatDuration(absl::Trunc(left, absl::Seconds(1)))
                << " from now (--register-timeout)" << std::endl;
      next_notice = now + absl::Seconds(30);
    }
    // A second between tries that Ctrl-C or SIGTERM cuts short (they are blocked here,
    // for sigwait); a wait another signal interrupts (EINTR) goes on for the rest.
    const sigset_t set = TerminationSignals();
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
  auto worker = control::Worker::Start(options);
  if (stopped_by != 0) return 128 + stopped_by;
  if (!worker.ok()) return Fail(worker.status(), "worker");
  std::cout << "sluice worker serving at " << (*worker)->address() << std::endl;
  std::cout << "sluice worker transport: " << (*worker)->transport_description() << std::endl;
  WaitForTerminationSignal();
  return 0;
}

}  // namespace sluice::tools
