// A queue (push at either end, pop at the front) in one ring of slots that grows by doubling
// and never shrinks. A queue moving through a std::deque allocates a 512-byte block each
// time it crosses into a new one (every 4 of a reader's ready batches) even when it never
// holds more than one element; this one allocates only when it holds more than ever before.
//
//   RingQueue<Batch> ready;
//   ready.push_back(std::move(batch));
//   Batch next = std::move(ready.front());
//   ready.pop_front();
#ifndef SLUICE_COMMON_RING_QUEUE_H_
#define SLUICE_COMMON_RING_QUEUE_H_

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace sluice {

template <typename T>
class RingQueue {
 public:
  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;
  // The source is left empty.
  RingQueue(RingQueue&& other) noexcept
      : slots_(std::move(other.slots_)),
        head_(std::exchange(other.head_, 0)),
        size_(std::exchange(other.size_, 0)) {
    other.slots_.clear();
  }
  RingQueue& operator=(RingQueue&& other) noexcept {
    if (this != &other) {
      slots_ = std::move(other.slots_);
      other.slots_.clear();
      head_ = std::exchange(other.head_, 0);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] size_t size() const { return size_; }
  // Room held: what the queue can hold before it allocates again.
  [[nodiscard]] size_t capacity() const { return slots_.size(); }

  // Not empty().
  T& front() {
    assert(!empty() && "RingQueue::front on an empty queue");
    return *slots_[head_];
  }
  const T& front() const {
    assert(!empty() && "RingQueue::front on an empty queue");
    return *slots_[head_];
  }

  // The i-th element from the front; i < size().
  T& operator[](size_t i) {
    assert(i < size_ && "RingQueue index out of range");
    return *slots_[(head_ + i) & mask()];
  }

  // One move (or copy) into the slot: a reader's batch is ~100 bytes. A push that grows the
  // ring moves every element, so a reference from front() does not survive a push, and an
  // element of this queue must be copied out before it is pushed.
  void push_back(T&& value) { EmplaceBack(std::move(value)); }
  void push_back(const T& value) { EmplaceBack(value); }
  void push_front(T&& value) { EmplaceFront(std::move(value)); }
  void push_front(const T& value) { EmplaceFront(value); }
  // Not empty(). Destroys the front element now (a batch gives its slab back).
  void pop_front() {
    assert(!empty() && "RingQueue::pop_front on an empty queue");
    slots_[head_].reset();
    head_ = (head_ + 1) & mask();
    --size_;
  }

 private:
  static constexpr size_t kFirstCapacity = 8;  // a power of two, as every capacity

  size_t mask() const { return slots_.size() - 1; }
  template <typename U>
  void EmplaceBack(U&& value) {
    GrowIfFull();
    slots_[(head_ + size_) & mask()].emplace(std::forward<U>(value));
    ++size_;
  }
  template <typename U>
  void EmplaceFront(U&& value) {
    GrowIfFull();
    head_ = (head_ + slots_.size() - 1) & mask();
    slots_[head_].emplace(std::forward<U>(value));
    ++size_;
  }
  void GrowIfFull() {
    if (size_ < slots_.size()) return;
    std::vector<std::optional<T>> grown(std::max(kFirstCapacity, slots_.size() * 2));
    for (size_t i = 0; i < size_; ++i) {
      std::optional<T>& slot = slots_[(head_ + i) & mask()];
      grown[i].emplace(std::move(*slot));
      slot.reset();
    }
    slots_.swap(grown);
    head_ = 0;
  }

  std::vector<std::optional<T>> slots_;
  size_t head_ = 0;  // the front's slot
  size_t size_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_RING_QUEUE_H_
