#include "control/journal_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/io/crc32c.h"

namespace sluice::control::journal_internal {
namespace {

constexpr std::string_view kJournalPrefix = "journal_";
constexpr std::string_view kJournalSuffix = ".log";
constexpr std::string_view kSnapshotPrefix = "snapshot_";
constexpr std::string_view kSnapshotSuffix = ".pb";
constexpr std::string_view kTmpSuffix = ".tmp";

void Store32(uint32_t value, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint32_t Load32(const char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

// The sequence number of "<prefix><digits><suffix>", or nullopt for any other name.
std::optional<int64_t> ParseSequence(std::string_view name, std::string_view prefix,
                                     std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix)) {
    return std::nullopt;
  }
  std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t seq = 0;
  if (!absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &seq)) return std::nullopt;
  return seq;
}

}  // namespace

std::string JournalPath(std::string_view dir, int64_t seq) {
  return absl::StrCat(absl::string_view(dir.data(), dir.size()), "/journal_", seq, ".log");
}

std::string SnapshotPath(std::string_view dir, int64_t seq) {
  return absl::StrCat(absl::string_view(dir.data(), dir.size()), "/snapshot_", seq, ".pb");
}

void AppendFramedRecord(std::string_view payload, std::string* out) {
  char header[kRecordHeaderBytes];
  Store32(static_cast<uint32_t>(payload.size()), header);
  Store32(engine::MaskCrc32c(engine::Crc32c(payload)), header + 4);
  out->append(header, sizeof(header));
  out->append(payload.data(), payload.size());
}

int64_t JournalListing::NextSequence() const {
  int64_t max = 0;
  if (!journals.empty()) max = std::max(max, journals.back());
  if (!snapshots.empty()) max = std::max(max, snapshots.back());
  return max + 1;
}

absl::StatusOr<JournalListing> ListJournalDir(const std::string& dir) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return FileError(errno, "listing journal directory", dir);
  JournalListing listing;
  errno = 0;
  while (const dirent* entry = readdir(handle)) {
    std::string_view name = entry->d_name;
    if (auto seq = ParseSequence(name, kJournalPrefix, kJournalSuffix)) {
      listing.journals.push_back(*seq);
    } else if (auto seq = ParseSequence(name, kSnapshotPrefix, kSnapshotSuffix)) {
      listing.snapshots.push_back(*seq);
    } else if (name.ends_with(kTmpSuffix) && name.starts_with(kSnapshotPrefix)) {
      listing.temporary_files.push_back(absl::StrCat(dir, "/", std::string(name)));
    }
    errno = 0;
  }
  const int error = errno;
  closedir(handle);
  if (error != 0) return FileError(error, "listing journal directory", dir);
  std::sort(listing.journals.begin(), listing.journals.end());
  std::sort(listing.snapshots.begin(), listing.snapshots.end());
  return listing;
}

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.Release();
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) close(fd_);
}

int ScopedFd::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

absl::Status FileError(int error, std::string_view op, std::string_view path) {
  return absl::ErrnoToStatus(error, absl::StrCat(absl::string_view(op.data(), op.size()), " ",
                                                 absl::string_view(path.data(), path.size())));
}

absl::StatusOr<ScopedFd> OpenFile(const std::string& path, int flags, int mode) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return FileError(errno, "opening", path);
  return ScopedFd(fd);
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileError(errno, "writing", path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncFile(int fd, const std::string& path, bool data_only) {
  if ((data_only ? fdatasync(fd) : fsync(fd)) != 0) return FileError(errno, "syncing", path);
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  SLUICE_ASSIGN_OR_RETURN(ScopedFd fd, OpenFile(dir, O_RDONLY | O_DIRECTORY));
  return SyncFile(fd.get(), dir, /*data_only=*/false);
}

absl::Status EnsureDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0) {
    const size_t slash = dir.find_last_of('/');
    return SyncDir(slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash));
  }
  if (errno != EEXIST) return FileError(errno, "creating journal directory", dir);
  struct stat info;
  if (stat(dir.c_str(), &info) != 0) return FileError(errno, "inspecting", dir);
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("journal path ", dir, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status RemoveFile(const std::string& path) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return FileError(errno, "removing", path);
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& dir, const std::string& path,
                                 std::string_view bytes) {
  const std::string tmp = path + std::string(kTmpSuffix);
  {
    SLUICE_ASSIGN_OR_RETURN(ScopedFd fd, OpenFile(tmp, O_WRONLY | O_CREAT | O_TRUNC));
    SLUICE_RETURN_IF_ERROR(WriteAll(fd.get(), bytes, tmp));
    SLUICE_RETURN_IF_ERROR(SyncFile(fd.get(), tmp, /*data_only=*/false));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return FileError(errno, absl::StrCat("renaming ", tmp, " to"), path);
  }
  return SyncDir(dir);
}

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(ScopedFd fd, OpenFile(path, O_RDONLY));
  struct stat info;
  if (fstat(fd.get(), &info) != 0) return FileError(errno, "inspecting", path);
  const size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) return MappedFile(path, nullptr, 0);
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.get(), 0);
  if (data == MAP_FAILED) return FileError(errno, "mapping", path);
  return MappedFile(path, static_cast<const char*>(data), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
}

absl::StatusOr<std::optional<std::string_view>> RecordScanner::Next() {
  const std::string_view data = file_.data();
  if (offset_ == data.size()) return std::nullopt;
  const uint64_t left = data.size() - offset_;
  if (left < kRecordHeaderBytes) return Bad("the record header is cut short");
  const char* header = data.data() + offset_;
  const uint32_t length = Load32(header);
  if (length > kMaxRecordBytes || length > left - kRecordHeaderBytes) {
    return Bad(absl::StrCat("the record claims ", length, " bytes but ", left - kRecordHeaderBytes,
                            " follow"));
  }
  const std::string_view payload(header + kRecordHeaderBytes, length);
  if (engine::UnmaskCrc32c(Load32(header + 4)) != engine::Crc32c(payload)) {
    return Bad("the record's CRC32C does not match");
  }
  offset_ += kRecordHeaderBytes + length;
  return payload;
}

absl::StatusOr<std::optional<std::string_view>> RecordScanner::Bad(const std::string& why) {
  if (!last_file_) {
    return absl::DataLossError(
        absl::StrCat("corrupt journal record in ", file_.path(), " at offset ", offset_, ": ", why,
                     " (not the journal's last file, so not a write torn by a crash)"));
  }
  if (std::optional<uint64_t> intact = FindIntactRecord(offset_)) {
    return absl::DataLossError(
        absl::StrCat("corrupt journal record in ", file_.path(), " at offset ", offset_, ": ", why,
                     "; an intact record follows at offset ", *intact,
                     ", so this is not a torn tail and acknowledged updates would be lost"));
  }
  dropped_ = TornTail{file_.path(), offset_, file_.data().size() - offset_};
  offset_ = file_.data().size();
  return std::nullopt;
}

std::optional<uint64_t> RecordScanner::FindIntactRecord(uint64_t from) const {
  const std::string_view data = file_.data();
  for (uint64_t at = from + 1; at + kRecordHeaderBytes <= data.size(); ++at) {
    const uint32_t length = Load32(data.data() + at);
    // The writer never writes an empty record, and an empty one would match zero-filled space.
    if (length == 0 || length > data.size() - at - kRecordHeaderBytes) continue;
    const std::string_view payload(data.data() + at + kRecordHeaderBytes, length);
    if (engine::UnmaskCrc32c(Load32(data.data() + at + 4)) == engine::Crc32c(payload)) return at;
  }
  return std::nullopt;
}

}  // namespace sluice::control::journal_internal
