// Shape-level tensor operations shared by ops: slicing along dim 0 (from_tensor_slices,
// unbatch) and padding to a larger shape (padded_batch, bucket_by_sequence_length).
//
//   Tensor m = Tensor::FromVector<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
//   Tensor row = SliceRow(m, 1);                                   // int64[3]{4, 5, 6}
//   SLUICE_ASSIGN_OR_RETURN(Tensor p, PadTo(row, {5}, IntScalarValue(-1)));
//   // int64[5]{4, 5, 6, -1, -1}
#ifndef SLUICE_ENGINE_TENSOR_OPS_H_
#define SLUICE_ENGINE_TENSOR_OPS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"
#include "engine/tensor.h"

namespace sluice::engine {

// Row `index` of `t` along dim 0: shape t.shape()[1:]. Preconditions: rank >= 1 and
// 0 <= index < t.shape()[0].
Tensor SliceRow(const Tensor& t, int64_t index);

// Whether `padding` can fill a tensor of `dtype`: a string for strings, a number for the
// rest, in range of an integer dtype (an integral float included). Unset always can (0 / "").
[[nodiscard]] absl::Status CheckPaddingValue(DType dtype, const proto::ScalarValue& padding);

// `t` in the leading corner of a tensor of `shape` (same rank, every dim >= t's), the
// rest filled with `padding` cast to t's dtype (0 / "" when it is unset).
// InvalidArgument for a rank mismatch, a dim smaller than t's, or a padding value of
// the wrong kind (a string for numbers or a number for strings).
[[nodiscard]] absl::StatusOr<Tensor> PadTo(const Tensor& t, std::span<const int64_t> shape,
                                           const proto::ScalarValue& padding);

// Convenience constructors for padding values.
proto::ScalarValue IntScalarValue(int64_t v);
proto::ScalarValue FloatScalarValue(double v);
proto::ScalarValue StringScalarValue(std::string v);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_TENSOR_OPS_H_
