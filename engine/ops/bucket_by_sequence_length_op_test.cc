#include "engine/ops/bucket_by_sequence_length_op.h"

#include <vector>

#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Sequences of lengths 1, 4, 2, 5, 3, 1, 6 (tokens of each line).
constexpr char kLines[] =
    "from_tensor_slices(['a', 'a b c d', 'a b', 'a b c d e', 'a b c', 'z', 'a b c d e f']) | "
    "map(split_whitespace)";

std::vector<std::vector<int64_t>> Shapes(const std::vector<Element>& batches) {
  std::vector<std::vector<int64_t>> out;
  for (const Element& b : batches) out.push_back(b[0].shape());
  return out;
}

TEST(BucketBySequenceLengthOpTest, BoundariesRouteLengthsAndFullBucketsEmitFirst) {
  // Buckets: [0, 3) size 2, [3, 5) size 2, [5, inf) size 3.
  absl::StatusOr<std::vector<Element>> batches = DrainText(
      std::string(kLines) +
      " | bucket_by_sequence_length(bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 3])");
  ASSERT_TRUE(batches.ok()) << batches.status();
  // 'a'(1) and 'a b'(2) fill bucket 0 first; 'a b c d'(4) and 'a b c'(3) fill bucket 1;
  // then the leftovers: bucket 0 holds 'z', bucket 2 holds lengths 5 and 6.
  EXPECT_THAT(Shapes(*batches), ElementsAre(ElementsAre(2, 2), ElementsAre(2, 4), ElementsAre(1, 1),
                                            ElementsAre(2, 6)));
  EXPECT_THAT((*batches)[0][0].string_values(), ElementsAre("a", "", "a", "b"));
  EXPECT_THAT((*batches)[2][0].string_values(), ElementsAre("z"));

  absl::StatusOr<std::vector<Element>> dropped = DrainText(
      std::string(kLines) +
      " | bucket_by_sequence_length(bucket_boundaries=[3, 5], bucket_batch_sizes=[2, 2, 3], "
      "drop_remainder=true)");
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->size(), 2u);
}

TEST(BucketBySequenceLengthOpTest, PadToBucketBoundaryAndPaddingValues) {
  absl::StatusOr<std::vector<Element>> batches = DrainText(
      "from_tensor_slices(['a', 'b c']) | map(split_whitespace) | "
      "bucket_by_sequence_length(bucket_boundaries=[4, 8], bucket_batch_sizes=[2, 2, 2], "
      "padding_values=['_'], pad_to_bucket_boundary=true)");
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 1u);
  EXPECT_THAT((*batches)[0][0].shape(), ElementsAre(2, 3));
  EXPECT_THAT((*batches)[0][0].string_values(), ElementsAre("a", "_", "_", "b", "c", "_"));
  EXPECT_THAT(DrainText("from_tensor_slices(['a b c d e f g h i']) | map(split_whitespace) | "
                        "bucket_by_sequence_length(bucket_boundaries=[4, 8], "
                        "bucket_batch_sizes=[2, 2, 1], pad_to_bucket_boundary=true)")
                  .status()
                  .message(),
              HasSubstr("every length must be below the last boundary 8"));
}

TEST(BucketBySequenceLengthOpTest, ValidationAndTextForm) {
  EXPECT_THAT(DrainText("range(3) | bucket_by_sequence_length(bucket_boundaries=[3], "
                        "bucket_batch_sizes=[2])")
                  .status()
                  .message(),
              HasSubstr("expected one more bucket_batch_sizes entry than bucket_boundaries (2), "
                        "got 1"));
  EXPECT_THAT(DrainText("range(3) | bucket_by_sequence_length(bucket_boundaries=[5, 3], "
                        "bucket_batch_sizes=[1, 1, 1])")
                  .status()
                  .message(),
              HasSubstr("strictly increasing; entry 1 is 3"));
  EXPECT_THAT(DrainText("range(3) | bucket_by_sequence_length(bucket_boundaries=[3], "
                        "bucket_batch_sizes=[1, 1])")
                  .status()
                  .message(),
              HasSubstr("expected component 0 to have rank >= 1 (its dim 0 is the length), got "
                        "int64[]{0}"));
  // It used to pass validation and abort the worker on the first batch (the error message
  // read bucket_boundaries(-1)).
  EXPECT_THAT(DrainText("from_tensor_slices(['a b']) | map(split_whitespace) | "
                        "bucket_by_sequence_length(bucket_boundaries=[], bucket_batch_sizes=[1], "
                        "pad_to_bucket_boundary=true)")
                  .status()
                  .message(),
              HasSubstr("pad_to_bucket_boundary needs bucket_boundaries"));
  const char* text =
      "range(0, 3, 1) | bucket_by_sequence_length(bucket_boundaries=[3], "
      "bucket_batch_sizes=[1, 2], length_component=1, padding_values=[0, -1], "
      "pad_to_bucket_boundary=true, drop_remainder=true)";
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(FormatPipeline(*def), text);
}

}  // namespace
}  // namespace sluice::engine
