// Sequential byte streams that file readers pull from, and the file stream that
// opens a path through the data-root policy (engine/io/data_roots.h).
//
//   SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<FileInputStream> file,
//                           FileInputStream::Open("train/a.tfrecord", context.data_roots));
//   char buf[4096];
//   SLUICE_ASSIGN_OR_RETURN(size_t n, file->Read(buf, sizeof(buf)));  // 0 at the end
//
// Streams never hold a whole file: callers read into their own bounded buffers.
#ifndef SLUICE_ENGINE_IO_INPUT_STREAM_H_
#define SLUICE_ENGINE_IO_INPUT_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sluice::engine {

class InputStream {
 public:
  virtual ~InputStream() = default;
  // Reads up to `n` bytes into `dest`; returns 0 only at the end of the stream. Errors
  // name the file.
  [[nodiscard]] virtual absl::StatusOr<size_t> Read(char* dest, size_t n) = 0;
};

// A regular file opened read-only for sequential access.
class FileInputStream : public InputStream {
 public:
  // Resolves `path` with ResolveDataPath, opens it, and checks the opened descriptor's
  // real path against the roots again (closing the window between resolving and
  // opening). NotFound / PermissionDenied as ResolveDataPath; FailedPrecondition for a
  // directory or other non-regular file.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FileInputStream>> Open(
      std::string_view path, std::span<const std::string> roots);

  ~FileInputStream() override;
  FileInputStream(const FileInputStream&) = delete;
  FileInputStream& operator=(const FileInputStream&) = delete;

  [[nodiscard]] absl::StatusOr<size_t> Read(char* dest, size_t n) override;
  // Up to `n` bytes from the start of the file, without moving the read position (for
  // sniffing the format).
  [[nodiscard]] absl::StatusOr<std::string> ReadPrefix(size_t n) const;

  // The canonical path that was opened.
  const std::string& path() const { return path_; }

 private:
  FileInputStream(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_;
  std::string path_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_IO_INPUT_STREAM_H_
