// The latest N records one thread writes, for any thread to read without stopping the
// writer: a seqlock over a ring. It is what a stage keeps to say where its recent outputs
// came from (InputIndexTrail, InterleaveOrigins): written per element or per run on the
// pipeline's hot path, read only when a later stage fails. A mutex there cost an
// interleave ~120 ns per element on this machine kind; these writes are plain stores.
//
//   SeqlockRing<Run, 256> runs;
//   runs.Push(Run{10, 3});                      // the writer's thread only
//   std::optional<Run> run = runs.FindNewest(   // any thread
//       [](const Run& r) { return r.first_output <= 12; });
//
// A reader never sees a torn record: one the writer overwrote while it read is dropped,
// and the search ends there (older ones are gone too), as it ends at the oldest kept.
#ifndef SLUICE_ENGINE_SEQLOCK_RING_H_
#define SLUICE_ENGINE_SEQLOCK_RING_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

namespace sluice::engine {

template <typename T, size_t N>
class SeqlockRing {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % sizeof(uint64_t) == 0);
  static constexpr size_t kWords = sizeof(T) / sizeof(uint64_t);

 public:
  // The writer's thread only.
  void Push(const T& record) {
    const int64_t index = written_.load(std::memory_order_relaxed);
    std::array<uint64_t, kWords> words;
    std::memcpy(words.data(), &record, sizeof(T));
    // A reader that loads any word of this record (acquire) then sees the count moved
    // (each word's store releases it), so it drops what it read of the one replaced.
    started_.store(index + 1, std::memory_order_relaxed);
    Slot& slot = slots_[static_cast<size_t>(index) % N];
    for (size_t i = 0; i < kWords; ++i) slot[i].store(words[i], std::memory_order_release);
    written_.store(index + 1, std::memory_order_release);
  }

  // The newest record `match` accepts, looking from the newest back to the oldest kept;
  // nullopt when none does.
  template <typename Match>
  [[nodiscard]] std::optional<T> FindNewest(Match match) const {
    const int64_t written = written_.load(std::memory_order_acquire);
    for (int64_t index = written - 1; index >= 0 && written - index <= static_cast<int64_t>(N);
         --index) {
      const Slot& slot = slots_[static_cast<size_t>(index) % N];
      std::array<uint64_t, kWords> words;
      // Acquire loads, not a fence: plain moves on x86 all the same, and ThreadSanitizer
      // models them (it does not model fences).
      for (size_t i = 0; i < kWords; ++i) words[i] = slot[i].load(std::memory_order_acquire);
      if (started_.load(std::memory_order_relaxed) - index > static_cast<int64_t>(N)) {
        return std::nullopt;  // overwritten while read, and every older one with it
      }
      T record;
      std::memcpy(&record, words.data(), sizeof(T));
      if (match(record)) return record;
    }
    return std::nullopt;
  }

 private:
  using Slot = std::array<std::atomic<uint64_t>, kWords>;
  std::array<Slot, N> slots_{};
  std::atomic<int64_t> started_{0};  // records the writer has begun
  std::atomic<int64_t> written_{0};  // records complete
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_SEQLOCK_RING_H_
