#include "engine/io/tfrecord_reader.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "engine/io/crc32c.h"
#include "engine/io/zlib_input_stream.h"
#include "engine/test_util.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class StringStream : public InputStream {
 public:
  explicit StringStream(std::string data) : data_(std::move(data)) {}
  absl::StatusOr<size_t> Read(char* dest, size_t n) override {
    const size_t take = std::min(n, data_.size() - pos_);
    data_.copy(dest, take, pos_);
    pos_ += take;
    return take;
  }

 private:
  std::string data_;
  size_t pos_ = 0;
};

// TFRecordWriter's bytes for the records "first" and "second" (see PROVENANCE.md).
const std::string kGolden(
    "\x05\x00\x00\x00\x00\x00\x00\x00\xea\xb2\x04>firstU\xff#\xe5"
    "\x06\x00\x00\x00\x00\x00\x00\x00si\xd5"
    "7second\xd3\xe0\xd3\xca",
    43);

struct Result {
  std::vector<std::string> records;
  absl::Status status;
  std::vector<std::string> bad;
};

Result ReadAll(std::string bytes, bool skip = false, size_t buffer_bytes = 64,
               bool read_as_plain = true) {
  Result r;
  TfRecordReaderOptions options;
  options.skip_bad_records = skip;
  options.buffer_bytes = buffer_bytes;
  options.read_as_plain = read_as_plain;
  options.on_bad_record = [&r](const absl::Status& s) { r.bad.emplace_back(s.message()); };
  TfRecordReader reader(std::make_unique<StringStream>(std::move(bytes)), "file 't.tfrecord'",
                        options);
  while (true) {
    std::string_view record;
    bool eof = false;
    r.status = reader.ReadRecord(&record, &eof);
    if (!r.status.ok() || eof) break;
    r.records.emplace_back(record);
  }
  return r;
}

TEST(TfRecordReaderTest, WriterMatchesTensorFlowsGoldenBytes) {
  std::string out;
  AppendTfRecord("first", &out);
  AppendTfRecord("second", &out);
  EXPECT_EQ(out, kGolden);
  EXPECT_TRUE(LooksLikeTfRecord(kGolden));
  EXPECT_FALSE(LooksLikeTfRecord("\x1f\x8b\x08 not a record"));
}

TEST(TfRecordReaderTest, ReadsRecordsOfAllSizesAcrossBufferRefills) {
  std::vector<std::string> want = {"", "a", std::string(1000, 'b'), "tail"};
  std::string bytes;
  for (const std::string& r : want) AppendTfRecord(r, &bytes);
  Result r = ReadAll(bytes, false, /*buffer_bytes=*/16);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.records, want);
  EXPECT_THAT(ReadAll(kGolden).records, ElementsAre("first", "second"));
  EXPECT_TRUE(ReadAll("").records.empty());
}

TEST(TfRecordReaderTest, CorruptionAndTruncationNameTheFileAndOffset) {
  std::string data_flip = kGolden;
  data_flip[14] ^= 1;  // Inside "first".
  Result r = ReadAll(data_flip);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status.message(),
              HasSubstr("corrupt record in file 't.tfrecord' at offset 0: expected data CRC32C"));

  std::string length_flip = kGolden;
  length_flip[21] ^= 1;  // The second record's length.
  r = ReadAll(length_flip);
  EXPECT_THAT(r.status.message(),
              HasSubstr("corrupt record in file 't.tfrecord' at offset 21: expected length "
                        "CRC32C"));
  EXPECT_THAT(r.records, ElementsAre("first"));

  r = ReadAll(kGolden.substr(0, 36));
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(r.status.message(),
            "truncated record in file 't.tfrecord' at offset 21: expected 22 bytes (6 of data), "
            "the file ends after 15");
  r = ReadAll(kGolden.substr(0, 25));
  EXPECT_EQ(r.status.message(),
            "truncated record in file 't.tfrecord' at offset 21: expected a 12-byte header, the "
            "file ends after 4 bytes");
}

// A compressed file read with compression 'none' fails on its first header's CRC; the error
// says which compression the bytes look like instead of only naming a CRC.
TEST(TfRecordReaderTest, ACompressedFileReadAsPlainSaysWhichCompressionItLooksLike) {
  Result gzip = ReadAll(testing::Compress(kGolden, /*gzip=*/true));
  EXPECT_EQ(gzip.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(gzip.status.message(), HasSubstr("at offset 0: expected length CRC32C"));
  EXPECT_THAT(gzip.status.message(),
              HasSubstr("starts like a GZIP stream: read it with compression='gzip'"));
  Result zlib = ReadAll(testing::Compress(kGolden, /*gzip=*/false));
  EXPECT_THAT(zlib.status.message(),
              HasSubstr("starts like a ZLIB stream: read it with compression='zlib'"));
  // Damage past the first record gets no such guess.
  std::string length_flip = kGolden;
  length_flip[21] ^= 1;
  EXPECT_THAT(ReadAll(length_flip).status.message(), Not(HasSubstr("starts like")));
  // Nor do bytes that came out of a decompressor (a file compressed twice).
  EXPECT_THAT(ReadAll(testing::Compress(kGolden, /*gzip=*/true), false, 64, /*read_as_plain=*/false)
                  .status.message(),
              Not(HasSubstr("starts like")));
}

TEST(TfRecordReaderTest, SkipModeCountsBadRecordsAndKeepsTheGoodOnes) {
  std::string bytes;
  for (const char* rec : {"one", "two", "three"}) AppendTfRecord(rec, &bytes);
  std::string bad = bytes;
  bad[12] ^= 0x20;  // "one" -> "One": data CRC mismatch, record skipped.
  Result r = ReadAll(bad, /*skip=*/true);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(r.records, ElementsAre("two", "three"));
  ASSERT_EQ(r.bad.size(), 1u);
  EXPECT_THAT(r.bad[0], HasSubstr("at offset 0: expected data CRC32C"));

  // A truncated tail loses the rest of the file: counted once.
  r = ReadAll(bytes.substr(0, bytes.size() - 3), /*skip=*/true);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(r.records, ElementsAre("one", "two"));
  ASSERT_EQ(r.bad.size(), 1u);
  EXPECT_THAT(r.bad[0], HasSubstr("truncated record"));
  EXPECT_THAT(r.bad[0], HasSubstr("skipped the rest of the file"));
}

// A length past the 1 GiB bound (here with a valid length CRC, the rest of the file short of
// it) is the loss of the file's rest in skip mode, as a truncated record is; it ended the
// read in both modes.
TEST(TfRecordReaderTest, SkipModeCountsALengthPastTheBoundAsTheLossOfTheRest) {
  std::string bytes;
  AppendTfRecord("one", &bytes);
  std::string forged(8, '\0');
  forged[3] = '\x80';  // 2^31
  bytes += forged;
  const uint32_t masked = MaskCrc32c(Crc32c(forged.data(), 8));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(masked >> (8 * i)));
  bytes += std::string(100, 'x');
  AppendTfRecord("two", &bytes);
  Result skipped = ReadAll(bytes, /*skip=*/true);
  ASSERT_TRUE(skipped.status.ok()) << skipped.status;
  EXPECT_THAT(skipped.records, ElementsAre("one"));
  ASSERT_EQ(skipped.bad.size(), 1u);
  EXPECT_THAT(skipped.bad[0], HasSubstr("at offset 19 has length 2147483648"));
  Result failed = ReadAll(bytes);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(failed.status.message(), HasSubstr("a damaged file, or a record too large"));
  EXPECT_THAT(failed.records, ElementsAre("one"));
}

// A .gz cut short breaks the compressed stream, not a record: skip mode must count it as the
// loss of the file's rest (as a truncated record is), not fail the read.
TEST(TfRecordReaderTest, SkipModeCountsABrokenCompressedStreamAsTheLossOfTheRest) {
  std::string records;
  for (int i = 0; i < 200; ++i)
    AppendTfRecord(std::string(100, static_cast<char>('a' + i % 26)), &records);
  const std::string gzip = testing::Compress(records, /*gzip=*/true);
  auto read_cut = [&](bool skip, std::vector<std::string>* bad) {
    TfRecordReaderOptions options;
    options.skip_bad_records = skip;
    options.on_bad_record = [bad](const absl::Status& s) { bad->emplace_back(s.message()); };
    TfRecordReader reader(std::make_unique<ZlibInputStream>(
                              std::make_unique<StringStream>(gzip.substr(0, gzip.size() / 2)),
                              ZlibFormat::kGzip, "'cut.gz'", /*input_buffer_bytes=*/256),
                          "file 'cut.gz'", options);
    int read = 0;
    while (true) {
      std::string_view record;
      bool eof = false;
      absl::Status status = reader.ReadRecord(&record, &eof);
      if (!status.ok()) return absl::StatusOr<int>(status);
      if (eof) return absl::StatusOr<int>(read);
      ++read;
    }
  };
  std::vector<std::string> bad;
  absl::StatusOr<int> skipped = read_cut(/*skip=*/true, &bad);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_GT(*skipped, 0);
  EXPECT_LT(*skipped, 200);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_THAT(bad[0], HasSubstr("cannot read file 'cut.gz' past offset"));
  EXPECT_THAT(bad[0], HasSubstr("skipped the rest of the file"));
  absl::StatusOr<int> failed = read_cut(/*skip=*/false, &bad);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(failed.status().message(), HasSubstr("cut.gz"));
}

}  // namespace
}  // namespace sluice::engine
