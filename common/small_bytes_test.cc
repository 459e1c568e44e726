#include "common/small_bytes.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace sluice {
namespace {

using Bytes = SmallBytes<8>;

TEST(SmallBytesTest, ShortBytesLiveInTheObject) {
  const std::string source = "12345678";
  Bytes bytes(source);
  EXPECT_TRUE(bytes.is_inline());
  EXPECT_EQ(bytes.view(), source);
  // A copy, not a view of the source.
  EXPECT_NE(static_cast<const void*>(bytes.data()), static_cast<const void*>(source.data()));
  const char* begin = bytes.data();
  const auto* object = reinterpret_cast<const char*>(&bytes);
  EXPECT_TRUE(begin >= object && begin < object + sizeof(bytes)) << "not inside the object";
}

TEST(SmallBytesTest, LongBytesGoToTheHeap) {
  Bytes bytes(std::string("123456789"));
  EXPECT_FALSE(bytes.is_inline());
  EXPECT_EQ(bytes.size(), 9u);
  EXPECT_EQ(bytes, "123456789");
}

TEST(SmallBytesTest, EmptyAndBinaryBytes) {
  Bytes empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.view(), "");
  const std::string binary("a\0b\0", 4);
  Bytes bytes(binary);
  EXPECT_EQ(bytes.size(), 4u);
  EXPECT_EQ(bytes.view(), binary);
}

TEST(SmallBytesTest, MovesLeaveTheSourceEmptyAndKeepTheBytes) {
  for (const std::string source : {"short", "longer than eight"}) {
    Bytes from(source);
    Bytes to(std::move(from));
    EXPECT_EQ(to.view(), source);
    EXPECT_TRUE(from.empty());  // NOLINT(bugprone-use-after-move): the contract under test
    Bytes assigned("x");
    assigned = std::move(to);
    EXPECT_EQ(assigned.view(), source);
    EXPECT_TRUE(to.empty());  // NOLINT(bugprone-use-after-move)
  }
}

TEST(SmallBytesTest, CopiesAreIndependent) {
  Bytes a("first one is long");
  Bytes b(a);
  a.assign("abc");
  EXPECT_EQ(a, "abc");
  EXPECT_EQ(b, "first one is long");
  b = a;
  EXPECT_EQ(b, "abc");
  EXPECT_TRUE(b.is_inline());
  // Back to long after short: the heap bytes are the new ones.
  b.assign("another long value");
  EXPECT_EQ(b, "another long value");
  Bytes& self = b;
  b = self;
  EXPECT_EQ(b, "another long value");
}

TEST(SmallBytesTest, AssigningAViewOfItselfKeepsTheBytes) {
  Bytes bytes("abcdefg");
  bytes.assign(bytes.view().substr(2));
  EXPECT_EQ(bytes, "cdefg");
}

TEST(SmallBytesTest, ConvertsToAStringView) {
  Bytes bytes("view");
  absl::string_view view = bytes;
  EXPECT_EQ(view, "view");
}

}  // namespace
}  // namespace sluice
