#include "engine/ops/file_records.h"

#include <string>
#include <vector>

#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarStrings;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FileRecordsTest, ArgumentHelpersParseFormatAndValidate) {
  OpArgs args({{"files", ArgValue::List({ArgValue::String("a"), ArgValue::String("b")})},
               {"compression", ArgValue::Name("gzip")}});
  google::protobuf::RepeatedPtrField<std::string> files;
  ASSERT_TRUE(FilesFromArgs(args, &files).ok());
  EXPECT_THAT(files, ElementsAre("a", "b"));
  EXPECT_EQ(*CompressionFromArgs(args), proto::COMPRESSION_GZIP);
  std::vector<FormattedArg> formatted;
  AppendFilesAndCompression(files, proto::COMPRESSION_GZIP, &formatted);
  ASSERT_EQ(formatted.size(), 2u);
  EXPECT_EQ(formatted[0].value.ToText(), "['a', 'b']");
  EXPECT_EQ(formatted[1].value.ToText(), "'gzip'");
  files.Add("");
  EXPECT_EQ(ValidateFilesAndCompression(files, proto::COMPRESSION_NONE).message(),
            "files[2] is empty; expected a path");
}

TEST(FileRecordsTest, ReadsListedFilesInOrderOrTheElementsFile) {
  TempDir dir;
  WriteFile(dir.path() + "/a.txt", "1\n2\n");
  WriteFile(dir.path() + "/b.txt", "3\n");
  PipelineContext context;
  context.data_roots = {dir.path()};
  absl::StatusOr<std::vector<Element>> listed =
      DrainText("text_line(files=['b.txt', 'a.txt', 'b.txt'])", context);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(ScalarStrings(*listed), ElementsAre("3", "1", "2", "3"));
  absl::StatusOr<std::vector<Element>> fed =
      DrainText("from_tensor_slices(['a.txt']) | interleave(text_line())", context);
  ASSERT_TRUE(fed.ok()) << fed.status();
  EXPECT_THAT(ScalarStrings(*fed), ElementsAre("1", "2"));
  EXPECT_THAT(DrainText("from_tensor_slices([['a.txt']]) | interleave(text_line())", context)
                  .status()
                  .message(),
              HasSubstr("expected the input element's component 0 to be a file name (a string "
                        "scalar), got (string[1]{\"a.txt\"})"));
}

}  // namespace
}  // namespace sluice::engine
