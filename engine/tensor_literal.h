// Tensors written inline in a pipeline (from_tensor_slices), in all three forms:
// the proto (TensorLiteral), the engine Tensor and the text form's nested lists.
//
//   proto::TensorLiteral lit = LiteralFromTensor(Tensor::FromVector<int64_t>({3}, {1, 2, 3}));
//   SLUICE_ASSIGN_OR_RETURN(Tensor t, TensorFromLiteral(lit));
//   // text: [1, 2, 3]; [[1, 2], [3, 4]] is int64[2, 2]; ['a', 'b'] is string[2]
//
// Text literals infer their dtype from the values: integers -> int64, any float ->
// float32 (as tf.data does for Python floats), quoted strings -> string. An explicit
// dtype converts integers to any numeric dtype and floats to float32/float64.
#ifndef SLUICE_ENGINE_TENSOR_LITERAL_H_
#define SLUICE_ENGINE_TENSOR_LITERAL_H_

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/op_args.h"
#include "engine/pipeline.pb.h"
#include "engine/tensor.h"

namespace sluice::engine {

// InvalidArgument for a bad dtype, a shape whose size does not match the values, values
// in the list that does not belong to the dtype, or out-of-range values (e.g. 300 for
// uint8).
[[nodiscard]] absl::StatusOr<Tensor> TensorFromLiteral(const proto::TensorLiteral& literal);

proto::TensorLiteral LiteralFromTensor(const Tensor& tensor);

// A literal from a (nested) list or scalar text value. Lists must be rectangular and hold
// only numbers or only strings. `what` names the argument in errors.
[[nodiscard]] absl::StatusOr<proto::TensorLiteral> LiteralFromArg(const ArgValue& value,
                                                                  std::optional<DType> dtype,
                                                                  std::string_view what);

// The text form of a literal; with LiteralDefaultDType it parses back to `literal`.
// Precondition: TensorFromLiteral(literal) is OK and every float is finite.
ArgValue LiteralToArg(const proto::TensorLiteral& literal);

// The dtype LiteralFromArg infers for LiteralToArg(literal) (int64, float32 or string; an
// empty literal reads as float32).
DType LiteralDefaultDType(const proto::TensorLiteral& literal);

// Whether LiteralToArg can represent `literal`: all floats finite and no zero dim before
// the last (nested lists cannot spell shape [0, 3]). InvalidArgument saying why not.
[[nodiscard]] absl::Status CheckLiteralIsWritable(const proto::TensorLiteral& literal);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_TENSOR_LITERAL_H_
