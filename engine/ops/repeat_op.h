// The `repeat` op: replays its input `count` times (-1 = forever).
//
//   range(3) | repeat(2)  -> 0, 1, 2, 0, 1, 2
//   range(3) | repeat()   -> 0, 1, 2, 0, 1, 2, ... (never ends)
//
// Each pass re-creates the input, so sources see a new repetition index and
// shuffles below the repeat can reshuffle. A pass that yields nothing ends the
// repeat, so repeat() over an empty input terminates instead of spinning; under DYNAMIC
// sharding, only if the pass got no split either (a worker's splits may all be filtered
// out while the source is not empty), or after 1000 such passes in a row. Cardinality as tf.data's:
// repeat() of an input of unknown size is infinite.
#ifndef SLUICE_ENGINE_OPS_REPEAT_OP_H_
#define SLUICE_ENGINE_OPS_REPEAT_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef RepeatOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_REPEAT_OP_H_
