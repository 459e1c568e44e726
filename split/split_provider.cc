#include "split/split_provider.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/ops/range_op.h"
#include "engine/pipeline_validate.h"

namespace sluice::split {
namespace {

// Splits [0, k), [k, 2k), ... over a source of `num_elements` indexable elements.
class IndexSplitProvider : public SplitProvider {
 public:
  IndexSplitProvider(int64_t num_elements, int64_t elements_per_split)
      : num_elements_(num_elements), elements_per_split_(elements_per_split) {}

  absl::Status GetNext(proto::Split* split, bool* end_of_splits) override {
    if (next_ >= num_elements_) {
      *end_of_splits = true;
      return absl::OkStatus();
    }
    // Subtraction first: next_ + k may overflow near INT64_MAX.
    const int64_t end = next_ + std::min(elements_per_split_, num_elements_ - next_);
    split->set_begin(next_);
    split->set_end(end);
    next_ = end;
    *end_of_splits = false;
    return absl::OkStatus();
  }

  void Reset() override { next_ = 0; }

 private:
  const int64_t num_elements_;
  const int64_t elements_per_split_;
  int64_t next_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SplitProvider>> CreateSplitProvider(const proto::PipelineDef& def,
                                                                   const SplitOptions& options) {
  if (options.elements_per_split <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("elements_per_split must be > 0, got ", options.elements_per_split));
  }
  SLUICE_RETURN_IF_ERROR(engine::ValidateSplittable(def));
  const proto::Stage& source = def.stages(0);
  // One case per splittable source op; ValidateSplittable guarantees a match.
  switch (source.op_case()) {
    case proto::Stage::kRange: {
      SLUICE_ASSIGN_OR_RETURN(int64_t length, engine::RangeLength(source.range()));
      return std::make_unique<IndexSplitProvider>(length, options.elements_per_split);
    }
    default:
      break;
  }
  return absl::UnimplementedError(absl::StrCat("source op field ",
                                               static_cast<int>(source.op_case()),
                                               " is marked splittable but has no split provider"));
}

}  // namespace sluice::split
