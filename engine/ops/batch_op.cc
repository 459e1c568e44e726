#include "engine/ops/batch_op.h"

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
      if (absl::Status s = builder.Append(row_); !s.ok()) return PrefixStatus("batch", s);
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

 private:
  std::unique_ptr<ElementIterator> input_;
  const int64_t batch_size_;
  const bool drop_remainder_;
  bool input_done_ = false;
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
