// The `map` op: applies a named FunctionRegistry function to every element,
// optionally on several threads.
//
//   range(4) | map(square)               -> 0, 1, 4, 9
//   range(4) | map('with_square')        -> (0, 0), (1, 1), (2, 4), (3, 9)
//   tfrecord(files=['a']) | map(decode_raw_uint8, parallel=8)
//
// parallel > 1 runs that many calls at once on threads the iterator owns, with at
// most 2 x parallel results buffered; the output order (and which error surfaces
// first) is the input order, as with parallel = 1 (engine/parallel_map.h).
#ifndef SLUICE_ENGINE_OPS_MAP_OP_H_
#define SLUICE_ENGINE_OPS_MAP_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

// Shared with filter: InvalidArgument listing the known functions when `name` is unknown.
[[nodiscard]] absl::Status CheckFunctionExists(const std::string& name,
                                               const FunctionRegistry* functions);
// Shared with filter: parallel must be in [0, kMaxParallel].
inline constexpr int kMaxParallel = 1024;
[[nodiscard]] absl::Status CheckParallel(int64_t parallel);

OpDef MapOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_MAP_OP_H_
