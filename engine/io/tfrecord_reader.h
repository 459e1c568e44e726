// TFRecord framing: reading records with both CRCs checked, and writing them.
//
// Each record is
//   uint64 length (little-endian)
//   uint32 masked CRC32C of the 8 length bytes
//   byte   data[length]
//   uint32 masked CRC32C of data
// (masking: engine/io/crc32c.h). This is what TensorFlow's TFRecordWriter and
// Apache Beam's WriteToTFRecord produce, inside optional gzip/zlib compression.
//
//   TfRecordReader reader(std::move(stream), "file '/data/a.tfrecord'");
//   std::string_view record;
//   bool eof = false;
//   while (true) {
//     SLUICE_RETURN_IF_ERROR(reader.ReadRecord(&record, &eof));
//     if (eof) break;
//     ...  // record is valid until the next ReadRecord
//   }
//
// A corrupt or truncated record is DataLoss naming the file and the record's byte
// offset (in the decompressed stream for compressed files). With skip_bad_records
// the reader reports it to on_bad_record instead and goes on: past a record whose
// data CRC is wrong, or to the end of the file when the length itself cannot be
// trusted (a bad length CRC or a truncated record), since record boundaries are then
// lost.
#ifndef SLUICE_ENGINE_IO_TFRECORD_READER_H_
#define SLUICE_ENGINE_IO_TFRECORD_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/io/buffered_reader.h"
#include "engine/io/input_stream.h"

namespace sluice::engine {

inline constexpr size_t kTfRecordHeaderBytes = 12;
inline constexpr size_t kTfRecordFooterBytes = 4;
// Larger lengths are refused (ResourceExhausted) rather than buffered.
inline constexpr uint64_t kMaxTfRecordBytes = uint64_t{1} << 30;

// Appends `data` framed as one TFRecord to `*out`.
void AppendTfRecord(std::string_view data, std::string* out);

// True when `prefix` starts with a TFRecord header whose length CRC checks out (used to
// tell uncompressed TFRecord files from compressed ones).
bool LooksLikeTfRecord(std::string_view prefix);

struct TfRecordReaderOptions {
  bool skip_bad_records = false;
  // Called with the DataLoss error of each skipped record (skip_bad_records only).
  std::function<void(const absl::Status&)> on_bad_record;
  size_t buffer_bytes = BufferedReader::kDefaultBufferBytes;
  // The stream is the file as it is, not decompressed: a first record that does not check
  // out and bytes that look like a GZIP or ZLIB stream make the error say so.
  bool read_as_plain = true;
};

class TfRecordReader {
 public:
  // `name` describes the source in errors, e.g. "file '/data/a.tfrecord'".
  TfRecordReader(std::unique_ptr<InputStream> stream, std::string name,
                 TfRecordReaderOptions options = {});

  // The next record's data (valid until the next call), or *eof.
  [[nodiscard]] absl::Status ReadRecord(std::string_view* record, bool* eof);

  // Records skipped as bad so far.
  int64_t bad_records() const { return bad_records_; }

 private:
  // Reports a bad record: an error, or (skipping) a count and a callback. *stop is set
  // when the rest of the stream must be abandoned.
  absl::Status Bad(absl::Status error, bool lose_rest, bool* stop);
  // A stream that cannot be read past `offset` (Peek failed): DataLoss (a broken .gz) is a
  // bad record losing the rest of the file; any other error is returned as it is.
  absl::Status Unreadable(const absl::Status& error, uint64_t offset, bool* stop);

  BufferedReader in_;
  std::string name_;
  TfRecordReaderOptions options_;
  int64_t bad_records_ = 0;
  bool done_ = false;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_IO_TFRECORD_READER_H_
