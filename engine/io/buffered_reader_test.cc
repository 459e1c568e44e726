#include "engine/io/buffered_reader.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;

class StringStream : public InputStream {
 public:
  StringStream(std::string data, size_t chunk) : data_(std::move(data)), chunk_(chunk) {}
  absl::StatusOr<size_t> Read(char* dest, size_t n) override {
    const size_t take = std::min({n, chunk_, data_.size() - pos_});
    data_.copy(dest, take, pos_);
    pos_ += take;
    return take;
  }

 private:
  std::string data_;
  size_t chunk_;
  size_t pos_ = 0;
};

std::unique_ptr<InputStream> Stream(std::string data, size_t chunk = 3) {
  return std::make_unique<StringStream>(std::move(data), chunk);
}

TEST(BufferedReaderTest, PeekConsumeAndSkipTrackTheOffset) {
  BufferedReader in(Stream("0123456789abcdefghij"), /*buffer_bytes=*/16);
  EXPECT_EQ(*in.Peek(4), "0123");
  in.Consume(2);
  EXPECT_EQ(in.offset(), 2u);
  // Larger than the buffer: it grows for this request.
  EXPECT_EQ(*in.Peek(17), "23456789abcdefghi");
  in.Consume(17);
  EXPECT_EQ(*in.Skip(100), 1u);  // Only "j" was left.
  EXPECT_EQ(in.offset(), 20u);
  EXPECT_EQ(*in.Peek(5), "");
}

TEST(BufferedReaderTest, ReadLineHandlesCrLfAndAFinalLineWithoutNewline) {
  BufferedReader in(Stream("alpha\r\n\nbeta gamma\nlast"), /*buffer_bytes=*/16);
  std::vector<std::string> lines;
  while (true) {
    std::string_view line;
    bool eof = false;
    ASSERT_TRUE(in.ReadLine(&line, &eof).ok());
    if (eof) break;
    lines.emplace_back(line);
  }
  EXPECT_THAT(lines, ElementsAre("alpha", "", "beta gamma", "last"));
}

// As tf.data's TextLineDataset (BufferedInputStream::ReadLine): every '\r' goes, not only
// the one before "\n", and a last line of nothing but '\r's is no line.
TEST(BufferedReaderTest, ReadLineDropsEveryCarriageReturnAsTfDataDoes) {
  for (size_t buffer_bytes : {16, 64}) {  // 16: the first line crosses a refill
    BufferedReader in(Stream("0123456789\r0123456789\na\rb\nx\r\r\n\r\n\r\r"), buffer_bytes);
    std::vector<std::string> lines;
    uint64_t offset_after_third = 0;
    while (true) {
      std::string_view line;
      bool eof = false;
      ASSERT_TRUE(in.ReadLine(&line, &eof).ok());
      if (eof) break;
      lines.emplace_back(line);
      if (lines.size() == 3) offset_after_third = in.offset();
    }
    EXPECT_THAT(lines, ElementsAre("01234567890123456789", "ab", "x", "")) << buffer_bytes;
    EXPECT_EQ(offset_after_third, 30u) << "offsets count the bytes in the file";
    EXPECT_EQ(in.offset(), 34u);
  }
}

TEST(BufferedReaderTest, LinesLongerThanTheLimitFailWithTheirOffset) {
  BufferedReader in(Stream("ok\n" + std::string(100, 'x') + "\n"), 16, /*max_line_bytes=*/32);
  std::string_view line;
  bool eof = false;
  ASSERT_TRUE(in.ReadLine(&line, &eof).ok());
  EXPECT_EQ(line, "ok");
  absl::Status s = in.ReadLine(&line, &eof);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "line at offset 3 is longer than the 32-byte limit");
}

// One record of 20 MiB grows the buffer; the small records after it are read through a
// buffer of the normal size again. (The grown one was kept for the rest of the file, and
// every read filled all of it, when bytes past the large record were already buffered,
// as they nearly always are.)
TEST(BufferedReaderTest, ABufferGrownForOneLargeRecordShrinksAfterIt) {
  constexpr size_t kLarge = 20 << 20;
  constexpr size_t kSmall = 1000;
  std::string data(kLarge, 'L');
  for (int i = 0; i < 2000; ++i) data += std::string(kSmall, static_cast<char>('a' + i % 26));
  BufferedReader in(Stream(std::move(data), /*chunk=*/3 << 20));
  absl::StatusOr<std::string_view> large = in.Peek(kLarge);
  ASSERT_TRUE(large.ok()) << large.status();
  ASSERT_EQ(large->size(), kLarge);
  EXPECT_GT(in.buffer_capacity(), kLarge);
  in.Consume(kLarge);
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<std::string_view> small = in.Peek(kSmall);
    ASSERT_TRUE(small.ok()) << small.status();
    ASSERT_EQ(*small, std::string(kSmall, static_cast<char>('a' + i % 26))) << "record " << i;
    in.Consume(kSmall);
    ASSERT_LE(in.buffer_capacity(), BufferedReader::kDefaultBufferBytes) << "record " << i;
  }
  EXPECT_TRUE(in.Peek(1)->empty());
}

}  // namespace
}  // namespace sluice::engine
