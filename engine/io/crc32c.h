// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecord
// files use, plus TFRecord's masking of stored CRCs.
//
//   uint32_t crc = Crc32c("123456789");                  // 0xE3069283
//   crc = Crc32cExtend(Crc32c(part1), part2);             // == Crc32c(part1 + part2)
//   uint32_t stored = MaskCrc32c(crc);                    // as written in a TFRecord
//
// Debian 12 packages no C/C++ CRC32C library and its Abseil predates absl/crc, so
// Sluice carries this one. On x86-64 CPUs with SSE4.2 it uses the crc32
// instruction on three interleaved streams (about 3x one stream's throughput);
// elsewhere a portable slicing-by-8 table implementation. Both give identical
// results (crc32c_test checks them against the published test vectors).
#ifndef SLUICE_ENGINE_IO_CRC32C_H_
#define SLUICE_ENGINE_IO_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sluice::engine {

// CRC-32C of `n` bytes continuing from `crc` (the CRC of the bytes before them; 0 for none).
[[nodiscard]] uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

[[nodiscard]] inline uint32_t Crc32c(const void* data, size_t n) {
  return Crc32cExtend(0, data, n);
}
[[nodiscard]] inline uint32_t Crc32c(std::string_view s) { return Crc32c(s.data(), s.size()); }
[[nodiscard]] inline uint32_t Crc32cExtend(uint32_t crc, std::string_view s) {
  return Crc32cExtend(crc, s.data(), s.size());
}

// The portable implementation, always available (for tests and comparisons).
[[nodiscard]] uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t n);
// True when Crc32cExtend uses the SSE4.2 instruction.
[[nodiscard]] bool Crc32cIsAccelerated();

// TFRecord stores CRCs rotated right by 15 bits plus a constant, so that a CRC of data
// that itself contains CRCs does not degenerate.
inline constexpr uint32_t kCrc32cMaskDelta = 0xa282ead8u;
[[nodiscard]] inline uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + kCrc32cMaskDelta;
}
[[nodiscard]] inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - kCrc32cMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_IO_CRC32C_H_
