#include "engine/tensor.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DTypeTest, NamesSizesAndParseRoundTrip) {
  struct Case {
    DType dtype;
    std::string_view name;
    size_t size;
  };
  for (const Case& c : {Case{DType::kInt32, "int32", 4}, Case{DType::kInt64, "int64", 8},
                        Case{DType::kFloat32, "float32", 4}, Case{DType::kFloat64, "float64", 8},
                        Case{DType::kUInt8, "uint8", 1}, Case{DType::kString, "string", 0}}) {
    EXPECT_EQ(DTypeName(c.dtype), c.name);
    EXPECT_EQ(DTypeSize(c.dtype), c.size);
    absl::StatusOr<DType> parsed = ParseDType(c.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, c.dtype);
    EXPECT_TRUE(IsValidDType(static_cast<uint8_t>(c.dtype)));
  }
  EXPECT_FALSE(IsValidDType(0));
  EXPECT_FALSE(IsValidDType(7));
  EXPECT_TRUE(IsNumericDType(DType::kUInt8));
  EXPECT_FALSE(IsNumericDType(DType::kString));
  EXPECT_FALSE(IsNumericDType(static_cast<DType>(9)));
  EXPECT_EQ(DTypeName(static_cast<DType>(9)), "invalid");
  EXPECT_EQ(DTypeSize(static_cast<DType>(9)), 0u);
}

TEST(DTypeTest, ParseRejectsUnknownNamesListingValidOnes) {
  absl::StatusOr<DType> parsed = ParseDType("int16");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(),
            "expected a dtype (int32, int64, float32, float64, uint8, string), got 'int16'");
}

TEST(DTypeTest, DTypeOfMatchesCppTypes) {
  static_assert(DTypeOf<int32_t>::value == DType::kInt32);
  static_assert(DTypeOf<int64_t>::value == DType::kInt64);
  static_assert(DTypeOf<float>::value == DType::kFloat32);
  static_assert(DTypeOf<double>::value == DType::kFloat64);
  static_assert(DTypeOf<uint8_t>::value == DType::kUInt8);
  EXPECT_EQ(
      VisitDType(DType::kFloat64, [](auto tag) { return sizeof(typename decltype(tag)::type); }),
      8u);
}

TEST(TensorTest, ScalarHasEmptyShapeAndOneValue) {
  Tensor t = Tensor::Scalar<int64_t>(-42);
  EXPECT_EQ(t.dtype(), DType::kInt64);
  EXPECT_TRUE(t.shape().empty());
  EXPECT_EQ(t.num_elements(), 1);
  EXPECT_EQ(t.byte_size(), 8u);
  EXPECT_THAT(t.values<int64_t>(), ElementsAre(-42));
}

TEST(TensorTest, FromVectorIsRowMajorAndAligned) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::FromVector<float>({2, 3}, v);
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_THAT(t.shape(), ElementsAre(2, 3));
  EXPECT_EQ(t.num_elements(), 6);
  EXPECT_EQ(t.byte_size(), 24u);
  EXPECT_THAT(t.values<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % Tensor::kAlignment, 0u);
}

TEST(TensorTest, CreateZeroFillsAndRejectsBadShapes) {
  absl::StatusOr<Tensor> t = Tensor::Create(DType::kInt32, {2, 2});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->values<int32_t>(), ElementsAre(0, 0, 0, 0));

  absl::StatusOr<Tensor> negative = Tensor::Create(DType::kInt32, {2, -1});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().message(),
            "expected non-negative dims, got dim 1 = -1 in shape [2, -1]");

  absl::StatusOr<Tensor> huge = Tensor::Create(DType::kInt64, {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("more than 2^63-1 elements"));

  absl::StatusOr<Tensor> too_big = Tensor::Create(DType::kInt64, {int64_t{1} << 61});
  EXPECT_THAT(too_big.status().message(), HasSubstr("too large"));

  absl::StatusOr<Tensor> empty = Tensor::Create(DType::kUInt8, {3, 0});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->num_elements(), 0);
  EXPECT_EQ(empty->data(), nullptr);
}

TEST(TensorTest, CopiesHaveValueSemanticsAndCompareByValue) {
  Tensor a = Tensor::FromVector<int32_t>({3}, std::vector<int32_t>{1, 2, 3});
  Tensor b = a;
  EXPECT_EQ(a, b);
  b.mutable_values<int32_t>()[0] = 9;
  EXPECT_NE(a.data(), b.data());
  EXPECT_THAT(a.values<int32_t>(), ElementsAre(1, 2, 3));
  EXPECT_FALSE(a == b);
  EXPECT_FALSE(a == Tensor::FromVector<int32_t>({3, 1}, std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(a == Tensor::FromVector<float>({3}, std::vector<float>{1, 2, 3}));

  Tensor c;
  c = a;
  EXPECT_EQ(c, a);
}

// Copy-assignment goes member by member (it reuses the shape's room): every kind of tensor
// assigned over every other must end up equal to its source, buffers shared or inline as a
// copy's would be, and the source untouched.
TEST(TensorTest, AssigningOverAnyOtherKindOfTensorGivesAnEqualCopy) {
  const std::vector<Tensor> kinds = {
      Tensor(),
      Tensor::Scalar<int64_t>(7),
      Tensor::FromVector<int64_t>({2}, {5, 6}),
      Tensor::FromVector<float>({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6}),
      Tensor::FromVector<uint8_t>({40}, std::vector<uint8_t>(40, 9)),
      Tensor::FromStrings({2}, std::vector<std::string>{"ada", "a longer string than sixteen"}),
  };
  for (size_t from = 0; from < kinds.size(); ++from) {
    for (size_t onto = 0; onto < kinds.size(); ++onto) {
      Tensor target = kinds[onto];
      target = kinds[from];
      EXPECT_EQ(target, kinds[from]) << from << " onto " << onto;
      EXPECT_EQ(target.dtype(), kinds[from].dtype()) << from << " onto " << onto;
      EXPECT_EQ(target.shape(), kinds[from].shape()) << from << " onto " << onto;
      EXPECT_EQ(target.byte_size(), kinds[from].byte_size()) << from << " onto " << onto;
      const bool heap = kinds[from].byte_size() > Tensor::kInlineBytes;
      EXPECT_EQ(target.SharesBufferWith(kinds[from]), heap) << from << " onto " << onto;
      if (from != onto && kinds[onto].byte_size() > Tensor::kInlineBytes) {
        EXPECT_FALSE(target.SharesBufferWith(kinds[onto])) << from << " onto " << onto;
      }
      if (target.byte_size() > 0) {
        // The target's bytes are its own once written: the source keeps its own (no kind
        // starts with 0x7f).
        target.mutable_data()[0] = std::byte{0x7f};
        EXPECT_FALSE(target.SharesBufferWith(kinds[from])) << from << " onto " << onto;
        EXPECT_NE(kinds[from].data()[0], std::byte{0x7f}) << from << " onto " << onto;
      }
    }
  }
  EXPECT_EQ(kinds[2].values<int64_t>()[0], 5) << "a source was written through a copy";
  Tensor self = kinds[4];
  const Tensor& alias = self;
  self = alias;
  EXPECT_EQ(self, kinds[4]);
}

TEST(TensorTest, MovedFromTensorHoldsNoBytes) {
  Tensor a = Tensor::Scalar<double>(2.5);
  Tensor b = std::move(a);
  EXPECT_THAT(b.values<double>(), ElementsAre(2.5));
  EXPECT_EQ(a.byte_size(), 0u);  // NOLINT(bugprone-use-after-move): documented state.
  Tensor c = a;                  // Copying it must not read the (absent) buffer.
  EXPECT_EQ(c.byte_size(), 0u);
}

TEST(TensorTest, DebugStringShowsDtypeShapeAndLeadingValues) {
  EXPECT_EQ(Tensor::FromVector<int64_t>({2, 2}, std::vector<int64_t>{0, 1, 2, 3}).DebugString(),
            "int64[2, 2]{0, 1, 2, 3}");
  EXPECT_EQ(Tensor::Scalar<uint8_t>(200).DebugString(), "uint8[]{200}");
  std::vector<int32_t> many(20, 7);
  EXPECT_EQ(Tensor::FromVector<int32_t>({20}, many).DebugString(),
            "int32[20]{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, ...}");
  EXPECT_EQ(ElementDebugString({Tensor::Scalar<int32_t>(1), Tensor::Scalar<float>(0.5f)}),
            "(int32[]{1}, float32[]{0.5})");
}

TEST(StringTensorTest, HoldsArbitraryBytesInTheDocumentedLayout) {
  const std::string binary("a\0\xff", 3);
  Tensor t = Tensor::FromStrings({2, 2}, std::vector<std::string>{"ada", "", binary, "bob"});
  EXPECT_EQ(t.dtype(), DType::kString);
  EXPECT_EQ(t.num_elements(), 4);
  EXPECT_EQ(t.string_value(0), "ada");
  EXPECT_EQ(t.string_value(1), "");
  EXPECT_EQ(t.string_value(2), binary);
  EXPECT_THAT(t.string_values(), ElementsAre("ada", "", binary, "bob"));
  // 5 offsets (0, 3, 3, 6, 9) then the 9 string bytes.
  EXPECT_EQ(t.byte_size(), 5u * 8 + 9);
  std::vector<uint64_t> offsets(5);
  std::memcpy(offsets.data(), t.data(), 40);
  EXPECT_THAT(offsets, ElementsAre(0, 3, 3, 6, 9));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data()) + 40, 9),
            std::string("ada") + binary + "bob");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % Tensor::kAlignment, 0u);
  EXPECT_TRUE(CheckStringBuffer({t.data(), t.byte_size()}, 4).ok());
}

TEST(StringTensorTest, CreateGivesEmptyStringsAndCopiesCompareByValue) {
  absl::StatusOr<Tensor> empty = Tensor::Create(DType::kString, {3});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(empty->string_values(), ElementsAre("", "", ""));
  EXPECT_EQ(empty->byte_size(), 32u);
  EXPECT_EQ(*empty, Tensor::FromStrings({3}, std::vector<std::string>{"", "", ""}));

  Tensor a = Tensor::StringScalar("hello");
  EXPECT_TRUE(a.shape().empty());
  Tensor b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(b.string_value(0), "hello");
  EXPECT_FALSE(a == Tensor::StringScalar("hellp"));
  EXPECT_FALSE(a == Tensor::FromStrings({1}, std::vector<std::string>{"hello"}));
  Tensor moved = std::move(b);
  EXPECT_EQ(moved.string_value(0), "hello");
  EXPECT_EQ(b.byte_size(), 0u);  // NOLINT(bugprone-use-after-move): documented state.
}

TEST(StringTensorTest, DebugStringQuotesAndEscapes) {
  EXPECT_EQ(Tensor::FromStrings({2}, std::vector<std::string>{"a", "b\n\"c"}).DebugString(),
            "string[2]{\"a\", \"b\\n\\\"c\"}");
}

TEST(StringTensorTest, CheckStringBufferRejectsBadOffsets) {
  Tensor t = Tensor::FromStrings({2}, std::vector<std::string>{"ab", "cde"});
  std::vector<std::byte> buf(t.data(), t.data() + t.byte_size());
  auto set = [&](int i, uint64_t v) { std::memcpy(buf.data() + 8 * i, &v, 8); };
  auto check = [&](int64_t n) { return CheckStringBuffer(buf, n); };
  EXPECT_TRUE(check(2).ok());
  EXPECT_EQ(check(5).message(),
            "expected a string offsets table of 5 + 1 entries, but the tensor holds only 29 bytes");
  set(1, 4);
  set(2, 3);
  EXPECT_EQ(check(2).message(), "expected string offset 2 in [4, 5], got 3");
  set(1, 2);
  set(2, 4);
  EXPECT_EQ(check(2).message(),
            "expected the last string offset to be 5 (the byte region size), got 4");
  set(0, 1);
  EXPECT_EQ(check(2).message(), "expected string offset 0 in [0, 0], got 1");
  EXPECT_FALSE(CheckStringBuffer(buf, -1).ok());
  EXPECT_FALSE(CheckStringBuffer(buf, INT64_MAX).ok());
}

TEST(TensorDeathTest, FromVectorWithWrongValueCountAborts) {
  std::vector<int32_t> v = {1, 2, 3};
  EXPECT_DEATH(Tensor::FromVector<int32_t>({2, 2}, v), "shape \\[2, 2\\] needs 4 values, got 3");
}

TEST(TensorTest, CopiesShareTheBufferUntilOneIsWritten) {
  Tensor a = Tensor::FromVector<int64_t>({3}, {1, 2, 3});
  Tensor b = a;
  EXPECT_TRUE(b.SharesBufferWith(a));
  EXPECT_EQ(b.data(), a.data()) << "no bytes copied";
  b.mutable_values<int64_t>()[0] = 7;
  EXPECT_FALSE(b.SharesBufferWith(a));
  EXPECT_EQ(a.values<int64_t>()[0], 1) << "the original is untouched";
  EXPECT_EQ(b.values<int64_t>()[0], 7);
  // A sole owner writes in place.
  const std::byte* before = b.data();
  b.mutable_data();
  EXPECT_EQ(b.data(), before);
  Tensor c = Tensor::FromStrings({2}, std::vector<std::string>{"x", "yz"});
  Tensor d;
  d = c;
  EXPECT_TRUE(d.SharesBufferWith(c));
  EXPECT_EQ(d, c);
}

TEST(TensorTest, SmallBuffersLiveInlineAndLargerOnesOnTheAlignedHeap) {
  // 16 bytes: inline, 16-byte aligned, and a copy owns its own bytes from the start.
  Tensor small = Tensor::FromVector<int64_t>({2}, {5, 6});
  EXPECT_EQ(small.byte_size(), Tensor::kInlineBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % Tensor::kInlineAlignment, 0u);
  EXPECT_GE(small.data(), reinterpret_cast<const std::byte*>(&small));
  EXPECT_LT(small.data(), reinterpret_cast<const std::byte*>(&small) + sizeof(Tensor));
  Tensor copy = small;
  EXPECT_FALSE(copy.SharesBufferWith(small));
  copy.mutable_values<int64_t>()[1] = 60;
  EXPECT_THAT(small.values<int64_t>(), ElementsAre(5, 6)) << "the original is untouched";
  EXPECT_THAT(copy.values<int64_t>(), ElementsAre(5, 60));
  // Moves carry the inline bytes; the moved-from tensor holds none.
  Tensor moved = std::move(copy);
  EXPECT_THAT(moved.values<int64_t>(), ElementsAre(5, 60));
  EXPECT_EQ(copy.byte_size(), 0u);  // NOLINT(bugprone-use-after-move): documented state.
  EXPECT_EQ(copy.data(), nullptr);
  Tensor assigned;
  assigned = std::move(moved);
  EXPECT_THAT(assigned.values<int64_t>(), ElementsAre(5, 60));
  // 17 bytes and more: a heap buffer, 64-byte aligned, shared by copies until written.
  Tensor large = Tensor::FromVector<uint8_t>({17}, std::vector<uint8_t>(17, 3));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data()) % Tensor::kAlignment, 0u);
  Tensor large_copy = large;
  EXPECT_TRUE(large_copy.SharesBufferWith(large));
  // Scalars and a one-character string scalar (offsets 16 bytes + 1) on either side.
  EXPECT_EQ(Tensor::Scalar<double>(2.5).values<double>()[0], 2.5);
  EXPECT_EQ(Tensor::StringScalar("").string_value(0), "");
  EXPECT_EQ(Tensor::StringScalar("q").string_value(0), "q");
  Element row = {Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(2)};
  for (int i = 0; i < 100; ++i) row.push_back(Tensor::Scalar<int32_t>(i));  // reallocates
  EXPECT_EQ(row[1].values<int32_t>()[0], 2);
  EXPECT_EQ(row[101].values<int32_t>()[0], 99);
}

}  // namespace
}  // namespace sluice::engine
