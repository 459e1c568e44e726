#include "tools/byte_size.h"

#include <gtest/gtest.h>

namespace sluice::tools {
namespace {

TEST(ByteSizeTest, ParsesUnits) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64KiB"), 65536u);
  EXPECT_EQ(*ParseByteSize("1MiB"), 1048576u);
  EXPECT_EQ(*ParseByteSize("16M"), 16u << 20);
  EXPECT_EQ(*ParseByteSize("1.5KB"), 1500u);
  EXPECT_EQ(*ParseByteSize("2GB"), 2000000000u);
  EXPECT_EQ(*ParseByteSize("2TiB"), size_t{2} << 40);
  EXPECT_EQ(*ParseByteSize("1T"), size_t{1} << 40);
  EXPECT_EQ(*ParseByteSize("3TB"), size_t{3'000'000'000'000});
  auto list = ParseByteSizeList("64KiB, 1MiB,16MiB");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<size_t>{65536, 1 << 20, 16 << 20}));
}

TEST(ByteSizeTest, RejectsNonsense) {
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("MiB").ok());
  EXPECT_FALSE(ParseByteSize("12 parsecs").ok());
  EXPECT_FALSE(ParseByteSize("0").ok());
  EXPECT_FALSE(ParseByteSize("0.5").ok());
  EXPECT_FALSE(ParseByteSize("-3").ok());
  // Too large was told as "must be a whole number of bytes >= 1".
  EXPECT_EQ(ParseByteSize("99999999GiB").status().message(),
            "byte size '99999999GiB' is more than 10^15 bytes (about 909TiB)");
  EXPECT_EQ(ParseByteBound("99999999GiB").status().message(),
            "byte size '99999999GiB' is more than 10^15 bytes (about 909TiB)");
}

TEST(ByteSizeTest, ABoundMayBeZeroForNone) {
  EXPECT_EQ(*ParseByteBound("0"), 0u);
  EXPECT_EQ(*ParseByteBound("0MiB"), 0u);
  EXPECT_FALSE(ParseByteSize("0MiB").ok());
  EXPECT_EQ(*ParseByteBound("4MiB"), 4u << 20);
  EXPECT_FALSE(ParseByteBound("-1").ok());
  EXPECT_FALSE(ParseByteBound("none").ok());
}

TEST(ByteSizeTest, FormatsRoundSizes) {
  EXPECT_EQ(FormatByteSize(1 << 20), "1MiB");
  EXPECT_EQ(FormatByteSize(65536), "64KiB");
  EXPECT_EQ(FormatByteSize(1000), "1000B");
}

}  // namespace
}  // namespace sluice::tools
