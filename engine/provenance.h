// Element provenance: which elements of which DYNAMIC splits a pipeline element (or a
// batch) was made from, so that the control plane can re-issue a dead worker's splits
// without delivering any element twice.
//
// Each element of a tracked split (proto::Split.key != 0) gets an ordinal within that
// split where its identity is born:
//   range, from_tensor_slices   index - split.begin
//   list_files                  position of the file name within the split
//   readers with files=[...]    (file position within the split << 32) | record index
//   interleave                  (outer element's ordinal << 32) | index of the element
//                               within the outer element's nested pipeline
// The rule is uniform: where an ordinal is assigned, the split's delivered ordinals
// (Split.delivered) are dropped. Only the final ordinal counts: when a range,
// from_tensor_slices or list_files source is followed by an interleave (with only
// element-wise stages between), the source tags its elements (the outer ordinals) without
// dropping anything, and that interleave re-tags and drops (BuildPipeline decides, see
// OpBuildArgs::final_ordinals). The nested pipeline must yield the same elements in the
// same order on every worker: that interleave seeds it from the job, the split and the
// outer element (PipelineContext::replay_seed), so an unseeded shuffle inside it replays
// alike on the worker a lost task's splits go to.
//
// Elements carry their provenance on component 0 (Tensor::provenance, ElementProvenance).
// map, filter and parse_example keep it; batch, padded_batch and bucket_by_sequence_length
// concatenate their rows'; unbatch hands row i its share. Elements of untracked splits,
// and every element outside DYNAMIC mode, carry none (a null pointer, no allocation).
//
// Ordinals that will never be produced are credited to the next element that is (skipped
// runs, DroppedCredit): they are reported delivered with it, so a re-issue skips them,
// which is what the pipeline would do with them again. Two stages credit:
//   filter                      the elements it drops
//   readers with files=[...],   the rest of a file's (outer element's) nested ordinal range
//   interleave                  once it ended: a file of 3 records is delivered as
//                               [p << 32, (p + 1) << 32), not [p << 32, (p << 32) | 3);
//                               they read one element ahead (engine/look_ahead.h), so
//                               a file's last element carries its rest
// Without that a split's delivered ordinals would keep holes for good, or differ from its
// neighbours' by the sizes of its files, and the dispatcher's log could not fold a
// finished split into its neighbours. What ends with no element after it (an empty file,
// or elements a filter drops, at the end of a worker's pass) is credited to nothing; a
// filter does not read ahead, as that could hold a kept element back for as long as no
// other one comes (`filter | take(n)` on an endless input would never end). Skipped runs
// are no rows of the element: total(), runs() and Slice() leave them out, so unbatch still hands
// each row its own ordinal.
//
// A worker reports each batch's Provenance with it (ToProto); the dispatcher accumulates
// what clients received in a DeliveryLog and fills Split.delivered when it re-issues:
//
//   Provenance p;
//   p.Append(/*split_key=*/3, /*ordinal=*/0);
//   p.Append(3, 1);                        // merged into one run {3, 0, 2}
//   p.Append(5, 7);                        // a second run {5, 7, 1}
//   p.ToProto(response.mutable_provenance());
//
//   DeliveryLog log;
//   log.Add(p);
//   proto::Split reissued = ...;           // key 3
//   log.FillDelivered(&reissued);          // delivered = [[0, 2)]
//   DeliveredSet::FromSplit(reissued).Contains(1);  // true: the source drops it
#ifndef SLUICE_ENGINE_PROVENANCE_H_
#define SLUICE_ENGINE_PROVENANCE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"
#include "engine/tensor.h"

namespace sluice::engine {

// Bits of a nested ordinal that hold the inner index (see above).
inline constexpr int kInnerOrdinalBits = 32;

// (outer << 32) | inner. InvalidArgument unless 0 <= outer < 2^30 and 0 <= inner < 2^32
// (so that the end of an outer element's ordinals, (outer + 1) << 32, fits too).
[[nodiscard]] absl::StatusOr<int64_t> NestedOrdinal(int64_t outer, int64_t inner);

class Provenance {
 public:
  // `count` elements of split `split_key` with ordinals first_ordinal, first_ordinal + 1, ...
  struct Run {
    int64_t split_key = 0;
    int64_t first_ordinal = 0;
    int64_t count = 0;
    friend bool operator==(const Run&, const Run&) = default;
  };

  Provenance() = default;

  // A single element's provenance, shared (what sources attach to an element).
  static std::shared_ptr<const Provenance> Of(int64_t split_key, int64_t ordinal);

  // One element; merged into the last run when it continues it (same key, next ordinal).
  void Append(int64_t split_key, int64_t ordinal);
  // A run (ignored when count <= 0); merged into the last run when it continues it.
  void AppendRun(const Run& run);
  // No runs, no skipped runs.
  void Clear() {
    runs_.clear();
    skipped_.clear();
    total_ = 0;
  }
  // Other's runs and skipped runs, each to its kind.
  void AppendAll(const Provenance& other);
  // Elements dropped on the way that this element answers for (see above); merged into the
  // last skipped run when it continues it.
  void AppendSkipped(const Run& run);

  std::span<const Run> runs() const { return {runs_.data(), runs_.size()}; }
  std::span<const Run> skipped() const { return {skipped_.data(), skipped_.size()}; }
  // No runs and no skipped runs.
  bool empty() const { return runs_.empty() && skipped_.empty(); }
  // Elements in all runs (skipped runs not counted).
  int64_t total() const { return total_; }

  // Elements [offset, offset + count) of the runs' flattened element list, clamped to it.
  Provenance Slice(int64_t offset, int64_t count) const;

  // Appends the runs, then the skipped runs, to *out (does not clear it): the receiver of
  // a batch reports both as delivered.
  void ToProto(google::protobuf::RepeatedPtrField<proto::ProvenanceRun>* out) const;
  // Runs from the wire, merged as by AppendRun. InvalidArgument for a run with key 0,
  // count <= 0, a negative first ordinal, or an end beyond int64.
  [[nodiscard]] static absl::StatusOr<Provenance> FromProto(
      const google::protobuf::RepeatedPtrField<proto::ProvenanceRun>& runs);

  // "{3:[0, 2), 5:[7, 8)}".
  std::string DebugString() const;

  friend bool operator==(const Provenance& a, const Provenance& b) {
    return a.runs_ == b.runs_ && a.skipped_ == b.skipped_;
  }

 private:
  static void AppendMerged(const Run& run, absl::InlinedVector<Run, 1>* runs);

  absl::InlinedVector<Run, 1> runs_;
  absl::InlinedVector<Run, 1> skipped_;
  int64_t total_ = 0;
};

// The nested ordinals an outer element that ended after `inner` elements never yielded,
// [(outer << 32) | inner, (outer + 1) << 32), as a run of `split_key`; count 0 when they
// are out of NestedOrdinal's range.
[[nodiscard]] Provenance::Run NestedRest(int64_t split_key, int64_t outer, int64_t inner);

// `own` (null: none) with `skipped` added as skipped runs; `own` itself when there are none.
std::shared_ptr<const Provenance> WithSkipped(std::shared_ptr<const Provenance> own,
                                              std::span<const Provenance::Run> skipped);

// What a stage gathers of the ordinals it will never produce (see above), to credit to
// the next element it does produce. Bounded: past kMaxRuns runs the credit is let go,
// which only leaves holes that a re-issue fills by reading those elements again.
//
//   DroppedCredit credit;
//   credit.Drop(ElementProvenance(rejected));   // for each element a filter drops
//   credit.DropRange({key, first, count});      // ordinals a source found it has not
//   credit.CreditTo(kept);                      // the next one kept answers for them
class DroppedCredit {
 public:
  static constexpr size_t kMaxRuns = 64;

  // The element's runs and skipped runs. Null is ignored.
  void Drop(const Provenance* dropped);
  // Ordinals of a tracked split. Ignored when split_key == 0 or count <= 0.
  void DropRange(const Provenance::Run& range);
  // Sets the element's provenance to its own plus the credit (as skipped runs), then
  // starts over. Does nothing to an element without components.
  void CreditTo(Element& kept);

 private:
  Provenance pending_;  // Only skipped runs.
};

// The provenance of a batch of `rows`: theirs concatenated in row order, runs merged; rows
// without one contribute nothing. Null when no row has any (then nothing is allocated).
std::shared_ptr<const Provenance> ConcatProvenance(std::span<const Element> rows);

// Delivered ordinals of one split: sorted, disjoint, non-adjacent intervals [begin, end).
class DeliveredSet {
 public:
  struct Interval {
    int64_t begin = 0;
    int64_t end = 0;
    friend bool operator==(const Interval&, const Interval&) = default;
  };

  DeliveredSet() = default;
  // Ranges in any order, overlapping or not; empty and inverted ones are ignored.
  static DeliveredSet FromRanges(const google::protobuf::RepeatedPtrField<proto::OrdinalRange>& r);
  static DeliveredSet FromSplit(const proto::Split& split) { return FromRanges(split.delivered()); }

  // Adds [begin, end) (ignored when empty), merging with overlapping and adjacent intervals.
  void Add(int64_t begin, int64_t end);

  bool empty() const { return intervals_.empty(); }
  bool Contains(int64_t ordinal) const;
  // Whether every ordinal of [begin, end) is delivered (true for an empty range).
  bool ContainsAll(int64_t begin, int64_t end) const;
  // The smallest ordinal >= `ordinal` that is not delivered.
  int64_t NextUndelivered(int64_t ordinal) const;
  // Ordinals in all intervals.
  int64_t count() const;

  std::span<const Interval> intervals() const { return intervals_; }
  std::vector<proto::OrdinalRange> ToRanges() const;

 private:
  // The first interval with end > ordinal (intervals_.size() when none).
  size_t UpperIndex(int64_t ordinal) const;

  std::vector<Interval> intervals_;
};

// The dispatcher's record of what clients received, per split key: Add every delivered
// batch's provenance, then FillDelivered a split before re-issuing it. Thread-compatible.
class DeliveryLog {
 public:
  void Add(const Provenance& provenance);
  // Ignored when split_key == 0 or count <= 0.
  void Add(const Provenance::Run& run);

  // The split's delivered ordinals as sorted, disjoint, merged ranges (empty when none).
  std::vector<proto::OrdinalRange> Delivered(int64_t split_key) const;
  // Replaces split->delivered with Delivered(split->key()).
  void FillDelivered(proto::Split* split) const;
  // Null when nothing of the split was delivered.
  const DeliveredSet* Find(int64_t split_key) const;
  // Forgets a split (e.g. once its whole pass is done).
  void Erase(int64_t split_key) { splits_.erase(split_key); }
  size_t split_count() const { return splits_.size(); }

 private:
  absl::flat_hash_map<int64_t, DeliveredSet> splits_;
};

// Per built pipeline (PipelineContext::delivered): the delivered sets of the tracked
// splits its source received, so that a later stage that assigns the final ordinals
// (interleave) can drop delivered elements. Only splits with a non-empty delivered list
// are kept, so it stays as small as the re-issued splits. Thread-safe: sources may run on
// prefetch or parallel-map threads.
class DeliveredRegistry {
 public:
  // Records the split's delivered set (replacing an earlier one of the same key) and
  // returns it; null when the key is 0 or nothing is delivered (then the key's earlier
  // set, if any, is dropped).
  std::shared_ptr<const DeliveredSet> Register(const proto::Split& split);
  // Null when nothing of the split is delivered.
  std::shared_ptr<const DeliveredSet> Find(int64_t split_key) const;
  bool IsDelivered(int64_t split_key, int64_t ordinal) const;

 private:
  mutable std::mutex mu_;
  absl::flat_hash_map<int64_t, std::shared_ptr<const DeliveredSet>> sets_;
};

// What a source does with each split it receives: the split's delivered set, registered
// with `registry` when that is not null; null when the split is untracked (key 0) or
// nothing of it is delivered.
std::shared_ptr<const DeliveredSet> TrackSplit(const proto::Split& split,
                                               DeliveredRegistry* registry);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_PROVENANCE_H_
