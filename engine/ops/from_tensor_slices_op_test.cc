#include "engine/ops/from_tensor_slices_op.h"

#include <string>
#include <vector>

#include "engine/pipeline_text.h"
#include "engine/tensor_literal.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::sluice::engine::testing::ScalarStrings;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FromTensorSlicesTest, SlicesScalarsVectorsAndTuples) {
  absl::StatusOr<std::vector<Element>> ints = DrainText("from_tensor_slices([1, 2, 3])");
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_THAT(ScalarInt64s(*ints), ElementsAre(1, 2, 3));

  absl::StatusOr<std::vector<Element>> rows = DrainText("from_tensor_slices([[1, 2], [3, 4]])");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1][0], Tensor::FromVector<int64_t>({2}, std::vector<int64_t>{3, 4}));

  absl::StatusOr<std::vector<Element>> pairs =
      DrainText("from_tensor_slices([0.5, 1.5], ['a', 'b'])");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 2u);
  EXPECT_EQ((*pairs)[0][0], Tensor::Scalar<float>(0.5f));
  EXPECT_EQ((*pairs)[1][1].string_value(0), "b");
  EXPECT_THAT(ScalarStrings(*DrainText("from_tensor_slices(['x', 'y'])")), ElementsAre("x", "y"));
}

TEST(FromTensorSlicesTest, DtypesConvertAndAreChecked) {
  absl::StatusOr<std::vector<Element>> f64 =
      DrainText("from_tensor_slices([1, 2], dtypes=[float64])");
  ASSERT_TRUE(f64.ok()) << f64.status();
  EXPECT_EQ((*f64)[1][0], Tensor::Scalar<double>(2.0));
  absl::StatusOr<std::vector<Element>> u8 = DrainText("from_tensor_slices([255], dtypes=uint8)");
  ASSERT_TRUE(u8.ok()) << u8.status();
  EXPECT_EQ((*u8)[0][0], Tensor::Scalar<uint8_t>(255));

  EXPECT_THAT(DrainText("from_tensor_slices([256], dtypes=[uint8])").status().message(),
              HasSubstr("values: value 256 at index 0 does not fit in uint8"));
  EXPECT_THAT(DrainText("from_tensor_slices([1.5], dtypes=[int32])").status().message(),
              HasSubstr("values holds floats but its dtype is int32"));
  EXPECT_THAT(DrainText("from_tensor_slices([1, 'a'])").status().message(),
              HasSubstr("values mixes strings and numbers"));
  EXPECT_THAT(DrainText("from_tensor_slices([[1, 2], [3]])").status().message(),
              HasSubstr("values must be rectangular"));
  EXPECT_THAT(DrainText("from_tensor_slices(5)").status().message(),
              HasSubstr("component 0 is a scalar; slicing needs rank >= 1"));
  EXPECT_THAT(DrainText("from_tensor_slices([1, 2], [3])").status().message(),
              HasSubstr("all components need the same dim 0; component 1 has 1 but component 0 "
                        "has 2"));
  EXPECT_THAT(DrainText("from_tensor_slices([1], dtypes=[int32, int64])").status().message(),
              HasSubstr("dtypes lists 2 dtypes for 1 components"));
}

TEST(FromTensorSlicesTest, FormatRoundTripsThroughTheTextForm) {
  for (const char* text :
       {"from_tensor_slices([1, 2, 3])", "from_tensor_slices([[0.25, -1.0], [3.0, 1e+30]])",
        "from_tensor_slices([1, 2], ['a', 'it\\'s'], dtypes=[int32, string])",
        "from_tensor_slices([], dtypes=[int64])", "from_tensor_slices([[], []])"}) {
    absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
    ASSERT_TRUE(def.ok()) << def.status();
    EXPECT_EQ(FormatPipeline(*def), text);
  }
}

TEST(FromTensorSlicesTest, BuilderLiteralsFromTensors) {
  proto::PipelineDef def;
  proto::FromTensorSlicesOp* op = def.add_stages()->mutable_from_tensor_slices();
  *op->add_components() =
      LiteralFromTensor(Tensor::FromVector<int32_t>({3}, std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(FormatPipeline(def), "from_tensor_slices([7, 8, 9], dtypes=[int32])");
  EXPECT_EQ(*FromTensorSlicesLength(*op), 3);
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(def, {});
  ASSERT_TRUE(it.ok()) << it.status();
  absl::StatusOr<std::vector<Element>> all = testing::Drain(**it);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[2][0], Tensor::Scalar<int32_t>(9));
}

}  // namespace
}  // namespace sluice::engine
