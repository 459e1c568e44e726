#include "control/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_name.h"

namespace sluice::control {
namespace {

using journal_internal::JournalListing;
using journal_internal::JournalPath;
using journal_internal::kMaxRecordBytes;
using journal_internal::MappedFile;
using journal_internal::RecordScanner;
using journal_internal::ScopedFd;

// journal_<seq>.log, new (O_EXCL: never a file an earlier process wrote), durable in `dir`.
absl::StatusOr<ScopedFd> CreateJournalFile(const std::string& dir, int64_t seq) {
  const std::string path = JournalPath(dir, seq);
  SLUICE_ASSIGN_OR_RETURN(ScopedFd fd,
                          journal_internal::OpenFile(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND));
  SLUICE_RETURN_IF_ERROR(journal_internal::SyncFile(fd.get(), path, /*data_only=*/false));
  SLUICE_RETURN_IF_ERROR(journal_internal::SyncDir(dir));
  return fd;
}

// Cuts a torn record (and what follows it) off the end of the journal's last file, so that
// the file is intact once a newer one follows it.
absl::Status TruncateTornTail(const std::string& path) {
  std::optional<TornTail> torn;
  {
    SLUICE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
    RecordScanner scanner(file, /*last_file=*/true);
    for (;;) {
      SLUICE_ASSIGN_OR_RETURN(std::optional<std::string_view> record, scanner.Next());
      if (!record.has_value()) break;
    }
    torn = scanner.dropped();
  }
  if (!torn.has_value()) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(ScopedFd fd, journal_internal::OpenFile(path, O_WRONLY));
  if (ftruncate(fd.get(), static_cast<off_t>(torn->offset)) != 0) {
    return journal_internal::FileError(errno, "truncating the torn tail of", path);
  }
  return journal_internal::SyncFile(fd.get(), path, /*data_only=*/false);
}

// Holds an exclusive flock on dir/LOCK for the writer's life: one writer per directory.
absl::StatusOr<ScopedFd> LockDir(const std::string& dir) {
  const std::string path = dir + "/LOCK";
  SLUICE_ASSIGN_OR_RETURN(ScopedFd fd, journal_internal::OpenFile(path, O_RDWR | O_CREAT));
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("journal directory ", dir, " is in use by another writer (", path, ")"));
    }
    return journal_internal::FileError(errno, "locking", path);
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JournalWriter>> JournalWriter::Open(const std::string& dir,
                                                                   const JournalOptions& options) {
  SLUICE_RETURN_IF_ERROR(journal_internal::EnsureDir(dir));
  SLUICE_ASSIGN_OR_RETURN(ScopedFd lock, LockDir(dir));
  SLUICE_ASSIGN_OR_RETURN(JournalListing listing, journal_internal::ListJournalDir(dir));
  for (const std::string& tmp : listing.temporary_files) {
    SLUICE_RETURN_IF_ERROR(journal_internal::RemoveFile(tmp));
  }
  if (!listing.journals.empty()) {
    SLUICE_RETURN_IF_ERROR(TruncateTornTail(JournalPath(dir, listing.journals.back())));
  }
  const int64_t seq = listing.NextSequence();
  SLUICE_ASSIGN_OR_RETURN(ScopedFd fd, CreateJournalFile(dir, seq));
  return std::unique_ptr<JournalWriter>(
      new JournalWriter(dir, options, seq, std::move(fd), std::move(lock)));
}

JournalWriter::JournalWriter(std::string dir, const JournalOptions& options, int64_t seq,
                             ScopedFd fd, ScopedFd lock)
    : dir_(std::move(dir)),
      options_(options),
      lock_(std::move(lock)),
      seq_(seq),
      fd_(std::move(fd)),
      current_path_(JournalPath(dir_, seq)) {
  thread_ = std::thread([this] {
    SetCurrentThreadName("sluice-journal");
    CommitLoop();
  });
}

JournalWriter::~JournalWriter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
    work_cv_.notify_all();
    space_cv_.notify_all();
  }
  thread_.join();
}

JournalWriter::Batch& JournalWriter::OpenBatch(size_t incoming_bytes) {
  if (queue_.empty() || queue_.back().snapshot.has_value() ||
      (!queue_.back().bytes.empty() &&
       queue_.back().bytes.size() + incoming_bytes > options_.max_batch_bytes)) {
    Batch& batch = queue_.emplace_back();
    batch.bytes = std::exchange(spare_, std::string());
    batch.first_at = std::chrono::steady_clock::now();
    work_cv_.notify_one();
  }
  return queue_.back();
}

void JournalWriter::Append(const proto::Update& update, DurableCallback durable) {
  absl::Status refused;
  thread_local std::string payload;
  if (update.kind_case() == proto::Update::KIND_NOT_SET) {
    refused = absl::InvalidArgumentError("a journal update must have a kind set");
  } else if (update.ByteSizeLong() > kMaxRecordBytes) {
    refused = absl::InvalidArgumentError(absl::StrCat("a journal update of ", update.ByteSizeLong(),
                                                      " bytes exceeds ", kMaxRecordBytes));
  } else {
    payload.clear();
    update.SerializeToString(&payload);
    std::unique_lock<std::mutex> lock(mu_);
    // Back-pressure, except for a callback appending: the commit thread cannot wait on itself.
    const bool on_commit_thread = std::this_thread::get_id() == thread_.get_id();
    while (pending_bytes_ >= options_.max_pending_bytes && failed_.ok() && !stop_ &&
           !on_commit_thread) {
      space_cv_.wait(lock);
    }
    refused = failed_;
    if (refused.ok()) {
      const size_t record_bytes = journal_internal::kRecordHeaderBytes + payload.size();
      Batch& batch = OpenBatch(record_bytes);
      journal_internal::AppendFramedRecord(payload, &batch.bytes);
      batch.records += 1;
      if (durable) batch.callbacks.push_back(std::move(durable));
      pending_bytes_ += record_bytes;
      if (batch.bytes.size() >= options_.max_batch_bytes) work_cv_.notify_one();
      return;
    }
  }
  if (durable) durable(refused);
}

absl::Status JournalWriter::Write(const proto::Update& update) {
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = done->get_future();
  Append(update, [done](absl::Status status) { done->set_value(std::move(status)); });
  return result.get();
}

void JournalWriter::Sync(DurableCallback durable) {
  absl::Status failed;
  {
    std::unique_lock<std::mutex> lock(mu_);
    failed = failed_;
    if (failed.ok()) {
      OpenBatch(0).callbacks.push_back(std::move(durable));
      return;
    }
  }
  if (durable) durable(failed);
}

absl::Status JournalWriter::Flush() {
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = done->get_future();
  Sync([done](absl::Status status) { done->set_value(std::move(status)); });
  return result.get();
}

void JournalWriter::CompactAsync(proto::Snapshot snapshot, DurableCallback done) {
  absl::Status failed;
  {
    std::unique_lock<std::mutex> lock(mu_);
    failed = failed_;
    if (failed.ok()) {
      Batch& batch = OpenBatch(0);
      batch.snapshot = std::move(snapshot);
      batch.compacted = std::move(done);
      work_cv_.notify_one();
      return;
    }
  }
  if (done) done(failed);
}

absl::Status JournalWriter::Compact(const proto::Snapshot& snapshot) {
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = done->get_future();
  CompactAsync(snapshot, [done](absl::Status status) { done->set_value(std::move(status)); });
  return result.get();
}

std::string JournalWriter::current_path() const {
  std::unique_lock<std::mutex> lock(mu_);
  return current_path_;
}

JournalWriter::Stats JournalWriter::stats() const {
  std::unique_lock<std::mutex> lock(mu_);
  return stats_;
}

void JournalWriter::CommitLoop() {
  for (;;) {
    Batch batch;
    absl::Status status;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (queue_.empty() && !stop_) work_cv_.wait(lock);
      if (queue_.empty()) return;
      if (options_.max_delay > absl::ZeroDuration()) {
        // Let the batch fill until the delay has passed, it is full, or something must go.
        const auto deadline =
            queue_.front().first_at + absl::ToChronoNanoseconds(options_.max_delay);
        while (!stop_ && queue_.size() == 1 && !queue_.front().snapshot.has_value() &&
               queue_.front().bytes.size() < options_.max_batch_bytes &&
               work_cv_.wait_until(lock, deadline) == std::cv_status::no_timeout) {
        }
      }
      batch = std::move(queue_.front());
      queue_.pop_front();
      pending_bytes_ -= batch.bytes.size();
      status = failed_;
      space_cv_.notify_all();
    }
    if (status.ok()) status = WriteBatch(batch.bytes);
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!status.ok() && failed_.ok()) failed_ = status;
      if (status.ok() && !batch.bytes.empty()) {
        stats_.records += batch.records;
        stats_.batches += 1;
        stats_.bytes += static_cast<int64_t>(batch.bytes.size());
      }
      batch.bytes.clear();
      if (batch.bytes.capacity() > spare_.capacity()) spare_.swap(batch.bytes);
    }
    for (DurableCallback& callback : batch.callbacks) {
      if (callback) callback(status);
    }
    if (batch.snapshot.has_value()) {
      absl::Status compacted = status.ok() ? Rotate(*batch.snapshot) : status;
      if (batch.compacted) batch.compacted(std::move(compacted));
    }
  }
}

absl::Status JournalWriter::WriteBatch(const std::string& bytes) {
  if (bytes.empty()) return absl::OkStatus();
  const std::string path = JournalPath(dir_, seq_);
  absl::Status status = journal_internal::WriteAll(fd_.get(), bytes, path);
  if (status.ok() && options_.sync) {
    status = journal_internal::SyncFile(fd_.get(), path, /*data_only=*/true);
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(status.message(), " (batch of ", bytes.size(),
                                                    " bytes at offset ", file_offset_, ")"));
  }
  file_offset_ += bytes.size();
  return absl::OkStatus();
}

absl::Status JournalWriter::Rotate(const proto::Snapshot& snapshot) {
  std::string payload;
  if (snapshot.ByteSizeLong() > kMaxRecordBytes || !snapshot.SerializeToString(&payload)) {
    return absl::InvalidArgumentError(absl::StrCat("a snapshot of ", snapshot.ByteSizeLong(),
                                                   " bytes cannot be written to ", dir_));
  }
  // Step 2: later records go to a new file, which exists before its snapshot does.
  const int64_t next = seq_ + 1;
  SLUICE_ASSIGN_OR_RETURN(ScopedFd fd, CreateJournalFile(dir_, next));
  fd_ = std::move(fd);
  seq_ = next;
  file_offset_ = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    current_path_ = JournalPath(dir_, next);
  }
  // Step 3: the snapshot, atomically.
  std::string bytes;
  journal_internal::AppendFramedRecord(payload, &bytes);
  SLUICE_RETURN_IF_ERROR(journal_internal::WriteFileAtomically(
      dir_, journal_internal::SnapshotPath(dir_, next), bytes));
  // Step 4: what the snapshot covers.
  SLUICE_ASSIGN_OR_RETURN(JournalListing listing, journal_internal::ListJournalDir(dir_));
  for (int64_t seq : listing.journals) {
    if (seq < next) SLUICE_RETURN_IF_ERROR(journal_internal::RemoveFile(JournalPath(dir_, seq)));
  }
  for (int64_t seq : listing.snapshots) {
    if (seq < next) {
      SLUICE_RETURN_IF_ERROR(
          journal_internal::RemoveFile(journal_internal::SnapshotPath(dir_, seq)));
    }
  }
  return journal_internal::SyncDir(dir_);
}

}  // namespace sluice::control
