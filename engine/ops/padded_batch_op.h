// The `padded_batch` op: batch for elements whose shapes differ, padding every
// component to a common shape first, like tf.data's padded_batch.
//
//   from_tensor_slices([[1], [2], [3]]) | map(...) | padded_batch(2)
//   text_line(files=['a.txt']) | map(split_whitespace) | padded_batch(32, padding_values=['<pad>'])
//   padded_batch(4, padded_shapes=[[10], []], padding_values=[-1, 0], drop_remainder=true)
//
// Component c of a batch is padded to padded_shapes[c] when given (one list of dims per
// component; -1 pads that dim to the batch's longest) and otherwise to the longest of
// the batch in every dim; ranks and dtypes must agree. Padding is padding_values[c]
// (a number for numeric components, a string for string ones) or 0 / "". A padded
// shape smaller than an element is an error naming the element and component.
#ifndef SLUICE_ENGINE_OPS_PADDED_BATCH_OP_H_
#define SLUICE_ENGINE_OPS_PADDED_BATCH_OP_H_

#include <span>

#include "absl/status/statusor.h"
#include "engine/op_registry.h"

namespace sluice::engine {

// Pads `rows` as described above and stacks them. `padded_shapes` and `padding_values`
// may be shorter than the component count (the rest use the defaults), not longer.
// `dim0_override[c]`, when >= 0, replaces the padded length of component c's dim 0.
// The result's provenance is the rows' concatenated, as for StackElements.
[[nodiscard]] absl::StatusOr<Element> PadAndStack(
    std::span<const Element> rows,
    const google::protobuf::RepeatedPtrField<proto::PaddedShape>& padded_shapes,
    const google::protobuf::RepeatedPtrField<proto::ScalarValue>& padding_values,
    std::span<const int64_t> dim0_override = {});

// Text-form helpers shared with bucket_by_sequence_length.
[[nodiscard]] absl::Status PaddingValuesFromArgs(
    const OpArgs& args, google::protobuf::RepeatedPtrField<proto::ScalarValue>* out);
ArgValue PaddingValuesToArg(const google::protobuf::RepeatedPtrField<proto::ScalarValue>& values);
// Set values that are finite (the text form cannot write others).
[[nodiscard]] absl::Status ValidatePaddingValues(
    const google::protobuf::RepeatedPtrField<proto::ScalarValue>& values);

OpDef PaddedBatchOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_PADDED_BATCH_OP_H_
