// Internal to the journal (control/journal.h): file names, record framing, descriptors and
// the POSIX calls the writer and the reader share. Every error names the file.
//
//   std::string bytes;
//   AppendFramedRecord(payload, &bytes);      // uint32 length, uint32 masked CRC32C, payload
//   SLUICE_ASSIGN_OR_RETURN(JournalListing listing, ListJournalDir(dir));
//   SLUICE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(JournalPath(dir, 7)));
//   RecordScanner scanner(file, /*last_file=*/true);
//   SLUICE_ASSIGN_OR_RETURN(std::optional<std::string_view> record, scanner.Next());
#ifndef SLUICE_CONTROL_JOURNAL_FILE_H_
#define SLUICE_CONTROL_JOURNAL_FILE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::control {

// A torn or corrupt record at the end of the journal's last file, dropped by recovery.
struct TornTail {
  std::string path;
  uint64_t offset = 0;         // where the dropped record began
  uint64_t bytes_dropped = 0;  // from there to the end of the file
};

namespace journal_internal {

inline constexpr size_t kRecordHeaderBytes = 8;
// Larger records are refused when written and taken for corruption when read.
inline constexpr uint32_t kMaxRecordBytes = 256u << 20;

[[nodiscard]] std::string JournalPath(std::string_view dir, int64_t seq);
[[nodiscard]] std::string SnapshotPath(std::string_view dir, int64_t seq);

// Appends the framed record (header + payload) to *out.
void AppendFramedRecord(std::string_view payload, std::string* out);

// What a journal directory holds, sequence numbers ascending.
struct JournalListing {
  std::vector<int64_t> journals;             // journal_<seq>.log
  std::vector<int64_t> snapshots;            // snapshot_<seq>.pb
  std::vector<std::string> temporary_files;  // snapshot_<seq>.pb.tmp left by a crash
  // One more than every sequence number in use.
  [[nodiscard]] int64_t NextSequence() const;
};
// NotFound when `dir` does not exist.
[[nodiscard]] absl::StatusOr<JournalListing> ListJournalDir(const std::string& dir);

// An owned file descriptor, closed on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.Release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] int Release();

 private:
  int fd_ = -1;
};

// errno as a Status whose message names the operation and the file.
[[nodiscard]] absl::Status FileError(int error, std::string_view op, std::string_view path);

[[nodiscard]] absl::StatusOr<ScopedFd> OpenFile(const std::string& path, int flags,
                                                int mode = 0644);
// write(2) until every byte is written.
[[nodiscard]] absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path);
[[nodiscard]] absl::Status SyncFile(int fd, const std::string& path, bool data_only);
// fsync of the directory, making creations, renames and deletions in it durable.
[[nodiscard]] absl::Status SyncDir(const std::string& dir);
// Creates `dir` when missing (its parent must exist).
[[nodiscard]] absl::Status EnsureDir(const std::string& dir);
[[nodiscard]] absl::Status RemoveFile(const std::string& path);
// Writes `bytes` to path.tmp, syncs it, renames it over `path` and syncs the directory.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& dir, const std::string& path,
                                               std::string_view bytes);

// A whole file mapped read-only (empty files map nothing).
class MappedFile {
 public:
  [[nodiscard]] static absl::StatusOr<MappedFile> Open(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  [[nodiscard]] std::string_view data() const { return {data_, size_}; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// Walks the framed records of one mapped file. A record that is short, overruns the file or
// fails its CRC is DataLoss naming the file and offset, except in the journal's last file
// when no intact record follows it: that is a write torn by a crash, which is dropped
// (with everything after it) and described by dropped().
class RecordScanner {
 public:
  RecordScanner(const MappedFile& file, bool last_file) : file_(file), last_file_(last_file) {}

  // The next record's payload (a view into the mapping), or nullopt at the end.
  [[nodiscard]] absl::StatusOr<std::optional<std::string_view>> Next();
  // Where the next record begins (after the end: the file's valid length).
  [[nodiscard]] uint64_t offset() const { return offset_; }
  [[nodiscard]] const std::optional<TornTail>& dropped() const { return dropped_; }

 private:
  [[nodiscard]] absl::StatusOr<std::optional<std::string_view>> Bad(const std::string& why);
  // The offset of the first intact record beginning after `from`, if any.
  [[nodiscard]] std::optional<uint64_t> FindIntactRecord(uint64_t from) const;

  const MappedFile& file_;
  const bool last_file_;
  uint64_t offset_ = 0;
  std::optional<TornTail> dropped_;
};

}  // namespace journal_internal
}  // namespace sluice::control

#endif  // SLUICE_CONTROL_JOURNAL_FILE_H_
