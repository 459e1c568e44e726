// The `map` op: applies a named FunctionRegistry function to every element.
//
//   range(4) | map(square)        -> 0, 1, 4, 9
//   range(4) | map('with_square') -> (0, 0), (1, 1), (2, 4), (3, 9)
#ifndef SLUICE_ENGINE_OPS_MAP_OP_H_
#define SLUICE_ENGINE_OPS_MAP_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef MapOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_MAP_OP_H_
