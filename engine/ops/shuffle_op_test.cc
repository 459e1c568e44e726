#include "engine/ops/shuffle_op.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::ElementsAreArray;

std::vector<int64_t> Values(std::string_view text, const PipelineContext& context = {}) {
  absl::StatusOr<std::vector<Element>> out = DrainText(text, context);
  EXPECT_TRUE(out.ok()) << text << ": " << out.status();
  return out.ok() ? ScalarInt64s(*out) : std::vector<int64_t>{};
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(ShuffleIteratorTest, EmitsAPermutationOfItsInput) {
  for (std::string_view text : {"range(100) | shuffle(1000)", "range(100) | shuffle(7)",
                                "range(100) | shuffle(100, seed=3)"}) {
    std::vector<int64_t> v = Values(text);
    EXPECT_THAT(Sorted(v), ElementsAreArray(Iota(100))) << text;
    EXPECT_NE(v, Iota(100)) << text;  // 1/100! odds of a false failure.
  }
}

TEST(ShuffleIteratorTest, BufferOfOneKeepsOrder) {
  EXPECT_THAT(Values("range(20) | shuffle(1)"), ElementsAreArray(Iota(20)));
}

TEST(ShuffleIteratorTest, SmallBufferOnlyMovesElementsLocally) {
  // With buffer k, output i can only be an input among the first i + k.
  std::vector<int64_t> v = Values("range(200) | shuffle(4, seed=11)");
  for (size_t i = 0; i < v.size(); ++i) EXPECT_LT(v[i], static_cast<int64_t>(i) + 4);
}

TEST(ShuffleIteratorTest, SeededShufflesAreDeterministicAcrossBuildsAndSalts) {
  PipelineContext salted;
  salted.seed_salt = 12345;
  std::vector<int64_t> a = Values("range(50) | shuffle(50, seed=42)");
  std::vector<int64_t> b = Values("range(50) | shuffle(50, seed=42)", salted);
  std::vector<int64_t> c = Values("range(50) | shuffle(50, seed=43)");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(ShuffleIteratorTest, UnseededShufflesDifferAcrossBuilds) {
  EXPECT_NE(Values("range(50) | shuffle(50)"), Values("range(50) | shuffle(50)"));
}

TEST(ShuffleIteratorTest, ReshuffleEachIterationControlsPerPassOrder) {
  for (const char* seed : {", seed=5", ""}) {
    std::vector<int64_t> reshuffled =
        Values(absl::StrCat("range(30) | shuffle(30", seed, ") | repeat(2)"));
    ASSERT_EQ(reshuffled.size(), 60u);
    std::vector<int64_t> first(reshuffled.begin(), reshuffled.begin() + 30);
    std::vector<int64_t> second(reshuffled.begin() + 30, reshuffled.end());
    EXPECT_THAT(Sorted(second), ElementsAreArray(Iota(30)));
    EXPECT_NE(first, second) << seed;

    std::vector<int64_t> fixed = Values(absl::StrCat("range(30) | shuffle(30", seed,
                                                     ", reshuffle_each_iteration=false) | "
                                                     "repeat(2)"));
    ASSERT_EQ(fixed.size(), 60u);
    EXPECT_TRUE(std::equal(fixed.begin(), fixed.begin() + 30, fixed.begin() + 30)) << seed;
  }
  // Seeded and reshuffled is still reproducible as a whole.
  EXPECT_EQ(Values("range(30) | shuffle(30, seed=5) | repeat(3)"),
            Values("range(30) | shuffle(30, seed=5) | repeat(3)"));
}

}  // namespace
}  // namespace sluice::engine
