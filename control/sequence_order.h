// Puts one sender's numbered items back in the order it numbered them.
//
// A worker numbers the batches it sends one client 1, 2, 3, ... (GetElementResponse.
// client_sequence) under a stream id of its choosing; replies may land out of order. This
// hands each item out once every item numbered before it has been handed out, or given up:
// the sender also says, with each item, the lowest number it may still send (the floor),
// and numbers below it that never landed are skipped. Numbers below the next one due are
// either skipped ones arriving after all (handed out at once, late rather than lost) or
// copies of items handed out already (a resend that crossed an acknowledgement), which are
// refused. A new stream id starts the numbering again at 1; an item of a stream given up
// for a newer one (a reply that was on its way when the sender renumbered) is handed out
// at once, without going back to the old numbering.
//
//   SequenceOrder<Batch> order;
//   if (order.HandedOut(stream, n)) return;  // a copy: drop it
//   order.Add(stream, n, floor, std::move(batch), [&](Batch b) { ready.push_back(std::move(b)); });
#ifndef SLUICE_CONTROL_SEQUENCE_ORDER_H_
#define SLUICE_CONTROL_SEQUENCE_ORDER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace sluice::control {

template <typename T>
class SequenceOrder {
 public:
  // Skipped numbers remembered at most; an older one arriving after all counts as a copy.
  static constexpr int64_t kMaxSkipped = 1024;
  // Streams given up for newer ones, remembered at most (a sender renumbers rarely).
  static constexpr size_t kMaxRetired = 8;

  // Whether item `sequence` of `stream` was handed out already, or is held.
  [[nodiscard]] bool HandedOut(uint64_t stream, int64_t sequence) const {
    if (stream != stream_) return false;
    if (held_.contains(sequence)) return true;
    return sequence < next_ && !skipped_.contains(sequence);
  }

  // Takes item `sequence` of `stream` (not HandedOut), sent with `floor`, and passes every
  // item now due to `hand_out`, in order.
  template <typename HandOut>
  void Add(uint64_t stream, int64_t sequence, int64_t floor, T item, HandOut&& hand_out) {
    if (stream != stream_ &&
        std::find(retired_.begin(), retired_.end(), stream) != retired_.end()) {
      // Late, from a numbering given up: going back to it would hold the new numbering's
      // items for numbers handed out long ago.
      hand_out(std::move(item));
      return;
    }
    if (stream != stream_) {
      // A new numbering (the first item, or a sender that restarted or forgot this client):
      // what waited under the old one goes first.
      Flush(hand_out);
      if (stream_ != 0) retired_.push_back(stream_);
      if (retired_.size() > kMaxRetired) retired_.erase(retired_.begin());
      stream_ = stream;
      next_ = 1;
      skipped_.clear();
    }
    if (floor > next_) {
      SkipBelow(floor);
      next_ = floor;
    }
    HandOutDue(hand_out);
    if (sequence > next_) {  // one before it is still on the way
      held_.try_emplace(sequence, std::move(item));
      return;
    }
    // Its turn; or, below next_, a skipped one that came after all.
    skipped_.erase(sequence);
    next_ = std::max(next_, sequence + 1);
    hand_out(std::move(item));
    HandOutDue(hand_out);
  }

  // Passes every held item to `hand_out`, in order, giving up the numbers between them.
  template <typename HandOut>
  void Flush(HandOut&& hand_out) {
    for (auto& [sequence, item] : held_) {
      SkipBelow(sequence);
      next_ = std::max(next_, sequence + 1);
      hand_out(std::move(item));
    }
    held_.clear();
  }

  [[nodiscard]] size_t held() const { return held_.size(); }
  [[nodiscard]] size_t skipped() const { return skipped_.size(); }

 private:
  // Numbers from next_ up to `end` that are not held never landed.
  void SkipBelow(int64_t end) {
    for (int64_t n = std::max(next_, end - kMaxSkipped); n < end; ++n) {
      if (!held_.contains(n)) skipped_.insert(n);
    }
    while (skipped_.size() > static_cast<size_t>(kMaxSkipped)) skipped_.erase(skipped_.begin());
  }

  template <typename HandOut>
  void HandOutDue(HandOut& hand_out) {
    while (!held_.empty() && held_.begin()->first <= next_) {
      auto first = held_.begin();
      next_ = std::max(next_, first->first + 1);
      hand_out(std::move(first->second));
      held_.erase(first);
    }
  }

  uint64_t stream_ = 0;  // 0: none yet (senders never use it)
  int64_t next_ = 1;     // the number due next
  std::map<int64_t, T> held_;
  std::set<int64_t> skipped_;
  // A vector, not a deque: its move is noexcept, so a vector of readers' tasks that hold
  // one moves them when it grows instead of trying to copy them.
  std::vector<uint64_t> retired_;
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_SEQUENCE_ORDER_H_
