#include "engine/ops/batch_op.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/batch_builder.h"
#include "engine/cardinality.h"

namespace sluice::engine {

absl::StatusOr<Element> StackElements(std::span<const Element> rows) {
  BatchBuilder builder(static_cast<int64_t>(rows.size()));
  for (const Element& row : rows) SLUICE_RETURN_IF_ERROR(builder.Append(row));
  return builder.Finish();
}

std::string DescribeBatchRows(const ElementIterator& input, int64_t index, int64_t batch_size,
                              int64_t rows_read) {
  if (index < 0 || batch_size <= 0 || index > std::numeric_limits<int64_t>::max() / batch_size) {
    return "";
  }
  const int64_t first = index * batch_size;
  if (first >= rows_read) return "";
  const int64_t last = std::min(first + (batch_size - 1), rows_read - 1);
  const std::string from = input.DescribeElement(first);
  if (first == last) return from.empty() ? "" : absl::StrCat("a batch of 1, ", from);
  const std::string to = input.DescribeElement(last);
  const std::string batch = absl::StrCat("a batch of ", last - first + 1);
  if (from.empty()) return to.empty() ? "" : absl::StrCat(batch, ", to ", to);
  if (to.empty()) return absl::StrCat(batch, ", from ", from);
  return absl::StrCat(batch, ", from ", from, " to ", to);
}

namespace {

class BatchIterator : public ElementIterator {
 public:
  BatchIterator(std::unique_ptr<ElementIterator> input, int64_t batch_size, bool drop_remainder)
      : input_(std::move(input)), batch_size_(batch_size), drop_remainder_(drop_remainder) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    // Rows are stacked as they arrive into one buffer per component, and row_ is reused:
    // a batch of scalars allocates nothing per row.
    BatchBuilder builder(batch_size_);
    while (!input_done_ && builder.rows() < batch_size_) {
      bool end = false;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&row_, &end));
      if (end) {
        input_done_ = true;
        break;
      }
      const int64_t row = rows_read_.load(std::memory_order_relaxed);
      rows_read_.store(row + 1, std::memory_order_relaxed);
      if (absl::Status s = builder.Append(row_); !s.ok()) {
        // Which record would not stack is what a user needs to find it.
        const std::string where = input_->DescribeElement(row);
        s = PrefixStatus("batch", s);
        return where.empty() ? s : PrefixStatus(absl::StrCat("reading ", where), s);
      }
    }
    if (builder.rows() == 0 || (drop_remainder_ && builder.rows() < batch_size_)) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    absl::StatusOr<Element> stacked = builder.Finish();
    if (!stacked.ok()) return PrefixStatus("batch", stacked.status());
    *out = *std::move(stacked);
    *end_of_sequence = false;
    return absl::OkStatus();
  }

  std::string DescribeElement(int64_t index) const override {
    return DescribeBatchRows(*input_, index, batch_size_,
                             rows_read_.load(std::memory_order_relaxed));
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  const int64_t batch_size_;
  const bool drop_remainder_;
  bool input_done_ = false;
  // Written by GetNext's thread only; DescribeElement may read it from another.
  std::atomic<int64_t> rows_read_{0};
  Element row_;
};

}  // namespace

OpDef BatchOpDef() {
  OpDef def;
  def.name = "batch";
  def.op_case = proto::Stage::kBatch;
  def.params = {{"batch_size", true}, {"drop_remainder", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(int64_t batch_size, args.GetInt("batch_size", 0));
    SLUICE_ASSIGN_OR_RETURN(bool drop, args.GetBool("drop_remainder", false));
    stage->mutable_batch()->set_batch_size(batch_size);
    stage->mutable_batch()->set_drop_remainder(drop);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    std::vector<FormattedArg> args = {
        {"batch_size", ArgValue::Integer(stage.batch().batch_size()), true}};
    if (stage.batch().drop_remainder()) {
      args.push_back({"drop_remainder", ArgValue::Bool(true), false});
    }
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    if (stage.batch().batch_size() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_size must be > 0, got ", stage.batch().batch_size()));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage& stage, int64_t input) -> absl::StatusOr<int64_t> {
    if (input < 0) return input;  // kInfinite and kUnknown pass through.
    const int64_t n = stage.batch().batch_size();
    if (n <= 0) return absl::InvalidArgumentError(absl::StrCat("batch_size must be > 0, got ", n));
    return stage.batch().drop_remainder() ? input / n : input / n + (input % n != 0 ? 1 : 0);
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<BatchIterator>(std::move(input), args.stage.batch().batch_size(),
                                           args.stage.batch().drop_remainder());
  };
  return def;
}

}  // namespace sluice::engine
