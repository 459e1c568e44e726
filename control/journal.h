// The fault-tolerant dispatcher's journal: every state change (control/journal.proto) is
// made durable before it is acknowledged, and a restarted dispatcher rebuilds its state
// from the newest snapshot plus the updates journaled after it.
//
//   // At start-up (NotFound: nothing journaled yet, a fresh dispatcher).
//   absl::StatusOr<Recovered> recovered = Recover(dir);
//   ... apply recovered->snapshot, then recovered->updates in order ...
//   SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<JournalWriter> journal,
//                           JournalWriter::Open(dir, JournalOptions{}));
//   // Per state change, inside the lock that orders them; reply from the callback.
//   journal->Append(update, [reply](absl::Status durable) { reply(durable); });
//   // Now and then: a snapshot of the state, taken under that same lock.
//   journal->CompactAsync(std::move(snapshot), [](absl::Status s) { ... });
//
// Files in `dir`:
//   journal_<seq>.log   records: uint32 payload length, uint32 masked CRC32C of the payload
//                       (engine/io/crc32c.h; both little-endian), the serialized Update.
//                       Each Open starts a new sequence number: a file written by an earlier
//                       process is never appended to.
//   snapshot_<seq>.pb   one such record holding a Snapshot of every update in the journal
//                       files numbered below <seq>.
//   LOCK                flock'd by the writer: a second writer on the directory is refused.
// Group commit: Append only queues the framed record; one thread writes everything queued
// with one write(2) and one fdatasync(2), then runs the callbacks of the records it covered.
//
// Compaction, in this order, so that a crash at any point leaves a recoverable directory:
//   1. the records before the cut are written and synced to the current file, journal_<n-1>;
//   2. journal_<n>.log is created (and the directory synced); later records go there;
//   3. snapshot_<n>.pb.tmp is written and synced, renamed to snapshot_<n>.pb, directory synced;
//   4. journal_<m>.log and snapshot_<m>.pb for m < n are deleted, directory synced.
// Before 3 completes recovery still uses the previous snapshot and every journal after it;
// from then on it uses snapshot_<n> and ignores whatever 4 has not yet deleted.
//
// Recovery reads the newest snapshot, then the journal files after it in order. The last
// file may end in a record torn by a crash (cut short, or failing its CRC with no intact
// record after it): that record and the rest of the file are dropped and reported. Any other
// bad record, or a missing file in the sequence, is DataLoss naming the file (and offset).
// JournalWriter::Open truncates such a torn tail before it starts the next file, so the
// tail of an earlier file is always intact.
#ifndef SLUICE_CONTROL_JOURNAL_H_
#define SLUICE_CONTROL_JOURNAL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "control/journal.pb.h"
#include "control/journal_file.h"

namespace sluice::control {

struct JournalOptions {
  // How long the commit thread waits, after the first record of a batch arrives, for more to
  // join it. Zero writes at once; records that arrive while a write and its sync are under
  // way share the next one anyway, which is where most of the batching comes from.
  absl::Duration max_delay = absl::ZeroDuration();
  // A batch (one write, one fdatasync) holds at most this many bytes, or one larger record.
  size_t max_batch_bytes = 4 << 20;
  // Append blocks while this many bytes wait to be written: back-pressure, not a queue
  // that grows without bound when the disk is slower than the updates.
  size_t max_pending_bytes = 64 << 20;
  // false skips fdatasync: NOT durable; for measuring everything but the disk.
  bool sync = true;
};

class JournalWriter {
 public:
  // Called once the update is durable (OK), or could not be made durable (the error).
  using DurableCallback = std::function<void(absl::Status)>;

  struct Stats {
    int64_t records = 0;
    int64_t batches = 0;  // writes, each followed by one fdatasync
    int64_t bytes = 0;
  };

  // Creates `dir` if needed, locks it (FailedPrecondition when another writer holds it),
  // truncates a torn tail of its last journal file (DataLoss when that file is corrupt
  // before its tail), removes snapshot temporaries left by a crash and starts
  // journal_<next seq>.log. Recover first: Open changes what Recover would report.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JournalWriter>> Open(
      const std::string& dir, const JournalOptions& options);
  // Writes and syncs what is queued and runs its callbacks.
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // Queues `update` (it must have a kind set) and returns; `durable` runs on the commit
  // thread after the fdatasync covering it, or at once with the error when the update is
  // refused or the writer has failed. Records are written, and callbacks run, in Append
  // order. Blocks only while max_pending_bytes are queued. Callbacks must be short and may
  // Append, Sync or CompactAsync, but not Write, Flush or Compact (they would wait on
  // themselves).
  void Append(const proto::Update& update, DurableCallback durable);
  // Append, then wait until durable.
  [[nodiscard]] absl::Status Write(const proto::Update& update);
  // `durable` runs once every update appended before this call is durable.
  void Sync(DurableCallback durable);
  [[nodiscard]] absl::Status Flush();

  // Compaction (see above). The cut is taken when the call is made: `snapshot` must hold
  // the effect of exactly the updates appended before it, so take the snapshot and call
  // this under the lock that orders your Appends. The commit thread then writes the files
  // and runs `done`; Appends made meanwhile return at once and are written after that I/O.
  // A failed compaction leaves the journal usable and recoverable.
  void CompactAsync(proto::Snapshot snapshot, DurableCallback done);
  // CompactAsync, then wait for `done`.
  [[nodiscard]] absl::Status Compact(const proto::Snapshot& snapshot);

  // The file records are now written to.
  [[nodiscard]] std::string current_path() const;
  [[nodiscard]] Stats stats() const;

 private:
  // Records queued for one write, and what to do after it.
  struct Batch {
    std::string bytes;
    std::vector<DurableCallback> callbacks;
    int64_t records = 0;
    std::chrono::steady_clock::time_point first_at;
    // Set on the last batch before a compaction's cut.
    std::optional<proto::Snapshot> snapshot;
    DurableCallback compacted;
  };

  JournalWriter(std::string dir, const JournalOptions& options, int64_t seq,
                journal_internal::ScopedFd fd, journal_internal::ScopedFd lock);
  // The batch new records join, started when needed. Requires mu_.
  Batch& OpenBatch(size_t incoming_bytes);
  void CommitLoop();
  [[nodiscard]] absl::Status WriteBatch(const std::string& bytes);
  // Steps 2-4 of compaction, on the commit thread.
  [[nodiscard]] absl::Status Rotate(const proto::Snapshot& snapshot);

  const std::string dir_;
  const JournalOptions options_;
  const journal_internal::ScopedFd lock_;  // flock on dir/LOCK: one writer per directory
  // Owned by the commit thread once it runs (Open sets them before).
  int64_t seq_;
  journal_internal::ScopedFd fd_;
  uint64_t file_offset_ = 0;

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for ThreadSanitizer,
  // which then cannot see absl::Mutex order memory; the writer is checked under TSan.
  mutable std::mutex mu_;             // guards the members below
  std::condition_variable work_cv_;   // the commit thread: a batch is queued, or stop_
  std::condition_variable space_cv_;  // appenders: pending bytes dropped below the limit
  std::deque<Batch> queue_;
  size_t pending_bytes_ = 0;
  absl::Status failed_;  // sticky: a write or sync failed
  bool stop_ = false;
  std::string spare_;  // a written batch's buffer, for reuse
  std::string current_path_;
  Stats stats_;
  std::thread thread_;
};

// What recovery read.
struct Recovered {
  // The newest snapshot, when there is one, and its file.
  std::optional<proto::Snapshot> snapshot;
  std::string snapshot_path;
  // The updates after the snapshot, in journal order.
  std::vector<proto::Update> updates;
  // Journal files read, in order.
  std::vector<std::string> journal_files;
  // Set when the last file ended in a torn record, which was dropped.
  std::optional<TornTail> dropped;
};

// Reads a journal directory without changing it, one update at a time (for journals too
// large to hold as a vector of messages).
class JournalReader {
 public:
  // Reads the newest snapshot and lists the journal files after it. NotFound when `dir`
  // does not exist; DataLoss when the snapshot is corrupt or a journal file is missing.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JournalReader>> Open(const std::string& dir);

  [[nodiscard]] const std::optional<proto::Snapshot>& snapshot() const { return snapshot_; }
  [[nodiscard]] const std::string& snapshot_path() const { return snapshot_path_; }
  [[nodiscard]] const std::vector<std::string>& journal_files() const { return files_; }
  // The next update into *update (replacing its contents): false after the last one.
  [[nodiscard]] absl::StatusOr<bool> Next(proto::Update* update);
  // Meaningful once Next has returned false.
  [[nodiscard]] const std::optional<TornTail>& dropped() const { return dropped_; }

 private:
  JournalReader() = default;

  std::optional<proto::Snapshot> snapshot_;
  std::string snapshot_path_;
  std::vector<std::string> files_;
  size_t next_file_ = 0;
  std::optional<journal_internal::MappedFile> file_;
  std::optional<journal_internal::RecordScanner> scanner_;
  std::optional<TornTail> dropped_;
};

// JournalReader, collected.
[[nodiscard]] absl::StatusOr<Recovered> Recover(const std::string& dir);

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_JOURNAL_H_
