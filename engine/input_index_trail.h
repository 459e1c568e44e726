// Which input element each output element of a stage came from, for a stage that drops
// elements (filter, or a map whose transform keeps nothing), so that DescribeElement can
// ask its input about the right one: after filter dropped one blank line, the 5th line it
// hands out is the reader's 6th.
//
//   InputIndexTrail trail;
//   trail.Produced(0);            // output 0 is input 0
//   trail.Produced(2);            // input 1 was dropped
//   trail.InputIndexOf(1);        // 2
//
// Produced is called by the stage's consumer thread, in output order; InputIndexOf from any
// thread (a stage downstream fails on one of its own threads while this one reads on). Only
// the outputs after a drop write an entry (a few stores, no lock: engine/seqlock_ring.h);
// the latest 256 are kept, so an output before those is not known (-1).
#ifndef SLUICE_ENGINE_INPUT_INDEX_TRAIL_H_
#define SLUICE_ENGINE_INPUT_INDEX_TRAIL_H_

#include <cstdint>

#include "engine/seqlock_ring.h"

namespace sluice::engine {

class InputIndexTrail {
 public:
  InputIndexTrail() { runs_.Push(Run{0, 0}); }

  // The next output (0, 1, ...) came from input element `input_index`; inputs come in
  // order, so input_index is at least the previous one plus one.
  void Produced(int64_t input_index);

  // The input element output `index`, one produced already, came from; -1 when it is too
  // long past to tell.
  [[nodiscard]] int64_t InputIndexOf(int64_t index) const;

 private:
  static constexpr size_t kDropsKept = 256;
  // From output `first_output` on, input index = output index + skipped.
  struct Run {
    int64_t first_output;
    int64_t skipped;
  };

  // The consumer's own.
  int64_t produced_ = 0;
  int64_t skipped_ = 0;

  SeqlockRing<Run, kDropsKept> runs_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_INPUT_INDEX_TRAIL_H_
