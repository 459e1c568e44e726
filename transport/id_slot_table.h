// A table of live entries keyed by ids it hands out, for the RPC layer's pending calls: an id
// names its slot, so a reply finds its call by index instead of by hashing, and the slots of
// finished calls are reused without allocating.
//
// An id is (sequence << kIndexBits) | slot, the sequence counting every insert, so an id is
// never handed out twice (until 2^40 inserts) even when its slot is: a late reply to a call
// that timed out finds nothing, not the call that reused the slot. Not thread-safe; the
// owner's lock guards it.
//
//   IdSlotTable<PendingCall> pending;
//   uint64_t id = pending.Insert(std::move(call));
//   if (PendingCall* call = pending.Find(id)) { ... }
//   std::optional<PendingCall> done = pending.Take(id);
#ifndef SLUICE_TRANSPORT_ID_SLOT_TABLE_H_
#define SLUICE_TRANSPORT_ID_SLOT_TABLE_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace sluice::transport {

template <typename T>
class IdSlotTable {
 public:
  static constexpr int kIndexBits = 24;  // up to 16 M live entries

  IdSlotTable() = default;
  // Starts counting after `sequence` (tests: near the wrap at 2^40 inserts).
  explicit IdSlotTable(uint64_t sequence) : sequence_(sequence) {}

  // Stores `value`; returns its id, or 0 when the table is full() (`value` is then dropped).
  [[nodiscard]] uint64_t Insert(T value) {
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      if (full()) return 0;
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    const uint64_t id = NextId(index);
    slots_[index].id = id;
    slots_[index].value.emplace(std::move(value));
    ++size_;
    return id;
  }

  // As Insert, with the value made in place (default-made, for the caller to fill in):
  // returns it, and its id in `*id`; nullptr when the table is full().
  [[nodiscard]] T* Add(uint64_t* id) {
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      if (full()) return nullptr;
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    *id = NextId(index);
    slots_[index].id = *id;
    ++size_;
    return &slots_[index].value.emplace();
  }

  // The live entry with `id`, or nullptr. Valid until the table next changes.
  [[nodiscard]] T* Find(uint64_t id) {
    const uint64_t index = id & kIndexMask;
    if (id == 0 || index >= slots_.size() || slots_[index].id != id) return nullptr;
    return &*slots_[index].value;
  }

  // Removes the entry with `id` and returns it; nullopt when there is none.
  [[nodiscard]] std::optional<T> Take(uint64_t id) {
    if (Find(id) == nullptr) return std::nullopt;
    return TakeAt(id & kIndexMask);
  }

  // Removes the entry with `id`, as Take without moving the value out (a caller that wants
  // one member moves it from Find's pointer first); false when there is none.
  [[nodiscard]] bool Erase(uint64_t id) {
    if (Find(id) == nullptr) return false;
    Free(id & kIndexMask);
    return true;
  }

  // Calls `take(id, value)` for every entry; removes and returns those for which it returns
  // true, in slot order.
  template <typename Predicate>
  [[nodiscard]] std::vector<T> TakeIf(Predicate take) {
    std::vector<T> taken;
    for (uint32_t index = 0; index < slots_.size(); ++index) {
      Slot& slot = slots_[index];
      if (slot.id != 0 && take(slot.id, *slot.value)) taken.push_back(*TakeAt(index));
    }
    return taken;
  }

  // 2^kIndexBits entries are live.
  [[nodiscard]] bool full() const { return free_.empty() && slots_.size() > kIndexMask; }
  [[nodiscard]] size_t size() const { return size_; }
  // Slots, live and free: the most entries live at once so far.
  [[nodiscard]] size_t slot_count() const { return slots_.size(); }
  [[nodiscard]] bool empty() const { return size_ == 0; }

 private:
  static constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
  struct Slot {
    uint64_t id = 0;  // 0: free
    std::optional<T> value;
  };

  // The sequence wraps after 2^40 inserts; the value that shifts to 0 is skipped, or slot
  // 0's id would be 0, "none" (a live call lost in a table that counted it, its caller told
  // the table was full).
  uint64_t NextId(uint32_t index) {
    if ((++sequence_ << kIndexBits) == 0) ++sequence_;
    return (sequence_ << kIndexBits) | index;
  }

  std::optional<T> TakeAt(uint64_t index) {
    std::optional<T> value = std::move(slots_[index].value);
    Free(index);
    return value;
  }

  void Free(uint64_t index) {
    Slot& slot = slots_[index];
    slot.value.reset();
    slot.id = 0;
    free_.push_back(static_cast<uint32_t>(index));
    --size_;
  }

  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  uint64_t sequence_ = 0;
  size_t size_ = 0;
};

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_ID_SLOT_TABLE_H_
