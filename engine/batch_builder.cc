#include "engine/batch_builder.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"

namespace sluice::engine {
namespace {

// The first buffer of a numeric column holds expected_rows rows only up to this size;
// beyond it, the column starts here and doubles, so memory follows the rows that came.
constexpr size_t kEagerColumnBytes = size_t{16} << 20;

std::vector<int64_t> BatchShape(int64_t rows, const std::vector<int64_t>& row_shape) {
  std::vector<int64_t> shape;
  shape.reserve(row_shape.size() + 1);
  shape.push_back(rows);
  shape.insert(shape.end(), row_shape.begin(), row_shape.end());
  return shape;
}

}  // namespace

BatchBuilder::BatchBuilder(int64_t expected_rows)
    : expected_rows_(std::max<int64_t>(1, expected_rows)) {}

absl::Status BatchBuilder::CheckRow(const Element& row) const {
  if (row.size() != columns_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("all elements of a batch need the same number of components; element ", rows_,
                     " has ", row.size(), " but element 0 has ", columns_.size()));
  }
  for (size_t c = 0; c < columns_.size(); ++c) {
    const Column& column = columns_[c];
    const Tensor& t = row[c];
    if (t.dtype() != column.dtype || t.shape() != column.row_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "all elements of a batch need equal dtype and shape per component; component ", c,
          " of element ", rows_, " is ", AbslView(DTypeName(t.dtype())), ShapeString(t.shape()),
          " but in element 0 it is ", AbslView(DTypeName(column.dtype)),
          ShapeString(column.row_shape)));
    }
  }
  return absl::OkStatus();
}

absl::Status BatchBuilder::StartColumns(const Element& row) {
  columns_.clear();
  columns_.resize(row.size());
  for (size_t c = 0; c < row.size(); ++c) {
    Column& column = columns_[c];
    column.dtype = row[c].dtype();
    column.row_shape = row[c].shape();
    if (column.dtype == DType::kString) {
      // A guess only (string rows differ): at most 64 Ki offsets, 512 KiB.
      column.ends.reserve(static_cast<size_t>(std::min<int64_t>(
          int64_t{1} << 16,
          std::min<int64_t>(expected_rows_, 4096) * std::max<int64_t>(1, row[c].num_elements()))));
      continue;
    }
    column.row_bytes = row[c].byte_size();
    int64_t capacity = expected_rows_;
    if (column.row_bytes > 0) {
      capacity = std::min<int64_t>(
          capacity,
          std::max<int64_t>(1, static_cast<int64_t>(kEagerColumnBytes / column.row_bytes)));
    }
    SLUICE_ASSIGN_OR_RETURN(column.stacked,
                            Tensor::Create(column.dtype, BatchShape(capacity, column.row_shape)));
    column.capacity = capacity;
  }
  return absl::OkStatus();
}

absl::Status BatchBuilder::Grow(Column& column) {
  // Doubling, but not past the expected rows while below them: a batch of 64 rows of 600 KB
  // goes 27 -> 54 -> 64 rows, not to 108 (and its full buffer is the batch, no copy).
  int64_t capacity = column.capacity * 2;
  if (column.capacity < expected_rows_) capacity = std::min(capacity, expected_rows_);
  SLUICE_ASSIGN_OR_RETURN(Tensor bigger,
                          Tensor::Create(column.dtype, BatchShape(capacity, column.row_shape)));
  const size_t used = static_cast<size_t>(rows_) * column.row_bytes;
  if (used > 0) std::memcpy(bigger.mutable_data(), column.stacked.data(), used);
  column.stacked = std::move(bigger);
  column.capacity = capacity;
  return absl::OkStatus();
}

absl::Status BatchBuilder::Append(const Element& row) {
  if (rows_ == 0) {
    SLUICE_RETURN_IF_ERROR(StartColumns(row));
  } else {
    SLUICE_RETURN_IF_ERROR(CheckRow(row));
  }
  for (size_t c = 0; c < columns_.size(); ++c) {
    Column& column = columns_[c];
    const Tensor& t = row[c];
    if (column.dtype == DType::kString) {
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const std::string_view s = t.string_value(i);
        column.bytes.append(s.data(), s.size());
        column.ends.push_back(column.bytes.size());
      }
      continue;
    }
    if (column.row_bytes == 0) continue;
    if (rows_ == column.capacity) SLUICE_RETURN_IF_ERROR(Grow(column));
    std::memcpy(column.stacked.mutable_data() + static_cast<size_t>(rows_) * column.row_bytes,
                t.data(), column.row_bytes);
  }
  if (const Provenance* p = ElementProvenance(row); p != nullptr && !p->empty()) {
    if (provenance_ == nullptr) provenance_ = std::make_shared<Provenance>();
    provenance_->AppendAll(*p);
  }
  ++rows_;
  return absl::OkStatus();
}

absl::StatusOr<Tensor> BatchBuilder::FinishColumn(Column& column) {
  std::vector<int64_t> shape = BatchShape(rows_, column.row_shape);
  if (column.dtype == DType::kString) {
    std::vector<std::string_view> strings;
    strings.reserve(column.ends.size());
    uint64_t begin = 0;
    for (uint64_t end : column.ends) {
      strings.emplace_back(column.bytes.data() + begin, end - begin);
      begin = end;
    }
    return Tensor::FromStrings(std::move(shape), strings);
  }
  if (column.row_bytes == 0) return Tensor::Create(column.dtype, std::move(shape));
  if (rows_ == column.capacity) return std::move(column.stacked);
  // A short batch (the remainder): copy the filled rows into a tensor of their own size.
  return Tensor::FromBuffer(
      column.dtype, std::move(shape),
      std::span<const std::byte>(column.stacked.data(),
                                 static_cast<size_t>(rows_) * column.row_bytes));
}

absl::StatusOr<Element> BatchBuilder::Finish() {
  if (rows_ == 0) return absl::InvalidArgumentError("expected at least one element to stack");
  Element out;
  out.reserve(columns_.size());
  for (Column& column : columns_) {
    SLUICE_ASSIGN_OR_RETURN(Tensor t, FinishColumn(column));
    out.push_back(std::move(t));
  }
  if (provenance_ != nullptr) SetElementProvenance(out, std::move(provenance_));
  provenance_ = nullptr;
  columns_.clear();
  rows_ = 0;
  return out;
}

}  // namespace sluice::engine
