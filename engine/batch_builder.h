// BatchBuilder stacks elements component-wise as they arrive, so a batch of N rows costs
// one growing buffer per component instead of N live rows: the caller may reuse (or drop)
// each row as soon as Append returns. This is what `batch` and StackElements run on.
//
//   BatchBuilder builder(/*expected_rows=*/1024);
//   Element row;
//   while (builder.rows() < 1024 && NextRow(&row)) {
//     SLUICE_RETURN_IF_ERROR(builder.Append(row));  // checks the row against row 0
//   }
//   SLUICE_ASSIGN_OR_RETURN(Element batch, builder.Finish());  // component k: [n, ...]
//
// Numeric components are copied straight into the batch tensor (sized for expected_rows
// when that is small, else grown by doubling, so a huge batch_size over a short input does
// not reserve memory it never fills); string components collect their bytes and offsets and
// are laid out once in Finish. The batch's provenance is the rows' in row order.
#ifndef SLUICE_ENGINE_BATCH_BUILDER_H_
#define SLUICE_ENGINE_BATCH_BUILDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/provenance.h"
#include "engine/tensor.h"

namespace sluice::engine {

class BatchBuilder {
 public:
  // `expected_rows` (> 0) sizes the first buffers; more rows may still be appended.
  explicit BatchBuilder(int64_t expected_rows);

  // Copies `row` into the batch. InvalidArgument when it differs from row 0 in component
  // count, dtype or shape (naming the row and component; the builder is unchanged then),
  // or when the batch would outgrow int64 sizes.
  [[nodiscard]] absl::Status Append(const Element& row);

  int64_t rows() const { return rows_; }

  // The stacked batch; the builder is empty afterwards. InvalidArgument with no rows.
  [[nodiscard]] absl::StatusOr<Element> Finish();

 private:
  struct Column {
    DType dtype;
    std::vector<int64_t> row_shape;
    size_t row_bytes = 0;        // numeric: bytes per row
    Tensor stacked;              // numeric: capacity rows of row_bytes each
    int64_t capacity = 0;        // rows `stacked` has room for
    std::vector<uint64_t> ends;  // string: end offset of every string so far
    std::string bytes;           // string: all string bytes so far
  };

  absl::Status CheckRow(const Element& row) const;
  absl::Status StartColumns(const Element& row);
  absl::Status Grow(Column& column);
  absl::StatusOr<Tensor> FinishColumn(Column& column);

  const int64_t expected_rows_;
  int64_t rows_ = 0;
  std::vector<Column> columns_;
  std::shared_ptr<Provenance> provenance_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_BATCH_BUILDER_H_
