#include "engine/batch_builder.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BatchBuilderTest, GrowsPastTheExpectedRowsWithoutLosingAny) {
  BatchBuilder builder(/*expected_rows=*/2);
  Element row;
  for (int64_t i = 0; i < 37; ++i) {
    row.clear();  // The row is reused, as BatchIterator does.
    row.push_back(Tensor::Scalar<int64_t>(i * 3));
    row.push_back(Tensor::FromVector<float>({2}, std::vector<float>{float(i), -float(i)}));
    ASSERT_TRUE(builder.Append(row).ok());
  }
  EXPECT_EQ(builder.rows(), 37);
  absl::StatusOr<Element> batch = builder.Finish();
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), 2u);
  EXPECT_THAT((*batch)[0].shape(), ElementsAre(37));
  EXPECT_THAT((*batch)[1].shape(), ElementsAre(37, 2));
  for (int64_t i = 0; i < 37; ++i) {
    EXPECT_EQ((*batch)[0].values<int64_t>()[i], i * 3) << "row " << i;
    EXPECT_EQ((*batch)[1].values<float>()[2 * i + 1], -float(i)) << "row " << i;
  }
  EXPECT_EQ((*batch)[0].byte_size(), 37u * 8) << "the buffer is exactly the rows' size";
}

TEST(BatchBuilderTest, LargeRowsGrowTheBufferOnlyUpToTheExpectedRows) {
  // 3 MiB rows: the first buffer holds 5 of the 8 expected (16 MiB), the second exactly 8.
  constexpr int64_t kValues = (3 << 20) / 4;
  BatchBuilder builder(/*expected_rows=*/8);
  for (int32_t r = 0; r < 8; ++r) {
    std::vector<int32_t> values(kValues, r);
    values.back() = -r;
    ASSERT_TRUE(builder.Append({Tensor::FromVector<int32_t>({kValues}, values)}).ok());
  }
  absl::StatusOr<Element> batch = builder.Finish();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT((*batch)[0].shape(), ElementsAre(8, kValues));
  EXPECT_EQ((*batch)[0].byte_size(), size_t{8} * kValues * 4);
  for (int32_t r = 0; r < 8; ++r) {
    EXPECT_EQ((*batch)[0].values<int32_t>()[r * kValues], r) << "row " << r;
    EXPECT_EQ((*batch)[0].values<int32_t>()[(r + 1) * kValues - 1], -r) << "row " << r;
  }
}

TEST(BatchBuilderTest, ARemainderShorterThanExpectedHasItsOwnSize) {
  BatchBuilder builder(/*expected_rows=*/1000);
  for (int64_t i = 0; i < 3; ++i)
    ASSERT_TRUE(builder.Append({Tensor::Scalar<int32_t>(7 - i)}).ok());
  absl::StatusOr<Element> batch = builder.Finish();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT((*batch)[0].shape(), ElementsAre(3));
  EXPECT_THAT((*batch)[0].values<int32_t>(), ElementsAre(7, 6, 5));
  EXPECT_EQ((*batch)[0].byte_size(), 12u);
}

TEST(BatchBuilderTest, StacksStringsAndEmptyComponents) {
  BatchBuilder builder(4);
  ASSERT_TRUE(builder
                  .Append({Tensor::FromStrings({2}, std::vector<std::string>{"ab", ""}),
                           *Tensor::Create(DType::kInt64, {0})})
                  .ok());
  ASSERT_TRUE(
      builder
          .Append({Tensor::FromStrings({2}, std::vector<std::string>{std::string(40, 'x'), "z"}),
                   *Tensor::Create(DType::kInt64, {0})})
          .ok());
  absl::StatusOr<Element> batch = builder.Finish();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT((*batch)[0].shape(), ElementsAre(2, 2));
  EXPECT_THAT((*batch)[0].string_values(), ElementsAre("ab", "", std::string(40, 'x'), "z"));
  EXPECT_THAT((*batch)[1].shape(), ElementsAre(2, 0));
  EXPECT_EQ((*batch)[1].byte_size(), 0u);
}

TEST(BatchBuilderTest, AMismatchedRowIsRefusedAndTheBatchGoesOn) {
  BatchBuilder builder(8);
  ASSERT_TRUE(builder.Append({Tensor::Scalar<int64_t>(1)}).ok());
  absl::Status bad = builder.Append({Tensor::Scalar<double>(2)});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("component 0 of element 1 is float64[]"));
  ASSERT_TRUE(builder.Append({Tensor::Scalar<int64_t>(3)}).ok());
  absl::StatusOr<Element> batch = builder.Finish();
  ASSERT_TRUE(batch.ok());
  EXPECT_THAT((*batch)[0].values<int64_t>(), ElementsAre(1, 3));
}

TEST(BatchBuilderTest, FinishEmptiesTheBuilderForTheNextBatch) {
  BatchBuilder builder(2);
  EXPECT_EQ(builder.Finish().status().message(), "expected at least one element to stack");
  ASSERT_TRUE(builder.Append({Tensor::Scalar<int64_t>(1)}).ok());
  ASSERT_TRUE(builder.Finish().ok());
  EXPECT_EQ(builder.rows(), 0);
  // The next batch may have another structure altogether.
  ASSERT_TRUE(builder.Append({Tensor::StringScalar("s"), Tensor::Scalar<uint8_t>(9)}).ok());
  absl::StatusOr<Element> batch = builder.Finish();
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_THAT((*batch)[0].string_values(), ElementsAre("s"));
  EXPECT_THAT((*batch)[1].values<uint8_t>(), ElementsAre(9));
}

TEST(BatchBuilderTest, TheBatchCarriesItsRowsProvenanceInOrder) {
  BatchBuilder builder(3);
  Element a = {Tensor::Scalar<int64_t>(0)};
  SetElementProvenance(a, Provenance::Of(/*split_key=*/4, /*ordinal=*/0));
  Element untracked = {Tensor::Scalar<int64_t>(1)};
  Element b = {Tensor::Scalar<int64_t>(2)};
  SetElementProvenance(b, Provenance::Of(4, 1));
  for (const Element* row : {&a, &untracked, &b}) ASSERT_TRUE(builder.Append(*row).ok());
  absl::StatusOr<Element> batch = builder.Finish();
  ASSERT_TRUE(batch.ok());
  ASSERT_NE(ElementProvenance(*batch), nullptr);
  EXPECT_EQ(ElementProvenance(*batch)->DebugString(), "{4:[0, 2)}");
}

}  // namespace
}  // namespace sluice::engine
