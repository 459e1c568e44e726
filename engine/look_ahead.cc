#include "engine/look_ahead.h"

#include <utility>

namespace sluice::engine {

absl::Status ElementLookAhead::Next(Read read, Element* out, bool* end, bool* last) {
  *end = false;
  *last = false;
  if (!failed_.ok()) return failed_;
  if (ended_) {
    *end = true;
    return absl::OkStatus();
  }
  if (has_ahead_) {
    out->swap(ahead_);  // ahead_ keeps *out's buffer for the next read: no allocation
    has_ahead_ = false;
  } else {
    failed_ = read(out, end);
    if (!failed_.ok()) return failed_;
    ended_ = *end;
    if (*end) return absl::OkStatus();
  }
  bool ahead_end = false;
  failed_ = read(&ahead_, &ahead_end);
  if (!failed_.ok()) return absl::OkStatus();  // *out is good: the error comes next call
  has_ahead_ = !ahead_end;
  ended_ = ahead_end;
  *last = ahead_end;
  if (ahead_end) ahead_.clear();  // what *out held before, not to be kept
  return absl::OkStatus();
}

void ElementLookAhead::Reset() {
  ahead_.clear();
  has_ahead_ = false;
  ended_ = false;
  failed_ = absl::OkStatus();
}

}  // namespace sluice::engine
