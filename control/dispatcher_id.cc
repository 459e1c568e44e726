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

absl::StatusOr<std::string> LoadOrCreateDispatcherId(const std::string& dir, bool has_state) {
  const std::string path = dir + "/dispatcher_id";
  auto damaged = [&path](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " does not hold a dispatcher id (", why,
        "): it was damaged or written by something else. Restore it, or start afresh with a "
        "new --work-dir (workers and clients then start their reads again)"));
  };
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_regular_file(status)) return damaged("it is not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::FailedPreconditionError(absl::StrCat("cannot read ", path));
    // One byte more than an id and its whitespace may take: a longer file is not an id.
    constexpr size_t kMaxBytes = 64;
    std::string text(kMaxBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxBytes) return damaged("it is too long");
    const absl::string_view id = absl::StripAsciiWhitespace(text);
    if (id.empty()) return damaged("it is empty");
    if (!IsId(id)) return damaged("not 16 hex digits");
    return std::string(id);
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot look for ", path, ": ", error.message()));
  }
  if (has_state) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is missing while ", dir,
        " holds a journal: a new id would tell workers and clients that the state was lost. "
        "Restore the file, or start afresh with a new --work-dir"));
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
