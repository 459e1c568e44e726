#include "control/delivery_log.h"

#include <algorithm>
#include <iterator>

namespace sluice::control {

void DeliveryLog::Record(int64_t split_key, int64_t first_ordinal, int64_t count) {
  if (split_key == 0 || count <= 0) return;
  auto it = Isolate(split_key);
  Ranges& ranges = it->second.ranges;
  int64_t begin = first_ordinal;
  int64_t end = first_ordinal + count;
  // Merge the new range with every range it touches (adjacent ones included).
  auto first = std::lower_bound(ranges.begin(), ranges.end(), begin,
                                [](const auto& r, int64_t b) { return r.second < b; });
  auto last = first;
  while (last != ranges.end() && last->first <= end) {
    begin = std::min(begin, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  ranges.insert(ranges.erase(first, last), {begin, end});
  Coalesce(it);
}

std::vector<proto::OrdinalRange> DeliveryLog::Delivered(int64_t split_key) const {
  std::vector<proto::OrdinalRange> out;
  auto it = entries_.upper_bound(split_key);
  if (it == entries_.begin()) return out;
  --it;
  if (split_key > it->second.last_key) return out;
  for (const auto& [begin, end] : it->second.ranges) {
    proto::OrdinalRange& range = out.emplace_back();
    range.set_begin(begin);
    range.set_end(end);
  }
  return out;
}

void DeliveryLog::EraseBelow(int64_t split_key) {
  auto end = entries_.lower_bound(split_key);
  if (end != entries_.begin()) {
    auto last = std::prev(end);
    if (last->second.last_key >= split_key) {
      // A span across the cut keeps its keys from split_key on.
      end = entries_.emplace(split_key, last->second).first;  // erased up to, not with
    }
  }
  entries_.erase(entries_.begin(), end);
}

bool DeliveryLog::AppendSpan(int64_t first_key, int64_t last_key, Ranges ranges) {
  if (first_key <= 0 || last_key < first_key || ranges.empty()) return false;
  if (!entries_.empty() && entries_.rbegin()->second.last_key >= first_key) return false;
  if (last_key > first_key && ranges.size() != 1) return false;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].first >= ranges[i].second) return false;
    if (i > 0 && ranges[i - 1].second >= ranges[i].first) return false;
  }
  entries_.emplace_hint(entries_.end(), first_key, Entry{last_key, std::move(ranges)});
  return true;
}

std::map<int64_t, DeliveryLog::Entry>::iterator DeliveryLog::Isolate(int64_t key) {
  auto it = entries_.upper_bound(key);
  if (it != entries_.begin()) {
    auto span = std::prev(it);
    const int64_t first = span->first;
    const int64_t last = span->second.last_key;
    if (key <= last) {
      if (first == last) return span;
      // Split the span [first, last] into [first, key - 1], [key], [key + 1, last].
      const Ranges ranges = span->second.ranges;
      if (key < last) entries_.emplace(key + 1, Entry{last, ranges});
      if (key > first) {
        span->second.last_key = key - 1;
        return entries_.emplace(key, Entry{key, ranges}).first;
      }
      span->second.last_key = key;
      return span;
    }
  }
  return entries_.emplace(key, Entry{key, {}}).first;
}

void DeliveryLog::Coalesce(std::map<int64_t, Entry>::iterator it) {
  if (it->second.ranges.size() != 1) return;
  if (auto next = std::next(it); next != entries_.end() && next->first == it->second.last_key + 1 &&
                                 next->second.ranges == it->second.ranges) {
    it->second.last_key = next->second.last_key;
    entries_.erase(next);
  }
  if (it != entries_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.last_key + 1 == it->first && prev->second.ranges == it->second.ranges) {
      prev->second.last_key = it->second.last_key;
      entries_.erase(it);
    }
  }
}

}  // namespace sluice::control
