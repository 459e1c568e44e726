#include "engine/io/data_file.h"

#include <string>
#include <vector>

#include "engine/io/tfrecord_reader.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Compress;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::HasSubstr;

std::string ReadAll(InputStream& in) {
  std::string out(1 << 16, '\0');
  size_t have = 0;
  while (true) {
    absl::StatusOr<size_t> n = in.Read(out.data() + have, out.size() - have);
    if (!n.ok() || *n == 0) break;
    have += *n;
  }
  out.resize(have);
  return out;
}

TEST(DataFileTest, AutoDetectionPerSniffMode) {
  TempDir dir;
  std::string records;
  AppendTfRecord("payload", &records);
  WriteFile(dir.path() + "/plain.tfrecord", records);
  WriteFile(dir.path() + "/r.gz", Compress(records, true));
  WriteFile(dir.path() + "/r.zlib", Compress(records, false));
  WriteFile(dir.path() + "/text.gz", Compress("x\n", true));
  const std::vector<std::string> roots = {dir.path()};
  struct Case {
    const char* file;
    Sniff sniff;
    std::string description;
  };
  for (const Case& c : {
           Case{"plain.tfrecord", Sniff::kTfRecord, "file 'plain.tfrecord'"},
           Case{"r.gz", Sniff::kTfRecord,
                "file 'r.gz' (gzip; offsets are in the decompressed data)"},
           Case{"r.zlib", Sniff::kTfRecord,
                "file 'r.zlib' (zlib; offsets are in the decompressed data)"},
           Case{"text.gz", Sniff::kGzipMagic,
                "file 'text.gz' (gzip; offsets are in the decompressed data)"},
           Case{"r.zlib", Sniff::kGzipMagic, "file 'r.zlib'"},
       }) {
    absl::StatusOr<OpenedDataFile> f =
        OpenDataFile(c.file, proto::COMPRESSION_AUTO, c.sniff, roots);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->description, c.description);
    if (c.sniff == Sniff::kTfRecord) {
      EXPECT_EQ(ReadAll(*f->stream), records) << c.file;
    }
  }
}

// A plain text file that starts with gzip's magic bytes, read under compression 'auto':
// its decompression fails, and says how to read the file as it is.
TEST(DataFileTest, AFileTakenForGzipByItsFirstBytesSaysHowToReadItPlain) {
  TempDir dir;
  WriteFile(dir.path() + "/looks.txt", std::string("\x1f\x8b\x08 but plain text\n", 20));
  const std::vector<std::string> roots = {dir.path()};
  absl::StatusOr<OpenedDataFile> f =
      OpenDataFile("looks.txt", proto::COMPRESSION_AUTO, Sniff::kGzipMagic, roots);
  ASSERT_TRUE(f.ok()) << f.status();
  std::string buffer(64, '\0');
  absl::StatusOr<size_t> read = f->stream->Read(buffer.data(), buffer.size());
  ASSERT_FALSE(read.ok()) << "inflated plain text";
  EXPECT_THAT(read.status().message(), HasSubstr("compression='none' reads it as it is"));
}

TEST(DataFileTest, CompressionNamesParseAndPrint) {
  for (proto::Compression c : {proto::COMPRESSION_AUTO, proto::COMPRESSION_NONE,
                               proto::COMPRESSION_GZIP, proto::COMPRESSION_ZLIB}) {
    EXPECT_EQ(*ParseCompression(CompressionName(c)), c);
  }
  EXPECT_THAT(ParseCompression("bz2").status().message(),
              HasSubstr("expected compression auto, none, gzip or zlib, got 'bz2'"));
}

}  // namespace
}  // namespace sluice::engine
