#include "engine/split_cursor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice::engine {

SplitCursor::SplitCursor(SplitFeed* feed, int64_t repetition, int64_t length, std::string_view op,
                         std::shared_ptr<DeliveredRegistry> registry, bool skip_delivered)
    : feed_(feed),
      repetition_(repetition),
      length_(length),
      op_(op),
      registry_(std::move(registry)),
      skip_delivered_(skip_delivered),
      // Without a feed the whole range is one implicit split.
      split_end_(feed == nullptr ? length : 0) {
  if (feed == nullptr) {
    split_.set_begin(0);
    split_.set_end(length);
  }
}

absl::Status SplitCursor::Next(int64_t* index, bool* end) {
  while (true) {
    if (next_ < split_end_) {
      if (!skip_delivered_ || delivered_ == nullptr) break;
      // Jump past a delivered interval in one step.
      next_ = split_.begin() + delivered_->NextUndelivered(next_ - split_.begin());
      if (next_ < split_end_) break;
    }
    if (feed_ == nullptr || done_) {
      done_ = true;
      *end = true;
      return absl::OkStatus();
    }
    proto::Split split;
    bool end_of_splits = false;
    SLUICE_RETURN_IF_ERROR(feed_->Next(repetition_, &split, &end_of_splits));
    if (end_of_splits) {
      done_ = true;
      continue;
    }
    if (split.begin() < 0 || split.begin() > split.end() || split.end() > length_) {
      return absl::InvalidArgumentError(
          absl::StrCat(op_, ": expected a split within [0, ", length_, ") with begin <= end, got [",
                       split.begin(), ", ", split.end(), ") for repetition ", repetition_));
    }
    split_ = std::move(split);
    next_ = split_.begin();
    split_end_ = split_.end();
    delivered_ = TrackSplit(split_, registry_.get());
  }
  last_ = next_;
  *index = next_++;
  *end = false;
  return absl::OkStatus();
}

}  // namespace sluice::engine
