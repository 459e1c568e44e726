// LeaseSizer picks how many DYNAMIC splits a worker's task leases per dispatcher round trip.
// tf.data pays one dispatcher RPC per split, which dominates small splits
// (tensorflow/tensorflow#70541); a fixed lease only moves the problem to the next split
// size. The lease doubles while leases are used up faster than `target`, so the round trip
// stays a small share of the work, and halves once one lasts over four targets, so at the
// end of a pass no worker sits on much more than a target's worth of splits that others,
// idle, could have had.
//
//   LeaseSizer sizer(/*min_splits=*/4, /*max_splits=*/64, absl::Milliseconds(5));
//   int want = sizer.Next(absl::Now());   // 4; then 8, 16, ... while leases go fast
//   ... GetSplit(max_splits = want) ...
//   sizer.Arrived(absl::Now());           // the lease's clock starts when it is here
#ifndef SLUICE_CONTROL_LEASE_SIZER_H_
#define SLUICE_CONTROL_LEASE_SIZER_H_

#include "absl/time/time.h"

namespace sluice::control {

class LeaseSizer {
 public:
  // 1 <= min_splits <= max_splits (clamped so).
  LeaseSizer(int min_splits, int max_splits, absl::Duration target);

  // The lease to ask for now: the last one's size, doubled or halved by how long it
  // lasted from its arrival until `now` (unchanged before any lease arrived).
  [[nodiscard]] int Next(absl::Time now);
  // A lease arrived at `now`.
  void Arrived(absl::Time now) { last_arrival_ = now; }
  // A new pass over the source: the size carries over, the timing does not.
  void NewPass() { last_arrival_ = absl::InfinitePast(); }

 private:
  const int min_splits_;
  const int max_splits_;
  const absl::Duration target_;
  int size_;
  absl::Time last_arrival_ = absl::InfinitePast();
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_LEASE_SIZER_H_
