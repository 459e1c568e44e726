#include "engine/provenance.h"

#include <memory>
#include <vector>

#include "engine/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ProvRun = Provenance::Run;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<ProvRun> Runs(const Provenance& p) { return {p.runs().begin(), p.runs().end()}; }

// [begin, end) pairs of ranges, for matching.
std::vector<std::pair<int64_t, int64_t>> Pairs(const std::vector<proto::OrdinalRange>& ranges) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const proto::OrdinalRange& r : ranges) out.emplace_back(r.begin(), r.end());
  return out;
}

proto::Split SplitWith(int64_t key, std::vector<std::pair<int64_t, int64_t>> delivered) {
  proto::Split split;
  split.set_key(key);
  for (auto [b, e] : delivered) {
    proto::OrdinalRange* r = split.add_delivered();
    r->set_begin(b);
    r->set_end(e);
  }
  return split;
}

TEST(ProvenanceTest, AppendMergesConsecutiveOrdinalsOfOneSplit) {
  Provenance p;
  p.Append(3, 0);
  p.Append(3, 1);
  p.Append(3, 2);
  p.Append(5, 7);
  p.Append(3, 3);  // Continues split 3, but not the last run.
  p.Append(3, 5);  // A gap.
  EXPECT_THAT(Runs(p),
              ElementsAre(ProvRun{3, 0, 3}, ProvRun{5, 7, 1}, ProvRun{3, 3, 1}, ProvRun{3, 5, 1}));
  EXPECT_EQ(p.total(), 6);
  EXPECT_EQ(p.DebugString(), "{3:[0, 3), 5:[7, 8), 3:[3, 4), 3:[5, 6)}");
}

TEST(ProvenanceTest, AppendAllMergesAtTheSeam) {
  Provenance a;
  a.Append(1, 10);
  a.Append(1, 11);
  Provenance b;
  b.AppendRun(ProvRun{1, 12, 4});
  b.Append(2, 0);
  b.AppendRun(ProvRun{2, 1, 0});  // Empty: ignored.
  a.AppendAll(b);
  EXPECT_THAT(Runs(a), ElementsAre(ProvRun{1, 10, 6}, ProvRun{2, 0, 1}));
  EXPECT_EQ(a.total(), 7);
  EXPECT_TRUE(Provenance().empty());
  EXPECT_EQ(Provenance().total(), 0);
}

TEST(ProvenanceTest, SliceTakesElementsOfTheFlattenedRuns) {
  Provenance p;
  p.AppendRun(ProvRun{1, 0, 3});
  p.AppendRun(ProvRun{2, 10, 2});
  p.AppendRun(ProvRun{1, 5, 4});
  EXPECT_THAT(Runs(p.Slice(0, 1)), ElementsAre(ProvRun{1, 0, 1}));
  EXPECT_THAT(Runs(p.Slice(2, 4)),
              ElementsAre(ProvRun{1, 2, 1}, ProvRun{2, 10, 2}, ProvRun{1, 5, 1}));
  EXPECT_THAT(Runs(p.Slice(7, 100)), ElementsAre(ProvRun{1, 7, 2}));
  EXPECT_TRUE(p.Slice(9, 1).empty());
  EXPECT_EQ(p.Slice(0, 9), p);
}

TEST(ProvenanceTest, ProtoRoundTrip) {
  Provenance p;
  p.AppendRun(ProvRun{4, 0, 10});
  p.AppendRun(ProvRun{9, int64_t{3} << 32, 2});
  google::protobuf::RepeatedPtrField<proto::ProvenanceRun> field;
  p.ToProto(&field);
  ASSERT_EQ(field.size(), 2);
  EXPECT_EQ(field[1].split_key(), 9);
  EXPECT_EQ(field[1].first_ordinal(), int64_t{3} << 32);
  EXPECT_EQ(field[1].count(), 2);
  absl::StatusOr<Provenance> back = Provenance::FromProto(field);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  EXPECT_EQ(back->total(), 12);

  // ToProto appends; FromProto merges runs that continue each other.
  Provenance q;
  q.AppendRun(ProvRun{9, (int64_t{3} << 32) + 2, 1});
  q.ToProto(&field);
  absl::StatusOr<Provenance> merged = Provenance::FromProto(field);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_THAT(Runs(*merged), ElementsAre(ProvRun{4, 0, 10}, ProvRun{9, int64_t{3} << 32, 3}));
}

TEST(ProvenanceTest, FromProtoRejectsBadRuns) {
  for (ProvRun bad :
       {ProvRun{0, 0, 1}, ProvRun{1, 0, 0}, ProvRun{1, -1, 2}, ProvRun{1, INT64_MAX - 1, 5}}) {
    google::protobuf::RepeatedPtrField<proto::ProvenanceRun> field;
    proto::ProvenanceRun* r = field.Add();
    r->set_split_key(bad.split_key);
    r->set_first_ordinal(bad.first_ordinal);
    r->set_count(bad.count);
    EXPECT_EQ(Provenance::FromProto(field).status().code(), absl::StatusCode::kInvalidArgument)
        << bad.split_key << " " << bad.first_ordinal << " " << bad.count;
  }
}

TEST(ProvenanceTest, NestedOrdinals) {
  EXPECT_EQ(*NestedOrdinal(0, 5), 5);
  EXPECT_EQ(*NestedOrdinal(3, 7), (int64_t{3} << 32) | 7);
  EXPECT_FALSE(NestedOrdinal(-1, 0).ok());
  EXPECT_FALSE(NestedOrdinal(int64_t{1} << 30, 0).ok());
  EXPECT_FALSE(NestedOrdinal(0, int64_t{1} << 32).ok());
  EXPECT_TRUE(NestedOrdinal((int64_t{1} << 30) - 1, (int64_t{1} << 32) - 1).ok());
}

TEST(ProvenanceTest, TensorsCarryProvenanceThroughCopiesAndMoves) {
  Tensor t = Tensor::Scalar<int64_t>(1);
  EXPECT_EQ(t.provenance(), nullptr);
  t.set_provenance(Provenance::Of(7, 3));
  Tensor copy = t;
  ASSERT_NE(copy.provenance(), nullptr);
  EXPECT_THAT(Runs(*copy.provenance()), ElementsAre(ProvRun{7, 3, 1}));
  Tensor assigned;
  assigned = copy;
  EXPECT_EQ(assigned.provenance(), t.provenance());
  Tensor moved = std::move(copy);
  EXPECT_EQ(moved.provenance(), t.provenance());
  // Equality ignores provenance.
  EXPECT_EQ(Tensor::Scalar<int64_t>(1), t);

  Element e = {t, Tensor::Scalar<int64_t>(2)};
  EXPECT_EQ(ElementProvenance(e), t.provenance().get());
  SetElementProvenance(e, nullptr);
  EXPECT_EQ(ElementProvenance(e), nullptr);
  Element empty;
  SetElementProvenance(empty, Provenance::Of(1, 1));  // No components: nothing to carry it.
  EXPECT_EQ(ElementProvenance(empty), nullptr);
  EXPECT_EQ(SharedElementProvenance(empty), nullptr);
}

TEST(ProvenanceTest, ConcatProvenanceJoinsRowsInOrder) {
  std::vector<Element> rows(4);
  for (int64_t i = 0; i < 4; ++i) rows[i].push_back(Tensor::Scalar<int64_t>(i));
  EXPECT_EQ(ConcatProvenance(rows), nullptr);  // None: nothing allocated.
  rows[0][0].set_provenance(Provenance::Of(2, 8));
  rows[1][0].set_provenance(Provenance::Of(2, 9));
  rows[3][0].set_provenance(Provenance::Of(5, 0));  // rows[2] has none.
  std::shared_ptr<const Provenance> p = ConcatProvenance(rows);
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(Runs(*p), ElementsAre(ProvRun{2, 8, 2}, ProvRun{5, 0, 1}));
}

TEST(ProvenanceTest, SkippedRunsAreReportedButAreNoRows) {
  Provenance p;
  p.Append(4, 2);
  p.AppendSkipped(ProvRun{4, 0, 2});
  p.AppendSkipped(ProvRun{4, 3, 0});  // Empty: ignored.
  EXPECT_EQ(p.total(), 1);
  EXPECT_THAT(Runs(p), ElementsAre(ProvRun{4, 2, 1}));
  EXPECT_THAT(p.skipped(), ElementsAre(ProvRun{4, 0, 2}));
  EXPECT_THAT(Runs(p.Slice(0, 5)), ElementsAre(ProvRun{4, 2, 1}));
  EXPECT_TRUE(p.Slice(0, 5).skipped().empty());
  EXPECT_EQ(p.DebugString(), "{4:[2, 3)} skipped {4:[0, 2)}");

  google::protobuf::RepeatedPtrField<proto::ProvenanceRun> field;
  p.ToProto(&field);
  absl::StatusOr<Provenance> reported = Provenance::FromProto(field);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_THAT(Runs(*reported), ElementsAre(ProvRun{4, 2, 1}, ProvRun{4, 0, 2}));

  DeliveryLog log;
  log.Add(p);
  EXPECT_THAT(Pairs(log.Delivered(4)), ElementsAre(std::pair<int64_t, int64_t>{0, 3}));

  // A batch's provenance keeps each row's skipped runs apart from its rows.
  Provenance q;
  q.Append(4, 3);
  q.AppendSkipped(ProvRun{4, 4, 1});
  p.AppendAll(q);
  EXPECT_THAT(Runs(p), ElementsAre(ProvRun{4, 2, 2}));
  EXPECT_THAT(p.skipped(), ElementsAre(ProvRun{4, 0, 2}, ProvRun{4, 4, 1}));
  EXPECT_FALSE(p == q);
}

TEST(DroppedCreditTest, TheNextElementKeptAnswersForTheDroppedOnes) {
  DroppedCredit credit;
  std::shared_ptr<const Provenance> first = Provenance::Of(7, 0);
  std::shared_ptr<const Provenance> second = Provenance::Of(7, 1);
  credit.Drop(first.get());
  credit.Drop(second.get());
  credit.Drop(nullptr);  // An element without provenance adds nothing.
  Element kept = {Tensor::Scalar<int64_t>(5)};
  SetElementProvenance(kept, Provenance::Of(7, 2));
  credit.CreditTo(kept);
  ASSERT_NE(ElementProvenance(kept), nullptr);
  EXPECT_THAT(Runs(*ElementProvenance(kept)), ElementsAre(ProvRun{7, 2, 1}));
  EXPECT_THAT(ElementProvenance(kept)->skipped(), ElementsAre(ProvRun{7, 0, 2}));
  EXPECT_EQ(*first, *Provenance::Of(7, 0));  // The dropped ones' provenance is not changed.

  // The credit starts over: the next element kept answers only for itself.
  Element next = {Tensor::Scalar<int64_t>(6)};
  SetElementProvenance(next, Provenance::Of(7, 3));
  credit.CreditTo(next);
  EXPECT_TRUE(ElementProvenance(next)->skipped().empty());
}

TEST(DroppedCreditTest, RangesASourceWillNeverProduceAreCreditedToo) {
  DroppedCredit credit;
  credit.DropRange(ProvRun{0, 0, 5});  // Untracked: nothing to credit.
  credit.DropRange(ProvRun{3, 7, 0});  // Empty.
  Element untouched = {Tensor::Scalar<int64_t>(0)};
  credit.CreditTo(untouched);
  EXPECT_EQ(ElementProvenance(untouched), nullptr);

  credit.DropRange(ProvRun{3, 7, 3});
  credit.DropRange(ProvRun{3, 10, 6});  // Continues the last range: merged.
  credit.Drop(Provenance::Of(4, 0).get());
  Element kept = {Tensor::Scalar<int64_t>(1)};  // An element of no tracked split.
  credit.CreditTo(kept);
  ASSERT_NE(ElementProvenance(kept), nullptr);
  EXPECT_TRUE(ElementProvenance(kept)->runs().empty());
  EXPECT_EQ(ElementProvenance(kept)->total(), 0);
  EXPECT_THAT(ElementProvenance(kept)->skipped(), ElementsAre(ProvRun{3, 7, 9}, ProvRun{4, 0, 1}));
}

TEST(NestedRestTest, IsWhatAnOuterElementDidNotReach) {
  const int64_t first = *NestedOrdinal(2, 5);
  EXPECT_EQ(NestedRest(3, 2, 5), (ProvRun{3, first, *NestedOrdinal(3, 0) - first}));
  EXPECT_EQ(NestedRest(3, 2, 0).count, int64_t{1} << kInnerOrdinalBits);  // An empty one.
  EXPECT_EQ(NestedRest(3, -1, 0).count, 0);                               // Out of range.
  EXPECT_EQ(NestedRest(3, 2, int64_t{1} << kInnerOrdinalBits).count, 0);
}

TEST(DroppedCreditTest, TooScatteredACreditIsLetGo) {
  DroppedCredit credit;
  // Every other ordinal: one run each, none merge.
  for (int64_t i = 0; i <= static_cast<int64_t>(DroppedCredit::kMaxRuns); ++i) {
    credit.Drop(Provenance::Of(1, 2 * i).get());
  }
  Element kept = {Tensor::Scalar<int64_t>(0)};
  SetElementProvenance(kept, Provenance::Of(2, 0));
  credit.CreditTo(kept);
  // The first kMaxRuns were let go when one more came; only the last is credited.
  EXPECT_THAT(ElementProvenance(kept)->skipped(),
              ElementsAre(ProvRun{1, 2 * static_cast<int64_t>(DroppedCredit::kMaxRuns), 1}));
}

TEST(DeliveredSetTest, FromRangesSortsAndMerges) {
  DeliveredSet set =
      DeliveredSet::FromSplit(SplitWith(1, {{7, 10}, {0, 4}, {3, 5}, {6, 6}, {10, 12}}));
  EXPECT_THAT(set.intervals(),
              ElementsAre(DeliveredSet::Interval{0, 5}, DeliveredSet::Interval{7, 12}));
  EXPECT_EQ(set.count(), 10);
  for (int64_t o : {0, 4, 7, 11}) EXPECT_TRUE(set.Contains(o)) << o;
  for (int64_t o : {-1, 5, 6, 12, 100}) EXPECT_FALSE(set.Contains(o)) << o;
  EXPECT_TRUE(set.ContainsAll(7, 12));
  EXPECT_TRUE(set.ContainsAll(3, 3));
  EXPECT_FALSE(set.ContainsAll(4, 8));
  EXPECT_EQ(set.NextUndelivered(0), 5);
  EXPECT_EQ(set.NextUndelivered(5), 5);
  EXPECT_EQ(set.NextUndelivered(8), 12);
  EXPECT_TRUE(DeliveredSet::FromSplit(SplitWith(1, {{5, 2}})).empty());
}

TEST(DeliveredSetTest, AddMergesOverlappingAndAdjacentIntervals) {
  DeliveredSet set;
  set.Add(10, 12);
  set.Add(0, 2);
  set.Add(5, 6);
  set.Add(4, 4);  // Empty.
  EXPECT_EQ(set.intervals().size(), 3u);
  set.Add(2, 5);  // Joins [0, 2) and [5, 6).
  EXPECT_THAT(set.intervals(),
              ElementsAre(DeliveredSet::Interval{0, 6}, DeliveredSet::Interval{10, 12}));
  set.Add(1, 20);  // Swallows everything.
  EXPECT_THAT(set.intervals(), ElementsAre(DeliveredSet::Interval{0, 20}));
}

TEST(DeliveryLogTest, AccumulatesDeliveriesPerSplit) {
  DeliveryLog log;
  Provenance batch1;  // Out of order and interleaved across splits, as shuffles make it.
  batch1.Append(3, 0);
  batch1.Append(3, 1);
  batch1.Append(8, 5);
  batch1.Append(3, 8);
  log.Add(batch1);
  Provenance batch2;
  batch2.AppendRun(ProvRun{3, 2, 2});
  batch2.AppendRun(ProvRun{3, 7, 1});
  batch2.AppendRun(ProvRun{0, 0, 5});  // Untracked: ignored.
  log.Add(batch2);
  EXPECT_THAT(Pairs(log.Delivered(3)), ElementsAre(std::pair{0, 4}, std::pair{7, 9}));
  EXPECT_THAT(Pairs(log.Delivered(8)), ElementsAre(std::pair{5, 6}));
  EXPECT_THAT(log.Delivered(4), IsEmpty());
  EXPECT_EQ(log.split_count(), 2u);

  proto::Split split = SplitWith(3, {{100, 200}});  // Replaced, not merged.
  log.FillDelivered(&split);
  EXPECT_THAT(Pairs({split.delivered().begin(), split.delivered().end()}),
              ElementsAre(std::pair{0, 4}, std::pair{7, 9}));
  ASSERT_NE(log.Find(3), nullptr);
  EXPECT_TRUE(log.Find(3)->Contains(8));
  log.Erase(3);
  EXPECT_EQ(log.Find(3), nullptr);
}

TEST(DeliveredRegistryTest, KeepsOnlyTrackedSplitsWithDeliveries) {
  DeliveredRegistry registry;
  EXPECT_EQ(registry.Register(SplitWith(0, {{0, 4}})), nullptr);  // Untracked.
  EXPECT_EQ(registry.Register(SplitWith(2, {})), nullptr);
  std::shared_ptr<const DeliveredSet> set = registry.Register(SplitWith(2, {{1, 3}}));
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(registry.Find(2), set);
  EXPECT_TRUE(registry.IsDelivered(2, 2));
  EXPECT_FALSE(registry.IsDelivered(2, 3));
  EXPECT_FALSE(registry.IsDelivered(0, 1));
  EXPECT_EQ(registry.Register(SplitWith(2, {})), nullptr);  // Re-issued clean: forgotten.
  EXPECT_EQ(registry.Find(2), nullptr);
  EXPECT_EQ(TrackSplit(SplitWith(5, {{0, 1}}), nullptr)->count(), 1);
  EXPECT_EQ(TrackSplit(SplitWith(5, {}), nullptr), nullptr);
}

}  // namespace
}  // namespace sluice::engine
