#include "control/kept_slab_count.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace sluice::control {

KeptSlabCount::KeptSlabCount(size_t num_slabs)
    : num_slabs_(num_slabs), kept_in_slab_(new std::atomic<uint32_t>[num_slabs]) {
  for (size_t i = 0; i < num_slabs; ++i) kept_in_slab_[i].store(0, std::memory_order_relaxed);
}

KeptSlabCount::Mark KeptSlabCount::MarkKept(size_t slab) {
  if (slab >= num_slabs_) {
    // A slab of another pool: counting it would write outside the table.
    std::fprintf(stderr, "sluice: KeptSlabCount: slab %zu of a pool of %zu\n", slab, num_slabs_);
    std::abort();
  }
  if (kept_in_slab_[slab].fetch_add(1, std::memory_order_relaxed) == 0) {
    slabs_.fetch_add(1, std::memory_order_relaxed);
  }
  return Mark(this, slab);
}

KeptSlabCount::Mark& KeptSlabCount::Mark::operator=(Mark&& other) noexcept {
  if (this != &other) {
    Release();
    count_ = std::exchange(other.count_, nullptr);
    slab_ = other.slab_;
  }
  return *this;
}

void KeptSlabCount::Mark::Release() {
  if (count_ == nullptr) return;
  if (count_->kept_in_slab_[slab_].fetch_sub(1, std::memory_order_relaxed) == 1) {
    count_->slabs_.fetch_sub(1, std::memory_order_relaxed);
  }
  count_ = nullptr;
}

}  // namespace sluice::control
