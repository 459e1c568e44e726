// `sluice` as a user at a terminal meets it: a read runs until it is done, or until it is
// told to stop (Ctrl-C, SIGTERM) or whoever reads its output goes away (`| head`).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/subprocess.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string SluiceBinary() {
  const char* path = std::getenv("SLUICE_BINARY");
  return path ? path : "sluice";
}

// An in-process cluster reading a job that never ends.
std::vector<std::string> EndlessLocalRead(const std::string& format) {
  return {
      SluiceBinary(), "local",    "--workers", "1",          "--mode",
      "off",          "--format", format,      "--pipeline", "range(100) | batch(10) | repeat()"};
}

// Signalled after its first batches: it stops, prints what it read, and says why in its
// exit status. Before, `local` and `read` blocked SIGINT and SIGTERM for the sake of the
// dispatcher's and worker's sigwait and never looked at them: only SIGKILL ended them.
void ExpectStopsOn(int signal, const std::string& format, const std::string& first_output) {
  Subprocess local(EndlessLocalRead(format));
  ASSERT_FALSE(local.WaitForOutput(first_output, absl::Seconds(30)).empty()) << local.stderr_text();
  local.Kill(signal);
  EXPECT_EQ(local.Wait(absl::Seconds(20)), 128 + signal) << local.stderr_text();
  EXPECT_THAT(local.stderr_text(), HasSubstr("stopping"));
}

TEST(CliTest, LocalStopsOnInterruptAndPrintsWhatItRead) {
  Subprocess local(EndlessLocalRead("summary"));
  // The summary's lines come at the end only: nothing to watch for meanwhile. Signalled
  // before its first batch, it prints "read 0 batches (...)".
  absl::SleepFor(absl::Seconds(2));
  local.Kill(SIGINT);
  EXPECT_EQ(local.Wait(absl::Seconds(20)), 128 + SIGINT) << local.stderr_text();
  EXPECT_THAT(local.stdout_text(), HasSubstr(" batches (")) << "the summary of what was read";
}

TEST(CliTest, LocalStopsOnTerminate) { ExpectStopsOn(SIGTERM, "jsonl", "\"index\""); }

// GNU timeout signals the process and its group at once: one request, not two (the second
// used to mean "exit at once", and the summary was lost).
TEST(CliTest, LocalUnderTimeoutPrintsWhatItRead) {
  std::string command;
  for (const std::string& arg : EndlessLocalRead("summary")) command += "'" + arg + "' ";
  Subprocess timed({"/bin/bash", "-c", "timeout 3 " + command});
  EXPECT_EQ(timed.Wait(absl::Seconds(60)), 124) << timed.stderr_text();
  EXPECT_THAT(timed.stdout_text(), HasSubstr(" batches (")) << timed.stderr_text();
}

// `sluice local --format jsonl | head -n 2` ends once head has its lines: the failed write
// stops the read (it ran until killed, SIGPIPE being ignored).
TEST(CliTest, LocalStopsWhenItsOutputIsClosed) {
  std::string command;
  for (const std::string& arg : EndlessLocalRead("jsonl")) {
    command += "'" + arg + "' ";
  }
  Subprocess pipeline({"/bin/bash", "-c", "set -o pipefail; " + command + "| head -n 2"});
  EXPECT_EQ(pipeline.Wait(absl::Seconds(60)), 128 + SIGPIPE) << pipeline.stderr_text();
  std::vector<std::string> lines = absl::StrSplit(pipeline.stdout_text(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1], HasSubstr("\"index\":1"));
}

// Output that cannot be written for another reason (a full disk) is an error, said: it
// passed for a closed pipe (exit 141, nothing said), and a summary lost at the end went
// unseen (exit 0).
TEST(CliTest, OutputToAFullDiskFailsAndSaysSo) {
  for (const std::string format : {"jsonl", "summary"}) {
    std::string command;
    for (const std::string& arg : EndlessLocalRead(format)) command += "'" + arg + "' ";
    // The summary's write fails only at the end: a bounded read.
    if (format == "summary") command += "--take 5 ";
    Subprocess full({"/bin/bash", "-c", command + "> /dev/full"});
    EXPECT_EQ(full.Wait(absl::Seconds(60)), 1) << format << ": " << full.stderr_text();
    EXPECT_THAT(full.stderr_text(), HasSubstr("cannot write the output: No space left")) << format;
  }
}

// The --dispatcher address's scheme names the transport of a worker, reader or status; an
// address without one takes --transport's. An explicit --transport the scheme contradicts
// was silently ignored.
TEST(CliTest, ATransportTheAddressContradictsIsRefused) {
  Subprocess contradicted({SluiceBinary(), "--transport", "ofi", "read", "--dispatcher",
                           "ucx://127.0.0.1:1", "--pipeline", "range(3)"});
  EXPECT_EQ(contradicted.Wait(absl::Seconds(30)), 2) << contradicted.stderr_text();
  EXPECT_THAT(contradicted.stderr_text(),
              HasSubstr("--transport ofi contradicts the address ucx://127.0.0.1:1"));
  Subprocess schemeless({SluiceBinary(), "--transport", "ofi", "status", "--dispatcher",
                         "127.0.0.1:1", "--timeout", "1s"});
  EXPECT_EQ(schemeless.Wait(absl::Seconds(30)), 1) << schemeless.stderr_text();
  EXPECT_THAT(schemeless.stderr_text(), HasSubstr("ofi://127.0.0.1:1")) << "took --transport";
  Subprocess unknown({SluiceBinary(), "--transport", "tcp", "local", "--pipeline", "range(3)"});
  EXPECT_EQ(unknown.Wait(absl::Seconds(30)), 2) << unknown.stderr_text();
  EXPECT_THAT(unknown.stderr_text(), HasSubstr("tcp not in {ucx,ofi}"));
}

// A --data-root that does not exist (a typo, a volume not mounted) is said at start-up; it
// was accepted, and every read of a file under it failed later as "outside every data root".
TEST(CliTest, ADataRootThatDoesNotExistIsRefusedAtStartUp) {
  for (const char* command : {"dispatcher", "worker", "local"}) {
    SCOPED_TRACE(command);
    Subprocess run({SluiceBinary(), command, "--data-root", "/nonexistent/sluice-data",
                    "--dispatcher", "ucx://127.0.0.1:1", "--pipeline", "range(3)"});
    EXPECT_EQ(run.Wait(absl::Seconds(30)), 2) << run.stderr_text();
    EXPECT_THAT(run.stderr_text(), HasSubstr("/nonexistent/sluice-data"));
  }
}

// Values that used to pass without a word: an empty --dataset-id (it registered under a
// generated id) and a negative --test-disconnect-every.
TEST(CliTest, EmptyOrNegativeValuesAreRefused) {
  Subprocess empty_id({SluiceBinary(), "read", "--dispatcher", "ucx://127.0.0.1:1", "--pipeline",
                       "range(3)", "--dataset-id", ""});
  EXPECT_EQ(empty_id.Wait(absl::Seconds(30)), 2) << empty_id.stderr_text();
  EXPECT_THAT(empty_id.stderr_text(), HasSubstr("leave --dataset-id out"));
  Subprocess negative({SluiceBinary(), "read", "--dispatcher", "ucx://127.0.0.1:1", "--pipeline",
                       "range(3)", "--test-disconnect-every", "-1"});
  EXPECT_EQ(negative.Wait(absl::Seconds(30)), 2) << negative.stderr_text();
  EXPECT_THAT(negative.stderr_text(), HasSubstr("--test-disconnect-every"));
}

// `local`'s --slab-bytes sizes its workers' slabs as well as the reader's: a batch over the
// 16 MiB default was refused, with advice to raise a worker flag `local` does not have.
TEST(CliTest, LocalReadsBatchesLargerThanTheDefaultSlab) {
  Subprocess local({SluiceBinary(), "local", "--workers", "1", "--slab-bytes", "24MiB",
                    "--pipeline", "range(2500000) | batch(2500000)", "--format", "summary"});
  EXPECT_EQ(local.Wait(absl::Seconds(60)), 0) << local.stderr_text();
  EXPECT_THAT(local.stdout_text(), HasSubstr("read 1 batches"));
}

// A value the help documents is taken: --spill-bytes 0 ("they keep their slabs") was refused
// as "must be >= 1". And the help shows units: byte defaults as sizes (--slab-bytes showed
// 16777216), durations as DURATION, and a subcommand's help names the global options.
TEST(CliTest, DocumentedValuesAreTakenAndTheHelpShowsUnits) {
  Subprocess zero({SluiceBinary(), "worker", "--dispatcher", "ucx://127.0.0.1:1", "--spill-bytes",
                   "0", "--register-timeout", "0s"});
  EXPECT_EQ(zero.Wait(absl::Seconds(30)), 1)
      << "the dispatcher, not the flag: " << zero.stderr_text();
  EXPECT_THAT(zero.stderr_text(), Not(HasSubstr("--spill-bytes")));
  Subprocess help({SluiceBinary(), "worker", "--help"});
  EXPECT_EQ(help.Wait(absl::Seconds(30)), 0);
  EXPECT_THAT(help.stdout_text(), HasSubstr("=16MiB"));
  EXPECT_THAT(help.stdout_text(), HasSubstr("--register-timeout DURATION=5m"));
  EXPECT_THAT(help.stdout_text(), HasSubstr("--timeout DURATION"));
}

// Workers of a local cluster share this process's CPUs, each polling its transport: 300 on
// 2 CPUs had not started after a minute, in silence.
TEST(CliTest, LocalRefusesMoreWorkersThanItsCpusCanRun) {
  Subprocess local({SluiceBinary(), "local", "--workers", "1000000", "--take", "1"});
  EXPECT_EQ(local.Wait(absl::Seconds(30)), 2) << local.stderr_text();
  EXPECT_THAT(local.stderr_text(), HasSubstr("per usable CPU"));
}

// A worker advertises its --advertise-host to every reader: one that is no host name is
// refused at start (exit 2), where it registered and every reader then failed to resolve it.
TEST(CliTest, AWorkerRefusesAnAdvertiseHostThatIsNoHostName) {
  for (const char* host : {"bad host!!", "a..b", ""}) {
    Subprocess worker(
        {SluiceBinary(), "worker", "--dispatcher", "ucx://127.0.0.1:1", "--advertise-host", host});
    EXPECT_EQ(worker.Wait(absl::Seconds(20)), 2) << host << ": " << worker.stderr_text();
    EXPECT_THAT(worker.stderr_text(), HasSubstr("--advertise-host")) << host;
  }
  for (const char* host : {"node-7.cluster.local", "10.0.0.1", "::1", "gpu_host"}) {
    Subprocess worker({SluiceBinary(), "worker", "--dispatcher", "ucx://127.0.0.1:1",
                       "--advertise-host", host, "--register-timeout", "1s"});
    worker.Wait(absl::Seconds(20));
    EXPECT_THAT(worker.stderr_text(), Not(HasSubstr("is not a host name"))) << host;
  }
}

// `sluice read` of a cluster names its pipeline: without one it read `local`'s demo
// pipeline into the cluster's workers and exited 0.
TEST(CliTest, AReadWithoutAPipelineIsRefused) {
  Subprocess read({SluiceBinary(), "read", "--dispatcher", "ucx://127.0.0.1:1"});
  EXPECT_EQ(read.Wait(absl::Seconds(20)), 2) << read.stderr_text();
  EXPECT_THAT(read.stderr_text(), HasSubstr("--pipeline is required"));
}

// A word that names no command is said to be one; it was told only that a command is
// required.
TEST(CliTest, AnUnknownCommandIsNamed) {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{SluiceBinary(), "bogus"},
        std::vector<std::string>{SluiceBinary(), "--timeout", "3s", "bogus"}}) {
    Subprocess run(argv);
    EXPECT_EQ(run.Wait(absl::Seconds(20)), 2) << run.stderr_text();
    EXPECT_THAT(run.stderr_text(), HasSubstr("unknown command 'bogus'; the commands are"));
  }
  Subprocess none({SluiceBinary(), "--timeout", "3s"});
  EXPECT_EQ(none.Wait(absl::Seconds(20)), 2);
  EXPECT_THAT(none.stderr_text(), HasSubstr("A subcommand is required"));
}

}  // namespace
}  // namespace sluice::testing
