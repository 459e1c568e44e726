#include "engine/io/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace sluice::engine {
namespace {

// All functions below work on the raw CRC register: Crc32cExtend inverts on entry and exit.
constexpr uint32_t kPoly = 0x82F63B78u;  // Reflected Castagnoli polynomial.

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;  // Little-endian hosts only (see batch_layout.h).
}

uint32_t RawPortable(uint32_t crc, const uint8_t* p, size_t n) {
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xff];
    --n;
  }
  for (; n >= 8; n -= 8, p += 8) {
    const uint64_t w = Load64(p) ^ crc;
    crc = kTables[7][w & 0xff] ^ kTables[6][(w >> 8) & 0xff] ^ kTables[5][(w >> 16) & 0xff] ^
          kTables[4][(w >> 24) & 0xff] ^ kTables[3][(w >> 32) & 0xff] ^
          kTables[2][(w >> 40) & 0xff] ^ kTables[1][(w >> 48) & 0xff] ^ kTables[0][w >> 56];
  }
  while (n-- > 0) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xff];
  return crc;
}

// Multiplying the register by x^(8 * len) (the effect of `len` zero bytes) is linear over
// GF(2), so it is a lookup per register byte. Lets three streams be computed independently
// and then combined: crc(A B C) = shift(shift(crc(A), |B|) ^ crc0(B), |C|) ^ crc0(C).
class ShiftTable {
 public:
  explicit ShiftTable(size_t len) {
    static const uint8_t kZeros[256] = {};
    uint32_t basis[32];
    for (int bit = 0; bit < 32; ++bit) {
      uint32_t c = 1u << bit;
      for (size_t left = len; left > 0;) {
        const size_t step = left < sizeof(kZeros) ? left : sizeof(kZeros);
        c = RawPortable(c, kZeros, step);
        left -= step;
      }
      basis[bit] = c;
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int j = 0; j < 8; ++j) {
          if (b & (1u << j)) v ^= basis[8 * k + j];
        }
        t_[k][b] = v;
      }
    }
  }
  uint32_t Apply(uint32_t c) const {
    return t_[0][c & 0xff] ^ t_[1][(c >> 8) & 0xff] ^ t_[2][(c >> 16) & 0xff] ^ t_[3][c >> 24];
  }

 private:
  uint32_t t_[4][256];
};

#if defined(__x86_64__)

// Stream lengths of the two interleaving levels, in bytes (multiples of 8).
constexpr size_t kLongStream = 4096;
constexpr size_t kShortStream = 256;

const ShiftTable& LongShift() {
  static const ShiftTable* const t = new ShiftTable(kLongStream);
  return *t;
}
const ShiftTable& ShortShift() {
  static const ShiftTable* const t = new ShiftTable(kShortStream);
  return *t;
}

template <size_t kStream>
__attribute__((target("sse4.2"))) uint32_t ThreeStreams(uint32_t crc, const uint8_t* p,
                                                        const ShiftTable& shift) {
  uint64_t c0 = crc, c1 = 0, c2 = 0;
  for (size_t i = 0; i < kStream; i += 8) {
    c0 = _mm_crc32_u64(c0, Load64(p + i));
    c1 = _mm_crc32_u64(c1, Load64(p + kStream + i));
    c2 = _mm_crc32_u64(c2, Load64(p + 2 * kStream + i));
  }
  uint32_t c = shift.Apply(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
  return shift.Apply(c) ^ static_cast<uint32_t>(c2);
}

__attribute__((target("sse4.2"))) uint32_t RawSse42(uint32_t crc, const uint8_t* p, size_t n) {
  if (n >= 3 * kLongStream) {
    const ShiftTable& shift = LongShift();
    for (; n >= 3 * kLongStream; n -= 3 * kLongStream, p += 3 * kLongStream) {
      crc = ThreeStreams<kLongStream>(crc, p, shift);
    }
  }
  if (n >= 3 * kShortStream) {
    const ShiftTable& shift = ShortShift();
    for (; n >= 3 * kShortStream; n -= 3 * kShortStream, p += 3 * kShortStream) {
      crc = ThreeStreams<kShortStream>(crc, p, shift);
    }
  }
  uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) c = _mm_crc32_u64(c, Load64(p));
  crc = static_cast<uint32_t>(c);
  while (n-- > 0) crc = _mm_crc32_u8(crc, *p++);
  return crc;
}

const bool kHaveSse42 = [] {
  if (!__builtin_cpu_supports("sse4.2")) return false;
  LongShift();  // Build the tables before any caller races to.
  ShortShift();
  return true;
}();

#else

const bool kHaveSse42 = false;

#endif

}  // namespace

uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t n) {
  return ~RawPortable(~crc, static_cast<const uint8_t*>(data), n);
}

bool Crc32cIsAccelerated() { return kHaveSse42; }

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  if (kHaveSse42) return ~RawSse42(~crc, static_cast<const uint8_t*>(data), n);
#endif
  return Crc32cPortable(crc, data, n);
}

}  // namespace sluice::engine
