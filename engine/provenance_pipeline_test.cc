// Element provenance through whole DYNAMIC pipelines (engine/provenance.h): a fake split
// feed hands out keyed splits, some re-issued with delivered ordinals.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/iterator.h"
#include "engine/provenance.h"
#include "engine/provenance_test_util.h"
#include "engine/split_key.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ProvRun = Provenance::Run;
using ::sluice::engine::testing::BuildFed;
using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::FakeFeed;
using ::sluice::engine::testing::FlatInt64s;
using ::sluice::engine::testing::Id;
using ::sluice::engine::testing::Ids;
using ::sluice::engine::testing::MakeSplit;
using ::sluice::engine::testing::OrdinalRangeIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::UnorderedElementsAre;

int64_t Nested(int64_t outer, int64_t inner) { return *NestedOrdinal(outer, inner); }

// Splits of 10 over range(100): key k + 1 holds [10k, 10k + 10).
std::vector<proto::Split> RangeSplits() {
  std::vector<proto::Split> splits;
  for (int64_t k = 0; k < 10; ++k) splits.push_back(MakeSplit(k + 1, 10 * k, 10 * k + 10));
  return splits;
}

// Checks that every batch's provenance names one element per row, that row r holds the
// square of the range value its id names, and returns all ids (in output order).
std::vector<Id> CheckSquareBatches(const std::vector<Element>& batches) {
  std::vector<Id> all;
  for (const Element& batch : batches) {
    std::vector<Id> ids = Ids(batch);
    EXPECT_EQ(static_cast<int64_t>(ids.size()), batch[0].shape()[0]);
    if (ids.size() != static_cast<size_t>(batch[0].shape()[0])) continue;
    for (size_t r = 0; r < ids.size(); ++r) {
      const int64_t value = 10 * (ids[r].first - 1) + ids[r].second;
      EXPECT_EQ(batch[0].values<int64_t>()[r], value * value)
          << ids[r].first << ":" << ids[r].second;
    }
    all.insert(all.end(), ids.begin(), ids.end());
  }
  return all;
}

// A worker given splits 1 ([0, 10)) and 2 ([10, 20)) of `pipeline` that dies after
// delivering `count` batches: the batches, and their provenance added to *log.
void DeliverThenDie(std::string_view pipeline, size_t count,
                    absl::StatusOr<std::vector<Element>>* delivered, DeliveryLog* log) {
  FakeFeed feed({MakeSplit(1, 0, 10), MakeSplit(2, 10, 20)});
  std::unique_ptr<ElementIterator> worker = BuildFed(pipeline, &feed);
  *delivered = Drain(*worker, count);
  if (!delivered->ok()) return;
  for (const Element& batch : **delivered) log->Add(*ElementProvenance(batch));
}

// Worker B, given splits 1 and 2 again with what `log` says was delivered of them: what
// `pipeline` then yields.
absl::StatusOr<std::vector<Element>> ReissueToWorkerB(std::string_view pipeline,
                                                      const DeliveryLog& log) {
  std::vector<proto::Split> reissued = {MakeSplit(1, 0, 10), MakeSplit(2, 10, 20)};
  for (proto::Split& s : reissued) log.FillDelivered(&s);
  FakeFeed feed_b(reissued);
  std::unique_ptr<ElementIterator> b = BuildFed(pipeline, &feed_b);
  if (b == nullptr) return absl::InternalError("not built");
  return Drain(*b);
}

std::vector<Id> AllRangeIds() {
  std::vector<Id> ids;
  for (int64_t k = 1; k <= 10; ++k) {
    for (int64_t o = 0; o < 10; ++o) ids.emplace_back(k, o);
  }
  return ids;
}

TEST(ProvenancePipelineTest, BatchesCoverEverySplitOrdinalOnce) {
  for (std::string_view text : {"range(100) | map(square) | batch(7)",
                                "range(100) | map(square, parallel=4) | prefetch(3) | batch(7)"}) {
    FakeFeed feed(RangeSplits());
    std::unique_ptr<ElementIterator> it = BuildFed(text, &feed);
    absl::StatusOr<std::vector<Element>> batches = Drain(*it);
    ASSERT_TRUE(batches.ok()) << batches.status();
    EXPECT_EQ(batches->size(), 15u);  // ceil(100 / 7)
    std::vector<Id> ids = CheckSquareBatches(*batches);
    EXPECT_THAT(ids, ElementsAreArray(AllRangeIds())) << text;  // In order, each once.
    // Batch 1 spans splits 1 and 2: two runs.
    EXPECT_THAT(ElementProvenance((*batches)[1])->runs(),
                ElementsAre(ProvRun{1, 7, 3}, ProvRun{2, 0, 4}));
  }
}

TEST(ProvenancePipelineTest, ReissuedSplitYieldsOnlyUndeliveredElements) {
  FakeFeed feed({MakeSplit(3, 30, 40, {{0, 4}, {7, 10}})});
  std::unique_ptr<ElementIterator> it = BuildFed("range(100) | map(square) | batch(7)", &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 1u);
  EXPECT_THAT(FlatInt64s(*batches), ElementsAre(34 * 34, 35 * 35, 36 * 36));
  EXPECT_THAT(ElementProvenance((*batches)[0])->runs(), ElementsAre(ProvRun{3, 4, 3}));
}

TEST(ProvenancePipelineTest, DeadWorkersSplitsReissuedWithoutDuplicates) {
  // Worker A takes splits 1 and 2 and dies after delivering two batches.
  absl::StatusOr<std::vector<Element>> delivered;
  DeliveryLog log;
  DeliverThenDie("range(100) | map(square) | prefetch(4) | batch(7)", 2, &delivered, &log);
  ASSERT_TRUE(delivered.ok()) << delivered.status();

  // Both splits go to worker B with what was delivered.
  EXPECT_THAT(log.Delivered(1), ElementsAre(OrdinalRangeIs(0, 10)));
  absl::StatusOr<std::vector<Element>> rest =
      ReissueToWorkerB("range(100) | map(square) | batch(7)", log);
  ASSERT_TRUE(rest.ok()) << rest.status();

  std::vector<Id> ids = CheckSquareBatches(*delivered);
  std::vector<Id> more = CheckSquareBatches(*rest);
  EXPECT_EQ(more.size(), 6u);
  ids.insert(ids.end(), more.begin(), more.end());
  std::vector<Id> expected = AllRangeIds();
  expected.resize(20);
  EXPECT_THAT(ids, ElementsAreArray(expected));
}

TEST(ProvenancePipelineTest, ShuffleAndFilterKeepExactSets) {
  std::vector<proto::Split> splits = RangeSplits();
  splits[4] = MakeSplit(5, 40, 50, {{2, 6}});  // Re-issued: ordinals 2..5 delivered.
  FakeFeed feed(splits);
  std::unique_ptr<ElementIterator> it = BuildFed(
      "range(100) | shuffle(16, seed=7) | filter(is_even, parallel=2) | map(square) | "
      "shuffle(5) | batch(4)",
      &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();
  std::vector<Id> ids = CheckSquareBatches(*batches);
  std::set<Id> got(ids.begin(), ids.end());
  EXPECT_EQ(got.size(), ids.size());  // No duplicates.
  std::set<Id> expected;
  for (const Id& id : AllRangeIds()) {
    const bool delivered = id.first == 5 && id.second >= 2 && id.second < 6;
    if ((10 * (id.first - 1) + id.second) % 2 == 0 && !delivered) expected.insert(id);
  }
  EXPECT_EQ(got, expected);
}

// A filter credits what it drops to the next element it keeps, so the splits a pass reads
// to the end are delivered whole ([0, 10) each) and the dispatcher's log can fold them.
TEST(ProvenancePipelineTest, FilteredSplitsReadToTheEndAreDeliveredWhole) {
  for (std::string_view text :
       {"range(100) | filter(is_even) | batch(7)",
        "range(100) | filter(is_even, parallel=3) | batch(7)",
        "range(100) | filter(is_even) | batch(4) | unbatch() | batch(3)",
        "range(100) | filter(is_even) | filter(is_even, parallel=2) | map(square) | batch(5)"}) {
    SCOPED_TRACE(text);
    FakeFeed feed(RangeSplits());
    std::unique_ptr<ElementIterator> it = BuildFed(text, &feed);
    absl::StatusOr<std::vector<Element>> batches = Drain(*it);
    ASSERT_TRUE(batches.ok()) << batches.status();
    std::vector<Id> rows;
    DeliveryLog log;
    for (const Element& batch : *batches) {
      std::vector<Id> ids = Ids(batch);  // Each row's own ordinal, none of the skipped.
      EXPECT_EQ(static_cast<int64_t>(ids.size()), batch[0].shape()[0]);
      rows.insert(rows.end(), ids.begin(), ids.end());
      log.Add(*ElementProvenance(batch));
    }
    std::vector<Id> evens;
    for (const Id& id : AllRangeIds()) {
      if (id.second % 2 == 0) evens.push_back(id);
    }
    EXPECT_THAT(rows, ElementsAreArray(evens));
    for (int64_t key = 1; key <= 9; ++key) {
      EXPECT_THAT(log.Delivered(key), ElementsAre(OrdinalRangeIs(0, 10))) << "split " << key;
    }
    // 99 is dropped after the last element kept: nothing answers for it.
    EXPECT_THAT(log.Delivered(10), ElementsAre(OrdinalRangeIs(0, 9)));
  }
}

TEST(ProvenancePipelineTest, FilterCreditsSurviveAReissue) {
  // Worker A delivers two batches, [1, 3, 5] and [7, 9, 11]: with what they answer for
  // (the even values dropped before each), all of split 1 and 10 of split 2.
  absl::StatusOr<std::vector<Element>> delivered;
  DeliveryLog log;
  DeliverThenDie("range(100) | filter(is_odd, parallel=2) | prefetch(4) | batch(3)", 2, &delivered,
                 &log);
  ASSERT_TRUE(delivered.ok()) << delivered.status();
  EXPECT_THAT(log.Delivered(1), ElementsAre(OrdinalRangeIs(0, 10)));  // Whole: nothing to re-issue.
  EXPECT_THAT(log.Delivered(2), ElementsAre(OrdinalRangeIs(0, 2)));   // 10 dropped, 11 kept.

  absl::StatusOr<std::vector<Element>> rest =
      ReissueToWorkerB("range(100) | filter(is_odd) | batch(3)", log);
  ASSERT_TRUE(rest.ok()) << rest.status();
  std::vector<int64_t> values = FlatInt64s(*delivered);
  std::vector<int64_t> more = FlatInt64s(*rest);
  EXPECT_THAT(more, ElementsAre(13, 15, 17, 19));
  values.insert(values.end(), more.begin(), more.end());
  EXPECT_THAT(values, ElementsAre(1, 3, 5, 7, 9, 11, 13, 15, 17, 19));
}

TEST(ProvenancePipelineTest, FilterBeforeAnInterleaveCreditsWholeOuterElements) {
  // Outer elements 0, 2 and 4 are dropped; each kept one's first nested element answers
  // for the dropped one before it, as every nested ordinal it could have had, and for the
  // nested ordinals the kept one before it did not reach.
  FakeFeed feed({MakeSplit(1, 0, 6)});
  std::unique_ptr<ElementIterator> it = BuildFed(
      "range(6) | filter(is_odd) | interleave(range(10, 12), cycle_length=1) | batch(100)", &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 1u);
  EXPECT_THAT(Ids((*batches)[0]),
              ElementsAre(Id{1, Nested(1, 0)}, Id{1, Nested(1, 1)}, Id{1, Nested(3, 0)},
                          Id{1, Nested(3, 1)}, Id{1, Nested(5, 0)}, Id{1, Nested(5, 1)}));
  DeliveryLog log;
  log.Add(*ElementProvenance((*batches)[0]));
  // Outer element 5 ends with the last element produced, which, read one ahead, carries its
  // rest: the split is delivered whole.
  EXPECT_THAT(log.Delivered(1), ElementsAre(OrdinalRangeIs(0, Nested(6, 0))));

  // Re-issued with that: nothing is left to read.
  proto::Split reissued = MakeSplit(1, 0, 6);
  log.FillDelivered(&reissued);
  FakeFeed again({reissued});
  it = BuildFed(
      "range(6) | filter(is_odd) | interleave(range(10, 12), cycle_length=1) | batch(100)", &again);
  absl::StatusOr<std::vector<Element>> rest = Drain(*it);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_THAT(*rest, ::testing::IsEmpty());
}

TEST(ProvenancePipelineTest, FromTensorSlicesAndUnbatch) {
  FakeFeed feed({MakeSplit(9, 1, 5, {{1, 2}})});
  std::unique_ptr<ElementIterator> it =
      BuildFed("from_tensor_slices([10, 11, 12, 13, 14, 15]) | batch(2) | unbatch()", &feed);
  absl::StatusOr<std::vector<Element>> rows = Drain(*it);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(FlatInt64s(*rows), ElementsAre(11, 13, 14));  // Ordinal 1 (12) delivered.
  std::vector<Id> ids;
  for (const Element& row : *rows) {
    std::vector<Id> one = Ids(row);
    EXPECT_EQ(one.size(), 1u);
    ids.insert(ids.end(), one.begin(), one.end());
  }
  EXPECT_THAT(ids, ElementsAre(Id{9, 0}, Id{9, 2}, Id{9, 3}));
}

TEST(ProvenancePipelineTest, NoFeedMeansNoProvenance) {
  absl::StatusOr<std::vector<Element>> batches = DrainText("range(20) | map(square) | batch(7)");
  ASSERT_TRUE(batches.ok()) << batches.status();
  for (const Element& b : *batches) EXPECT_EQ(ElementProvenance(b), nullptr);
  // Untracked splits (key 0) carry none either.
  FakeFeed feed({MakeSplit(0, 0, 10)});
  std::unique_ptr<ElementIterator> it = BuildFed("range(100) | batch(4)", &feed);
  absl::StatusOr<std::vector<Element>> untracked = Drain(*it);
  ASSERT_TRUE(untracked.ok()) << untracked.status();
  EXPECT_EQ(FlatInt64s(*untracked).size(), 10u);
  for (const Element& b : *untracked) EXPECT_EQ(ElementProvenance(b), nullptr);
}

TEST(ProvenancePipelineTest, PaddedBatchesAndBucketsConcatenateRowProvenance) {
  const std::vector<std::string> first_words = {"a", "b", "d", "g", "h", "l"};
  for (std::string_view op : {"padded_batch(4)",
                              "bucket_by_sequence_length(bucket_boundaries=[3], "
                              "bucket_batch_sizes=[2, 2], padding_values=['_'])"}) {
    FakeFeed feed({MakeSplit(6, 0, 6, {{3, 4}})});  // 'g' was delivered.
    std::unique_ptr<ElementIterator> it =
        BuildFed(std::string("from_tensor_slices(['a', 'b c', 'd e f', 'g', 'h i j k', 'l m']) | "
                             "map(split_whitespace) | ") +
                     std::string(op),
                 &feed);
    absl::StatusOr<std::vector<Element>> batches = Drain(*it);
    ASSERT_TRUE(batches.ok()) << batches.status();
    std::vector<Id> all;
    for (const Element& batch : *batches) {
      std::vector<Id> ids = Ids(batch);
      const int64_t rows = batch[0].shape()[0], width = batch[0].shape()[1];
      ASSERT_EQ(static_cast<int64_t>(ids.size()), rows) << op;
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(batch[0].string_value(r * width), first_words[ids[r].second]) << op;
      }
      all.insert(all.end(), ids.begin(), ids.end());
    }
    EXPECT_THAT(all, UnorderedElementsAre(Id{6, 0}, Id{6, 1}, Id{6, 2}, Id{6, 4}, Id{6, 5}));
  }
}

TEST(ProvenancePipelineTest, InterleaveNestsOrdinalsUnderItsOuterElement) {
  // Outer 1 had inner elements 1 and 2 delivered, outer 2 all of them (never opened).
  FakeFeed feed({MakeSplit(1, 0, 4, {{Nested(1, 1), Nested(1, 3)}, {Nested(2, 0), Nested(3, 0)}})});
  std::unique_ptr<ElementIterator> it =
      BuildFed("range(4) | interleave(range(10, 13), cycle_length=2) | batch(3)", &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();
  std::vector<Id> all;
  for (const Element& batch : *batches) {
    std::vector<Id> ids = Ids(batch);
    ASSERT_EQ(static_cast<int64_t>(ids.size()), batch[0].shape()[0]);
    for (size_t r = 0; r < ids.size(); ++r) {
      EXPECT_EQ(batch[0].values<int64_t>()[r], 10 + (ids[r].second & 0xffffffff));
    }
    all.insert(all.end(), ids.begin(), ids.end());
  }
  EXPECT_THAT(all,
              UnorderedElementsAre(Id{1, Nested(0, 0)}, Id{1, Nested(0, 1)}, Id{1, Nested(0, 2)},
                                   Id{1, Nested(1, 0)}, Id{1, Nested(3, 0)}, Id{1, Nested(3, 1)},
                                   Id{1, Nested(3, 2)}));
}

// An unseeded shuffle inside the interleave that numbers a split's elements: the worker
// that takes the split over must shuffle each outer element's nested pipeline as the dead
// one did, or the places it drops as delivered hold other values (some lost, some twice).
// Each build draws its own random seed, as two workers do.
TEST(ProvenancePipelineTest, AShuffleInsideTheInterleaveReplaysOnTheWorkerThatTakesOver) {
  constexpr char kPipeline[] =
      "range(20) | interleave(range(100) | shuffle(100), cycle_length=2) | batch(50)";
  absl::StatusOr<std::vector<Element>> delivered;
  DeliveryLog log;
  DeliverThenDie(kPipeline, 5, &delivered, &log);
  ASSERT_TRUE(delivered.ok()) << delivered.status();
  absl::StatusOr<std::vector<Element>> rest = ReissueToWorkerB(kPipeline, log);
  ASSERT_TRUE(rest.ok()) << rest.status();
  // (split, outer ordinal) -> how often each value 0..99 came.
  std::map<std::pair<int64_t, int64_t>, std::vector<int>> seen;
  int64_t elements = 0;
  for (const std::vector<Element>* part : {&*delivered, &*rest}) {
    for (const Element& batch : *part) {
      const std::vector<Id> ids = Ids(batch);
      ASSERT_EQ(static_cast<int64_t>(ids.size()), batch[0].shape()[0]);
      for (size_t r = 0; r < ids.size(); ++r) {
        std::vector<int>& counts = seen[{ids[r].first, ids[r].second >> 32}];
        counts.resize(100);
        ++counts[static_cast<size_t>(batch[0].values<int64_t>()[r])];
        ++elements;
      }
    }
  }
  EXPECT_EQ(elements, 2000);
  ASSERT_EQ(seen.size(), 20u);
  for (const auto& [outer, counts] : seen) {
    EXPECT_EQ(std::count(counts.begin(), counts.end(), 1), 100)
        << "split " << outer.first << " outer " << outer.second << ": a value lost or twice";
  }
}

// One split in two passes of a repeat() (keys that differ only in the repetition): a nested
// shuffle that reshuffles each iteration shuffles each pass anew, one that does not keeps
// its order, and each alike on every worker. Before, the seed came from the whole key, so
// the second reshuffled too.
TEST(ProvenancePipelineTest, ANestedShuffleInADynamicPassReshufflesOnlyWhenAsked) {
  auto order = [](bool reshuffle, int64_t repetition) {
    const std::string text =
        absl::StrCat("range(10) | interleave(range(100) | shuffle(100, reshuffle_each_iteration=",
                     reshuffle ? "true" : "false", ")) | batch(1000)");
    FakeFeed feed({MakeSplit(MakeSplitKey(repetition, 3), 0, 10)});
    std::unique_ptr<ElementIterator> it = BuildFed(text, &feed);
    absl::StatusOr<std::vector<Element>> all = Drain(*it);
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? FlatInt64s(*all) : std::vector<int64_t>{};
  };
  EXPECT_EQ(order(false, 0).size(), 1000u);
  EXPECT_EQ(order(false, 0), order(false, 1)) << "reshuffled without being asked to";
  EXPECT_NE(order(true, 0), order(true, 1)) << "the same order in both passes";
  EXPECT_EQ(order(true, 1), order(true, 1)) << "another worker shuffles the pass otherwise";
}

// A nested repeat builds its shuffle once per iteration, counting instances up from the
// pass: passes are that far apart that the second iteration of pass 0 does not reuse the
// first of pass 1's order (pass 0 took instances 0 and 1, pass 1 took 1 and 2).
TEST(ProvenancePipelineTest, ANestedRepeatsIterationsDoNotReuseTheNextPasssOrder) {
  auto order = [](int64_t repetition) {
    FakeFeed feed({MakeSplit(MakeSplitKey(repetition, 3), 0, 1)});
    std::unique_ptr<ElementIterator> it = BuildFed(
        "range(1) | interleave(range(100) | shuffle(100) | repeat(2), cycle_length=1) | "
        "batch(1000)",
        &feed);
    absl::StatusOr<std::vector<Element>> all = Drain(*it);
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? FlatInt64s(*all) : std::vector<int64_t>{};
  };
  const std::vector<int64_t> pass0 = order(0);
  const std::vector<int64_t> pass1 = order(1);
  ASSERT_EQ(pass0.size(), 200u);
  ASSERT_EQ(pass1.size(), 200u);
  EXPECT_NE(std::vector<int64_t>(pass0.begin(), pass0.begin() + 100),
            std::vector<int64_t>(pass0.begin() + 100, pass0.end()))
      << "a nested repeat did not reshuffle";
  EXPECT_NE(std::vector<int64_t>(pass0.begin() + 100, pass0.end()),
            std::vector<int64_t>(pass1.begin(), pass1.begin() + 100))
      << "pass 1 began with pass 0's last order";
}

// The same one level down: an interleave nested in the split's interleave starts its own
// chains from an instance of the outer chain, which must still name the pass (shifted by 32
// bits twice, it wrapped to the same instance in every pass).
TEST(ProvenancePipelineTest, AShuffleTwoInterleavesDownReshufflesEachPass) {
  auto order = [](int64_t repetition) {
    FakeFeed feed({MakeSplit(MakeSplitKey(repetition, 3), 0, 1)});
    std::unique_ptr<ElementIterator> it = BuildFed(
        "range(1) | interleave(range(1) | interleave(range(100) | shuffle(100))) | batch(1000)",
        &feed);
    absl::StatusOr<std::vector<Element>> all = Drain(*it);
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() ? FlatInt64s(*all) : std::vector<int64_t>{};
  };
  ASSERT_EQ(order(0).size(), 100u);
  EXPECT_NE(order(0), order(1)) << "the same order in both passes";
  EXPECT_EQ(order(1), order(1));
}

TEST(ProvenancePipelineTest, InterleaveAfterBatchKeepsTheSourceOrdinals) {
  // A batch before the interleave: the source's ordinals stay final (it drops ordinal 0),
  // and each outer batch's provenance goes to its first nested element.
  FakeFeed feed({MakeSplit(1, 0, 4, {{0, 1}})});
  std::unique_ptr<ElementIterator> it =
      BuildFed("range(4) | batch(2) | interleave(range(3)) | batch(100)", &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 1u);
  EXPECT_THAT(FlatInt64s(*batches), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(ElementProvenance((*batches)[0])->runs(), ElementsAre(ProvRun{1, 1, 3}));
}

}  // namespace
}  // namespace sluice::engine
