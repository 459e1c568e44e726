// JournalReader and Recover (declared in control/journal.h).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/journal.h"

namespace sluice::control {
namespace {

using journal_internal::JournalPath;
using journal_internal::MappedFile;
using journal_internal::RecordScanner;

absl::StatusOr<proto::Snapshot> ReadSnapshot(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  RecordScanner scanner(file, /*last_file=*/false);
  absl::StatusOr<std::optional<std::string_view>> record = scanner.Next();
  if (!record.ok()) {
    return absl::DataLossError(
        absl::StrCat("snapshot ", path, " is unreadable: ", record.status().message()));
  }
  proto::Snapshot snapshot;
  if (!record->has_value() || scanner.offset() != file.data().size() ||
      !snapshot.ParseFromArray((*record)->data(), static_cast<int>((*record)->size()))) {
    return absl::DataLossError(
        absl::StrCat("snapshot ", path, " does not hold exactly one sluice.proto.Snapshot"));
  }
  return snapshot;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JournalReader>> JournalReader::Open(const std::string& dir) {
  SLUICE_ASSIGN_OR_RETURN(journal_internal::JournalListing listing,
                          journal_internal::ListJournalDir(dir));
  std::unique_ptr<JournalReader> reader(new JournalReader());
  int64_t first = listing.journals.empty() ? 0 : listing.journals.front();
  if (!listing.snapshots.empty()) {
    // Compaction renames a snapshot into place only once it is complete and durable, and
    // deletes the files it covers only after that: the newest is the one to use.
    first = listing.snapshots.back();
    reader->snapshot_path_ = journal_internal::SnapshotPath(dir, first);
    SLUICE_ASSIGN_OR_RETURN(reader->snapshot_, ReadSnapshot(reader->snapshot_path_));
  }
  int64_t expected = first;
  for (int64_t seq : listing.journals) {
    if (seq < first) continue;  // covered by the snapshot; compaction had yet to delete it
    if (seq != expected) {
      return absl::DataLossError(absl::StrCat("journal file ", JournalPath(dir, expected),
                                              " is missing (", JournalPath(dir, seq),
                                              " follows it)"));
    }
    reader->files_.push_back(JournalPath(dir, seq));
    expected = seq + 1;
  }
  if (reader->snapshot_.has_value() && reader->files_.empty()) {
    // Compaction creates journal_<n>.log before snapshot_<n>.pb.
    return absl::DataLossError(absl::StrCat("journal file ", JournalPath(dir, first),
                                            " is missing (", reader->snapshot_path_,
                                            " precedes it)"));
  }
  return reader;
}

absl::StatusOr<bool> JournalReader::Next(proto::Update* update) {
  for (;;) {
    if (!scanner_.has_value()) {
      if (next_file_ == files_.size()) return false;
      file_.reset();
      SLUICE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(files_[next_file_]));
      file_.emplace(std::move(file));
      ++next_file_;
      scanner_.emplace(*file_, /*last_file=*/next_file_ == files_.size());
    }
    const uint64_t offset = scanner_->offset();
    SLUICE_ASSIGN_OR_RETURN(std::optional<std::string_view> record, scanner_->Next());
    if (!record.has_value()) {
      if (scanner_->dropped().has_value()) dropped_ = scanner_->dropped();
      scanner_.reset();
      file_.reset();
      continue;
    }
    if (!update->ParseFromArray(record->data(), static_cast<int>(record->size())) ||
        update->kind_case() == proto::Update::KIND_NOT_SET) {
      return absl::DataLossError(absl::StrCat(
          "journal record in ", file_->path(), " at offset ", offset,
          " is not a sluice.proto.Update of a known kind (written by a newer version?)"));
    }
    return true;
  }
}

absl::StatusOr<Recovered> Recover(const std::string& dir) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<JournalReader> reader, JournalReader::Open(dir));
  Recovered recovered;
  recovered.snapshot = reader->snapshot();
  recovered.snapshot_path = reader->snapshot_path();
  recovered.journal_files = reader->journal_files();
  for (;;) {
    proto::Update& update = recovered.updates.emplace_back();
    SLUICE_ASSIGN_OR_RETURN(bool more, reader->Next(&update));
    if (!more) break;
  }
  recovered.updates.pop_back();
  recovered.dropped = reader->dropped();
  return recovered;
}

}  // namespace sluice::control
