#include "engine/ops/range_op.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/split_cursor.h"

namespace sluice::engine {

absl::StatusOr<int64_t> RangeLength(const proto::RangeOp& range) {
  const int64_t start = range.start(), stop = range.stop(), step = range.step();
  if (step == 0) return absl::InvalidArgumentError("step must be != 0, got 0");
  // Unsigned arithmetic: stop - start can exceed int64 (e.g. range(INT64_MIN, INT64_MAX)).
  uint64_t span;
  uint64_t stride;
  if (step > 0) {
    if (start >= stop) return 0;
    span = static_cast<uint64_t>(stop) - static_cast<uint64_t>(start);
    stride = static_cast<uint64_t>(step);
  } else {
    if (start <= stop) return 0;
    span = static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
    stride = uint64_t{0} - static_cast<uint64_t>(step);
  }
  uint64_t length = (span - 1) / stride + 1;
  if (length > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("range(", start, ", ", stop, ", ", step,
                                                   ") has ", length,
                                                   " elements; at most 2^63-1 are supported"));
  }
  return static_cast<int64_t>(length);
}

int64_t RangeValue(const proto::RangeOp& range, int64_t index) {
  // The true value lies between start and stop, so the wrapped unsigned result is exact.
  return static_cast<int64_t>(static_cast<uint64_t>(range.start()) +
                              static_cast<uint64_t>(index) * static_cast<uint64_t>(range.step()));
}

namespace {

class RangeIterator : public ElementIterator {
 public:
  RangeIterator(proto::RangeOp range, int64_t length, const OpBuildArgs& args)
      : range_(std::move(range)),
        // Splits come over the network; the cursor refuses one outside the range.
        cursor_(args.context.split_feed, args.instance, length, "range", args.context.delivered,
                args.final_ordinals) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    int64_t index;
    SLUICE_RETURN_IF_ERROR(cursor_.Next(&index, end_of_sequence));
    if (*end_of_sequence) return absl::OkStatus();
    out->clear();
    out->push_back(Tensor::Scalar<int64_t>(RangeValue(range_, index)));
    if (cursor_.split_key() != 0) SetElementProvenance(*out, cursor_.LastProvenance());
    return absl::OkStatus();
  }

 private:
  const proto::RangeOp range_;
  SplitCursor cursor_;
};

}  // namespace

OpDef RangeOpDef() {
  OpDef def;
  def.name = "range";
  def.op_case = proto::Stage::kRange;
  def.is_source = true;
  def.splittable = true;
  def.params = {{"start", false}, {"stop", true}, {"step", false}};
  // Python's overloads: range(stop), range(start, stop), range(start, stop, step).
  def.positional_names = [](size_t count) -> absl::StatusOr<std::vector<std::string>> {
    switch (count) {
      case 0:
        return std::vector<std::string>{};
      case 1:
        return std::vector<std::string>{"stop"};
      case 2:
        return std::vector<std::string>{"start", "stop"};
      case 3:
        return std::vector<std::string>{"start", "stop", "step"};
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "range takes 1 to 3 positional arguments (stop | start, stop | start, stop, step), "
            "got ",
            count));
    }
  };
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::RangeOp* range = stage->mutable_range();
    SLUICE_ASSIGN_OR_RETURN(int64_t start, args.GetInt("start", 0));
    SLUICE_ASSIGN_OR_RETURN(int64_t stop, args.GetInt("stop", 0));
    SLUICE_ASSIGN_OR_RETURN(int64_t step, args.GetInt("step", 1));
    range->set_start(start);
    range->set_stop(stop);
    range->set_step(step);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::RangeOp& r = stage.range();
    return std::vector<FormattedArg>{{"start", ArgValue::Integer(r.start()), true},
                                     {"stop", ArgValue::Integer(r.stop()), true},
                                     {"step", ArgValue::Integer(r.step()), true}};
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    return RangeLength(stage.range()).status();
  };
  def.cardinality = [](const proto::Stage& stage, int64_t) { return RangeLength(stage.range()); };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(int64_t length, RangeLength(args.stage.range()));
    return std::make_unique<RangeIterator>(args.stage.range(), length, args);
  };
  return def;
}

}  // namespace sluice::engine
