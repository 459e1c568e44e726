// What clients reported receiving of a DYNAMIC job's splits (the dispatcher's side of
// exactly-once, see engine/provenance.h), in memory that grows with the splits still in
// progress rather than with every split the job ever handed out.
//
// A split's delivered ordinals are kept as sorted, disjoint, merged ranges. Consecutive
// split keys whose ranges are the same single range (splits of equal size, all delivered:
// [0, 256) each, say) collapse into one entry, so a pass over a billion elements read to
// the end costs a handful of entries instead of millions. Sources and filters credit what
// they will never produce (engine/provenance.h), so a split read to the end has no holes
// and a split of files is whole ([0, files << 32)) whatever their sizes; a split whose
// ordinals keep holes for good (an empty file or filtered elements ended a worker's pass)
// stays an entry of its own.
//
//   DeliveryLog log;
//   log.Record(/*split_key=*/1, /*first_ordinal=*/0, /*count=*/256);
//   log.Record(2, 0, 256);                 // keys 1..2 now share one entry
//   log.Delivered(2);                      // [[0, 256)]
//   log.EraseBelow(2);                     // forgets key 1 (a pruned pass)
//   log.ForEachSpan([](int64_t first, int64_t last, const DeliveryLog::Ranges& ranges) {});
#ifndef SLUICE_CONTROL_DELIVERY_LOG_H_
#define SLUICE_CONTROL_DELIVERY_LOG_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/pipeline.pb.h"

namespace sluice::control {

class DeliveryLog {
 public:
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;  // [begin, end)

  // Adds ordinals [first_ordinal, first_ordinal + count) of `split_key`. Ignored when
  // split_key == 0 (untracked) or count <= 0.
  void Record(int64_t split_key, int64_t first_ordinal, int64_t count);
  // The split's delivered ordinals, sorted, disjoint and merged; empty when none.
  [[nodiscard]] std::vector<proto::OrdinalRange> Delivered(int64_t split_key) const;
  // Forgets every split key below `split_key`.
  void EraseBelow(int64_t split_key);
  // Entries held (what the memory grows with); a split has ranges iff Delivered is
  // non-empty.
  [[nodiscard]] size_t entries() const { return entries_.size(); }

  // The log as spans, in key order: split keys first_key .. last_key all have `ranges`
  // (what a snapshot holds). `f(first_key, last_key, ranges)`.
  template <typename F>
  void ForEachSpan(F f) const {
    for (const auto& [first, entry] : entries_) f(first, entry.last_key, entry.ranges);
  }
  // Appends a span ForEachSpan gave, after every key held (a snapshot read back). False,
  // and nothing added, for one that could not have come from a log: keys out of order or
  // overlapping, no ranges, ranges unsorted, empty or touching, or several over a span of
  // keys.
  [[nodiscard]] bool AppendSpan(int64_t first_key, int64_t last_key, Ranges ranges);

 private:
  // Split keys [first key, last_key] all have `ranges`; a span of several keys always
  // holds exactly one range.
  struct Entry {
    int64_t last_key;
    Ranges ranges;
  };
  // Makes `key` an entry of its own (splitting a span), created empty if absent.
  std::map<int64_t, Entry>::iterator Isolate(int64_t key);
  // Merges the entry at `it` with its neighbours where they continue it with equal ranges.
  void Coalesce(std::map<int64_t, Entry>::iterator it);

  std::map<int64_t, Entry> entries_;  // by first key
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_DELIVERY_LOG_H_
