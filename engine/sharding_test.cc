#include "engine/sharding.h"

#include <string>
#include <vector>

#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

proto::PipelineDef Parse(const char* text) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  return def.ok() ? *def : proto::PipelineDef();
}

TEST(RewriteShardHintsTest, ReplacesHintsEverywhereAndKeepsExplicitNumbers) {
  const proto::PipelineDef def = Parse(
      "range(10) | shard(SHARD_HINT, SHARD_HINT) | shard(2, 0) | "
      "interleave(range(4) | shard(SHARD_HINT, 0))");
  absl::StatusOr<proto::PipelineDef> mine = RewriteShardHints(def, 3, 1);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(FormatPipeline(*mine),
            "range(0, 10, 1) | shard(3, 1) | shard(2, 0) | interleave(range(0, 4, 1) | shard(3, "
            "0))");
  EXPECT_EQ(FormatPipeline(def).find("SHARD_HINT") != std::string::npos, true);  // Untouched.

  // Three workers together see every element exactly once.
  std::vector<int64_t> all;
  for (int w = 0; w < 3; ++w) {
    absl::StatusOr<proto::PipelineDef> share =
        RewriteShardHints(Parse("range(10) | shard(SHARD_HINT, SHARD_HINT)"), 3, w);
    ASSERT_TRUE(share.ok());
    absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*share, {});
    ASSERT_TRUE(it.ok()) << it.status();
    for (int64_t v : ScalarInt64s(*Drain(**it))) all.push_back(v);
  }
  std::sort(all.begin(), all.end());
  EXPECT_THAT(all, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
}

TEST(RewriteShardHintsTest, RejectsBadWorkerNumbersAndImpossibleShards) {
  EXPECT_EQ(RewriteShardHints(Parse("range(3)"), 2, 2).status().message(),
            "expected num_workers >= 1 and 0 <= worker_index < num_workers, got 2 and 2");
  EXPECT_EQ(RewriteShardHints(Parse("range(3) | shard(SHARD_HINT, 3)"), 2, 0).status().message(),
            "stage 1 (shard): after replacing SHARD_HINT with 2 workers / worker 0, index 3 is "
            "not below num_shards 2");
}

TEST(ApplyFileShardingTest, ReaderFileListsKeepEveryNthFile) {
  const proto::PipelineDef def = Parse("tfrecord(files=['a', 'b', 'c', 'd', 'e']) | batch(2)");
  absl::StatusOr<proto::PipelineDef> w1 = ApplyFileSharding(def, 2, 1);
  ASSERT_TRUE(w1.ok()) << w1.status();
  EXPECT_EQ(FormatPipeline(*w1), "tfrecord(files=['b', 'd']) | batch(2)");
  absl::StatusOr<proto::PipelineDef> w0 = ApplyFileSharding(def, 2, 0);
  EXPECT_EQ(FormatPipeline(*w0), "tfrecord(files=['a', 'c', 'e']) | batch(2)");
  absl::StatusOr<proto::PipelineDef> text =
      ApplyFileSharding(Parse("text_line(files=['x', 'y'])"), 2, 1);
  EXPECT_EQ(FormatPipeline(*text), "text_line(files=['y'])");
}

TEST(ApplyFileShardingTest, ListFilesIsShardedWhenItGlobs) {
  absl::StatusOr<proto::PipelineDef> mine =
      ApplyFileSharding(Parse("list_files('*.gz') | interleave(tfrecord())"), 4, 3);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(FormatPipeline(*mine),
            "list_files('*.gz', shard_count=4, shard_index=3) | interleave(tfrecord())");
  EXPECT_EQ(ApplyFileSharding(*mine, 4, 3).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ApplyFileShardingTest, FewerFilesThanWorkersAndNonFileSourcesAreFailedPrecondition) {
  absl::Status few = ApplyFileSharding(Parse("tfrecord(files=['a', 'b'])"), 3, 0).status();
  EXPECT_EQ(few.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(few.message(),
            "stage 0 (tfrecord): FILE sharding over 3 workers needs at least 3 files, got 2; use "
            "DATA sharding or fewer workers");
  absl::Status range = ApplyFileSharding(Parse("range(10)"), 2, 0).status();
  EXPECT_EQ(range.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(range.message(), HasSubstr("stage 0 (range): FILE sharding needs a file source"));
}

TEST(ApplyDataShardingTest, ShardsElementsBeforeTheFirstBatchSoSharesAreDisjoint) {
  const proto::PipelineDef def = Parse("range(23) | map(identity) | batch(4) | prefetch(2)");
  absl::StatusOr<proto::PipelineDef> w2 = ApplyDataSharding(def, 3, 2);
  ASSERT_TRUE(w2.ok()) << w2.status();
  EXPECT_EQ(FormatPipeline(*w2),
            "range(0, 23, 1) | map(identity) | shard(3, 2) | batch(4) | prefetch(2)");
  std::vector<int64_t> all;
  for (int w = 0; w < 3; ++w) {
    absl::StatusOr<proto::PipelineDef> share = ApplyDataSharding(Parse("range(23)"), 3, w);
    ASSERT_TRUE(share.ok()) << share.status();
    absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*share, {});
    ASSERT_TRUE(it.ok()) << it.status();
    for (int64_t v : ScalarInt64s(*Drain(**it))) all.push_back(v);
  }
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 23u);
  for (int64_t v = 0; v < 23; ++v) EXPECT_EQ(all[v], v);
  EXPECT_EQ(ApplyDataSharding(def, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::engine
