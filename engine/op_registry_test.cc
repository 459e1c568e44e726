#include "engine/op_registry.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;

OpDef MinimalOp(std::string name, proto::Stage::OpCase op_case) {
  OpDef def;
  def.name = std::move(name);
  def.op_case = op_case;
  def.from_args = [](const OpArgs&, proto::Stage*) { return absl::OkStatus(); };
  def.to_args = [](const proto::Stage&) { return std::vector<FormattedArg>{}; };
  def.validate = [](const proto::Stage&, const FunctionRegistry*) { return absl::OkStatus(); };
  def.cardinality = [](const proto::Stage&, int64_t n) -> absl::StatusOr<int64_t> { return n; };
  def.make_iterator = [](const OpBuildArgs&) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    return absl::UnimplementedError("test op");
  };
  return def;
}

TEST(OpRegistryTest, GlobalHasTheBuiltinOps) {
  const OpRegistry& r = OpRegistry::Global();
  EXPECT_THAT(r.Names(),
              ElementsAre("batch", "bucket_by_sequence_length", "cache", "filter",
                          "fixed_length_record", "from_tensor_slices", "interleave", "list_files",
                          "map", "padded_batch", "parse_example", "prefetch", "range", "repeat",
                          "shard", "shuffle", "skip", "take", "text_line", "tfrecord", "unbatch"));
  const std::vector<std::string> sources = {
      "fixed_length_record", "from_tensor_slices", "list_files", "range", "text_line", "tfrecord"};
  EXPECT_EQ(r.SourceNames(/*splittable_only=*/false), sources);
  EXPECT_EQ(r.SourceNames(/*splittable_only=*/true), sources);
  EXPECT_FALSE(r.Find("cache")->dynamic_unsupported.empty());
  EXPECT_TRUE(r.Find("tfrecord")->reads_source_element(proto::Stage()));
  ASSERT_NE(r.Find("batch"), nullptr);
  EXPECT_EQ(r.Find("batch")->op_case, proto::Stage::kBatch);
  EXPECT_EQ(r.Find(proto::Stage::kShuffle)->name, "shuffle");
  EXPECT_EQ(r.Find("nope"), nullptr);
  EXPECT_TRUE(r.Find("range")->is_source);
  EXPECT_FALSE(r.Find("map")->is_source);
}

TEST(OpRegistryTest, ForStageRejectsUnsetStages) {
  proto::Stage stage;
  absl::StatusOr<const OpDef*> op = OpRegistry::Global().ForStage(stage);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(op.status().message(),
            "expected an op, found none set; known ops: batch, bucket_by_sequence_length, cache, "
            "filter, fixed_length_record, from_tensor_slices, interleave, list_files, map, "
            "padded_batch, parse_example, prefetch, range, repeat, shard, shuffle, skip, take, "
            "text_line, tfrecord, unbatch");
  stage.mutable_take()->set_count(1);
  op = OpRegistry::Global().ForStage(stage);
  ASSERT_TRUE(op.ok());
  EXPECT_EQ((*op)->name, "take");
}

TEST(OpRegistryTest, RegisterChecksNamesCasesAndHooks) {
  OpRegistry r;
  ASSERT_TRUE(r.Register(MinimalOp("first", proto::Stage::kRange)).ok());

  absl::Status dup_name = r.Register(MinimalOp("first", proto::Stage::kMap));
  EXPECT_EQ(dup_name.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(dup_name.message(), "op 'first' is already registered");

  absl::Status dup_case = r.Register(MinimalOp("second", proto::Stage::kRange));
  EXPECT_EQ(dup_case.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(dup_case.message(), "op 'second' uses Stage field 1, already taken by op 'first'");

  absl::Status bad_name = r.Register(MinimalOp("9lives", proto::Stage::kMap));
  EXPECT_EQ(bad_name.code(), absl::StatusCode::kInvalidArgument);

  OpDef no_hooks = MinimalOp("third", proto::Stage::kMap);
  no_hooks.make_iterator = nullptr;
  EXPECT_EQ(r.Register(std::move(no_hooks)).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(r.Register(MinimalOp("fourth", proto::Stage::OP_NOT_SET)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.Names(), ElementsAre("first"));
}

TEST(OpRegistryTest, StageLabelAndPrefixStatus) {
  proto::Stage stage;
  EXPECT_EQ(StageLabel(3, stage), "stage 3");
  stage.mutable_batch();
  EXPECT_EQ(StageLabel(3, stage), "stage 3 (batch)");
  absl::Status s = PrefixStatus("outer", absl::NotFoundError("inner"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "outer: inner");
  EXPECT_TRUE(PrefixStatus("outer", absl::OkStatus()).ok());
}

}  // namespace
}  // namespace sluice::engine
