#include "engine/ops/fixed_length_record_op.h"

#include <string>
#include <vector>

#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Compress;
using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarStrings;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FixedLengthRecordOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_.data_roots = {dir_.path()};
    // 3-byte header, records of 4 bytes, 2-byte footer.
    WriteFile(dir_.path() + "/r.bin", "HHHaaaabbbbccccFF");
    WriteFile(dir_.path() + "/r.bin.gz", Compress("HHHaaaabbbbccccFF", true));
    WriteFile(dir_.path() + "/partial.bin", "HHHaaaabbFF");
    WriteFile(dir_.path() + "/short.bin", "HH");
  }
  TempDir dir_;
  PipelineContext context_;
};

TEST_F(FixedLengthRecordOpTest, SkipsHeaderAndFooter) {
  for (const char* file : {"r.bin", "r.bin.gz"}) {
    absl::StatusOr<std::vector<Element>> records =
        DrainText(std::string("fixed_length_record(files=['") + file +
                      "'], record_bytes=4, header_bytes=3, footer_bytes=2)",
                  context_);
    ASSERT_TRUE(records.ok()) << records.status();
    EXPECT_THAT(ScalarStrings(*records), ElementsAre("aaaa", "bbbb", "cccc")) << file;
  }
}

TEST_F(FixedLengthRecordOpTest, PartialRecordsAndShortFilesNameFileAndOffset) {
  absl::Status partial =
      DrainText(
          "fixed_length_record(files=['partial.bin'], record_bytes=4, header_bytes=3, "
          "footer_bytes=2)",
          context_)
          .status();
  EXPECT_EQ(partial.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(partial.message(),
              HasSubstr("truncated record in file 'partial.bin' at offset 7: expected 4 bytes "
                        "before the 2-byte footer, got 2"));
  absl::Status short_header =
      DrainText("fixed_length_record(files=['short.bin'], record_bytes=4, header_bytes=3)",
                context_)
          .status();
  EXPECT_THAT(short_header.message(),
              HasSubstr("file 'short.bin' has 2 bytes, fewer than its 3-byte header"));
}

TEST_F(FixedLengthRecordOpTest, ValidationAndTextForm) {
  EXPECT_THAT(DrainText("fixed_length_record(files=['r.bin'], record_bytes=0)", context_)
                  .status()
                  .message(),
              HasSubstr("record_bytes must be in [1, 1073741824], got 0"));
  absl::StatusOr<proto::PipelineDef> def =
      ParsePipeline("fixed_length_record(files=['r.bin'], record_bytes=4, footer_bytes=2)");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(FormatPipeline(*def),
            "fixed_length_record(files=['r.bin'], record_bytes=4, footer_bytes=2)");
}

}  // namespace
}  // namespace sluice::engine
