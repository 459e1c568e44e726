#include "engine/ops/interleave_origins.h"

namespace sluice::engine {

void InterleaveOrigins::Took(uint64_t opened, size_t slot, int64_t inner) {
  const int64_t output = next_output_++;
  const bool continues = continuing_.has_value() && continuing_->opened == opened &&
                         continuing_->slot == slot && continuing_->inner == inner;
  continuing_ = Origin{opened, slot, inner + 1};
  if (continues) return;
  runs_.Push(Run{output, Origin{opened, slot, inner}});
}

std::optional<InterleaveOrigins::Origin> InterleaveOrigins::Find(int64_t output) const {
  // The latest run that began at or before it: runs are in output order, and each lasts
  // until the next begins.
  const std::optional<Run> run =
      runs_.FindNewest([output](const Run& r) { return r.first_output <= output; });
  if (!run.has_value()) return std::nullopt;
  Origin origin = run->first;
  origin.inner += output - run->first_output;
  return origin;
}

}  // namespace sluice::engine
