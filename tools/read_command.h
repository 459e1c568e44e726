// `sluice read` and `sluice local`'s reading half: their flags, and the read that prints a
// job's batches, saying on stderr what happens to the job on the way (a worker lost, a
// listed worker awaited, a pass ended short).
//
//   ReadFlags flags;
//   AddReadFlags(read_cmd, flags);
//   ...
//   return ReadAll("read", dispatcher, flags, timeout, stop, std::cout);
#ifndef SLUICE_TOOLS_READ_COMMAND_H_
#define SLUICE_TOOLS_READ_COMMAND_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "control/service.pb.h"
#include "engine/pipeline.pb.h"
#include "tools/cli_checks.h"
#include "tools/stop_request.h"
#include "transport/address.h"

namespace sluice::tools {

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

// A positive byte count with an optional unit ("1MiB", "64KiB", "1048576"), turned into the
// number the option stores.
[[nodiscard]] CLI::Validator ByteSize();
// As ByteSize, and 0 too, for a bound whose help says what 0 means.
[[nodiscard]] CLI::Validator ByteBound();

// Prints "sluice CONTEXT: message" on stderr; returns ExitCodeFor(status).
int Fail(const absl::Status& status, absl::string_view context);

// --mode, as InvalidArgument naming the flag.
[[nodiscard]] absl::StatusOr<proto::ProcessingMode> ParseMode(const std::string& text);
// Parses and validates locally so that a typo is reported before any connection is made.
[[nodiscard]] absl::StatusOr<proto::PipelineDef> ParseAndValidate(const std::string& text,
                                                                  proto::ProcessingMode mode);

void AddReadFlags(CLI::App* app, ReadFlags& flags);

// How long a read asked to stop by a signal has to print what it read and let its job go.
inline constexpr absl::Duration kStopGrace = absl::Seconds(3);

// What ReadAll refuses of `flags` before it reads: checked first by a caller that starts
// something on the way (`sluice local`'s cluster).
[[nodiscard]] absl::Status CheckReadFlags(const ReadFlags& flags);

// Reads a whole job and prints it on `data`. Shared by `read` and `local`. Stops early,
// with what it read printed and status 128 + the signal, when `stop` is requested, with
// status 128 + SIGPIPE when whoever read `data` went away (`| head`), and with 1 when
// `data` cannot be written otherwise (a full disk).
int ReadAll(absl::string_view command, const transport::Address& dispatcher, const ReadFlags& flags,
            absl::Duration timeout, const StopRequest& stop, std::ostream& data);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_READ_COMMAND_H_
