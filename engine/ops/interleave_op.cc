#include "engine/ops/interleave_op.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/pipeline_text.h"
#include "engine/pipeline_validate.h"
#include "engine/prefetch_iterator.h"
#include "engine/random.h"

namespace sluice::engine {
namespace {

constexpr int64_t kMaxCycleLength = 4096;

class InterleaveIterator : public ElementIterator {
 public:
  InterleaveIterator(std::unique_ptr<ElementIterator> input, const OpBuildArgs& args)
      : input_(std::move(input)),
        op_(args.stage.interleave()),
        // Inside the built pipeline's own copy of the definition, which build_nested_ keeps
        // alive; nested iterators refer to its stages.
        nested_(&args.stage.interleave().nested()),
        build_nested_(args.build_nested),
        seed_(args.stage_seed),
        slots_(static_cast<size_t>(op_.cycle_length())) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (!input_done_ || open_ > 0) {
      std::unique_ptr<ElementIterator>& slot = slots_[cycle_index_];
      if (slot != nullptr) {
        bool end = false;
        SLUICE_RETURN_IF_ERROR(slot->GetNext(out, &end));
        if (!end) {
          if (++block_index_ == op_.block_length()) NextInCycle();
          *end_of_sequence = false;
          return absl::OkStatus();
        }
        slot.reset();
        --open_;
        NextInCycle();
      } else if (!input_done_) {
        Element element;
        SLUICE_RETURN_IF_ERROR(input_->GetNext(&element, &input_done_));
        if (input_done_) continue;
        SLUICE_ASSIGN_OR_RETURN(
            std::unique_ptr<ElementIterator> nested,
            build_nested_(*nested_, std::move(element), CombineSeeds(seed_, opened_++)));
        if (op_.parallel()) {
          nested = std::make_unique<PrefetchIterator>(std::move(nested),
                                                      std::max<int64_t>(op_.block_length(), 2));
        }
        slot = std::move(nested);
        ++open_;
      } else {
        NextInCycle();
      }
    }
    *end_of_sequence = true;
    return absl::OkStatus();
  }

 private:
  void NextInCycle() {
    block_index_ = 0;
    cycle_index_ = (cycle_index_ + 1) % slots_.size();
  }

  std::unique_ptr<ElementIterator> input_;
  const proto::InterleaveOp op_;
  const proto::PipelineDef* const nested_;
  const decltype(OpBuildArgs::build_nested) build_nested_;
  const uint64_t seed_;
  std::vector<std::unique_ptr<ElementIterator>> slots_;
  size_t cycle_index_ = 0;
  int64_t block_index_ = 0;
  int64_t open_ = 0;
  uint64_t opened_ = 0;
  bool input_done_ = false;
};

}  // namespace

OpDef InterleaveOpDef() {
  OpDef def;
  def.name = "interleave";
  def.op_case = proto::Stage::kInterleave;
  def.params = {
      {"pipeline", true}, {"cycle_length", false}, {"block_length", false}, {"parallel", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::InterleaveOp* op = stage->mutable_interleave();
    SLUICE_ASSIGN_OR_RETURN(*op->mutable_nested(), args.GetPipeline("pipeline"));
    SLUICE_ASSIGN_OR_RETURN(int64_t cycle, args.GetInt("cycle_length", 1));
    SLUICE_ASSIGN_OR_RETURN(int64_t block, args.GetInt("block_length", 1));
    SLUICE_ASSIGN_OR_RETURN(bool parallel, args.GetBool("parallel", false));
    op->set_cycle_length(cycle);
    op->set_block_length(block);
    op->set_parallel(parallel);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::InterleaveOp& op = stage.interleave();
    std::vector<FormattedArg> args = {
        {"pipeline", ArgValue::Pipeline(op.nested(), FormatPipeline(op.nested())), true}};
    if (op.cycle_length() != 1) {
      args.push_back({"cycle_length", ArgValue::Integer(op.cycle_length()), false});
    }
    if (op.block_length() != 1) {
      args.push_back({"block_length", ArgValue::Integer(op.block_length()), false});
    }
    if (op.parallel()) args.push_back({"parallel", ArgValue::Bool(true), false});
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry* functions) -> absl::Status {
    const proto::InterleaveOp& op = stage.interleave();
    if (op.cycle_length() < 1 || op.cycle_length() > kMaxCycleLength) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cycle_length must be in [1, ", kMaxCycleLength, "], got ", op.cycle_length()));
    }
    if (op.block_length() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("block_length must be >= 1, got ", op.block_length()));
    }
    return ValidateNestedPipeline(op.nested(), functions);
  };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input == 0 ? 0 : kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<InterleaveIterator>(std::move(input), args);
  };
  return def;
}

}  // namespace sluice::engine
