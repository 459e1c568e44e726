#include "engine/ops/shard_op.h"

#include <vector>

#include "engine/cardinality.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShardOpTest, KeepsEveryNthElementFromIndex) {
  EXPECT_THAT(ScalarInt64s(*DrainText("range(10) | shard(3, 1)")), ElementsAre(1, 4, 7));
  EXPECT_THAT(ScalarInt64s(*DrainText("range(10) | shard(3, 0)")), ElementsAre(0, 3, 6, 9));
  EXPECT_THAT(ScalarInt64s(*DrainText("range(10) | shard(1, 0)")).size(), 10u);
  EXPECT_EQ(*Cardinality(*ParsePipeline("range(10) | shard(3, 0)")), 4);
  EXPECT_EQ(*Cardinality(*ParsePipeline("range(10) | shard(3, 2)")), 3);
}

TEST(ShardOpTest, ShardHintsParseFormatAndRefuseToRun) {
  absl::StatusOr<proto::PipelineDef> def =
      ParsePipeline("range(10) | shard(SHARD_HINT, SHARD_HINT)");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->stages(1).shard().num_shards(), kShardHint);
  EXPECT_EQ(FormatPipeline(*def), "range(0, 10, 1) | shard(SHARD_HINT, SHARD_HINT)");
  absl::Status run = DrainText("range(10) | shard(SHARD_HINT, SHARD_HINT)").status();
  EXPECT_EQ(run.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.message(), HasSubstr("RewriteShardHints"));
  EXPECT_EQ(*Cardinality(*def), kUnknown);
  EXPECT_THAT(DrainText("range(10) | shard(3, 3)").status().message(),
              HasSubstr("expected num_shards > 0 and 0 <= index < num_shards (or SHARD_HINT), "
                        "got 3 and 3"));
  EXPECT_THAT(DrainText("range(10) | shard(OTHER, 0)").status().message(),
              HasSubstr("num_shards expects an integer, got name OTHER"));
}

}  // namespace
}  // namespace sluice::engine
