#include "engine/io/tfrecord_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/io/compression_magic.h"
#include "engine/io/crc32c.h"

namespace sluice::engine {
namespace {

template <typename T>
T LoadLE(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;  // Little-endian hosts only (see batch_layout.h).
}

template <typename T>
void AppendLE(T v, std::string* out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out->append(bytes, sizeof(T));
}

// For a first record that does not check out in a file read as it is: what the file looks
// like instead (the error alone names a CRC).
std::string CompressionHint(std::string_view start) {
  if (LooksLikeGzip(start)) {
    return "; the file starts like a GZIP stream: read it with compression='gzip' or 'auto'";
  }
  if (LooksLikeZlib(start)) {
    return "; the file starts like a ZLIB stream: read it with compression='zlib' or 'auto'";
  }
  return "";
}

}  // namespace

void AppendTfRecord(std::string_view data, std::string* out) {
  const uint64_t length = data.size();
  char length_bytes[8];
  std::memcpy(length_bytes, &length, 8);
  out->append(length_bytes, 8);
  AppendLE<uint32_t>(MaskCrc32c(Crc32c(length_bytes, 8)), out);
  out->append(data);
  AppendLE<uint32_t>(MaskCrc32c(Crc32c(data)), out);
}

bool LooksLikeTfRecord(std::string_view prefix) {
  return prefix.size() >= kTfRecordHeaderBytes &&
         UnmaskCrc32c(LoadLE<uint32_t>(prefix.data() + 8)) == Crc32c(prefix.data(), 8);
}

TfRecordReader::TfRecordReader(std::unique_ptr<InputStream> stream, std::string name,
                               TfRecordReaderOptions options)
    : in_(std::move(stream), options.buffer_bytes),
      name_(std::move(name)),
      options_(std::move(options)) {}

absl::Status TfRecordReader::Bad(absl::Status error, bool lose_rest, bool* stop) {
  if (!options_.skip_bad_records) return error;
  ++bad_records_;
  if (options_.on_bad_record) {
    options_.on_bad_record(
        lose_rest ? absl::Status(error.code(),
                                 absl::StrCat(error.message(), "; skipped the rest of the file"))
                  : error);
  }
  *stop = lose_rest;
  return absl::OkStatus();
}

absl::Status TfRecordReader::Unreadable(const absl::Status& error, uint64_t offset, bool* stop) {
  // A broken compressed stream (a truncated or corrupt .gz) loses the rest of the file, as a
  // truncated record does; other errors (I/O) are not the data's fault and are not skipped.
  if (!absl::IsDataLoss(error)) return error;
  return Bad(absl::DataLossError(absl::StrCat("cannot read ", name_, " past offset ", offset, ": ",
                                              error.message())),
             /*lose_rest=*/true, stop);
}

absl::Status TfRecordReader::ReadRecord(std::string_view* record, bool* eof) {
  while (!done_) {
    const uint64_t offset = in_.offset();
    bool stop = false;
    absl::StatusOr<std::string_view> peeked = in_.Peek(kTfRecordHeaderBytes);
    if (!peeked.ok()) {
      SLUICE_RETURN_IF_ERROR(Unreadable(peeked.status(), offset, &stop));
      break;
    }
    const std::string_view header = *peeked;
    if (header.empty()) break;
    if (header.size() < kTfRecordHeaderBytes) {
      SLUICE_RETURN_IF_ERROR(
          Bad(absl::DataLossError(absl::StrCat("truncated record in ", name_, " at offset ", offset,
                                               ": expected a 12-byte header, the file ends after ",
                                               header.size(), " bytes")),
              /*lose_rest=*/true, &stop));
      break;
    }
    const uint64_t length = LoadLE<uint64_t>(header.data());
    const uint32_t length_crc = Crc32c(header.data(), 8);
    const uint32_t stored_length_crc = UnmaskCrc32c(LoadLE<uint32_t>(header.data() + 8));
    if (length_crc != stored_length_crc) {
      SLUICE_RETURN_IF_ERROR(
          Bad(absl::DataLossError(absl::StrFormat(
                  "corrupt record in %s at offset %d: expected length CRC32C 0x%08x, got 0x%08x "
                  "(the length field %d cannot be trusted)%s",
                  name_, offset, length_crc, stored_length_crc, length,
                  offset == 0 && options_.read_as_plain ? CompressionHint(header) : "")),
              /*lose_rest=*/true, &stop));
      break;
    }
    if (length > kMaxTfRecordBytes) {
      // A record past the bound cannot be read, whether it is one or the length is damaged
      // (a valid length CRC makes that rare, not impossible): skip mode counts it as the
      // loss of the file's rest, as it does a truncated record.
      SLUICE_RETURN_IF_ERROR(
          Bad(absl::ResourceExhaustedError(absl::StrCat(
                  "record in ", name_, " at offset ", offset, " has length ", length, "; at most ",
                  kMaxTfRecordBytes, " is supported (a damaged file, or a record too large)")),
              /*lose_rest=*/true, &stop));
      break;
    }
    const size_t total = kTfRecordHeaderBytes + length + kTfRecordFooterBytes;
    peeked = in_.Peek(total);
    if (!peeked.ok()) {
      SLUICE_RETURN_IF_ERROR(Unreadable(peeked.status(), offset, &stop));
      break;
    }
    const std::string_view framed = *peeked;
    if (framed.size() < total) {
      SLUICE_RETURN_IF_ERROR(
          Bad(absl::DataLossError(absl::StrCat("truncated record in ", name_, " at offset ", offset,
                                               ": expected ", total, " bytes (", length,
                                               " of data), the file ends after ", framed.size())),
              /*lose_rest=*/true, &stop));
      break;
    }
    const std::string_view data = framed.substr(kTfRecordHeaderBytes, length);
    const uint32_t data_crc = Crc32c(data);
    const uint32_t stored_data_crc =
        UnmaskCrc32c(LoadLE<uint32_t>(framed.data() + kTfRecordHeaderBytes + length));
    in_.Consume(total);
    if (data_crc != stored_data_crc) {
      SLUICE_RETURN_IF_ERROR(Bad(
          absl::DataLossError(absl::StrFormat("corrupt record in %s at offset %d: expected data "
                                              "CRC32C 0x%08x, got 0x%08x (%d bytes of data)",
                                              name_, offset, data_crc, stored_data_crc, length)),
          /*lose_rest=*/false, &stop));
      continue;
    }
    *record = data;
    *eof = false;
    return absl::OkStatus();
  }
  done_ = true;
  *eof = true;
  return absl::OkStatus();
}

}  // namespace sluice::engine
