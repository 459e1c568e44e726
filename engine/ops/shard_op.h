// The `shard` op: keeps every num_shards-th element starting at `index`, like
// tf.data.Dataset.shard: element i passes when i % num_shards == index.
//
//   range(10) | shard(3, 1)                   -> 1, 4, 7
//   list_files('/data/*') | shard(SHARD_HINT, SHARD_HINT) | interleave(tfrecord())
//
// SHARD_HINT (kShardHint, -1 in the proto) is a placeholder for either argument that
// the control plane's FILE/DATA/HINT sharding replaces with the worker count and the
// worker's index (RewriteShardHints in engine/sharding.h). Running a pipeline whose
// hints were not replaced is FailedPrecondition.
#ifndef SLUICE_ENGINE_OPS_SHARD_OP_H_
#define SLUICE_ENGINE_OPS_SHARD_OP_H_

#include <cstdint>

#include "engine/op_registry.h"

namespace sluice::engine {

inline constexpr int64_t kShardHint = -1;

OpDef ShardOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_SHARD_OP_H_
