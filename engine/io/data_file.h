// Opens a data file for a reader op: the data-root check, then decompression as the
// op's `compression` argument asks.
//
//   SLUICE_ASSIGN_OR_RETURN(OpenedDataFile file,
//       OpenDataFile("/data/a.gz", proto::COMPRESSION_AUTO, Sniff::kTfRecord, roots));
//   TfRecordReader reader(std::move(file.stream), file.description);
//
// COMPRESSION_AUTO looks at the file's first bytes:
//   * Sniff::kTfRecord: a valid TFRecord header (length CRC checks out) means
//     uncompressed; else the gzip magic (1f 8b) or a zlib header (CMF/FLG check)
//     means compressed (inflate then auto-detects which, windowBits 32 + 15); else
//     uncompressed, and the reader reports the bad header with its offset.
//   * Sniff::kGzipMagic (text and fixed-length files, whose bytes can be anything):
//     gzip when the file starts with 1f 8b 08, else uncompressed. zlib-compressed text
//     must be asked for explicitly.
#ifndef SLUICE_ENGINE_IO_DATA_FILE_H_
#define SLUICE_ENGINE_IO_DATA_FILE_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/io/input_stream.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

enum class Sniff { kTfRecord, kGzipMagic };

struct OpenedDataFile {
  std::unique_ptr<InputStream> stream;
  // For error messages: "file '/data/a.gz' (gzip; offsets are in the decompressed data)".
  std::string description;
  // Decompressed on the fly (false: read as it is).
  bool compressed = false;
};

// Errors as FileInputStream::Open.
[[nodiscard]] absl::StatusOr<OpenedDataFile> OpenDataFile(std::string_view path,
                                                          proto::Compression compression,
                                                          Sniff sniff,
                                                          std::span<const std::string> roots);

// "auto", "none", "gzip", "zlib".
std::string_view CompressionName(proto::Compression compression);
// Inverse of CompressionName; InvalidArgument listing the valid names.
[[nodiscard]] absl::StatusOr<proto::Compression> ParseCompression(std::string_view name);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_IO_DATA_FILE_H_
