// The `range` source: scalar int64 elements like Python's range(start, stop, step).
//
//   range(10)          -> 0, 1, ..., 9
//   range(2, 10, 3)    -> 2, 5, 8
//   range(5, 0, -2)    -> 5, 3, 1
//
// Element i of the source is start + i * step; with a SplitFeed the iterator
// produces exactly the indices of the splits it is fed.
#ifndef SLUICE_ENGINE_OPS_RANGE_OP_H_
#define SLUICE_ENGINE_OPS_RANGE_OP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/op_registry.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

// len(range(start, stop, step)). InvalidArgument for step == 0 or more than 2^63-1
// elements.
[[nodiscard]] absl::StatusOr<int64_t> RangeLength(const proto::RangeOp& range);

// Value of element `index` (0 <= index < RangeLength); never overflows for valid indices.
int64_t RangeValue(const proto::RangeOp& range, int64_t index);

OpDef RangeOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_RANGE_OP_H_
