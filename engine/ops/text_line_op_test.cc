#include "engine/ops/text_line_op.h"

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

TEST(TextLineOpTest, ReadsLinesOfPlainAndCompressedFilesInOrder) {
  TempDir dir;
  WriteFile(dir.path() + "/a.txt", "alpha\r\nbeta\n\ngamma");
  WriteFile(dir.path() + "/b.txt.gz", Compress("delta\nepsilon\n", /*gzip=*/true));
  WriteFile(dir.path() + "/c.z", Compress("zeta\n", /*gzip=*/false));
  WriteFile(dir.path() + "/empty.txt", "");
  PipelineContext context;
  context.data_roots = {dir.path()};
  absl::StatusOr<std::vector<Element>> lines =
      DrainText("text_line(files=['a.txt', 'empty.txt', 'b.txt.gz'])", context);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_THAT(ScalarStrings(*lines), ElementsAre("alpha", "beta", "", "gamma", "delta", "epsilon"));
  absl::StatusOr<std::vector<Element>> zlib =
      DrainText("text_line(files=['c.z'], compression='zlib')", context);
  ASSERT_TRUE(zlib.ok()) << zlib.status();
  EXPECT_THAT(ScalarStrings(*zlib), ElementsAre("zeta"));
  // Without compression='zlib' the bytes are taken as text (zlib has no reliable magic).
  absl::StatusOr<std::vector<Element>> raw = DrainText("text_line(files=['c.z'])", context);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_NE(ScalarStrings(*raw), std::vector<std::string>{"zeta"});
}

TEST(TextLineOpTest, MissingFilesAndTextFormRoundTrip) {
  TempDir dir;
  PipelineContext context;
  context.data_roots = {dir.path()};
  absl::Status missing = DrainText("text_line(files=['nope.txt'])", context).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("text_line: 'nope.txt' does not exist"));
  absl::StatusOr<proto::PipelineDef> def =
      ParsePipeline("text_line(files=['a.txt'], compression='none')");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(FormatPipeline(*def), "text_line(files=['a.txt'], compression='none')");
}

}  // namespace
}  // namespace sluice::engine
