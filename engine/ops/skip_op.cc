#include "engine/ops/skip_op.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"

namespace sluice::engine {
namespace {

class SkipIterator : public ElementIterator {
 public:
  SkipIterator(std::unique_ptr<ElementIterator> input, int64_t count)
      : input_(std::move(input)), count_(count) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (count_ == -1 || skipped_ < count_) {
      SLUICE_RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      ++skipped_;
    }
    return input_->GetNext(out, end_of_sequence);
  }

  // Output i is input count_ + i (with count_ at -1 there is none).
  std::string DescribeElement(int64_t index) const override {
    return count_ < 0 ? "" : input_->DescribeElement(count_ + index);
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  const int64_t count_;
  int64_t skipped_ = 0;
};

}  // namespace

OpDef SkipOpDef() {
  OpDef def;
  def.name = "skip";
  def.op_case = proto::Stage::kSkip;
  def.params = {{"count", true}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(int64_t count, args.GetInt("count", 0));
    stage->mutable_skip()->set_count(count);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    return std::vector<FormattedArg>{{"count", ArgValue::Integer(stage.skip().count()), true}};
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    if (stage.skip().count() < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("count must be >= 0, or -1 for all, got ", stage.skip().count()));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage& stage, int64_t input) -> absl::StatusOr<int64_t> {
    const int64_t count = stage.skip().count();
    if (input == kInfinite && count == -1) {
      // tf.data calls it infinite; it never yields an element. Refused where cardinality
      // decides (coordinated reads, which would wait on it for ever); a plain read of it
      // spins its worker's thread, as before and as in tf.data.
      return absl::InvalidArgumentError("skip(-1) of an infinite input never yields an element");
    }
    if (input == kInfinite) return kInfinite;
    if (input == kUnknown) return kUnknown;
    if (count == -1) return 0;
    return input > count ? input - count : 0;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<SkipIterator>(std::move(input), args.stage.skip().count());
  };
  return def;
}

}  // namespace sluice::engine
