// Crash simulation: torn and bit-flipped tails are dropped, other corruption is DataLoss
// naming the file and offset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "control/journal.h"
#include "control/journal_test_util.h"

namespace sluice::control::journal_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A journal of two files; the last record of the second is a large one.
struct TwoFiles {
  std::vector<proto::Update> first = SomeUpdates(1, 10);
  std::vector<proto::Update> second = Concat(SomeUpdates(11, 10), {Dataset("ds-last")});
  std::string file1, file2, bytes1, bytes2;
  uint64_t last_start = 0;  // offset of the last record of file2

  explicit TwoFiles(const std::string& dir) {
    file1 = WriteSession(dir, first);
    file2 = WriteSession(dir, second);
    bytes1 = ReadBytes(file1);
    bytes2 = ReadBytes(file2);
    last_start = bytes2.size() - FramedSize(second.back());
  }
  std::vector<proto::Update> AllButLast() const {
    return Concat(first, std::vector<proto::Update>(second.begin(), second.end() - 1));
  }
};

TEST(JournalCrashTest, TornTailAtEveryOffsetIsDropped) {
  TempDir tmp;
  TwoFiles journal(tmp.dir());
  for (uint64_t cut = journal.last_start; cut < journal.bytes2.size(); ++cut) {
    WriteBytes(journal.file2, journal.bytes2.substr(0, cut));
    auto recovered = Recover(tmp.dir());
    ASSERT_TRUE(recovered.ok()) << "cut at " << cut << ": " << recovered.status();
    ExpectUpdates(recovered->updates, journal.AllButLast());
    if (cut == journal.last_start) {
      EXPECT_FALSE(recovered->dropped.has_value());  // a clean end: the write never began
    } else {
      ASSERT_TRUE(recovered->dropped.has_value()) << "cut at " << cut;
      EXPECT_EQ(recovered->dropped->path, journal.file2);
      EXPECT_EQ(recovered->dropped->offset, journal.last_start);
      EXPECT_EQ(recovered->dropped->bytes_dropped, cut - journal.last_start);
    }
  }
  // A zero-filled tail (an extended file whose data never reached the disk) is torn too.
  WriteBytes(journal.file2, journal.bytes2.substr(0, journal.last_start) + std::string(300, '\0'));
  auto zeros = Recover(tmp.dir());
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  EXPECT_EQ(zeros->dropped->bytes_dropped, 300u);

  // The next writer truncates the torn tail, so the file stays intact once it is not last.
  WriteBytes(journal.file2, journal.bytes2.substr(0, journal.last_start + 5));
  const std::vector<proto::Update> third = SomeUpdates(100, 3);
  WriteSession(tmp.dir(), third);
  EXPECT_EQ(fs::file_size(journal.file2), journal.last_start);
  auto recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ExpectUpdates(recovered->updates, Concat(journal.AllButLast(), third));
  EXPECT_FALSE(recovered->dropped.has_value());
}

TEST(JournalCrashTest, BitFlipInLastRecordIsDropped) {
  TempDir tmp;
  TwoFiles journal(tmp.dir());
  for (uint64_t byte = journal.last_start; byte < journal.bytes2.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bytes = journal.bytes2;
      bytes[byte] = static_cast<char>(bytes[byte] ^ (1 << bit));
      WriteBytes(journal.file2, bytes);
      auto recovered = Recover(tmp.dir());
      ASSERT_TRUE(recovered.ok()) << "byte " << byte << " bit " << bit << ": "
                                  << recovered.status();
      ExpectUpdates(recovered->updates, journal.AllButLast());
      ASSERT_TRUE(recovered->dropped.has_value());
      EXPECT_EQ(recovered->dropped->offset, journal.last_start);
    }
  }
}

TEST(JournalCrashTest, CorruptionBeforeTheTailIsDataLoss) {
  TempDir tmp;
  TwoFiles journal(tmp.dir());
  // A middle record of the earlier file: the offset of the third record.
  const uint64_t third = FramedSize(journal.first[0]) + FramedSize(journal.first[1]);
  std::string bytes = journal.bytes1;
  bytes[third + 10] ^= 0x20;
  WriteBytes(journal.file1, bytes);
  auto recovered = Recover(tmp.dir());
  EXPECT_EQ(recovered.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(recovered.status().message(), HasSubstr(journal.file1));
  EXPECT_THAT(recovered.status().message(), HasSubstr(absl::StrCat("offset ", third)));
  // The last record of an earlier file is no tail either.
  bytes = journal.bytes1;
  bytes.back() ^= 0x01;
  WriteBytes(journal.file1, bytes);
  EXPECT_EQ(Recover(tmp.dir()).status().code(), absl::StatusCode::kDataLoss);
  WriteBytes(journal.file1, journal.bytes1);

  // In the last file, a bad record followed by intact ones is no torn write.
  bytes = journal.bytes2;
  bytes[third + 3] ^= 0x01;  // the third record's CRC
  WriteBytes(journal.file2, bytes);
  recovered = Recover(tmp.dir());
  EXPECT_EQ(recovered.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(recovered.status().message(),
              HasSubstr(absl::StrCat(journal.file2, " at offset ", third)));
  // And the writer refuses to start after it.
  EXPECT_EQ(JournalWriter::Open(tmp.dir(), {}).status().code(), absl::StatusCode::kDataLoss);
  WriteBytes(journal.file2, journal.bytes2);

  // A missing file in the sequence.
  WriteSession(tmp.dir(), {});
  fs::rename(journal.file2, journal.file2 + ".moved");
  recovered = Recover(tmp.dir());
  EXPECT_EQ(recovered.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(recovered.status().message(), HasSubstr(journal.file2));
}

}  // namespace
}  // namespace sluice::control::journal_test
