#include "engine/input_index_trail.h"

#include <optional>

namespace sluice::engine {

void InputIndexTrail::Produced(int64_t input_index) {
  const int64_t output = produced_++;
  const int64_t skipped = input_index - output;
  if (skipped == skipped_) return;
  skipped_ = skipped;
  runs_.Push(Run{output, skipped});
}

int64_t InputIndexTrail::InputIndexOf(int64_t index) const {
  // The latest run that began at or before it.
  const std::optional<Run> run =
      runs_.FindNewest([index](const Run& r) { return r.first_output <= index; });
  return run.has_value() ? index + run->skipped : -1;
}

}  // namespace sluice::engine
