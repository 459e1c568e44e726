// The `skip` op: drops the first `count` elements of its input (-1 = all).
//
//   range(10) | skip(7)          -> 7, 8, 9
//   range(3) | skip(5)           -> (nothing)
#ifndef SLUICE_ENGINE_OPS_SKIP_OP_H_
#define SLUICE_ENGINE_OPS_SKIP_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef SkipOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_SKIP_OP_H_
