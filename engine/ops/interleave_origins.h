// Where an interleave's latest output elements came from: which of its nested pipelines
// (by the order it opened them, and the cycle slot it sits in) and which element of that
// pipeline's output, so that a stage after the interleave can name the file and record
// (ElementIterator::DescribeElement) of
//
//   list_files('train-*.tfrecord') | interleave(tfrecord(), cycle_length=8) | parse_example(...)
//
//   InterleaveOrigins origins;
//   origins.Took(/*opened=*/0, /*slot=*/0, /*inner=*/0);   // output 0
//   origins.Took(1, 1, 0);                                 // output 1
//   origins.Took(0, 0, 1);                                 // output 2
//   origins.Find(2);  // {opened 0, slot 0, inner 1}
//
// Took is called by the interleave's consumer thread, once per output, in order; Find from
// any thread. Outputs continuing a run of one pipeline (a block) write nothing; each new
// run writes an entry (a few stores, no lock: engine/seqlock_ring.h), and the latest 1024
// runs are kept.
#ifndef SLUICE_ENGINE_OPS_INTERLEAVE_ORIGINS_H_
#define SLUICE_ENGINE_OPS_INTERLEAVE_ORIGINS_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "engine/seqlock_ring.h"

namespace sluice::engine {

class InterleaveOrigins {
 public:
  struct Origin {
    uint64_t opened = 0;  // the nested pipeline, counted in the order they were opened
    uint64_t slot = 0;    // the cycle slot it was read from
    int64_t inner = 0;    // the element's index in that pipeline's output
  };

  // The next output (0, 1, ...) is element `inner` of pipeline `opened`, in `slot`.
  void Took(uint64_t opened, size_t slot, int64_t inner);

  // Where output `output`, one taken already, came from; nullopt when it is too long past.
  [[nodiscard]] std::optional<Origin> Find(int64_t output) const;

  // More than a parallel map after the interleave may ask back for: 2 x parallel x 16
  // elements, 512 at parallel=16, each a run of its own at block_length=1 (32 KiB).
  static constexpr size_t kRunsKept = 1024;

 private:
  struct Run {
    int64_t first_output = 0;
    Origin first;  // of the run's first output; the next ones follow it in one pipeline
  };

  // The consumer's own: the next output, and the origin it would have continuing the run.
  int64_t next_output_ = 0;
  std::optional<Origin> continuing_;

  SeqlockRing<Run, kRunsKept> runs_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_INTERLEAVE_ORIGINS_H_
