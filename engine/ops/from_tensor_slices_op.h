// The `from_tensor_slices` source: inline tensors sliced along dim 0, like
// tf.data.Dataset.from_tensor_slices.
//
//   from_tensor_slices([1, 2, 3])                    -> 1, 2, 3 (int64 scalars)
//   from_tensor_slices([[1, 2], [3, 4]])             -> [1, 2], [3, 4]
//   from_tensor_slices([1, 2], ['a', 'b'])           -> (1, 'a'), (2, 'b')
//   from_tensor_slices([1, 2], dtypes=[float64])     -> 1.0, 2.0 (float64)
//
// Up to four components are positional (values, values_1, values_2, values_3);
// dtypes lists a dtype per component (default: inferred, see tensor_literal.h).
// Splittable by element index for DYNAMIC sharding.
#ifndef SLUICE_ENGINE_OPS_FROM_TENSOR_SLICES_OP_H_
#define SLUICE_ENGINE_OPS_FROM_TENSOR_SLICES_OP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/op_registry.h"

namespace sluice::engine {

// Elements the op yields (the common dim 0). InvalidArgument for bad literals, no
// components, scalars, or components disagreeing on dim 0.
[[nodiscard]] absl::StatusOr<int64_t> FromTensorSlicesLength(const proto::FromTensorSlicesOp& op);

OpDef FromTensorSlicesOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_FROM_TENSOR_SLICES_OP_H_
