#include "control/dispatcher_id.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace sluice::control {
namespace {

constexpr size_t kIdDigits = 16;

bool IsId(absl::string_view text) {
  if (text.size() != kIdDigits) return false;
  for (char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateDispatcherId(const std::string& dir) {
  const std::string path = dir + "/dispatcher_id";
  std::error_code error;
  if (std::filesystem::exists(path, error)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::FailedPreconditionError(absl::StrCat("cannot read ", path));
    // At most a little more than an id: a large file is not one, whatever it holds.
    std::string text(kIdDigits + 8, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    const absl::string_view id = absl::StripAsciiWhitespace(text);
    if (IsId(id)) return std::string(id);
    return absl::FailedPreconditionError(absl::StrCat(
        path, " does not hold a dispatcher id (",
        text.empty() ? "it is empty" : "not 16 hex digits",
        "): it was damaged or written by something else. Restore it, or start afresh with a "
        "new --work-dir (workers and clients then start their reads again)"));
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot look for ", path, ": ", error.message()));
  }
  absl::BitGen gen;
  const std::string id = absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  const std::string line = id + "\n";
  const bool written =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return id;
}

}  // namespace sluice::control
