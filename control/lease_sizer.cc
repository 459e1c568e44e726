#include "control/lease_sizer.h"

#include <algorithm>

namespace sluice::control {

LeaseSizer::LeaseSizer(int min_splits, int max_splits, absl::Duration target)
    : min_splits_(std::max(1, min_splits)),
      max_splits_(std::max(min_splits_, max_splits)),
      target_(target),
      size_(min_splits_) {}

int LeaseSizer::Next(absl::Time now) {
  if (last_arrival_ != absl::InfinitePast()) {
    const absl::Duration lasted = now - last_arrival_;
    if (lasted < target_) {
      size_ = std::min(max_splits_, size_ * 2);
    } else if (lasted > 4 * target_) {
      size_ = std::max(min_splits_, size_ / 2);
    }
  }
  return size_;
}

}  // namespace sluice::control
