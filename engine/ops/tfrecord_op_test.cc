#include "engine/ops/tfrecord_op.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/io/tfrecord_reader.h"
#include "engine/pipeline_stats.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Compress;
using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ReadFile;
using ::sluice::engine::testing::ScalarStrings;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::TestDataDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTfx[] = "/tfrecord/tfx/tfx/";
constexpr char kExample[] = "/tfrecord/pytorch-data/test/_fakedata/tfrecord/example.tfrecord";

PipelineContext Roots(std::vector<std::string> roots) {
  PipelineContext context;
  context.data_roots = std::move(roots);
  return context;
}

std::string FilesArg(const std::vector<std::string>& files) {
  std::vector<std::string> quoted;
  for (const std::string& f : files) quoted.push_back(absl::StrCat("'", f, "'"));
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

// Records of `files` read by a tfrecord stage with `extra` arguments.
absl::StatusOr<std::vector<Element>> Read(const std::vector<std::string>& files,
                                          const PipelineContext& context,
                                          const std::string& extra = "") {
  return DrainText(absl::StrCat("tfrecord(files=", FilesArg(files), extra, ")"), context);
}

TEST(TfRecordOpTest, TaxiGzipShardsHoldTheDocumentedRecordCount) {
  std::optional<std::string> data = TestDataDir();
  if (!data) GTEST_SKIP() << "shared test data not found (set SLUICE_TESTDATA)";
  std::vector<std::string> shards;
  for (int i = 0; i < 12; ++i) {
    shards.push_back(absl::StrCat(*data, kTfx,
                                  "components/testdata/csv_example_gen/Split-eval/data_tfrecord-",
                                  absl::StrFormat("%05d", i), "-of-00012.gz"));
  }
  absl::StatusOr<std::vector<Element>> auto_detected = Read(shards, Roots({*data}));
  ASSERT_TRUE(auto_detected.ok()) << auto_detected.status();
  EXPECT_EQ(auto_detected->size(), 5091u);  // PROVENANCE.md: 5,091 records in all 12 shards.
  absl::StatusOr<std::vector<Element>> explicit_gzip =
      Read({shards[0]}, Roots({*data}), ", compression='gzip'");
  ASSERT_TRUE(explicit_gzip.ok()) << explicit_gzip.status();
  EXPECT_EQ(explicit_gzip->size(), 424u);
}

TEST(TfRecordOpTest, OtherPublishedFilesHaveTheirDocumentedRecords) {
  std::optional<std::string> data = TestDataDir();
  if (!data) GTEST_SKIP() << "shared test data not found (set SLUICE_TESTDATA)";
  struct Case {
    std::string path;
    size_t records;
    size_t bytes;  // Every record's size, or 0 when they vary.
  };
  const std::vector<Case> cases = {
      {absl::StrCat(*data, kTfx, "examples/mnist/data/mnist.tfrecord"), 1000, 3187},
      {absl::StrCat(*data, kTfx,
                    "components/testdata/penguin/data/Split-train/"
                    "data_tfrecord-00000-of-00001.gz"),
       234, 136},
      // Its gzip header has the FNAME field set.
      {absl::StrCat(*data, kTfx, "examples/tfjs_next_page_prediction/data/data.tfrecord.gz"), 100,
       69},
      {absl::StrCat(*data, kExample), 4, 0},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<Element>> records = Read({c.path}, Roots({*data}));
    ASSERT_TRUE(records.ok()) << records.status();
    EXPECT_EQ(records->size(), c.records) << c.path;
    for (const Element& e : *records) {
      if (c.bytes != 0) {
        EXPECT_EQ(e[0].string_value(0).size(), c.bytes) << c.path;
      }
    }
  }
}

TEST(TfRecordOpTest, DerivedZlibFileIsDetectedAndReadExplicitly) {
  std::optional<std::string> data = TestDataDir();
  if (!data) GTEST_SKIP() << "shared test data not found (set SLUICE_TESTDATA)";
  TempDir dir;
  const std::string plain = ReadFile(*data + kExample);
  // Derived here, as PROVENANCE.md suggests: example.tfrecord through zlib.compress.
  WriteFile(dir.path() + "/example.zlib", Compress(plain, /*gzip=*/false));
  WriteFile(dir.path() + "/example.tfrecord", plain);
  const PipelineContext context = Roots({dir.path()});
  absl::StatusOr<std::vector<Element>> reference = Read({"example.tfrecord"}, context);
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (const char* extra : {"", ", compression='zlib'"}) {
    absl::StatusOr<std::vector<Element>> zlib = Read({"example.zlib"}, context, extra);
    ASSERT_TRUE(zlib.ok()) << zlib.status();
    EXPECT_EQ(ScalarStrings(*zlib), ScalarStrings(*reference));
  }
  // Read as uncompressed on purpose: the bad header is reported at offset 0.
  EXPECT_THAT(Read({"example.zlib"}, context, ", compression='none'").status().message(),
              HasSubstr("at offset 0: expected length CRC32C"));
}

class CorruptFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::canonical(dir_.path()).string();
    for (int i = 0; i < 3; ++i) AppendTfRecord(absl::StrCat("record-", i), &bytes_);
    // Each record: 12 + 8 + 4 = 24 bytes. Flip a data byte of record 1 (offset 24).
    std::string flipped = bytes_;
    flipped[24 + 12 + 2] ^= 0x01;
    WriteFile(root_ + "/flipped.tfrecord", flipped);
    WriteFile(root_ + "/truncated.tfrecord", bytes_.substr(0, bytes_.size() - 5));
    WriteFile(root_ + "/truncated.gz", Compress(bytes_.substr(0, 40), true));
    WriteFile(root_ + "/good.tfrecord", bytes_);
  }
  TempDir dir_;
  std::string root_;
  std::string bytes_;
};

TEST_F(CorruptFilesTest, ErrorsNameTheFileAndOffset) {
  const PipelineContext context = Roots({root_});
  absl::Status flipped = Read({"flipped.tfrecord"}, context).status();
  EXPECT_EQ(flipped.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(flipped.message(),
              HasSubstr("tfrecord: corrupt record in file 'flipped.tfrecord' at offset 24: "
                        "expected data CRC32C"));
  absl::Status truncated = Read({"truncated.tfrecord"}, context).status();
  EXPECT_EQ(truncated.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(truncated.message(),
              HasSubstr("truncated record in file 'truncated.tfrecord' at offset 48"));
  absl::Status gz = Read({"truncated.gz"}, context).status();
  EXPECT_THAT(gz.message(),
              HasSubstr("truncated record in file 'truncated.gz' (gzip; offsets are in the "
                        "decompressed data) at offset 24"));
}

TEST_F(CorruptFilesTest, SkipModeCountsAndReportsBadRecords) {
  PipelineStats stats;
  PipelineContext context = Roots({root_});
  context.stats = &stats;
  absl::StatusOr<std::vector<Element>> records =
      Read({"flipped.tfrecord", "truncated.tfrecord", "good.tfrecord"}, context,
           ", skip_bad_records=true");
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_THAT(ScalarStrings(*records), ElementsAre("record-0", "record-2", "record-0", "record-1",
                                                   "record-0", "record-1", "record-2"));
  EXPECT_EQ(stats.bad_records_skipped(), 2);
  std::vector<std::string> messages = stats.bad_record_messages();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_THAT(messages[0], HasSubstr("'flipped.tfrecord' at offset 24"));
  EXPECT_THAT(messages[1], HasSubstr("'truncated.tfrecord' at offset 48"));
}

// A later stage's error names the record's file, and its index in the file while none was
// skipped; with skip_bad_records the count of records handed out is no such index, so the
// file alone is named.
TEST_F(CorruptFilesTest, LaterErrorsNameTheFileAndARecordIndexOnlyWhenCounted) {
  PipelineContext context = Roots({root_});
  PipelineStats stats;
  context.stats = &stats;
  EXPECT_THAT(DrainText("tfrecord(files=['good.tfrecord']) | map(string_to_int64)", context)
                  .status()
                  .message(),
              HasSubstr("reading record 0 of 'good.tfrecord': "));
  const std::string skipping(
      DrainText("tfrecord(files=['flipped.tfrecord'], skip_bad_records=true) | "
                "map(string_to_int64)",
                context)
          .status()
          .message());
  EXPECT_THAT(skipping, HasSubstr("reading 'flipped.tfrecord': "));
  EXPECT_THAT(skipping, Not(HasSubstr("record 0 of")));
}

TEST_F(CorruptFilesTest, FilesOutsideTheDataRootsAreRefused) {
  absl::Status none = Read({root_ + "/good.tfrecord"}, PipelineContext{}).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(none.message(), HasSubstr("'" + root_ + "/good.tfrecord'"));
  EXPECT_THAT(none.message(), HasSubstr("--data-root"));
  absl::Status outside = Read({"/etc/hostname"}, Roots({root_})).status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(outside.message(), HasSubstr("tfrecord: '/etc/hostname'"));
  EXPECT_THAT(outside.message(), HasSubstr("outside the data roots [" + root_ + "]"));
}

TEST(TfRecordOpTest, TextFormRoundTripsAndNeedsFilesAtTheTop) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(
      "tfrecord(files=['a.tfrecord', 'b.tfrecord'], compression='gzip', skip_bad_records=true)");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(FormatPipeline(*def),
            "tfrecord(files=['a.tfrecord', 'b.tfrecord'], compression='gzip', "
            "skip_bad_records=true)");
  EXPECT_THAT(DrainText("tfrecord()").status().message(),
              HasSubstr("stage 0 (tfrecord): without files=[...] tfrecord reads the file named "
                        "by its input element"));
  EXPECT_THAT(DrainText("tfrecord(files=['a'], compression='lz4')").status().message(),
              HasSubstr("compression: expected compression auto, none, gzip or zlib, got 'lz4'"));
}

}  // namespace
}  // namespace sluice::engine
