// The part every file reader op (tfrecord, text_line, fixed_length_record) shares:
// which files to read and in what order, opening them under the data roots, and
// turning each record into a string scalar element.
//
// A reader reads, in this order of precedence:
//   * the files of each split its SplitFeed hands out (file indices into files=[...]),
//     when it is a DYNAMIC pipeline's first stage;
//   * all of files=[...], in order, otherwise;
//   * inside interleave, with no files=[...], the one file named by component 0 of the
//     outer element (a string scalar), e.g. list_files(...) | interleave(tfrecord()).
// Each op supplies how one opened file turns into records (a RecordReader).
#ifndef SLUICE_ENGINE_OPS_FILE_RECORDS_H_
#define SLUICE_ENGINE_OPS_FILE_RECORDS_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/io/data_file.h"
#include "engine/op_registry.h"

namespace sluice::engine {

// Records of one open file.
class RecordReader {
 public:
  virtual ~RecordReader() = default;
  // The next record (valid until the next call), or *eof.
  [[nodiscard]] virtual absl::Status Next(std::string_view* record, bool* eof) = 0;
};

// Makes the RecordReader for one opened file (`file.description` names it in errors).
using RecordReaderFactory =
    std::function<absl::StatusOr<std::unique_ptr<RecordReader>>(OpenedDataFile file)>;

struct FileRecordsOptions {
  std::string op;  // For messages, e.g. "tfrecord".
  std::vector<std::string> files;
  proto::Compression compression = proto::COMPRESSION_AUTO;
  Sniff sniff = Sniff::kGzipMagic;
  RecordReaderFactory make_reader;
  // The reader may pass over records it cannot read (tfrecord's skip_bad_records): counting
  // those handed out then gives no record's index in its file, and errors name the file only.
  bool may_skip_records = false;
};

// The iterator for a reader op's stage (see above for where files come from).
[[nodiscard]] absl::StatusOr<std::unique_ptr<ElementIterator>> MakeFileRecordsIterator(
    const OpBuildArgs& args, FileRecordsOptions options);

// Shared text-form plumbing: files (list of strings) and compression ('auto' | 'none' |
// 'gzip' | 'zlib').
[[nodiscard]] absl::Status FilesFromArgs(const OpArgs& args,
                                         google::protobuf::RepeatedPtrField<std::string>* files);
[[nodiscard]] absl::StatusOr<proto::Compression> CompressionFromArgs(const OpArgs& args);
void AppendFilesAndCompression(const google::protobuf::RepeatedPtrField<std::string>& files,
                               proto::Compression compression, std::vector<FormattedArg>* args);
// Non-empty names and a known compression.
[[nodiscard]] absl::Status ValidateFilesAndCompression(
    const google::protobuf::RepeatedPtrField<std::string>& files, proto::Compression compression);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_FILE_RECORDS_H_
