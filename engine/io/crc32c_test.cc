#include "engine/io/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

struct Vector {
  std::string name;
  std::vector<uint8_t> data;
  uint32_t crc;
};

std::vector<Vector> PublishedVectors() {
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  const std::string check = "123456789";
  // RFC 3720 appendix B.4: an iSCSI SCSI Read (10) command PDU.
  const std::vector<uint8_t> pdu = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                                    0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                                    0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                    0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  return {
      {"check value \"123456789\"", {check.begin(), check.end()}, 0xE3069283u},
      {"RFC 3720 32 zero bytes", zeros, 0x8A9136AAu},
      {"RFC 3720 32 0xff bytes", ones, 0x62A8AB43u},
      {"RFC 3720 32 incrementing bytes", up, 0x46DD794Eu},
      {"RFC 3720 32 decrementing bytes", down, 0x113FDB5Cu},
      {"RFC 3720 iSCSI read PDU", pdu, 0xD9963A56u},
      {"empty", {}, 0u},
  };
}

TEST(Crc32cTest, PublishedVectors) {
  for (const Vector& v : PublishedVectors()) {
    EXPECT_EQ(Crc32c(v.data.data(), v.data.size()), v.crc) << v.name;
    EXPECT_EQ(Crc32cPortable(0, v.data.data(), v.data.size()), v.crc) << v.name;
  }
}

TEST(Crc32cTest, ExtendEqualsOneShotAtEverySplitPoint) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  const uint32_t whole = Crc32c(s);
  EXPECT_EQ(whole, 0x22620404u);  // Widely published CRC-32C of this sentence.
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(Crc32cExtend(Crc32c(s.substr(0, cut)), s.substr(cut)), whole) << cut;
  }
}

TEST(Crc32cTest, AcceleratedAndPortableAgreeOnLongUnalignedBuffers) {
  // Lengths around the three-stream block sizes (3 x 256 and 3 x 4096) and odd offsets
  // exercise every path of the interleaved implementation.
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(70000);
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t len : {0, 1, 7, 8, 9, 767, 768, 769, 1000, 12287, 12288, 12289, 30000, 65536}) {
    for (size_t offset : {0, 1, 3, 5}) {
      const uint8_t* p = buf.data() + offset;
      EXPECT_EQ(Crc32c(p, len), Crc32cPortable(0, p, len)) << len << " @" << offset;
      EXPECT_EQ(Crc32cExtend(0x12345678u, p, len), Crc32cPortable(0x12345678u, p, len))
          << len << " @" << offset;
    }
  }
}

TEST(Crc32cTest, MaskMatchesTfRecordGoldenBytes) {
  // TFRecordWriter output for the record b"first": length 5, then masked CRCs of the length
  // bytes (ea b2 04 3e) and of the data (55 ff 23 e5), both little-endian.
  const uint8_t length[8] = {5, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(MaskCrc32c(Crc32c(length, 8)), 0x3e04b2eau);
  EXPECT_EQ(MaskCrc32c(Crc32c("first")), 0xe523ff55u);
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu}) EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(c)), c);
  EXPECT_NE(MaskCrc32c(0xE3069283u), 0xE3069283u);
}

}  // namespace
}  // namespace sluice::engine
