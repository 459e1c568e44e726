// Whether the first bytes of a file look like a GZIP or a ZLIB stream: what compression
// 'auto' sniffs (data_file.cc), and what a TFRecord read as plain suspects when its first
// record does not check out (tfrecord_reader.cc).
//
//   if (LooksLikeGzip(prefix)) ...   // prefix: the file's first 3 bytes or more
#ifndef SLUICE_ENGINE_IO_COMPRESSION_MAGIC_H_
#define SLUICE_ENGINE_IO_COMPRESSION_MAGIC_H_

#include <cstdint>
#include <string_view>

namespace sluice::engine {

// RFC 1952: ID1 ID2 and deflate (CM 8).
inline bool LooksLikeGzip(std::string_view prefix) {
  return prefix.size() >= 3 && static_cast<uint8_t>(prefix[0]) == 0x1f &&
         static_cast<uint8_t>(prefix[1]) == 0x8b && prefix[2] == 8;
}

// RFC 1950: deflate (CM 8) with a window of at most 32K, and a header checksum.
inline bool LooksLikeZlib(std::string_view prefix) {
  if (prefix.size() < 2) return false;
  const auto cmf = static_cast<uint8_t>(prefix[0]);
  const auto flg = static_cast<uint8_t>(prefix[1]);
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0;
}

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_IO_COMPRESSION_MAGIC_H_
