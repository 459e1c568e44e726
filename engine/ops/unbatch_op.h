// The `unbatch` op: splits each element along dim 0 of every component, the inverse
// of batch. All components need rank >= 1 and the same dim 0.
//
//   range(5) | batch(2) | unbatch()          -> 0, 1, 2, 3, 4
//   from_tensor_slices([[1, 2], [3, 4]]) | unbatch()   -> 1, 2, 3, 4
//
// Provenance (engine/provenance.h): when the batch's provenance counts exactly as many
// elements as the batch has rows (a batch op made it), row i gets the i-th element of it,
// and row 0 the elements a filter dropped before the batch (Provenance::skipped) as well.
// Otherwise (e.g. from_tensor_slices rows that were never batched) the rows cannot be told
// apart: row 0 gets the whole provenance and the other rows none, so delivering row 0
// counts the batch as delivered (a re-issue may then miss the later rows, never repeat).
#ifndef SLUICE_ENGINE_OPS_UNBATCH_OP_H_
#define SLUICE_ENGINE_OPS_UNBATCH_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef UnbatchOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_UNBATCH_OP_H_
