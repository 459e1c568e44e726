#include "engine/io/buffered_reader.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice::engine {

BufferedReader::BufferedReader(std::unique_ptr<InputStream> stream, size_t buffer_bytes,
                               size_t max_line_bytes)
    : stream_(std::move(stream)),
      buffer_bytes_(std::max<size_t>(buffer_bytes, 16)),
      max_line_bytes_(max_line_bytes),
      buffer_(new char[buffer_bytes_]),
      capacity_(buffer_bytes_) {}

absl::Status BufferedReader::Fill(size_t n) {
  // A very large record grew the buffer; release it once that record is consumed, moving
  // what was read past it (at most a normal buffer's worth, as it grew by that much) into
  // a buffer of the normal size. Kept, every later read would fill all of it.
  if (const size_t have = end_ - begin_;
      capacity_ > kKeepGrownBytes && n <= buffer_bytes_ && have <= buffer_bytes_) {
    std::unique_ptr<char[]> normal(new char[buffer_bytes_]);
    if (have > 0) std::memcpy(normal.get(), buffer_.get() + begin_, have);
    buffer_ = std::move(normal);
    capacity_ = buffer_bytes_;
    begin_ = 0;
    end_ = have;
  }
  while (end_ - begin_ < n && !stream_done_) {
    if (capacity_ - begin_ < n) {
      // Move what is left to the front, growing only when one request exceeds the buffer.
      const size_t have = end_ - begin_;
      if (capacity_ < n) {
        // Room for the request plus a normal buffer's worth of what follows it.
        const size_t grown = n + buffer_bytes_;
        std::unique_ptr<char[]> bigger(new char[grown]);
        if (have > 0) std::memcpy(bigger.get(), buffer_.get() + begin_, have);
        buffer_ = std::move(bigger);
        capacity_ = grown;
      } else if (have > 0) {
        std::memmove(buffer_.get(), buffer_.get() + begin_, have);
      }
      begin_ = 0;
      end_ = have;
    }
    SLUICE_ASSIGN_OR_RETURN(size_t got, stream_->Read(buffer_.get() + end_, capacity_ - end_));
    if (got == 0) stream_done_ = true;
    end_ += got;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string_view> BufferedReader::Peek(size_t n) {
  SLUICE_RETURN_IF_ERROR(Fill(n));
  return std::string_view(buffer_.get() + begin_, std::min(n, end_ - begin_));
}

void BufferedReader::Consume(size_t n) {
  assert(n <= end_ - begin_ && "BufferedReader::Consume: more than was peeked");
  begin_ += n;
  offset_ += n;
}

absl::StatusOr<uint64_t> BufferedReader::Skip(uint64_t n) {
  uint64_t skipped = 0;
  while (skipped < n) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - skipped, buffer_bytes_));
    SLUICE_ASSIGN_OR_RETURN(std::string_view got, Peek(chunk));
    if (got.empty()) break;
    Consume(got.size());
    skipped += got.size();
  }
  return skipped;
}

namespace {

// Removes every '\r' from the `len` bytes at `line`, in place; returns the length left.
size_t DropCarriageReturns(char* line, size_t len) {
  char* cr = static_cast<char*>(std::memchr(line, '\r', len));
  if (cr == nullptr) return len;
  char* out = cr;
  for (const char* in = cr; in != line + len; ++in) {
    if (*in != '\r') *out++ = *in;
  }
  return static_cast<size_t>(out - line);
}

}  // namespace

absl::Status BufferedReader::ReadLine(std::string_view* line, bool* eof) {
  size_t scanned = 0;  // Bytes already searched for '\n'.
  while (true) {
    char* start = buffer_.get() + begin_;
    const size_t have = end_ - begin_;
    if (const void* nl = std::memchr(start + scanned, '\n', have - scanned); nl != nullptr) {
      const size_t len = static_cast<size_t>(static_cast<const char*>(nl) - start);
      *line = std::string_view(start, DropCarriageReturns(start, len));
      Consume(len + 1);
      *eof = false;
      return absl::OkStatus();
    }
    scanned = have;
    if (stream_done_) {
      const size_t len = DropCarriageReturns(start, have);
      Consume(have);
      // As tf.data's: a last line without "\n" counts unless nothing is left of it.
      *eof = len == 0;
      *line = std::string_view(start, len);
      return absl::OkStatus();
    }
    if (have >= max_line_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "line at offset ", offset_, " is longer than the ", max_line_bytes_, "-byte limit"));
    }
    SLUICE_RETURN_IF_ERROR(Fill(std::min(max_line_bytes_, std::max(2 * have, buffer_bytes_))));
  }
}

}  // namespace sluice::engine
