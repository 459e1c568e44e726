#include "engine/ops/cache_op.h"

#include <filesystem>
#include <vector>

#include "engine/pipeline_text.h"
#include "engine/pipeline_validate.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::sluice::engine::testing::ScalarStrings;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CacheOpTest, LaterPassesReplayWithoutReadingTheInputAgain) {
  TempDir dir;
  const std::string file = dir.path() + "/lines.txt";
  WriteFile(file, "a\nb\n");
  PipelineContext context;
  context.data_roots = {dir.path()};
  absl::StatusOr<proto::PipelineDef> def =
      ParsePipeline("text_line(files=['lines.txt']) | cache() | repeat(3)");
  ASSERT_TRUE(def.ok()) << def.status();
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, context);
  ASSERT_TRUE(it.ok()) << it.status();
  absl::StatusOr<std::vector<Element>> first = testing::Drain(**it, 2);
  ASSERT_TRUE(first.ok());
  // The first pass is done; remove the file. Later passes must come from the cache.
  std::filesystem::remove(file);
  absl::StatusOr<std::vector<Element>> rest = testing::Drain(**it);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_THAT(ScalarStrings(*first), ElementsAre("a", "b"));
  EXPECT_THAT(ScalarStrings(*rest), ElementsAre("a", "b", "a", "b"));
}

TEST(CacheOpTest, AnIncompletePassDoesNotFillTheCache) {
  TempDir dir;
  const std::string file = dir.path() + "/lines.txt";
  WriteFile(file, "a\nb\nc\n");
  PipelineContext context;
  context.data_roots = {dir.path()};
  absl::StatusOr<proto::PipelineDef> def =
      ParsePipeline("text_line(files=['lines.txt']) | cache() | take(2) | repeat(2)");
  ASSERT_TRUE(def.ok()) << def.status();
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, context);
  ASSERT_TRUE(it.ok()) << it.status();
  absl::StatusOr<std::vector<Element>> first = testing::Drain(**it, 2);
  ASSERT_TRUE(first.ok());
  EXPECT_THAT(ScalarStrings(*first), ElementsAre("a", "b"));
  // take(2) ended the pass before the input did, so the second pass reads the file again.
  std::filesystem::remove(file);
  EXPECT_EQ(testing::Drain(**it).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ScalarInt64s(*DrainText("range(3) | cache() | repeat(2)")),
              ElementsAre(0, 1, 2, 0, 1, 2));
}

// repeat() rewinds a completed cache's replay instead of building it again: every pass
// must still be the cached one, in the cached order, however many passes there are.
TEST(CacheOpTest, EveryRepeatedPassReplaysTheCachedOrder) {
  absl::StatusOr<std::vector<Element>> out =
      DrainText("range(6) | shuffle(6) | cache() | repeat(4)");
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<int64_t> values = ScalarInt64s(*out);
  ASSERT_EQ(values.size(), 24u);
  const std::vector<int64_t> first(values.begin(), values.begin() + 6);
  EXPECT_THAT(first, ::testing::UnorderedElementsAre(0, 1, 2, 3, 4, 5));
  for (int pass = 1; pass < 4; ++pass) {
    EXPECT_EQ(std::vector<int64_t>(values.begin() + 6 * pass, values.begin() + 6 * (pass + 1)),
              first)
        << "pass " << pass;
  }
  EXPECT_THAT(ScalarInt64s(*DrainText("range(5) | take(2) | cache() | repeat() | take(7)")),
              ElementsAre(0, 1, 0, 1, 0, 1, 0));
}

TEST(CacheOpTest, DynamicShardingRefusesCacheNamingIt) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(10) | cache() | repeat(2)");
  ASSERT_TRUE(def.ok());
  EXPECT_THAT(ValidateSplittable(*def).message(),
              HasSubstr("stage 1 (cache): cache cannot run under DYNAMIC sharding"));
}

}  // namespace
}  // namespace sluice::engine
