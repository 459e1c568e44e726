// The `shuffle` op: a buffer shuffle. It keeps up to buffer_size elements and
// emits a uniformly chosen one, refilling from its input; buffer_size >= the
// input size gives a uniform permutation.
//
//   range(100) | shuffle(1000, seed=7)                                 deterministic
//   range(100) | shuffle(10) | repeat(3)                               new order per pass
//   range(100) | shuffle(10, seed=7, reshuffle_each_iteration=false) | repeat(3)
//                                                                      same order per pass
//
// With a seed the order depends only on the seed (and, when reshuffling, on the
// pass). Without one it is random per BuildPipeline, mixed with
// PipelineContext::seed_salt.
#ifndef SLUICE_ENGINE_OPS_SHUFFLE_OP_H_
#define SLUICE_ENGINE_OPS_SHUFFLE_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef ShuffleOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_SHUFFLE_OP_H_
