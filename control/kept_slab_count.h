// How many of a worker's slabs hold batches kept for an acknowledgement, counted as batches
// are kept and let go.
//
// A task checks its kept budget (in slabs) each time it keeps a batch. Counting by walking
// every kept batch of every client cost a sort per reply, growing with the clients and their
// requests in flight; a Mark per kept batch keeps the count current instead, whichever way
// the batch later leaves (acknowledged, let go, its client forgotten, its entry erased).
// Small batches are packed several to a slab, so a slab counts once while any of them is kept.
//
//   KeptSlabCount count(pool->num_slabs());
//   KeptSlabCount::Mark mark = count.MarkKept(slab.index());   // count.slabs() == 1
//   mark = {};                                                  // count.slabs() == 0
#ifndef SLUICE_CONTROL_KEPT_SLAB_COUNT_H_
#define SLUICE_CONTROL_KEPT_SLAB_COUNT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace sluice::control {

class KeptSlabCount {
 public:
  // Counts for one kept batch while it lives. Moves carry the count; there are no copies,
  // so that a copy of a kept batch (to serve again, say) is not counted by accident.
  class Mark {
   public:
    Mark() = default;
    Mark(Mark&& other) noexcept : count_(other.count_), slab_(other.slab_) {
      other.count_ = nullptr;
    }
    Mark& operator=(Mark&& other) noexcept;
    Mark(const Mark&) = delete;
    Mark& operator=(const Mark&) = delete;
    ~Mark() { Release(); }

    [[nodiscard]] bool counted() const { return count_ != nullptr; }

   private:
    friend class KeptSlabCount;
    Mark(KeptSlabCount* count, size_t slab) : count_(count), slab_(slab) {}
    void Release();

    KeptSlabCount* count_ = nullptr;
    size_t slab_ = 0;
  };

  explicit KeptSlabCount(size_t num_slabs);
  KeptSlabCount(const KeptSlabCount&) = delete;
  KeptSlabCount& operator=(const KeptSlabCount&) = delete;

  // A kept batch in the slab with this index (Slab::index(), below num_slabs).
  [[nodiscard]] Mark MarkKept(size_t slab);
  // Slabs holding at least one kept batch. Marks may be dropped on any thread; the count is
  // exact whenever none is being made or dropped.
  [[nodiscard]] size_t slabs() const { return slabs_.load(std::memory_order_relaxed); }

 private:
  const size_t num_slabs_;
  std::unique_ptr<std::atomic<uint32_t>[]> kept_in_slab_;  // by slab index
  std::atomic<size_t> slabs_{0};
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_KEPT_SLAB_COUNT_H_
