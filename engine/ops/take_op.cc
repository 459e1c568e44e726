#include "engine/ops/take_op.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"

namespace sluice::engine {
namespace {

class TakeIterator : public ElementIterator {
 public:
  TakeIterator(std::unique_ptr<ElementIterator> input, int64_t count)
      : input_(std::move(input)), count_(count) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    // Stop before pulling: the input may be expensive or infinite.
    if (count_ != -1 && taken_ >= count_) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    SLUICE_RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
    if (!*end_of_sequence) ++taken_;
    return absl::OkStatus();
  }

  std::string DescribeElement(int64_t index) const override {
    return input_->DescribeElement(index);
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  const int64_t count_;
  int64_t taken_ = 0;
};

}  // namespace

OpDef TakeOpDef() {
  OpDef def;
  def.name = "take";
  def.op_case = proto::Stage::kTake;
  def.params = {{"count", true}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(int64_t count, args.GetInt("count", -1));
    stage->mutable_take()->set_count(count);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    return std::vector<FormattedArg>{{"count", ArgValue::Integer(stage.take().count()), true}};
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    if (stage.take().count() < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("count must be >= 0, or -1 for all, got ", stage.take().count()));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage& stage, int64_t input) -> absl::StatusOr<int64_t> {
    const int64_t count = stage.take().count();
    if (count == -1) return input;
    if (count == 0) return 0;
    if (input == kInfinite) return count;
    // With an unknown input the result is somewhere in [0, count].
    if (input == kUnknown) return kUnknown;
    return std::min(input, count);
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<TakeIterator>(std::move(input), args.stage.take().count());
  };
  return def;
}

}  // namespace sluice::engine
