#include "engine/io/data_file.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/io/tfrecord_reader.h"
#include "engine/io/zlib_input_stream.h"

namespace sluice::engine {
namespace {

bool HasGzipMagic(std::string_view prefix) {
  return prefix.size() >= 3 && static_cast<uint8_t>(prefix[0]) == 0x1f &&
         static_cast<uint8_t>(prefix[1]) == 0x8b && prefix[2] == 8;
}

// RFC 1950: deflate (CM 8) with a window of at most 32K, and a header checksum.
bool HasZlibHeader(std::string_view prefix) {
  if (prefix.size() < 2) return false;
  const auto cmf = static_cast<uint8_t>(prefix[0]);
  const auto flg = static_cast<uint8_t>(prefix[1]);
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0;
}

}  // namespace

std::string_view CompressionName(proto::Compression compression) {
  switch (compression) {
    case proto::COMPRESSION_AUTO:
      return "auto";
    case proto::COMPRESSION_NONE:
      return "none";
    case proto::COMPRESSION_GZIP:
      return "gzip";
    case proto::COMPRESSION_ZLIB:
      return "zlib";
    case proto::Compression_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::Compression_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "invalid";
}

absl::StatusOr<proto::Compression> ParseCompression(std::string_view name) {
  for (proto::Compression c : {proto::COMPRESSION_AUTO, proto::COMPRESSION_NONE,
                               proto::COMPRESSION_GZIP, proto::COMPRESSION_ZLIB}) {
    if (CompressionName(c) == name) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("expected compression auto, none, gzip or zlib, got '", AbslView(name), "'"));
}

absl::StatusOr<OpenedDataFile> OpenDataFile(std::string_view path, proto::Compression compression,
                                            Sniff sniff, std::span<const std::string> roots) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<FileInputStream> file,
                          FileInputStream::Open(path, roots));
  std::optional<ZlibFormat> format;
  std::string_view kind;
  switch (compression) {
    case proto::COMPRESSION_NONE:
      break;
    case proto::COMPRESSION_GZIP:
      format = ZlibFormat::kGzip;
      kind = "gzip";
      break;
    case proto::COMPRESSION_ZLIB:
      format = ZlibFormat::kZlib;
      kind = "zlib";
      break;
    case proto::COMPRESSION_AUTO: {
      SLUICE_ASSIGN_OR_RETURN(std::string prefix, file->ReadPrefix(kTfRecordHeaderBytes));
      switch (sniff) {
        case Sniff::kTfRecord:
          if (!LooksLikeTfRecord(prefix) && (HasGzipMagic(prefix) || HasZlibHeader(prefix))) {
            format = ZlibFormat::kAuto;
            kind = HasGzipMagic(prefix) ? "gzip" : "zlib";
          }
          break;
        case Sniff::kGzipMagic:
          if (HasGzipMagic(prefix)) {
            format = ZlibFormat::kGzip;
            kind = "gzip";
          }
          break;
      }
      break;
    }
    case proto::Compression_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::Compression_INT_MAX_SENTINEL_DO_NOT_USE_:
      return absl::InvalidArgumentError(
          absl::StrCat("expected a compression, got ", static_cast<int>(compression)));
  }
  OpenedDataFile out;
  const std::string quoted = absl::StrCat("file '", AbslView(path), "'");
  if (!format.has_value()) {
    out.description = quoted;
    out.stream = std::move(file);
    return out;
  }
  out.description =
      absl::StrCat(quoted, " (", AbslView(kind), "; offsets are in the decompressed data)");
  out.stream = std::make_unique<ZlibInputStream>(std::move(file), *format, quoted);
  return out;
}

}  // namespace sluice::engine
