#include "control/delivery_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace sluice::control {
namespace {

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

Pairs DeliveredOf(const DeliveryLog& log, int64_t key) {
  Pairs out;
  for (const proto::OrdinalRange& r : log.Delivered(key)) out.emplace_back(r.begin(), r.end());
  return out;
}

TEST(DeliveryLogTest, MergesTouchingRangesOfASplit) {
  DeliveryLog log;
  log.Record(7, 0, 3);
  log.Record(7, 5, 4);
  EXPECT_EQ(DeliveredOf(log, 7), (Pairs{{0, 3}, {5, 9}}));
  log.Record(7, 3, 2);  // fills the hole: adjacent ranges merge
  EXPECT_EQ(DeliveredOf(log, 7), (Pairs{{0, 9}}));
  EXPECT_TRUE(log.Delivered(6).empty());
  EXPECT_TRUE(log.Delivered(8).empty());
}

TEST(DeliveryLogTest, IgnoresUntrackedSplitsAndEmptyRuns) {
  DeliveryLog log;
  log.Record(0, 0, 5);
  log.Record(3, 0, 0);
  EXPECT_EQ(log.entries(), 0u);
}

// The point of the log: whole splits of one size, delivered in any order (several workers
// interleave their leases), end up as one entry however many there are.
TEST(DeliveryLogTest, WholeSplitsOfOneSizeCollapseIntoOneEntry) {
  constexpr int64_t kSplits = 20000;
  std::vector<int64_t> keys(kSplits);
  std::iota(keys.begin(), keys.end(), 1);
  std::shuffle(keys.begin(), keys.end(), std::mt19937(42));
  DeliveryLog log;
  size_t most_entries = 0;
  for (int64_t key : keys) {
    // In two halves, as two batches would report them.
    log.Record(key, 128, 128);
    log.Record(key, 0, 128);
    most_entries = std::max(most_entries, log.entries());
  }
  EXPECT_EQ(log.entries(), 1u);
  EXPECT_LT(most_entries, static_cast<size_t>(kSplits)) << "it was bounded on the way too";
  for (int64_t key : {int64_t{1}, kSplits / 2, kSplits}) {
    EXPECT_EQ(DeliveredOf(log, key), (Pairs{{0, 256}})) << key;
  }
  EXPECT_TRUE(log.Delivered(kSplits + 1).empty());
}

TEST(DeliveryLogTest, ARecordInsideASpanSplitsItAndKeepsTheOthers) {
  DeliveryLog log;
  for (int64_t key = 1; key <= 5; ++key) log.Record(key, 0, 10);
  ASSERT_EQ(log.entries(), 1u);
  log.Record(3, 20, 5);  // key 3 now differs: the span splits around it
  EXPECT_EQ(log.entries(), 3u);
  EXPECT_EQ(DeliveredOf(log, 2), (Pairs{{0, 10}}));
  EXPECT_EQ(DeliveredOf(log, 3), (Pairs{{0, 10}, {20, 25}}));
  EXPECT_EQ(DeliveredOf(log, 4), (Pairs{{0, 10}}));
  log.Record(1, 20, 5);  // the span's first key
  log.Record(5, 20, 5);  // and its last
  EXPECT_EQ(DeliveredOf(log, 1), (Pairs{{0, 10}, {20, 25}}));
  EXPECT_EQ(DeliveredOf(log, 2), (Pairs{{0, 10}}));
  EXPECT_EQ(DeliveredOf(log, 5), (Pairs{{0, 10}, {20, 25}}));
  // Several ranges never collapse: each of these keys keeps its own entry.
  EXPECT_EQ(log.entries(), 5u);
}

TEST(DeliveryLogTest, SplitsWithHolesStayApart) {
  // A filter drops elements for good: a split's ranges may never become one.
  DeliveryLog log;
  for (int64_t key = 1; key <= 100; ++key) {
    log.Record(key, 0, 4);
    log.Record(key, 6, 4);
  }
  EXPECT_EQ(log.entries(), 100u);
  EXPECT_EQ(DeliveredOf(log, 50), (Pairs{{0, 4}, {6, 10}}));
}

TEST(DeliveryLogTest, EraseBelowCutsThroughASpan) {
  DeliveryLog log;
  for (int64_t key = 1; key <= 10; ++key) log.Record(key, 0, 8);
  log.Record(12, 0, 3);
  log.EraseBelow(6);
  EXPECT_TRUE(log.Delivered(5).empty());
  EXPECT_EQ(DeliveredOf(log, 6), (Pairs{{0, 8}}));
  EXPECT_EQ(DeliveredOf(log, 10), (Pairs{{0, 8}}));
  EXPECT_EQ(DeliveredOf(log, 12), (Pairs{{0, 3}}));
  EXPECT_EQ(log.entries(), 2u);
  log.EraseBelow(11);
  EXPECT_TRUE(log.Delivered(10).empty());
  EXPECT_EQ(log.entries(), 1u);
  log.EraseBelow(100);
  EXPECT_EQ(log.entries(), 0u);
}

// Against a plain map of sets, over random runs: the compression never changes an answer.
TEST(DeliveryLogTest, AgreesWithAnUncompressedLog) {
  std::mt19937 rng(7);
  DeliveryLog log;
  std::map<int64_t, std::vector<bool>> plain;
  constexpr int64_t kKeys = 40;
  constexpr int64_t kOrdinals = 16;
  for (int i = 0; i < 3000; ++i) {
    const int64_t key = 1 + static_cast<int64_t>(rng() % kKeys);
    const int64_t first = static_cast<int64_t>(rng() % kOrdinals);
    const int64_t count = 1 + static_cast<int64_t>(rng() % (kOrdinals - first));
    log.Record(key, first, count);
    std::vector<bool>& bits = plain[key];
    bits.resize(kOrdinals);
    for (int64_t o = first; o < first + count; ++o) bits[o] = true;
    if (i % 100 != 99) continue;
    for (int64_t k = 0; k <= kKeys + 1; ++k) {
      Pairs expected;
      if (auto it = plain.find(k); it != plain.end()) {
        for (int64_t o = 0; o < kOrdinals; ++o) {
          if (!it->second[o]) continue;
          if (!expected.empty() && expected.back().second == o) {
            ++expected.back().second;
          } else {
            expected.emplace_back(o, o + 1);
          }
        }
      }
      ASSERT_EQ(DeliveredOf(log, k), expected) << "key " << k << " after " << i;
    }
  }
}

// What a snapshot holds (ForEachSpan) read back (AppendSpan) is the same log: every key
// answers alike, and the spans stay collapsed.
TEST(DeliveryLogTest, SpansReadBackMakeTheSameLog) {
  DeliveryLog log;
  for (int64_t key = 1; key <= 1000; ++key) log.Record(key, 0, 256);
  log.Record(1001, 0, 3);
  log.Record(1001, 9, 2);
  log.Record(5000, 4, 4);
  DeliveryLog copy;
  log.ForEachSpan([&copy](int64_t first, int64_t last, const DeliveryLog::Ranges& ranges) {
    EXPECT_TRUE(copy.AppendSpan(first, last, ranges)) << first << ".." << last;
  });
  EXPECT_EQ(copy.entries(), log.entries());
  EXPECT_EQ(copy.entries(), 3u);
  for (int64_t key : {1, 500, 1000, 1001, 1002, 4999, 5000, 5001}) {
    EXPECT_EQ(DeliveredOf(copy, key), DeliveredOf(log, key)) << "key " << key;
  }
  // It goes on as the original would: a record extends the span.
  copy.Record(1002, 0, 256);
  EXPECT_EQ(DeliveredOf(copy, 1002), (Pairs{{0, 256}}));
}

// A span no log could have given is refused, and adds nothing (a damaged snapshot fails its
// restore instead of re-issuing the wrong elements).
TEST(DeliveryLogTest, SpansNoLogCouldHaveGivenAreRefused) {
  DeliveryLog log;
  ASSERT_TRUE(log.AppendSpan(10, 20, {{0, 8}}));
  EXPECT_FALSE(log.AppendSpan(20, 30, {{0, 8}})) << "overlaps the last span";
  EXPECT_FALSE(log.AppendSpan(5, 6, {{0, 8}})) << "out of order";
  EXPECT_FALSE(log.AppendSpan(30, 29, {{0, 8}})) << "ends before it begins";
  EXPECT_FALSE(log.AppendSpan(30, 30, {})) << "no ranges";
  EXPECT_FALSE(log.AppendSpan(30, 30, {{4, 4}})) << "an empty range";
  EXPECT_FALSE(log.AppendSpan(30, 30, {{5, 9}, {0, 2}})) << "unsorted";
  EXPECT_FALSE(log.AppendSpan(30, 30, {{0, 5}, {5, 9}})) << "touching ranges merge";
  EXPECT_FALSE(log.AppendSpan(30, 31, {{0, 2}, {5, 9}})) << "several ranges over two keys";
  EXPECT_FALSE(log.AppendSpan(0, 0, {{0, 2}})) << "the untracked key";
  EXPECT_EQ(log.entries(), 1u);
  EXPECT_TRUE(log.AppendSpan(30, 30, {{0, 2}, {5, 9}}));
  EXPECT_EQ(DeliveredOf(log, 30), (Pairs{{0, 2}, {5, 9}}));
  EXPECT_EQ(DeliveredOf(log, 15), (Pairs{{0, 8}}));
}

}  // namespace
}  // namespace sluice::control
