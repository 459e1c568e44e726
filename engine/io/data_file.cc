#include "engine/io/data_file.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/io/compression_magic.h"
#include "engine/io/tfrecord_reader.h"
#include "engine/io/zlib_input_stream.h"

namespace sluice::engine {

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
          if (!LooksLikeTfRecord(prefix) && (LooksLikeGzip(prefix) || LooksLikeZlib(prefix))) {
            format = ZlibFormat::kAuto;
            kind = LooksLikeGzip(prefix) ? "gzip" : "zlib";
          }
          break;
        case Sniff::kGzipMagic:
          if (LooksLikeGzip(prefix)) {
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
  out.compressed = format.has_value();
  if (!format.has_value()) {
    out.description = quoted;
    out.stream = std::move(file);
    return out;
  }
  out.description =
      absl::StrCat(quoted, " (", AbslView(kind), "; offsets are in the decompressed data)");
  // Taken for compressed by its first bytes alone: a plain file may start with them, and its
  // read then fails inside the decompressor, which should say how to read it as it is.
  const std::string stream_name =
      compression == proto::COMPRESSION_AUTO
          ? absl::StrCat(quoted, ", taken for ", AbslView(kind),
                         " by its first bytes (compression='none' reads it as it is),")
          : quoted;
  out.stream = std::make_unique<ZlibInputStream>(std::move(file), *format, stream_name);
  return out;
}

}  // namespace sluice::engine
