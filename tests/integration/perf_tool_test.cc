// `sluice-perf` keeps its JSON contract (field names scripts rely on) and its numbers are
// coherent. Not a timing test: speed claims live in perf/RESULTS.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sched.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "transport/progress_mode.h"
#include "transport/slab_pool.h"

namespace sluice::testing {
namespace {

std::string PerfBinary() {
  const char* path = std::getenv("SLUICE_PERF_BINARY");
  return path ? path : "sluice-perf";
}

nlohmann::json RunJson(std::vector<std::string> argv) {
  Subprocess run(std::move(argv));
  EXPECT_EQ(run.Wait(absl::Seconds(120)), 0) << run.stderr_text();
  return nlohmann::json::parse(run.stdout_text());
}

TEST(PerfToolTest, TransportReportsTheContractFields) {
  nlohmann::json r = RunJson({PerfBinary(), "transport", "--size", "256KiB", "--iterations", "200",
                              "--latency-iterations", "200", "--json"});
  EXPECT_EQ(r["transport"], "ucx");
  EXPECT_EQ(r["size"], 256 * 1024);
  EXPECT_GT(r["bandwidth_mb_s"].get<double>(), 0);
  EXPECT_GT(r["latency_us"].get<double>(), 0);
  // The bare-message round trip (no RPC layer) was measured too.
  EXPECT_GT(r["message_latency_us"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(r["message_round_trip_us"].get<double>(),
                   2 * r["message_latency_us"].get<double>());
  EXPECT_TRUE(r["ucx_tls"].is_string());
  EXPECT_THAT(r["transport_description"].get<std::string>(), ::testing::HasSubstr("UCX"));
  // Above the rendezvous threshold the payload lands without a copy.
  EXPECT_EQ(r["payload_bytes_copied"], 0);
  EXPECT_EQ(r["window"], 8) << "4MiB in flight allow all 8 requests of 256 KiB";
  EXPECT_EQ(r["huge_pages"], transport::DefaultPoolsUseHugePages()) << r.dump();
}

// SLUICE_HUGE_PAGES=off reaches the pools of every process a perf run starts.
TEST(PerfToolTest, HugePagesFollowTheEnvironment) {
  ASSERT_EQ(setenv("SLUICE_HUGE_PAGES", "off", 1), 0);
  nlohmann::json transport = RunJson({PerfBinary(), "transport", "--size", "1MiB", "--iterations",
                                      "20", "--latency-iterations", "0", "--json"});
  nlohmann::json service =
      RunJson({PerfBinary(), "service", "--workers", "1", "--clients", "1", "--batch-bytes",
               "64KiB", "--seconds", "1", "--mode", "off", "--json"});
  ASSERT_EQ(unsetenv("SLUICE_HUGE_PAGES"), 0);
  EXPECT_EQ(transport["huge_pages"], false) << transport.dump();
  // Skipped latency runs are null, not a latency of 0.
  EXPECT_TRUE(transport["latency_us"].is_null()) << transport.dump();
  EXPECT_TRUE(transport["message_round_trip_us"].is_null()) << transport.dump();
  EXPECT_EQ(service["huge_pages"], false) << service.dump();
  if (transport::TransparentHugePageBytes() == 0) {
    GTEST_SKIP() << "no transparent huge pages on this host: the default is base pages too";
  }
  nlohmann::json by_default = RunJson({PerfBinary(), "transport", "--size", "1MiB", "--iterations",
                                       "20", "--latency-iterations", "0", "--json"});
  EXPECT_EQ(by_default["huge_pages"], true) << by_default.dump();
}

// As `sluice read`, the transport run keeps fewer requests in flight for large messages:
// at most --max-bytes-in-flight (4MiB) over the size, at least one; 0 lifts the bound.
TEST(PerfToolTest, TransportBoundsTheBytesInFlight) {
  auto window = [](std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        PerfBinary(),           "transport", "--size", "2MiB", "--iterations", "20",
        "--latency-iterations", "0",         "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunJson(argv)["window"];
  };
  EXPECT_EQ(window({}), 2);
  EXPECT_EQ(window({"--max-bytes-in-flight", "1MiB"}), 1);
  EXPECT_EQ(window({"--max-bytes-in-flight", "0"}), 8);
  EXPECT_EQ(window({"--max-bytes-in-flight", "0", "--window", "3"}), 3);
  Subprocess bad({PerfBinary(), "transport", "--max-bytes-in-flight", "lots"});
  EXPECT_EQ(bad.Wait(absl::Seconds(30)), 2);  // a usage error, as `sluice` and sweep give
  EXPECT_THAT(bad.stderr_text(), ::testing::HasSubstr("--max-bytes-in-flight: "));
}

TEST(PerfToolTest, ServiceReportsTheContractFields) {
  nlohmann::json r =
      RunJson({PerfBinary(), "service", "--workers", "2", "--clients", "1", "--batch-bytes",
               "64KiB", "--seconds", "1", "--mode", "off", "--pipeline",
               "range(8192) | batch(8192) | repeat()", "--progress", "thread", "--json"});
  EXPECT_GT(r["batches_per_s"].get<double>(), 0);
  EXPECT_GT(r["bandwidth_mb_s"].get<double>(), 0);
  EXPECT_GE(r["p99_us"].get<double>(), r["p50_us"].get<double>());
  ASSERT_EQ(r["per_worker_batches"].size(), 2u);
  EXPECT_EQ(r["device"], -1);  // host landing, so no staging copy to a device is reported
  EXPECT_EQ(r["latency_kind"], "fetch");
  EXPECT_EQ(r["progress"], "thread");
  EXPECT_EQ(r["progress_requested"], "thread");
  EXPECT_EQ(r["driven_waits_per_batch"].get<double>(), 0.0) << "no reader drove the transport";
  EXPECT_FALSE(r.contains("bytes_copied_to_device_per_delivered_byte")) << r.dump();
  // The pipeline's batches (8192 int64 and a header), not --batch-bytes, are reported.
  EXPECT_EQ(r["batch_bytes_measured"], true);
  EXPECT_GE(r["batch_bytes"].get<int64_t>(), 8192 * 8) << r.dump();
  EXPECT_LT(r["batch_bytes"].get<int64_t>(), 8192 * 8 + 4096) << r.dump();
  ASSERT_TRUE(r["kept_batches_released"].is_number_integer()) << r.dump();
  EXPECT_GE(r["kept_batches_released"].get<int64_t>(), 0);
  ASSERT_TRUE(r["slab_waits"].is_number_integer()) << r.dump();
  EXPECT_GE(r["slab_waits"].get<int64_t>(), 0);
  // One copy per byte, the assembly into the slab; batches still buffered on workers when
  // the clients stopped do not count (they showed as up to 1.1).
  EXPECT_GE(r["copied_bytes_per_delivered_byte"].get<double>(), 0.99);
  EXPECT_LE(r["copied_bytes_per_delivered_byte"].get<double>(), 1.01);
  // The per-worker counts cover the measured window, as batches_per_s does, not the warm-up.
  int64_t by_workers = 0;
  for (const auto& n : r["per_worker_batches"]) by_workers += n.get<int64_t>();
  EXPECT_NEAR(static_cast<double>(by_workers),
              r["batches_per_s"].get<double>() * r["seconds"].get<double>(), 0.5)
      << r.dump();
}

// Without --pipeline, both modes serve a synthetic pipeline their sharding accepts (DYNAMIC
// refuses cache(), which the OFF default uses). The DYNAMIC run's reader drives the
// transport itself (--progress caller) and says how many of its batches it received so.
TEST(PerfToolTest, ServiceRunsItsDefaultPipelineInBothModes) {
  for (const char* mode : {"off", "dynamic"}) {
    const std::string progress = std::string(mode) == "off" ? "thread" : "caller";
    nlohmann::json r = RunJson({PerfBinary(), "service", "--batch-bytes", "64KiB", "--seconds", "1",
                                "--mode", mode, "--progress", progress, "--json"});
    EXPECT_GT(r["batches_per_s"].get<double>(), 0) << mode;
    ASSERT_EQ(r["per_worker_batches"].size(), 1u) << mode;
    EXPECT_EQ(r["progress"], progress);
    if (progress == "caller") {
      EXPECT_GT(r["driven_waits_per_batch"].get<double>(), 0.0) << r.dump();
      EXPECT_LE(r["driven_waits_per_batch"].get<double>(), 1.0) << r.dump();
    }
  }
}

// By default (--progress auto) readers drive the transport only where CPUs are scarce. The
// processes inherit this thread's affinity, so pinned to one CPU the run must be
// caller-driven; unpinned it follows the rule for the CPUs this machine gives the test.
TEST(PerfToolTest, AutoProgressFollowsTheCpusTheReadersMayUse) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  const std::vector<std::string> argv = {PerfBinary(), "service", "--batch-bytes", "64KiB",
                                         "--seconds",  "1",       "--json"};
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  nlohmann::json pinned = RunJson(argv);
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(pinned["progress_requested"], "auto");
  EXPECT_EQ(pinned["progress"], "caller") << pinned.dump();
  EXPECT_GT(pinned["driven_waits_per_batch"].get<double>(), 0.0) << pinned.dump();

  nlohmann::json free = RunJson(argv);
  const bool caller =
      transport::UsesCallerDrivenProgress(transport::ProgressMode::kAuto, CPU_COUNT(&all));
  EXPECT_EQ(free["progress"], caller ? "caller" : "thread") << CPU_COUNT(&all) << " CPUs";
  if (!caller) {
    EXPECT_EQ(free["driven_waits_per_batch"].get<double>(), 0.0) << free.dump();
  }
}

// `--device 0` lands each client's batches in GPU memory. With a GPU every byte delivered was
// copied to the device once; without one the run fails before any process starts, with the
// reason, and never measures the host path instead.
TEST(PerfToolTest, ServiceIntoDeviceMemoryCountsTheStagingCopyOrSaysWhyNot) {
  Subprocess run({PerfBinary(), "service", "--batch-bytes", "256KiB", "--seconds", "1", "--device",
                  "0", "--json"});
  const int code = run.Wait(absl::Seconds(120));
  if (code == 0) {
    nlohmann::json r = nlohmann::json::parse(run.stdout_text());
    EXPECT_EQ(r["device"], 0);
    EXPECT_EQ(r["latency_kind"], "device_wait");
    EXPECT_GT(r["batches_per_s"].get<double>(), 0);
    // Counted over the same seconds, give or take the few batches copied ahead of the reader.
    EXPECT_NEAR(r["bytes_copied_to_device_per_delivered_byte"].get<double>(), 1.0, 0.02);
    EXPECT_LE(r["copied_bytes_per_delivered_byte"].get<double>(), 1.1);
  } else {
    EXPECT_EQ(code, 1) << run.stderr_text();
    EXPECT_THAT(run.stderr_text(), ::testing::HasSubstr("--device needs a CUDA device: "));
    EXPECT_EQ(run.stdout_text(), "");
  }
}

TEST(PerfToolTest, ServiceNamesAMissingSluiceBinary) {
  Subprocess run(
      {PerfBinary(), "service", "--seconds", "1", "--sluice-binary", "/nonexistent/sluice"});
  EXPECT_EQ(run.Wait(absl::Seconds(30)), 1);
  EXPECT_THAT(run.stderr_text(), ::testing::HasSubstr("/nonexistent/sluice"));
  EXPECT_THAT(run.stderr_text(), ::testing::HasSubstr("No such file"));
}

// Ctrl-C or a scheduler's SIGTERM ends a run with 128 + the signal, as the README says,
// (the processes it started go by their parent-death signal). libfabric's PSM provider had set
// handlers that exit(1), with no word of why.
TEST(PerfToolTest, ASignalEndsARunWithItsStatus) {
  for (const int signal : {SIGINT, SIGTERM}) {
    Subprocess run({PerfBinary(), "service", "--seconds", "60"});
    std::this_thread::sleep_for(std::chrono::seconds(3));
    run.Kill(signal);
    // Ended by the signal (Wait's -signal), which a shell's $? shows as 128 + the signal.
    EXPECT_EQ(run.Wait(absl::Seconds(30)), -signal) << run.stderr_text();
  }
}

// A transport server killed mid-transfer over tcp must fail the client promptly and plainly,
// whichever notices first (UCX's peer mode, the default on tcp, or the bootstrap socket),
// without UCX's leak warnings for the receives the dead peer left behind.
TEST(PerfToolTest, ServerKilledMidTransferIsAPromptClearErrorWithoutUcxNoise) {
  setenv("UCX_TLS", "tcp,self", 1);
  Subprocess client({PerfBinary(), "transport", "--size", "16MiB", "--iterations", "1000000",
                     "--latency-iterations", "0"});
  unsetenv("UCX_TLS");
  // The transport server is the client's child, started by its main thread.
  int server = 0;
  for (int i = 0; i < 200 && server == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream children("/proc/" + std::to_string(client.pid()) + "/task/" +
                           std::to_string(client.pid()) + "/children");
    children >> server;
  }
  ASSERT_GT(server, 0) << "no transport server appeared";
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // mid-transfer
  ASSERT_EQ(kill(server, SIGKILL), 0);
  EXPECT_EQ(client.Wait(absl::Seconds(30)), 1) << client.stderr_text();
  EXPECT_THAT(client.stderr_text(), ::testing::HasSubstr("exited"));  // either path says so
  EXPECT_THAT(client.stderr_text(), ::testing::Not(::testing::HasSubstr("mpool")));
}

// --coordinated: the clients are the consumers of one read in rounds, each round from one
// worker in turn, so the two workers serve alike. The dispatcher holds the clients to
// coordinated reads' rules: a finite pipeline is refused.
TEST(PerfToolTest, ServiceReadsInCoordinatedRounds) {
  nlohmann::json r =
      RunJson({PerfBinary(), "service", "--workers", "2", "--clients", "2", "--batch-bytes",
               "64KiB", "--seconds", "2", "--coordinated", "--json"});
  EXPECT_EQ(r["coordinated"], true);
  EXPECT_GT(r["batches_per_s"].get<double>(), 0);
  ASSERT_EQ(r["per_worker_batches"].size(), 2u);
  const int64_t first = r["per_worker_batches"][0].get<int64_t>();
  const int64_t second = r["per_worker_batches"][1].get<int64_t>();
  EXPECT_GT(first, 0);
  // Rounds alternate between the workers; only those in flight at the end differ.
  EXPECT_LE(std::abs(first - second), (first + second) / 10 + 40) << r.dump();

  Subprocess finite({PerfBinary(), "service", "--clients", "2", "--batch-bytes", "64KiB",
                     "--seconds", "1", "--coordinated", "--pipeline", "range(8192) | batch(8192)",
                     "--json"});
  EXPECT_EQ(finite.Wait(absl::Seconds(60)), 2);  // refused input, passed on from the client
  EXPECT_THAT(finite.stderr_text(), ::testing::HasSubstr("infinite"));
  Subprocess dynamic({PerfBinary(), "service", "--coordinated", "--mode", "dynamic"});
  EXPECT_EQ(dynamic.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(dynamic.stderr_text(), ::testing::HasSubstr("--coordinated needs --mode off"));
}

// `doctor` reports the host as the processes it starts would see it (UCX_TLS from the
// environment), and --strict turns its warnings into the exit status.
TEST(PerfToolTest, DoctorWarnsAboutAUcxTlsWithoutSharedMemory) {
  const char* outer = std::getenv("UCX_TLS");
  const std::string restore = outer != nullptr ? outer : "";
  ASSERT_EQ(setenv("UCX_TLS", "tcp,self", 1), 0);
  Subprocess strict({PerfBinary(), "doctor", "--json", "--strict"});
  const int strict_rc = strict.Wait(absl::Seconds(60));
  ASSERT_EQ(outer != nullptr ? setenv("UCX_TLS", restore.c_str(), 1) : unsetenv("UCX_TLS"), 0);
  EXPECT_EQ(strict_rc, 1) << strict.stderr_text();
  nlohmann::json report = nlohmann::json::parse(strict.stdout_text());
  EXPECT_EQ(report["facts"]["ucx"]["tls"], "tcp,self");
  EXPECT_GE(report["warnings"].get<int>(), 1);
  bool warned = false;
  for (const auto& finding : report["findings"]) {
    if (finding["topic"] == "shared_memory") {
      warned = finding["severity"] == "warn";
      EXPECT_THAT(finding["advice"].get<std::string>(), ::testing::HasSubstr("UCX_TLS=tcp,self"));
    }
  }
  EXPECT_TRUE(warned) << report.dump();
  EXPECT_EQ(report["facts"]["usable_cpus"], transport::UsableCpus());

  // Without --strict a warning is not a failure; the text names every topic.
  Subprocess text({PerfBinary(), "doctor"});
  EXPECT_EQ(text.Wait(absl::Seconds(60)), 0) << text.stderr_text();
  for (const char* topic : {"ucx", "shared_memory", "cma", "rdma", "huge_pages", "progress",
                            "dev_shm", "libfabric", "gpu"}) {
    EXPECT_THAT(text.stdout_text(), ::testing::HasSubstr(topic));
  }
  EXPECT_THAT(text.stdout_text(), ::testing::ContainsRegex("[0-9]+ warnings?"));
}

std::string DenyCmaBinary() {
  const char* path = std::getenv("SLUICE_DENY_CMA_BINARY");
  return path ? path : "deny_cma";
}

// A host that refuses cross-memory attach (tests/tools/deny_cma: a seccomp filter, as in
// some containers): UCX drops cma, `doctor` warns and names the cause, and the transport
// still moves every byte, with UCX watching peers whose large messages now go over tcp
// rather than warning that it does not.
TEST(PerfToolTest, WithoutCrossMemoryAttachDoctorSaysWhyAndBatchesStillMove) {
  if (std::getenv("UCX_TLS") != nullptr) GTEST_SKIP() << "needs UCX's default transports";
  Subprocess doctor({DenyCmaBinary(), PerfBinary(), "doctor", "--json"});
  const int doctor_rc = doctor.Wait(absl::Seconds(60));
  if (doctor_rc == 1 && doctor.stdout_text().empty()) {
    GTEST_SKIP() << "deny_cma cannot filter system calls here: " << doctor.stderr_text();
  }
  ASSERT_EQ(doctor_rc, 0) << doctor.stderr_text();
  nlohmann::json report = nlohmann::json::parse(doctor.stdout_text());
  for (const auto& transport : report["facts"]["ucx"]["transports"]) {
    if (transport == "knem" || transport == "xpmem") {
      GTEST_SKIP() << transport << " copies once without process_vm_readv";
    }
  }
  EXPECT_EQ(report["facts"]["cma"]["syscall_permitted"], false) << report.dump();
  for (const auto& transport : report["facts"]["ucx"]["transports"]) {
    EXPECT_NE(transport, "cma") << "UCX tests process_vm_writev before it offers cma";
  }
  bool warned = false;
  for (const auto& finding : report["findings"]) {
    if (finding["topic"] != "cma") continue;
    warned = finding["severity"] == "warn";
    EXPECT_THAT(finding["advice"].get<std::string>(),
                ::testing::HasSubstr("Operation not permitted"));
  }
  EXPECT_TRUE(warned) << report.dump();

  Subprocess transport({DenyCmaBinary(), PerfBinary(), "transport", "--size", "1MiB",
                        "--iterations", "100", "--latency-iterations", "100", "--json"});
  ASSERT_EQ(transport.Wait(absl::Seconds(120)), 0) << transport.stderr_text();
  nlohmann::json r = nlohmann::json::parse(transport.stdout_text());
  EXPECT_GT(r["bandwidth_mb_s"].get<double>(), 0);
  EXPECT_EQ(r["payload_bytes_copied"], 0);
  EXPECT_THAT(r["transport_description"].get<std::string>(),
              ::testing::HasSubstr("dead peers: UCX (peer mode)"));
  EXPECT_THAT(transport.stderr_text(),
              ::testing::Not(::testing::HasSubstr("without UCX's peer watch")));
  // Said once, by each process, where it starts UCX: the client here.
  EXPECT_THAT(transport.stderr_text(), ::testing::HasSubstr("UCX opened shared memory but no cma"));
}

// --step holds each batch while the client's CPU is busy, as a training step would: no client
// can read faster than one batch a step, and with 2 ms to fetch the next 4 KiB batch the
// input keeps up, so the clients wait for it a smaller share of the time than without one.
TEST(PerfToolTest, ServiceHoldsEachBatchForTheStep) {
  nlohmann::json r = RunJson({PerfBinary(), "service", "--batch-bytes", "4KiB", "--seconds", "1",
                              "--step", "2ms", "--json"});
  EXPECT_EQ(r["step_us"].get<double>(), 2000.0);
  EXPECT_GT(r["batches_per_s"].get<double>(), 0) << r.dump();
  EXPECT_LE(r["batches_per_s"].get<double>(), 1 / 2e-3 * 1.01) << r.dump();
  EXPECT_GE(r["input_wait_fraction"].get<double>(), 0.0) << r.dump();
  // Loose: on a loaded 2-CPU machine the busy client shares its CPUs with the worker.
  EXPECT_LT(r["input_wait_fraction"].get<double>(), 0.8) << r.dump();
  // Without a step the client does nothing but wait for input.
  nlohmann::json flat =
      RunJson({PerfBinary(), "service", "--batch-bytes", "4KiB", "--seconds", "1", "--json"});
  EXPECT_EQ(flat["step_us"].get<double>(), 0.0);
  EXPECT_GT(flat["input_wait_fraction"].get<double>(), r["input_wait_fraction"].get<double>())
      << flat.dump();
  EXPECT_LE(flat["input_wait_fraction"].get<double>(), 1.0) << flat.dump();
}

// Bad arguments exit 2, as in `sluice` and `sluice-perf sweep` (they gave 1 here, which also
// means a run that failed).
TEST(PerfToolTest, BadArgumentsAreClearErrors) {
  Subprocess bad({PerfBinary(), "transport", "--size", "12 parsecs"});
  EXPECT_EQ(bad.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(bad.stderr_text(), ::testing::HasSubstr("unknown unit"));
  Subprocess negative({PerfBinary(), "transport", "--latency-iterations", "-1"});
  EXPECT_EQ(negative.Wait(absl::Seconds(30)), 2);  // accepted, and the latency run skipped
  EXPECT_THAT(negative.stderr_text(),
              ::testing::HasSubstr("--latency-iterations: must be at least 0, got -1"));
  Subprocess empty_points({PerfBinary(), "sweep", "--bytes-per-point", "0"});
  EXPECT_EQ(empty_points.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(empty_points.stderr_text(), ::testing::HasSubstr("must be at least 1, got 0"));
  Subprocess sideways({PerfBinary(), "service", "--progress", "sideways"});
  EXPECT_EQ(sideways.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(sideways.stderr_text(),
              ::testing::HasSubstr("--progress must be auto, caller or thread, got 'sideways'"));
  Subprocess forever({PerfBinary(), "service", "--step", "inf"});
  EXPECT_EQ(forever.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(forever.stderr_text(), ::testing::HasSubstr("--step must be a finite duration"));
  Subprocess backwards({PerfBinary(), "service", "--step", "-1ms"});
  EXPECT_EQ(backwards.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(backwards.stderr_text(),
              ::testing::HasSubstr("--step must be a finite duration of zero or more"));
  Subprocess help({PerfBinary(), "service", "--help"});
  EXPECT_EQ(help.Wait(absl::Seconds(30)), 0);
  EXPECT_THAT(help.stdout_text(), ::testing::HasSubstr("--batch-bytes"));
}

}  // namespace
}  // namespace sluice::testing
