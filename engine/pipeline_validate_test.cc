#include "engine/pipeline_validate.h"

#include "engine/pipeline_text.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

proto::PipelineDef MustParse(std::string_view text) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << text << ": " << def.status();
  return def.ok() ? *def : proto::PipelineDef();
}

std::string ValidationError(std::string_view text) {
  absl::Status s = ValidatePipeline(MustParse(text), FunctionRegistry::Builtins());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(s.message());
}

TEST(ValidatePipelineTest, AcceptsWellFormedPipelines) {
  for (std::string_view text :
       {"range(10)", "range(0)", "range(5, 0, -1) | map(square) | batch(2)",
        "range(10) | shuffle(1) | repeat() | take(-1) | repeat(0) | take(0)",
        "range(10) | map('with_square') | batch(3, drop_remainder=true)"}) {
    absl::Status s = ValidatePipeline(MustParse(text), FunctionRegistry::Builtins());
    EXPECT_TRUE(s.ok()) << text << ": " << s;
  }
}

TEST(ValidatePipelineTest, EmptyAndMisplacedSources) {
  absl::Status empty = ValidatePipeline(proto::PipelineDef(), FunctionRegistry::Builtins());
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.message(),
            "pipeline is empty: expected at least a source stage (fixed_length_record, "
            "from_tensor_slices, list_files, range, text_line, tfrecord)");

  EXPECT_EQ(ValidationError("map(square) | batch(2)"),
            "stage 0 (map): the first stage must be a source (fixed_length_record, "
            "from_tensor_slices, list_files, range, text_line, tfrecord), got map");
  EXPECT_EQ(ValidationError("range(3) | batch(2) | range(4)"),
            "stage 2 (range): a source may only be the first stage; range has an input here "
            "(stage 1)");

  proto::PipelineDef unset = MustParse("range(3)");
  unset.add_stages();
  absl::Status s = ValidatePipeline(unset, FunctionRegistry::Builtins());
  EXPECT_EQ(s.message(),
            "stage 1: expected an op, found none set; known ops: batch, bucket_by_sequence_length, "
            "cache, filter, fixed_length_record, from_tensor_slices, interleave, list_files, map, "
            "padded_batch, parse_example, prefetch, range, repeat, shard, shuffle, skip, take, "
            "text_line, tfrecord, unbatch");
}

TEST(ValidatePipelineTest, FieldRangesNameTheStage) {
  EXPECT_EQ(ValidationError("range(0, 10, 0)"), "stage 0 (range): step must be != 0, got 0");
  EXPECT_EQ(ValidationError("range(10) | map(square) | batch(-1)"),
            "stage 2 (batch): batch_size must be > 0, got -1");
  EXPECT_EQ(ValidationError("range(10) | batch(0)"),
            "stage 1 (batch): batch_size must be > 0, got 0");
  EXPECT_EQ(ValidationError("range(10) | take(-2)"),
            "stage 1 (take): count must be >= 0, or -1 for all, got -2");
  EXPECT_EQ(ValidationError("range(10) | repeat(-5)"),
            "stage 1 (repeat): count must be >= 0, or -1 for forever, got -5");
  EXPECT_EQ(ValidationError("range(10) | shuffle(0)"),
            "stage 1 (shuffle): buffer_size must be > 0, got 0");
  EXPECT_EQ(ValidationError("range(-9223372036854775808, 9223372036854775807)"),
            "stage 0 (range): range(-9223372036854775808, 9223372036854775807, 1) has "
            "18446744073709551615 elements; at most 2^63-1 are supported");

  proto::PipelineDef seed_without_flag = MustParse("range(3) | shuffle(2)");
  seed_without_flag.mutable_stages(1)->mutable_shuffle()->set_seed(5);
  EXPECT_EQ(ValidatePipeline(seed_without_flag, FunctionRegistry::Builtins()).message(),
            "stage 1 (shuffle): seed is 5 but has_seed is false; set has_seed to use it");
}

// Each stage's own limit allowed an interleave of 4096 slots each running a map of 1024
// threads: four million threads, and the worker died when thread creation failed.
TEST(ValidatePipelineTest, NestedParallelismIsBoundedAsAProduct) {
  EXPECT_EQ(PipelineThreads(MustParse("range(10) | map(square, parallel=8) | prefetch(2)")), 9);
  EXPECT_EQ(PipelineThreads(MustParse("range(10) | interleave(range(3) | map(square, parallel=4) "
                                      "| prefetch(1), cycle_length=3, parallel=true)")),
            3 * (4 + 1 + 1));
  EXPECT_EQ(PipelineThreads(MustParse("range(10) | map(square, parallel=1) | batch(2)")), 0);
  // As many as allowed, and one stage's worth more.
  for (std::string_view text :
       {"range(10) | interleave(range(3) | map(square, parallel=1024), cycle_length=8)",
        "range(10) | interleave(range(3), cycle_length=4096, parallel=true) | "
        "map(square, parallel=1024)"}) {
    absl::Status s = ValidatePipeline(MustParse(text), FunctionRegistry::Builtins());
    EXPECT_TRUE(s.ok()) << text << ": " << s;
  }
  EXPECT_EQ(ValidationError("range(4096) | interleave(range(1) | map(square, parallel=1024), "
                            "cycle_length=4096)"),
            "stage 1 (interleave): the pipeline would run 4194304 threads at once (an interleave "
            "runs its nested pipeline's parallel stages once per open slot: cycle_length times "
            "their parallel), more than the 8192 one pipeline may; lower the parallelism");
  EXPECT_EQ(PipelineThreads(MustParse(
                "range(9) | interleave(range(9) | interleave(range(9) | interleave(range(9) | "
                "interleave(range(1) | map(square, parallel=1024), cycle_length=4096), "
                "cycle_length=4096), cycle_length=4096), cycle_length=4096)")),
            int64_t{1} << 40)
      << "saturates rather than overflows";
  EXPECT_EQ(PipelineThreads(MustParse("range(9) | interleave(range(9) | interleave(range(1) | "
                                      "map(square, parallel=2), cycle_length=1099511627776), "
                                      "cycle_length=1099511627776)")),
            int64_t{1} << 40)
      << "two factors near the bound overflow their product";
  // A nested pipeline is counted in its interleave, not on its own.
  EXPECT_TRUE(ValidateNestedPipeline(MustParse("range(3) | map(square, parallel=1024) | "
                                               "map(square, parallel=1024) | "
                                               "map(square, parallel=1024) | "
                                               "map(square, parallel=1024) | "
                                               "map(square, parallel=1024) | "
                                               "map(square, parallel=1024) | "
                                               "map(square, parallel=1024) | "
                                               "map(square, parallel=1024) | "
                                               "map(square, parallel=1024)"),
                                     nullptr)
                  .ok());
}

TEST(ValidatePipelineTest, MapFunctionsMustExistInTheGivenRegistry) {
  EXPECT_EQ(ValidationError("range(3) | map(cube)"),
            "stage 1 (map): unknown function 'cube'; known functions: cast_float32, "
            "cast_float64, cast_int32, cast_int64, decode_raw_float32, decode_raw_uint8, "
            "identity, increment, is_even, is_odd, negate, non_empty, normalize_uint8, "
            "split_whitespace, square, string_length, string_to_float32, string_to_int64, "
            "with_square");
  proto::PipelineDef empty_fn = MustParse("range(3) | map(x)");
  empty_fn.mutable_stages(1)->mutable_map()->clear_function();
  EXPECT_EQ(ValidatePipeline(empty_fn, FunctionRegistry::Builtins()).message(),
            "stage 1 (map): expected a function name, got ''");

  FunctionRegistry custom;
  ASSERT_TRUE(custom.Register("cube", [](Element, Element*) { return absl::OkStatus(); }).ok());
  EXPECT_TRUE(ValidatePipeline(MustParse("range(3) | map(cube)"), custom).ok());
  EXPECT_EQ(ValidatePipeline(MustParse("range(3) | map(square)"), custom).message(),
            "stage 1 (map): unknown function 'square'; known functions: cube");
}

TEST(ValidatePipelineStructureTest, SkipsOnlyTheFunctionLookup) {
  EXPECT_TRUE(ValidatePipelineStructure(MustParse("range(3) | map(only_on_workers)")).ok());
  EXPECT_EQ(ValidatePipelineStructure(MustParse("range(3) | batch(0)")).message(),
            "stage 1 (batch): batch_size must be > 0, got 0");
}

TEST(ValidateSplittableTest, FileSourcesAndSlicesAreSplittable) {
  EXPECT_TRUE(ValidateSplittable(MustParse("from_tensor_slices([1, 2]) | batch(2)")).ok());
  EXPECT_TRUE(ValidateSplittable(MustParse("list_files('*.gz') | interleave(tfrecord())")).ok());
  EXPECT_TRUE(ValidateSplittable(MustParse("tfrecord(files=['a']) | map(square)")).ok());
  EXPECT_EQ(ValidateSplittable(MustParse("range(4) | cache()")).message(),
            "stage 1 (cache): cache cannot run under DYNAMIC sharding: it would replay the first "
            "repetition's splits instead of reading each repetition's own");
}

TEST(ValidatePipelineTest, ElementFedSourcesOnlyRunInsideInterleave) {
  EXPECT_EQ(ValidationError("text_line()"),
            "stage 0 (text_line): without files=[...] text_line reads the file named by its input "
            "element, so it can only be the source of an interleave's nested pipeline, e.g. "
            "list_files('/data/*') | interleave(text_line()); give files=[...] here");
  EXPECT_EQ(ValidationError("list_files('*') | interleave(tfrecord() | batch(0))"),
            "stage 1 (interleave): nested stage 1 (batch): batch_size must be > 0, got 0");
  EXPECT_EQ(ValidationError("list_files('*') | interleave(tfrecord() | map(cube))"),
            "stage 1 (interleave): nested stage 1 (map): unknown function 'cube'; known "
            "functions: cast_float32, cast_float64, cast_int32, cast_int64, decode_raw_float32, "
            "decode_raw_uint8, identity, increment, is_even, is_odd, negate, non_empty, "
            "normalize_uint8, split_whitespace, square, string_length, string_to_float32, "
            "string_to_int64, with_square");
}

TEST(ValidateSplittableTest, RangeSourcesAreSplittable) {
  EXPECT_TRUE(ValidateSplittable(MustParse("range(100) | shuffle(4) | batch(8)")).ok());
  EXPECT_EQ(ValidateSplittable(proto::PipelineDef()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateSplittable(MustParse("map(square)")).message(),
            "stage 0 (map): the first stage must be a source (fixed_length_record, "
            "from_tensor_slices, list_files, range, text_line, tfrecord), got map");
}

}  // namespace
}  // namespace sluice::engine
