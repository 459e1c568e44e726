#include "engine/random.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

TEST(RngTest, SameSeedSameSequence) {
  Rng a(123), b(123), c(124);
  std::vector<uint64_t> va, vb, vc;
  for (int i = 0; i < 100; ++i) {
    va.push_back(a.Next());
    vb.push_back(b.Next());
    vc.push_back(c.Next());
  }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  EXPECT_EQ(std::set<uint64_t>(va.begin(), va.end()).size(), 100u);
}

TEST(RngTest, OutputIsPinnedAcrossBuilds) {
  // Seeded shuffles must agree across workers and releases; changing the generator is a
  // wire-visible change that must be deliberate.
  // Expected values come from an independent Python model of SplitMix64 + xoshiro256**.
  Rng rng(0);
  EXPECT_EQ(rng.Next(), 0x422ea740d0977210ULL);
  EXPECT_EQ(rng.Next(), 0xe062b061b42e2928ULL);
  EXPECT_EQ(MixBits(0), 0xe220a8397b1dcdafULL);
}

TEST(RngTest, UniformStaysInRangeAndIsRoughlyFlat) {
  Rng rng(7);
  constexpr int kBuckets = 10;
  constexpr int kDraws = 100000;
  std::vector<int> counts(kBuckets, 0);
  for (int i = 0; i < kDraws; ++i) {
    uint64_t x = rng.Uniform(kBuckets);
    ASSERT_LT(x, uint64_t{kBuckets});
    ++counts[x];
  }
  for (int c : counts) {
    EXPECT_NEAR(c, kDraws / kBuckets, kDraws / kBuckets / 10);  // Within 10%.
  }
  EXPECT_EQ(rng.Uniform(1), 0u);
}

TEST(SeedTest, CombineIsOrderSensitiveAndSpreads) {
  EXPECT_NE(CombineSeeds(1, 2), CombineSeeds(2, 1));
  EXPECT_NE(CombineSeeds(5, 0), CombineSeeds(5, 1));
  EXPECT_EQ(CombineSeeds(5, 1), CombineSeeds(5, 1));
  EXPECT_NE(RandomSeed(), RandomSeed());  // 2^-64 flake odds.
}

}  // namespace
}  // namespace sluice::engine
