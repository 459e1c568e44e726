// A read buffer over an InputStream, for record framing: look at the next bytes
// in place (no copy when they are already buffered), then consume them.
//
//   BufferedReader in(std::move(stream));
//   SLUICE_ASSIGN_OR_RETURN(std::string_view header, in.Peek(12));
//   if (header.size() < 12) { ... end of stream or truncated ... }
//   in.Consume(12);
//   std::string_view line;
//   bool eof = false;
//   SLUICE_RETURN_IF_ERROR(in.ReadLine(&line, &eof));
//
// Memory stays bounded: the buffer holds buffer_bytes, growing only to the
// largest single Peek (one record) or line (capped by max_line_bytes); a buffer grown
// beyond kKeepGrownBytes is released once the large request has been consumed, whatever
// was read past it moving to a buffer of the normal size.
#ifndef SLUICE_ENGINE_IO_BUFFERED_READER_H_
#define SLUICE_ENGINE_IO_BUFFERED_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/io/input_stream.h"

namespace sluice::engine {

class BufferedReader {
 public:
  static constexpr size_t kDefaultBufferBytes = 256 << 10;
  static constexpr size_t kDefaultMaxLineBytes = 64 << 20;
  // A grown buffer up to this size is kept for the next large record.
  static constexpr size_t kKeepGrownBytes = 16 << 20;

  explicit BufferedReader(std::unique_ptr<InputStream> stream,
                          size_t buffer_bytes = kDefaultBufferBytes,
                          size_t max_line_bytes = kDefaultMaxLineBytes);

  // The next `n` bytes without consuming them; fewer only at the end of the stream. The
  // view is valid until the next non-const call.
  [[nodiscard]] absl::StatusOr<std::string_view> Peek(size_t n);
  // Consumes `n` bytes; n must not exceed what the last Peek returned.
  void Consume(size_t n);
  // Reads and drops up to `n` bytes; returns how many there were (< n at the end).
  [[nodiscard]] absl::StatusOr<uint64_t> Skip(uint64_t n);
  // The next line without its "\n" and without any '\r' in it (tf.data's TextLineDataset
  // drops them all, not only a "\r\n"'s); a last line without "\n" counts unless nothing
  // is left of it. *eof when no line is left. ResourceExhausted (with the offset) for a line
  // longer than max_line_bytes.
  [[nodiscard]] absl::Status ReadLine(std::string_view* line, bool* eof);

  // Bytes consumed so far: the offset of the next byte in the stream.
  uint64_t offset() const { return offset_; }
  // The buffer's size now: buffer_bytes, or more while a large record or line needs it.
  [[nodiscard]] size_t buffer_capacity() const { return capacity_; }

 private:
  // Makes at least `n` bytes available unless the stream ends first.
  absl::Status Fill(size_t n);

  std::unique_ptr<InputStream> stream_;
  const size_t buffer_bytes_;
  const size_t max_line_bytes_;
  // Uninitialised storage: every byte is written by the stream before it is read.
  std::unique_ptr<char[]> buffer_;
  size_t capacity_;
  size_t begin_ = 0;  // First unconsumed byte.
  size_t end_ = 0;    // One past the last buffered byte.
  bool stream_done_ = false;
  uint64_t offset_ = 0;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_IO_BUFFERED_READER_H_
