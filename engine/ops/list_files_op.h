// The `list_files` source: the names of files matching a glob pattern, as string
// scalars, like tf.data.Dataset.list_files.
//
//   list_files('/data/train/*.gz')                          sorted
//   list_files('train/*.gz', shuffle=true, seed=7)          relative to the first data root
//   list_files('/data/*.gz') | interleave(tfrecord(), cycle_length=4)
//
// Files are globbed under the worker's data roots (engine/io/data_roots.h) when the
// iterator starts each pass, sorted bytewise, sharded when ApplyFileSharding set
// shard_count (before shuffling, so shards never overlap), then shuffled when asked:
// reshuffled each pass, deterministically when a seed is given. No matching file is
// NotFound.
//
// DYNAMIC sharding: the dispatcher's split provider globs and orders the files with
// ListFilesPass and each split carries its file names; a worker's list_files then
// yields exactly those names (each must match the pattern) and never globs, so workers
// and dispatcher cannot disagree about the file list (see split/split_provider.h).
#ifndef SLUICE_ENGINE_OPS_LIST_FILES_OP_H_
#define SLUICE_ENGINE_OPS_LIST_FILES_OP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/op_registry.h"

namespace sluice::engine {

// One pass's files from the sorted glob result: sharded, then shuffled (seeded by
// op.seed when has_seed, else by `unseeded_seed`, mixed with `repetition`).
// FailedPrecondition when sharding asks for more shards than there are files; NotFound
// when nothing matched.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ListFilesPass(
    const proto::ListFilesOp& op, std::vector<std::string> sorted_files, int64_t repetition,
    uint64_t unseeded_seed);

OpDef ListFilesOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_LIST_FILES_OP_H_
