// The `batch` op: stacks batch_size consecutive elements component-wise, so
// component k of a batch has shape [n, ...shape of component k].
//
//   range(10) | batch(4)                       -> [0..3], [4..7], [8, 9]
//   range(10) | batch(4, drop_remainder=true)  -> [0..3], [4..7]
#ifndef SLUICE_ENGINE_OPS_BATCH_OP_H_
#define SLUICE_ENGINE_OPS_BATCH_OP_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "engine/iterator.h"
#include "engine/op_registry.h"
#include "engine/tensor.h"

namespace sluice::engine {

// Stacks `rows` component-wise. InvalidArgument when `rows` is empty or the rows disagree
// in component count, dtype or shape (the message names the row and component). The
// result's provenance is the rows' concatenated in row order (ConcatProvenance).
[[nodiscard]] absl::StatusOr<Element> StackElements(std::span<const Element> rows);

// Where output `index` of a batching stage came from (its DescribeElement), by its first
// and last rows as `input` describes them: "a batch of 32, from record 64 of 'a.tfrecord'
// to record 95 of 'a.tfrecord'". `rows_read`: rows the stage has taken from `input` so far
// (a batch it has not finished yet is described by the rows it has); empty when `input`
// knows neither row.
[[nodiscard]] std::string DescribeBatchRows(const ElementIterator& input, int64_t index,
                                            int64_t batch_size, int64_t rows_read);

OpDef BatchOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_BATCH_OP_H_
