#include "engine/ops/list_files_op.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/pipeline_text.h"
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
using ::testing::UnorderedElementsAreArray;

class ListFilesOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::canonical(dir_.path()).string();
    for (const char* f : {"c.gz", "a.gz", "b.gz", "d.gz", "e.gz", "notes.txt"}) {
      WriteFile(root_ + "/" + f, "x");
    }
    context_.data_roots = {root_};
  }
  std::vector<std::string> List(const std::string& args) {
    absl::StatusOr<std::vector<Element>> out = DrainText("list_files(" + args + ")", context_);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? ScalarStrings(*out) : std::vector<std::string>{};
  }
  TempDir dir_;
  std::string root_;
  PipelineContext context_;
};

TEST_F(ListFilesOpTest, SortedMatchesSpelledLikeThePattern) {
  EXPECT_THAT(List("'*.gz'"), ElementsAre("a.gz", "b.gz", "c.gz", "d.gz", "e.gz"));
  EXPECT_THAT(List("'" + root_ + "/[ab].gz'"), ElementsAre(root_ + "/a.gz", root_ + "/b.gz"));
}

TEST_F(ListFilesOpTest, SeededShufflesAreDeterministicPermutations) {
  const std::vector<std::string> sorted = {"a.gz", "b.gz", "c.gz", "d.gz", "e.gz"};
  std::vector<std::string> first = List("'*.gz', shuffle=true, seed=7");
  EXPECT_THAT(first, UnorderedElementsAreArray(sorted));
  EXPECT_EQ(List("'*.gz', shuffle=true, seed=7"), first);
  bool any_differs = false;
  for (int seed = 0; seed < 5; ++seed) {
    any_differs |= List("'*.gz', shuffle=true, seed=" + std::to_string(seed)) != sorted;
  }
  EXPECT_TRUE(any_differs);
}

TEST_F(ListFilesOpTest, FileShardsAreTakenFromTheSortedListBeforeShuffling) {
  EXPECT_THAT(List("'*.gz', shard_count=2, shard_index=1"), ElementsAre("b.gz", "d.gz"));
  EXPECT_THAT(List("'*.gz', shuffle=true, seed=3, shard_count=2, shard_index=0"),
              UnorderedElementsAreArray({"a.gz", "c.gz", "e.gz"}));
  absl::Status too_few =
      DrainText("list_files('*.gz', shard_count=6, shard_index=0)", context_).status();
  EXPECT_EQ(too_few.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(too_few.message(),
              HasSubstr("FILE sharding over 6 workers needs at least 6 files, but '*.gz' matches "
                        "only 5"));
}

TEST_F(ListFilesOpTest, NoMatchesAndPatternsOutsideTheRootsAreErrors) {
  absl::Status none = DrainText("list_files('*.tfrecord')", context_).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.message(), HasSubstr("no files match '*.tfrecord'"));
  EXPECT_EQ(DrainText("list_files('/etc/*')", context_).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(DrainText("list_files('*.gz')").status().code(), absl::StatusCode::kPermissionDenied);
}

// glob(3) reads '**' as '*': a pattern meant to reach every depth listed one level, and the
// files further down were missing without a word.
TEST_F(ListFilesOpTest, ARecursiveWildcardIsRefused) {
  std::filesystem::create_directories(root_ + "/x/y");
  WriteFile(root_ + "/x/y/deep.gz", "x");
  absl::Status refused = DrainText("list_files('**/*.gz')", context_).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("'**' does not descend into subdirectories"));
  EXPECT_THAT(List("'*/*/*.gz'"), ElementsAre("x/y/deep.gz"));
}

TEST_F(ListFilesOpTest, TextFormRoundTrips) {
  const char* text = "list_files('/data/*.gz', shuffle=true, seed=7, shard_count=3, shard_index=2)";
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(FormatPipeline(*def), text);
}

}  // namespace
}  // namespace sluice::engine
