// The `take` op: yields at most `count` elements of its input (-1 = all).
//
//   range(10) | take(3)     -> 0, 1, 2
//   range(3) | repeat() | take(5) -> 0, 1, 2, 0, 1
#ifndef SLUICE_ENGINE_OPS_TAKE_OP_H_
#define SLUICE_ENGINE_OPS_TAKE_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef TakeOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_TAKE_OP_H_
