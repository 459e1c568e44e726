// The `unbatch` op: splits each element along dim 0 of every component, the inverse
// of batch. All components need rank >= 1 and the same dim 0.
//
//   range(5) | batch(2) | unbatch()          -> 0, 1, 2, 3, 4
//   from_tensor_slices([[1, 2], [3, 4]]) | unbatch()   -> 1, 2, 3, 4
#ifndef SLUICE_ENGINE_OPS_UNBATCH_OP_H_
#define SLUICE_ENGINE_OPS_UNBATCH_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef UnbatchOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_UNBATCH_OP_H_
