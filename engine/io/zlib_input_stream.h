// Decompresses a gzip or zlib stream on the fly with zlib's inflate, so
// compressed files are read in bounded memory.
//
//   std::unique_ptr<InputStream> raw = ...;  // e.g. a FileInputStream
//   auto in = std::make_unique<ZlibInputStream>(std::move(raw), ZlibFormat::kGzip,
//                                                "'/data/a.gz'");
//   SLUICE_ASSIGN_OR_RETURN(size_t n, in->Read(buf, sizeof(buf)));
//
// Gzip streams may hold several members back to back (as `cat a.gz b.gz` makes);
// they are decompressed in turn. Optional gzip header fields (FNAME, FEXTRA, ...)
// are handled by zlib. Errors (DataLoss) name the stream and the compressed byte
// offset where decompression failed, including a stream that ends early.
#ifndef SLUICE_ENGINE_IO_ZLIB_INPUT_STREAM_H_
#define SLUICE_ENGINE_IO_ZLIB_INPUT_STREAM_H_

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/io/input_stream.h"

namespace sluice::engine {

enum class ZlibFormat {
  kGzip,  // RFC 1952 (windowBits 16 + 15)
  kZlib,  // RFC 1950 (windowBits 15)
  kAuto,  // either, by header (windowBits 32 + 15)
};

class ZlibInputStream : public InputStream {
 public:
  // `name` is used in error messages, e.g. "'/data/a.gz'".
  ZlibInputStream(std::unique_ptr<InputStream> compressed, ZlibFormat format, std::string name,
                  size_t input_buffer_bytes = 64 << 10);
  ~ZlibInputStream() override;
  ZlibInputStream(const ZlibInputStream&) = delete;
  ZlibInputStream& operator=(const ZlibInputStream&) = delete;

  [[nodiscard]] absl::StatusOr<size_t> Read(char* dest, size_t n) override;

 private:
  // Reads more compressed input; false at its end.
  absl::StatusOr<bool> Refill();
  absl::Status Error(std::string_view what) const;

  std::unique_ptr<InputStream> compressed_;
  const ZlibFormat format_;
  const std::string name_;
  std::vector<unsigned char> input_;
  z_stream z_{};
  bool initialised_ = false;
  bool input_done_ = false;
  bool finished_ = false;
  // An error met after a Read had already decompressed bytes: those are returned first
  // (they are good data), the error by the next Read, and every one after it.
  absl::Status deferred_error_;
  // Compressed bytes handed to inflate so far, minus those still unread in input_.
  uint64_t consumed_base_ = 0;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_IO_ZLIB_INPUT_STREAM_H_
