#include "engine/ops/interleave_origins.h"

#include <gtest/gtest.h>

#include <optional>

namespace sluice::engine {
namespace {

void ExpectOrigin(const InterleaveOrigins& origins, int64_t output, uint64_t opened, size_t slot,
                  int64_t inner) {
  SCOPED_TRACE(output);
  std::optional<InterleaveOrigins::Origin> origin = origins.Find(output);
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->opened, opened);
  EXPECT_EQ(origin->slot, slot);
  EXPECT_EQ(origin->inner, inner);
}

TEST(InterleaveOriginsTest, BlocksAndCyclesAreFoundAgain) {
  InterleaveOrigins origins;
  // cycle_length=2, block_length=2 over pipelines 0 and 1, then 2 replacing 0 in slot 0.
  origins.Took(0, 0, 0);
  origins.Took(0, 0, 1);
  origins.Took(1, 1, 0);
  origins.Took(1, 1, 1);
  origins.Took(2, 0, 0);
  origins.Took(1, 1, 2);
  // A pipeline passing over elements delivered before: its next one is not the following.
  origins.Took(1, 1, 5);
  ExpectOrigin(origins, 1, 0, 0, 1);
  ExpectOrigin(origins, 3, 1, 1, 1);
  ExpectOrigin(origins, 4, 2, 0, 0);
  ExpectOrigin(origins, 5, 1, 1, 2);
  ExpectOrigin(origins, 6, 1, 1, 5);
}

TEST(InterleaveOriginsTest, OnlyTheLatestRunsAreKept) {
  InterleaveOrigins origins;
  for (int64_t i = 0; i < 3000; ++i) origins.Took(static_cast<uint64_t>(i % 2), i % 2, i / 2);
  ExpectOrigin(origins, 2999, 1, 1, 1499);
  ExpectOrigin(origins, 2000, 0, 0, 1000);
  EXPECT_FALSE(origins.Find(10).has_value()) << "long past: not known, rather than guessed";
  // A long run holds all its outputs with one entry.
  InterleaveOrigins one_run;
  for (int64_t i = 0; i < 1000; ++i) one_run.Took(7, 3, i);
  ExpectOrigin(one_run, 0, 7, 3, 0);
  ExpectOrigin(one_run, 999, 7, 3, 999);
}

}  // namespace
}  // namespace sluice::engine
