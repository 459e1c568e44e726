#include "engine/io/zlib_input_stream.h"

#include <string>
#include <string_view>
#include <utility>

#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Compress;
using ::testing::HasSubstr;

// Serves a string in chunks of at most `chunk` bytes, like a slow file.
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

std::string Sample() {
  std::string s;
  for (int i = 0; i < 20000; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

absl::StatusOr<std::string> ReadAll(std::string compressed, ZlibFormat format, size_t chunk,
                                    size_t read_size) {
  ZlibInputStream in(std::make_unique<StringStream>(std::move(compressed), chunk), format,
                     "'test.gz'", /*input_buffer_bytes=*/chunk * 2);
  std::string out;
  std::string buf(read_size, '\0');
  while (true) {
    absl::StatusOr<size_t> n = in.Read(buf.data(), buf.size());
    if (!n.ok()) return n.status();
    if (*n == 0) return out;
    out.append(buf.data(), *n);
  }
}

TEST(ZlibInputStreamTest, DecompressesGzipAndZlibExplicitlyAndByAutoDetection) {
  const std::string data = Sample();
  const std::string gz = Compress(data, /*gzip=*/true);
  const std::string zl = Compress(data, /*gzip=*/false);
  EXPECT_EQ(*ReadAll(gz, ZlibFormat::kGzip, 4096, 1000), data);
  EXPECT_EQ(*ReadAll(zl, ZlibFormat::kZlib, 4096, 1000), data);
  EXPECT_EQ(*ReadAll(gz, ZlibFormat::kAuto, 7, 3), data);
  EXPECT_EQ(*ReadAll(zl, ZlibFormat::kAuto, 65536, 1 << 20), data);
}

// An empty file named compressed holds nothing; it failed as "truncated", where compression
// 'auto' (and TensorFlow) read no records. A stream cut short still fails.
TEST(ZlibInputStreamTest, AnEmptyFileIsAnEmptyStream) {
  for (ZlibFormat format : {ZlibFormat::kGzip, ZlibFormat::kZlib, ZlibFormat::kAuto}) {
    absl::StatusOr<std::string> read = ReadAll("", format, 16, 16);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(*read, "");
  }
  EXPECT_FALSE(ReadAll(Compress("data", true).substr(0, 5), ZlibFormat::kGzip, 16, 16).ok());
}

TEST(ZlibInputStreamTest, ConcatenatedGzipMembersAreReadInTurn) {
  const std::string a = "first member\n", b = "second member\n";
  EXPECT_EQ(*ReadAll(Compress(a, true) + Compress(b, true), ZlibFormat::kGzip, 5, 4), a + b);
}

TEST(ZlibInputStreamTest, TruncationAndCorruptionNameTheStreamAndCompressedOffset) {
  const std::string gz = Compress(Sample(), true);
  absl::StatusOr<std::string> truncated =
      ReadAll(gz.substr(0, gz.size() / 2), ZlibFormat::kGzip, 1024, 4096);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(truncated.status().message(),
              HasSubstr("corrupt gzip data in 'test.gz' at compressed offset " +
                        std::to_string(gz.size() / 2) + ": the file ends inside"));

  std::string corrupt = gz;
  corrupt[0] = 'X';  // Not a gzip header.
  absl::StatusOr<std::string> bad = ReadAll(corrupt, ZlibFormat::kGzip, 1024, 4096);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("incorrect header check"));

  std::string zl = Compress("abc", false) + "junk";
  EXPECT_THAT(ReadAll(zl, ZlibFormat::kZlib, 1024, 4096).status().message(),
              HasSubstr("unexpected bytes after the end of the zlib stream"));
}

// What a reader gets before the error: the bytes every Read returned, then the error.
std::pair<std::string, absl::Status> ReadUntilError(std::string compressed, ZlibFormat format,
                                                    size_t read_size) {
  ZlibInputStream in(std::make_unique<StringStream>(std::move(compressed), 1 << 20), format,
                     "'test.gz'", /*input_buffer_bytes=*/1 << 20);
  std::string out;
  std::string buf(read_size, '\0');
  while (true) {
    absl::StatusOr<size_t> n = in.Read(buf.data(), buf.size());
    if (!n.ok()) {
      // And it stays failed.
      EXPECT_EQ(in.Read(buf.data(), buf.size()).status(), n.status());
      return {out, n.status()};
    }
    if (*n == 0) return {out, absl::OkStatus()};
    out.append(buf.data(), *n);
  }
}

// inflate writes good output and fails in one call at a gzip trailer whose check fails, or
// at junk after a zlib stream: the output comes first (it held ~130 good records that a
// reader skipping bad records lost), then the error.
TEST(ZlibInputStreamTest, BytesDecompressedBeforeAnErrorComeOutFirst) {
  const std::string data = Sample();
  std::string gz = Compress(data, true);
  gz[gz.size() - 8] ^= 0x5a;  // the trailer's CRC-32
  auto [from_gzip, gzip_error] = ReadUntilError(gz, ZlibFormat::kGzip, 1 << 20);
  EXPECT_EQ(from_gzip, data);
  EXPECT_EQ(gzip_error.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(gzip_error.message(), HasSubstr("incorrect data check"));

  auto [from_zlib, zlib_error] =
      ReadUntilError(Compress(data, false) + "junk", ZlibFormat::kZlib, 1 << 20);
  EXPECT_EQ(from_zlib, data);
  EXPECT_THAT(zlib_error.message(), HasSubstr("unexpected bytes after the end of the zlib stream"));
}

}  // namespace
}  // namespace sluice::engine
