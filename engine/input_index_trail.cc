#include "engine/input_index_trail.h"

namespace sluice::engine {

void InputIndexTrail::Produced(int64_t input_index) {
  const int64_t output = produced_++;
  const int64_t skipped = input_index - output;
  if (skipped == skipped_) return;
  skipped_ = skipped;
  absl::MutexLock lock(&mu_);
  if (runs_.size() == kDropsKept) runs_.pop_front();
  runs_.push_back(Run{output, skipped});
}

int64_t InputIndexTrail::InputIndexOf(int64_t index) const {
  absl::MutexLock lock(&mu_);
  // The latest run that began at or before it.
  for (auto run = runs_.rbegin(); run != runs_.rend(); ++run) {
    if (run->first_output <= index) return index + run->skipped;
  }
  return -1;
}

}  // namespace sluice::engine
