#include "engine/string_functions.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;

absl::StatusOr<Element> Call(std::string_view name, Element in) {
  const FunctionRegistry::Function* fn = FunctionRegistry::Builtins().Find(name);
  if (fn == nullptr) return absl::NotFoundError("no such function");
  Element out;
  absl::Status s = (*fn)(std::move(in), &out);
  if (!s.ok()) return s;
  return out;
}

TEST(StringFunctionsTest, LengthAndNumberParsingKeepShapeAndPassOthersThrough) {
  Element in = {Tensor::FromStrings({3}, std::vector<std::string>{"12", " -7 ", ""}),
                Tensor::Scalar<int32_t>(5)};
  absl::StatusOr<Element> len = Call("string_length", in);
  ASSERT_TRUE(len.ok()) << len.status();
  EXPECT_THAT((*len)[0].values<int64_t>(), ElementsAre(2, 4, 0));
  EXPECT_THAT((*len)[0].shape(), ElementsAre(3));
  EXPECT_EQ((*len)[1], Tensor::Scalar<int32_t>(5));

  absl::StatusOr<Element> ints =
      Call("string_to_int64", {Tensor::FromStrings({2}, std::vector<std::string>{"12", " -7 "})});
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_THAT((*ints)[0].values<int64_t>(), ElementsAre(12, -7));

  absl::StatusOr<Element> floats = Call("string_to_float32", {Tensor::StringScalar("2.5e1")});
  ASSERT_TRUE(floats.ok()) << floats.status();
  EXPECT_THAT((*floats)[0].values<float>(), ElementsAre(25.0f));

  absl::StatusOr<Element> bad = Call("string_to_int64", in);
  EXPECT_EQ(bad.status().message(),
            "string_to_int64: expected a decimal int64, got \"\" at index 2");
}

TEST(StringFunctionsTest, DecodeRawReinterpretsBytes) {
  absl::StatusOr<Element> u8 = Call("decode_raw_uint8", {Tensor::StringScalar("\x01\x02\xff")});
  ASSERT_TRUE(u8.ok()) << u8.status();
  EXPECT_THAT((*u8)[0].values<uint8_t>(), ElementsAre(1, 2, 255));

  const float values[2] = {1.5f, -2.0f};
  std::string bytes(sizeof(values), '\0');
  std::memcpy(bytes.data(), values, sizeof(values));
  absl::StatusOr<Element> f32 = Call("decode_raw_float32", {Tensor::StringScalar(bytes)});
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_THAT((*f32)[0].values<float>(), ElementsAre(1.5f, -2.0f));

  EXPECT_EQ(Call("decode_raw_float32", {Tensor::StringScalar("abc")}).status().message(),
            "decode_raw_float32: expected a multiple of 4 bytes, got 3");
  EXPECT_EQ(Call("decode_raw_uint8", {Tensor::FromStrings({1}, std::vector<std::string>{"a"})})
                .status()
                .message(),
            "decode_raw_uint8 expects string scalars, got string[1]");
}

TEST(StringFunctionsTest, SplitWhitespaceDropsEmptyTokens) {
  absl::StatusOr<Element> out =
      Call("split_whitespace", {Tensor::StringScalar("  the\tquick  fox\n")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0].string_values(), ElementsAre("the", "quick", "fox"));
  EXPECT_THAT((*out)[0].shape(), ElementsAre(3));
  absl::StatusOr<Element> none = Call("split_whitespace", {Tensor::StringScalar(" ")});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT((*none)[0].shape(), ElementsAre(0));
}

}  // namespace
}  // namespace sluice::engine
