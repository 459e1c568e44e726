#include "engine/ops/unbatch_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/provenance.h"
#include "engine/tensor_ops.h"

namespace sluice::engine {
namespace {

class UnbatchIterator : public ElementIterator {
 public:
  explicit UnbatchIterator(std::unique_ptr<ElementIterator> input) : input_(std::move(input)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (next_row_ >= rows_) {
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&batch_, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      SLUICE_RETURN_IF_ERROR(Check());
      rows_ = batch_.empty() ? 0 : batch_[0].shape()[0];
      next_row_ = 0;
      provenance_ = SharedElementProvenance(batch_);
      run_ = 0;
      run_offset_ = 0;
    }
    out->clear();
    for (const Tensor& t : batch_) out->push_back(SliceRow(t, next_row_));
    if (provenance_ != nullptr) SetElementProvenance(*out, RowProvenance());
    ++next_row_;
    *end_of_sequence = false;
    return absl::OkStatus();
  }

 private:
  absl::Status Check() const {
    for (size_t c = 0; c < batch_.size(); ++c) {
      if (batch_[c].shape().empty()) {
        return absl::InvalidArgumentError(absl::StrCat("unbatch: component ", c,
                                                       " is a scalar; expected rank >= 1, got ",
                                                       batch_[c].DebugString()));
      }
      if (batch_[c].shape()[0] != batch_[0].shape()[0]) {
        return absl::InvalidArgumentError(
            absl::StrCat("unbatch: all components need the same dim 0; component ", c, " has ",
                         batch_[c].shape()[0], " but component 0 has ", batch_[0].shape()[0]));
      }
    }
    return absl::OkStatus();
  }

  // Row next_row_'s share of the batch's provenance (see unbatch_op.h).
  std::shared_ptr<const Provenance> RowProvenance() {
    if (provenance_->total() != rows_) return next_row_ == 0 ? provenance_ : nullptr;
    // One element per row: walk the runs. Row 0 also answers for what a filter dropped
    // (skipped runs), which belong to no row.
    const Provenance::Run& run = provenance_->runs()[run_];
    std::shared_ptr<const Provenance> row =
        Provenance::Of(run.split_key, run.first_ordinal + run_offset_);
    if (next_row_ == 0) row = WithSkipped(std::move(row), provenance_->skipped());
    if (++run_offset_ == run.count) {
      ++run_;
      run_offset_ = 0;
    }
    return row;
  }

  std::unique_ptr<ElementIterator> input_;
  Element batch_;
  int64_t rows_ = 0;
  int64_t next_row_ = 0;
  // The batch's provenance (null: none) and where row next_row_ is in its runs.
  std::shared_ptr<const Provenance> provenance_;
  size_t run_ = 0;
  int64_t run_offset_ = 0;
};

}  // namespace

OpDef UnbatchOpDef() {
  OpDef def;
  def.name = "unbatch";
  def.op_case = proto::Stage::kUnbatch;
  def.from_args = [](const OpArgs&, proto::Stage* stage) -> absl::Status {
    stage->mutable_unbatch();
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage&) { return std::vector<FormattedArg>{}; };
  def.validate = [](const proto::Stage&, const FunctionRegistry*) { return absl::OkStatus(); };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input == 0 ? 0 : input == kInfinite ? kInfinite : kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<UnbatchIterator>(std::move(input));
  };
  return def;
}

}  // namespace sluice::engine
