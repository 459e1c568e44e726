// Engine hooks for static sharding (the control plane picks the policy; FILE, DATA and
// HINT as in tf.data's AutoShardPolicy): each worker of n runs a rewritten copy of the
// pipeline that reads only its share.
//
//   // HINT: the user placed shard(SHARD_HINT, SHARD_HINT) where sharding should happen.
//   SLUICE_ASSIGN_OR_RETURN(proto::PipelineDef mine, RewriteShardHints(def, 4, 1));
//   // FILE: the source keeps files i with i % 4 == 1.
//   SLUICE_ASSIGN_OR_RETURN(proto::PipelineDef mine, ApplyFileSharding(def, 4, 1));
//
// Both return a new definition and leave `def` untouched.
#ifndef SLUICE_ENGINE_SHARDING_H_
#define SLUICE_ENGINE_SHARDING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

// Replaces every SHARD_HINT (kShardHint) in shard stages, nested pipelines included:
// num_shards becomes num_workers and index becomes worker_index. Explicit numbers stay.
// InvalidArgument unless num_workers >= 1 and 0 <= worker_index < num_workers, or when a
// rewritten stage is invalid (shard(SHARD_HINT, 3) with 2 workers).
[[nodiscard]] absl::StatusOr<proto::PipelineDef> RewriteShardHints(const proto::PipelineDef& def,
                                                                   int64_t num_workers,
                                                                   int64_t worker_index);

// Makes the first stage read only files i with i % num_workers == worker_index: a
// reader's files=[...] list is filtered here, list_files gets shard_count/shard_index
// (applied to its sorted glob result before any shuffle, so shards never overlap).
// FailedPrecondition when the first stage is not a file source (list_files or a reader
// with files=[...]), when a files list holds fewer files than workers (list_files
// reports that when it globs), or when list_files is already sharded; InvalidArgument
// for bad worker numbers.
[[nodiscard]] absl::StatusOr<proto::PipelineDef> ApplyFileSharding(const proto::PipelineDef& def,
                                                                   int64_t num_workers,
                                                                   int64_t worker_index);

// Makes the pipeline keep elements j with j % num_workers == worker_index: a shard stage is
// inserted before the first top-level batching stage (batch, padded_batch,
// bucket_by_sequence_length), or appended when there is none, so each worker batches only
// its own elements. Every worker still reads all the data, so the order before the shard
// must be deterministic (no unseeded shuffle) for the shares to be disjoint.
[[nodiscard]] absl::StatusOr<proto::PipelineDef> ApplyDataSharding(const proto::PipelineDef& def,
                                                                   int64_t num_workers,
                                                                   int64_t worker_index);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_SHARDING_H_
