#include "engine/ops/file_records.h"

#include <deque>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/look_ahead.h"
#include "engine/provenance.h"
#include "engine/split_cursor.h"

namespace sluice::engine {
namespace {

// Tracked splits (engine/provenance.h): record r of the split's file at position p has
// ordinal (p << 32) | r. Delivered records are still read (to find the next one) but not
// produced; a file whose whole ordinal range is delivered is not opened. Once a file ends,
// the rest of its range is credited to its last record (read one ahead), or to the next
// record produced if it had none left to produce, so a file read to the end is delivered
// whole, whatever its size.
class FileRecordsIterator : public ElementIterator {
 public:
  FileRecordsIterator(FileRecordsOptions options, const OpBuildArgs& args, SplitFeed* feed)
      : options_(std::move(options)),
        roots_(args.context.data_roots),
        drop_delivered_(args.final_ordinals),
        cursor_(feed, args.instance, static_cast<int64_t>(options_.files.size()), options_.op,
                args.context.delivered, /*skip_delivered=*/false) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (true) {
      if (reader_ != nullptr) {
        bool eof = false;
        bool last = false;
        if (drop_delivered_ && cursor_.split_key() != 0) {
          SLUICE_RETURN_IF_ERROR(
              ahead_.Next([this](Element* record, bool* end) { return ReadRecord(record, end); },
                          out, &eof, &last));
        } else {
          SLUICE_RETURN_IF_ERROR(ReadRecord(out, &eof));
        }
        if (!eof) {
          if (last) EndFile();  // its rest goes with its last record
          credit_.CreditTo(*out);
          ++produced_;
          *end_of_sequence = false;
          return absl::OkStatus();
        }
        EndFile();
      }
      int64_t index;
      SLUICE_RETURN_IF_ERROR(cursor_.Next(&index, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      file_ordinal_ = index - cursor_.split().begin();
      file_index_ = index;
      record_ = 0;
      delivered_ = drop_delivered_ ? cursor_.delivered() : nullptr;
      if (delivered_ != nullptr) {
        SLUICE_ASSIGN_OR_RETURN(int64_t first, NestedOrdinal(file_ordinal_, 0));
        if (delivered_->ContainsAll(first, first + (int64_t{1} << kInnerOrdinalBits))) continue;
      }
      absl::StatusOr<OpenedDataFile> file =
          OpenDataFile(options_.files[index], options_.compression, options_.sniff, roots_);
      if (!file.ok()) return PrefixStatus(options_.op, file.status());
      SLUICE_ASSIGN_OR_RETURN(reader_, options_.make_reader(*std::move(file)));
      absl::MutexLock lock(&starts_mu_);
      starts_.push_back(FileStart{produced_, static_cast<size_t>(index),
                                  delivered_ == nullptr && !options_.may_skip_records});
      if (starts_.size() > kFileStartsKept) starts_.pop_front();
    }
  }

  std::string DescribeElement(int64_t index) const override {
    absl::MutexLock lock(&starts_mu_);
    // The latest file that started at or before it: files are read one after another.
    for (auto start = starts_.rbegin(); start != starts_.rend(); ++start) {
      if (start->first_element > index) continue;
      const std::string& file = options_.files[start->file];
      // With records skipped (delivered ones of a re-issued split, bad ones), counting gives
      // no record index.
      if (!start->counted) return absl::StrCat("'", file, "'");
      return absl::StrCat("record ", index - start->first_element, " of '", file, "'");
    }
    return "";
  }

 private:
  // The open file's next record not delivered before, or *eof.
  absl::Status ReadRecord(Element* out, bool* eof) {
    while (true) {
      std::string_view record;
      SLUICE_RETURN_IF_ERROR(PrefixStatus(options_.op, reader_->Next(&record, eof)));
      if (*eof) return absl::OkStatus();
      std::shared_ptr<const Provenance> provenance;
      if (cursor_.split_key() != 0) {
        absl::StatusOr<int64_t> ordinal = NestedOrdinal(file_ordinal_, record_++);
        if (!ordinal.ok()) {
          // Said as the file's, not as the provenance's inner limit: which file, and why.
          return absl::OutOfRangeError(
              absl::StrCat(options_.op, ": ", options_.files[file_index_], " has more than 2^",
                           kInnerOrdinalBits,
                           " records, more than a DYNAMIC read tracks in one file; split "
                           "it, or read it in mode OFF (",
                           ordinal.status().message(), ")"));
        }
        if (delivered_ != nullptr && delivered_->Contains(*ordinal)) continue;
        provenance = Provenance::Of(cursor_.split_key(), *ordinal);
      }
      out->clear();
      out->push_back(Tensor::StringScalar(record));
      if (provenance != nullptr) SetElementProvenance(*out, std::move(provenance));
      return absl::OkStatus();
    }
  }

  // Closes the open file; with final ordinals its rest is credited to the next record
  // handed out (its own last one, when the look-ahead saw the end).
  void EndFile() {
    reader_.reset();
    ahead_.Reset();
    if (drop_delivered_) {
      credit_.DropRange(NestedRest(cursor_.split_key(), file_ordinal_, record_));
    }
  }

  const FileRecordsOptions options_;
  const std::vector<std::string> roots_;
  const bool drop_delivered_;
  SplitCursor cursor_;
  std::unique_ptr<RecordReader> reader_;
  // The open file's position within its split, the next record's index, and the split's
  // delivered ordinals (null when none or not dropping).
  int64_t file_ordinal_ = 0;
  int64_t file_index_ = 0;  // into options_.files, of the open file
  int64_t record_ = 0;
  const DeliveredSet* delivered_ = nullptr;
  // Tracked splits read one record ahead, so that a file's last record carries its rest.
  ElementLookAhead ahead_;
  // Ordinals of ended files, for the next record produced.
  DroppedCredit credit_;
  // DescribeElement: elements handed out, and where the latest files' elements began. A
  // parallel map asks about an element up to 2 x parallel x 16 behind the one read last:
  // with files that small (under 8 records at parallel=16), an error may name no file.
  static constexpr size_t kFileStartsKept = 256;
  struct FileStart {
    int64_t first_element;
    size_t file;   // index into options_.files
    bool counted;  // its records are numbered by counting (none skipped)
  };
  int64_t produced_ = 0;
  mutable absl::Mutex starts_mu_;
  std::deque<FileStart> starts_ ABSL_GUARDED_BY(starts_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<ElementIterator>> MakeFileRecordsIterator(
    const OpBuildArgs& args, FileRecordsOptions options) {
  SplitFeed* feed = args.context.split_feed;
  if (options.files.empty()) {
    const Element* element = args.source_element;
    if (element == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.op,
                       ": expected files=[...], or an input element naming the file inside "
                       "interleave; got neither"));
    }
    if (element->empty() || element->at(0).dtype() != DType::kString ||
        !element->at(0).shape().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.op,
          ": expected the input element's component 0 to be a file name (a string scalar), got ",
          ElementDebugString(*element)));
    }
    options.files.emplace_back(element->at(0).string_value(0));
    feed = nullptr;
  }
  return std::make_unique<FileRecordsIterator>(std::move(options), args, feed);
}

absl::Status FilesFromArgs(const OpArgs& args,
                           google::protobuf::RepeatedPtrField<std::string>* files) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> names, args.GetStringList("files"));
  for (std::string& name : names) files->Add(std::move(name));
  return absl::OkStatus();
}

absl::StatusOr<proto::Compression> CompressionFromArgs(const OpArgs& args) {
  SLUICE_ASSIGN_OR_RETURN(std::string name, args.GetIdentifier("compression", "auto"));
  absl::StatusOr<proto::Compression> c = ParseCompression(name);
  if (!c.ok()) return PrefixStatus("compression", c.status());
  return c;
}

void AppendFilesAndCompression(const google::protobuf::RepeatedPtrField<std::string>& files,
                               proto::Compression compression, std::vector<FormattedArg>* args) {
  if (!files.empty()) {
    std::vector<ArgValue> names;
    for (const std::string& f : files) names.push_back(ArgValue::String(f));
    args->push_back({"files", ArgValue::List(std::move(names)), false});
  }
  if (compression != proto::COMPRESSION_AUTO) {
    args->push_back(
        {"compression", ArgValue::String(std::string(CompressionName(compression))), false});
  }
}

absl::Status ValidateFilesAndCompression(
    const google::protobuf::RepeatedPtrField<std::string>& files, proto::Compression compression) {
  for (int i = 0; i < files.size(); ++i) {
    if (files[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("files[", i, "] is empty; expected a path"));
    }
  }
  if (!proto::Compression_IsValid(compression)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected compression auto, none, gzip or zlib, got ", compression));
  }
  return absl::OkStatus();
}

}  // namespace sluice::engine
