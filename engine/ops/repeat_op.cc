#include "engine/ops/repeat_op.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"

namespace sluice::engine {
namespace {

class RepeatIterator : public ElementIterator {
 public:
  RepeatIterator(IteratorFactory input_factory, int64_t count, const SplitFeed* feed)
      : input_factory_(std::move(input_factory)), count_(count), feed_(feed) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (!done_) {
      if (count_ != -1 && pass_ >= count_) break;
      if (input_ == nullptr) {
        // Created lazily so repeat(0) never touches its input (or asks for splits).
        StartPass();  // first: a prefetch under it starts leasing as it is made
        SLUICE_ASSIGN_OR_RETURN(input_, input_factory_());
      }
      bool end = false;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(out, &end));
      if (!end) {
        produced_in_pass_ = true;
        barren_passes_ = 0;
        *end_of_sequence = false;
        return absl::OkStatus();
      }
      ++pass_;
      if (!produced_in_pass_ && !GoOnPastAnEmptyPass()) {
        input_.reset();
        break;
      }
      const bool another_pass = count_ == -1 || pass_ < count_;
      StartPass();
      if (!another_pass || !input_->Rewind()) input_.reset();
    }
    done_ = true;
    *end_of_sequence = true;
    return absl::OkStatus();
  }

 private:
  // Passes in a row that had splits and yielded nothing, past which the repeat ends: a
  // pipeline that never yields (a filter that drops everything) would otherwise lease pass
  // after pass for ever, as tf.data's does.
  static constexpr int64_t kMaxBarrenPasses = 1000;

  void StartPass() {
    produced_in_pass_ = false;
    if (feed_ != nullptr) {
      handed_out_at_start_ = feed_->handed_out();
      calls_at_start_ = feed_->calls();
    }
  }

  // A pass that yields nothing ends the repeat, else repeat() over an empty source would
  // spin for ever; tf.data does the same. Under DYNAMIC sharding, though, this worker's
  // share of a pass may be empty while the source is not, and then the repeat goes on, as
  // tf.data's does with split providers:
  // - its splits were filtered out, or fell short of a batch(drop_remainder=True): up to
  //   kMaxBarrenPasses such passes in a row;
  // - it got no split, the other workers took them all first (a slow or restarted worker):
  //   the passes still to come are read by whoever asks, so a worker that left here would
  //   leave them to fewer, or to none once the others are lost. A finite count bounds it;
  //   forever, the feed leases where the others are.
  // A pass that never asked the feed (`take(0)`, a `repeat(0)` under this one) yields
  // nothing by itself, as without sharding: every pass would be the same.
  bool GoOnPastAnEmptyPass() {
    if (feed_ == nullptr || feed_->calls() == calls_at_start_) return false;
    if (feed_->handed_out() == handed_out_at_start_) return !feed_->source_empty();
    if (++barren_passes_ <= kMaxBarrenPasses) return true;
    std::fprintf(stderr,
                 "sluice: repeat() ends: its last %lld passes had splits and yielded nothing "
                 "(does a filter drop everything?)\n",
                 static_cast<long long>(kMaxBarrenPasses));
    return false;
  }

  IteratorFactory input_factory_;
  const int64_t count_;
  const SplitFeed* const feed_;  // null without DYNAMIC sharding
  int64_t handed_out_at_start_ = 0;
  int64_t calls_at_start_ = 0;
  int64_t barren_passes_ = 0;
  std::unique_ptr<ElementIterator> input_;
  int64_t pass_ = 0;
  bool produced_in_pass_ = false;
  bool done_ = false;
};

}  // namespace

OpDef RepeatOpDef() {
  OpDef def;
  def.name = "repeat";
  def.op_case = proto::Stage::kRepeat;
  def.params = {{"count", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(int64_t count, args.GetInt("count", -1));
    stage->mutable_repeat()->set_count(count);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    std::vector<FormattedArg> args;
    if (stage.repeat().count() != -1) {
      args.push_back({"count", ArgValue::Integer(stage.repeat().count()), true});
    }
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    if (stage.repeat().count() < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("count must be >= 0, or -1 for forever, got ", stage.repeat().count()));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage& stage, int64_t input) -> absl::StatusOr<int64_t> {
    const int64_t count = stage.repeat().count();
    if (count == 0 || input == 0) return 0;
    // As tf.data: for ever over an input of unknown size is infinite (a pass that yields
    // nothing ends it all the same), so `list_files | interleave(...) | repeat()` is.
    if (count == -1 || input == kInfinite) return kInfinite;
    if (input == kUnknown) return kUnknown;
    int64_t total;
    if (__builtin_mul_overflow(input, count, &total)) {
      return absl::OutOfRangeError(
          absl::StrCat("cardinality ", input, " x ", count, " does not fit in int64"));
    }
    return total;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    return std::make_unique<RepeatIterator>(args.input, args.stage.repeat().count(),
                                            args.context.split_feed);
  };
  return def;
}

}  // namespace sluice::engine
