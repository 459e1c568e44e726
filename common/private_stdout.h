// Keeps a command's machine-readable output apart from what libraries print.
//
// UCX and libfabric print their warnings and errors on stdout. A command whose stdout is
// data (jsonl batches, one JSON object) takes stdout for itself before any transport starts:
// the data then goes out on a private copy of the original stdout, and fd 1 leads to stderr
// for the rest of the process, so a library's message cannot land amid the data (one did,
// in a `sluice read --format jsonl` stream, when UCX failed to reconnect a tcp socket).
//
//   absl::StatusOr<std::unique_ptr<PrivateStdout>> out = PrivateStdout::Take();
//   if (!out.ok()) return Fail(out.status());
//   (*out)->stream() << json.dump() << "\n";
#ifndef SLUICE_COMMON_PRIVATE_STDOUT_H_
#define SLUICE_COMMON_PRIVATE_STDOUT_H_

#include <ext/stdio_filebuf.h>

#include <memory>
#include <ostream>

#include "absl/status/statusor.h"

namespace sluice {

class PrivateStdout {
 public:
  // Flushes std::cout and stdout, copies fd 1 for the data, and points fd 1 at stderr.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<PrivateStdout>> Take();
  // Flushes and closes the private copy; fd 1 keeps leading to stderr.
  ~PrivateStdout();
  PrivateStdout(const PrivateStdout&) = delete;
  PrivateStdout& operator=(const PrivateStdout&) = delete;

  // Where the data goes.
  [[nodiscard]] std::ostream& stream() { return stream_; }

 private:
  explicit PrivateStdout(int fd);

  __gnu_cxx::stdio_filebuf<char> buffer_;
  std::ostream stream_;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_PRIVATE_STDOUT_H_
