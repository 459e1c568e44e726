#include "engine/ops/padded_batch_op.h"

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

// Lines of different lengths, tokenised: string[2], string[1], string[3], string[0].
constexpr char kWords[] = "from_tensor_slices(['a b', 'c', 'd e f', '']) | map(split_whitespace)";

TEST(PaddedBatchOpTest, PadsToTheLongestInEachBatchWithDefaultValues) {
  absl::StatusOr<std::vector<Element>> batches =
      DrainText(std::string(kWords) + " | padded_batch(2)");
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 2u);
  EXPECT_THAT((*batches)[0][0].shape(), ElementsAre(2, 2));
  EXPECT_THAT((*batches)[0][0].string_values(), ElementsAre("a", "b", "c", ""));
  EXPECT_THAT((*batches)[1][0].shape(), ElementsAre(2, 3));
  EXPECT_THAT((*batches)[1][0].string_values(), ElementsAre("d", "e", "f", "", "", ""));
}

TEST(PaddedBatchOpTest, PaddedShapesAndPaddingValues) {
  absl::StatusOr<std::vector<Element>> numbers = DrainText(
      "range(1, 6) | batch(2) | padded_batch(2, padded_shapes=[[4]], padding_values=[-1])");
  ASSERT_TRUE(numbers.ok()) << numbers.status();
  ASSERT_EQ(numbers->size(), 2u);
  // Elements [1, 2], [3, 4], [5]: each padded to [4] with -1.
  EXPECT_THAT((*numbers)[0][0].shape(), ElementsAre(2, 4));
  EXPECT_THAT((*numbers)[0][0].values<int64_t>(), ElementsAre(1, 2, -1, -1, 3, 4, -1, -1));
  EXPECT_THAT((*numbers)[1][0].values<int64_t>(), ElementsAre(5, -1, -1, -1));
  // -1 pads to the batch's longest: [2] here, and the remainder [5] to [1].
  absl::StatusOr<std::vector<Element>> longest =
      DrainText("range(1, 6) | batch(2) | padded_batch(2, padded_shapes=[[-1]])");
  ASSERT_TRUE(longest.ok()) << longest.status();
  EXPECT_THAT((*longest)[0][0].shape(), ElementsAre(2, 2));
  EXPECT_THAT((*longest)[1][0].shape(), ElementsAre(1, 1));

  absl::StatusOr<std::vector<Element>> strings = DrainText(
      std::string(kWords) + " | padded_batch(4, padded_shapes=[[4]], padding_values=['<p>'])");
  ASSERT_TRUE(strings.ok()) << strings.status();
  EXPECT_THAT((*strings)[0][0].shape(), ElementsAre(4, 4));
  EXPECT_THAT((*strings)[0][0].string_values(),
              ElementsAre("a", "b", "<p>", "<p>", "c", "<p>", "<p>", "<p>", "d", "e", "f", "<p>",
                          "<p>", "<p>", "<p>", "<p>"));
  absl::StatusOr<std::vector<Element>> floats = DrainText(
      "from_tensor_slices([[1.5], [2.5]]) | padded_batch(2, padded_shapes=[[3]], "
      "padding_values=[0.25], drop_remainder=true)");
  ASSERT_TRUE(floats.ok()) << floats.status();
  EXPECT_THAT((*floats)[0][0].values<float>(), ElementsAre(1.5f, 0.25f, 0.25f, 2.5f, 0.25f, 0.25f));
}

TEST(PaddedBatchOpTest, ErrorsNameTheComponent) {
  EXPECT_THAT(
      DrainText(std::string(kWords) + " | padded_batch(4, padded_shapes=[[2]])").status().message(),
      HasSubstr("padded_batch: padded_shapes[0] dim 0 is 2 but an element of the batch "
                "has 3"));
  EXPECT_THAT(
      DrainText(std::string(kWords) + " | padded_batch(4, padding_values=[0])").status().message(),
      HasSubstr("component 0: padding value number does not match the component's dtype "
                "string"));
  EXPECT_THAT(DrainText("range(3) | padded_batch(0)").status().message(),
              HasSubstr("batch_size must be > 0, got 0"));
}

// A pipeline any client may send must not take a shared worker down: a padded shape past
// any real batch used to throw std::bad_alloc (terminating the process), and a padding
// value outside the component's dtype was silently wrapped (-1 padded uint8 with 255).
TEST(PaddedBatchOpTest, HugePaddedShapesAndPaddingsOutsideTheDtypeFail) {
  absl::Status huge =
      DrainText("range(3) | batch(1) | padded_batch(2, padded_shapes=[[1000000000000]])").status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kResourceExhausted) << huge;
  EXPECT_THAT(huge.message(), HasSubstr("above the limit"));
  absl::Status strings =
      DrainText(std::string(kWords) + " | padded_batch(4, padded_shapes=[[1000000000000]])")
          .status();
  EXPECT_EQ(strings.code(), absl::StatusCode::kResourceExhausted) << strings;
  EXPECT_THAT(DrainText("range(3) | batch(1) | padded_batch(2, padded_shapes=[[3]], "
                        "padding_values=[0.5])")
                  .status()
                  .message(),
              HasSubstr("padding value 0.5 is not a value of the component's dtype int64"));
  EXPECT_THAT(DrainText("range(3) | batch(1) | padded_batch(2, padded_shapes=[[3]], "
                        "padding_values=[1e30])")
                  .status()
                  .message(),
              HasSubstr("is not a value of the component's dtype int64"));
  // Whether a batch needs padding does not decide whether a wrong padding value fails: rows
  // of equal length used to pass, and the read failed later, at its first ragged batch.
  EXPECT_THAT(DrainText("from_tensor_slices(['a b', 'c d']) | map(split_whitespace) | "
                        "padded_batch(2, padding_values=[0])")
                  .status()
                  .message(),
              HasSubstr("component 0: padding value number does not match the component's dtype "
                        "string"));
  EXPECT_THAT(
      DrainText("range(4) | batch(2) | padded_batch(2, padding_values=[0.5])").status().message(),
      HasSubstr("padding value 0.5 is not a value of the component's dtype int64"));
  absl::StatusOr<std::vector<Element>> whole = DrainText(
      "range(3) | batch(1) | padded_batch(2, padded_shapes=[[2]], padding_values=[-2.0])");
  ASSERT_TRUE(whole.ok()) << whole.status();  // a whole number in a float's form is fine
  EXPECT_THAT((*whole)[0][0].values<int64_t>(), ElementsAre(0, -2, 1, -2));
}

TEST(PaddedBatchOpTest, TextFormRoundTrips) {
  const char* text =
      "range(0, 3, 1) | padded_batch(4, padded_shapes=[[10, -1], []], padding_values=['x', 1.5], "
      "drop_remainder=true)";
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(FormatPipeline(*def), text);
}

}  // namespace
}  // namespace sluice::engine
