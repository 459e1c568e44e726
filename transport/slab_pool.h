// A pool of equal-sized slabs in one allocation registered with a transport once.
//
// Workers assemble batches straight into slabs and send from them; clients land batches in
// them. Registering the whole pool at start-up is what keeps per-batch cost free of memory
// registration. Memory use is bounded by (slab_bytes × num_slabs), never by the data; pages
// are committed on first write (on an RDMA NIC, registration pins them at start-up), and
// Acquire hands out the most recently returned slab first, so RAM follows the batches'
// real sizes: a pool of 16 × 16 MiB serving 8 KiB batches holds a few huge pages.
//
// Pools ask for transparent huge pages where the kernel offers them: a shared-memory
// transfer pins and walks the sender's pages once per 4 KiB page and copies through a TLB
// entry per page, so 2 MiB pages doubled 1 MiB batches' throughput between processes
// (perf/RESULTS.md, session 25). The price is RAM in 2 MiB steps: a touched slab commits at
// least one huge page. SLUICE_HUGE_PAGES=off in the environment gives every pool base pages.
//
//   absl::StatusOr<std::shared_ptr<SlabPool>> pool = SlabPool::Create(transport, 1 << 20, 8);
//   std::optional<Slab> slab = (*pool)->Acquire(absl::Seconds(1));
//   EncodeBatch(batch, slab->span());  // returned to the pool when `slab` is destroyed
#ifndef SLUICE_TRANSPORT_SLAB_POOL_H_
#define SLUICE_TRANSPORT_SLAB_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transport/transport.h"

namespace sluice::transport {

class SlabPool;

// Exclusive use of one slab; gives it back when destroyed. Keeps the pool alive.
// A slab made by OnHeap belongs to no pool: heap memory, freed when it is destroyed.
class Slab {
 public:
  // index() of a slab in no pool.
  static constexpr size_t kNotPooled = static_cast<size_t>(-1);

  Slab() = default;
  // `capacity` bytes of unregistered heap memory, in no pool: what a worker moves a batch
  // into to give the pool's slab back (a transport sends from it, registering it on the fly).
  [[nodiscard]] static Slab OnHeap(size_t capacity);
  // Inline, member by member: a reader's batch moves its slab about 15 times on its way
  // to the caller, and out-of-line moves were ~4% of the reader's work per small batch.
  Slab(Slab&& other) noexcept
      : pool_(std::move(other.pool_)),
        index_(other.index_),
        data_(std::exchange(other.data_, nullptr)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  Slab& operator=(Slab&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) Release();
      pool_ = std::move(other.pool_);
      index_ = other.index_;
      data_ = std::exchange(other.data_, nullptr);
      capacity_ = std::exchange(other.capacity_, 0);
    }
    return *this;
  }
  ~Slab() {
    if (data_ != nullptr) Release();
  }

  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] size_t capacity() const { return capacity_; }
  [[nodiscard]] std::span<std::byte> span() const { return {data_, capacity_}; }
  // Its place in the pool, below SlabPool::num_slabs(): stable while the slab is held.
  // kNotPooled for a slab made by OnHeap.
  [[nodiscard]] size_t index() const { return index_; }
  [[nodiscard]] bool pooled() const { return pool_ != nullptr; }
  explicit operator bool() const { return data_ != nullptr; }
  void Release();

 private:
  friend class SlabPool;
  Slab(std::shared_ptr<SlabPool> pool, size_t index, std::byte* data, size_t capacity)
      : pool_(std::move(pool)), index_(index), data_(data), capacity_(capacity) {}
  std::shared_ptr<SlabPool> pool_;
  size_t index_ = 0;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

// What backs a pool's memory.
enum class PageBacking {
  kHugeWhereAvailable,  // transparent huge pages, aligned, when the kernel has them
  kBasePages,           // base pages only, even where THP is on for every mapping
};

// kHugeWhereAvailable unless SLUICE_HUGE_PAGES=off; a value other than auto or off is said on
// stderr (once) and taken for auto.
[[nodiscard]] PageBacking DefaultPageBacking();

// The kernel's transparent huge page size, 0 when it has none to give (no THP, or "never").
[[nodiscard]] size_t TransparentHugePageBytes();

// Whether pools made with the default backing ask for huge pages on this host.
[[nodiscard]] bool DefaultPoolsUseHugePages();

// `why` a pool of `bytes` failed to register, with the likely cause added when the soft
// RLIMIT_MEMLOCK that applies (`memlock_limit`; RLIM_INFINITY for none, or with
// CAP_IPC_LOCK) is below `bytes`: RDMA pins registered memory, and a low limit is the
// usual reason registration fails there.
[[nodiscard]] absl::Status ExplainRegistrationFailure(const absl::Status& why, size_t bytes,
                                                      uint64_t memlock_limit);

class SlabPool : public std::enable_shared_from_this<SlabPool> {
 public:
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<SlabPool>> Create(
      Transport& transport, size_t slab_bytes, size_t num_slabs,
      PageBacking backing = DefaultPageBacking());
  ~SlabPool();

  // A free slab, or nullopt when none frees up within `timeout`.
  [[nodiscard]] std::optional<Slab> Acquire(absl::Duration timeout);
  [[nodiscard]] std::optional<Slab> TryAcquire() { return Acquire(absl::ZeroDuration()); }

  [[nodiscard]] size_t slab_bytes() const { return slab_bytes_; }
  [[nodiscard]] size_t num_slabs() const { return num_slabs_; }
  [[nodiscard]] size_t free_slabs() const;
  [[nodiscard]] const MemoryRegion& region() const { return *region_; }
  // Whether the kernel was asked to back the pool with huge pages (it may still fall back to
  // base pages when it has no free huge page, or THP is off).
  [[nodiscard]] bool huge_pages_advised() const { return huge_pages_advised_; }

 private:
  friend class Slab;
  SlabPool(std::byte* memory, size_t mapped_bytes, size_t slab_bytes, size_t num_slabs,
           bool huge_pages_advised);
  void Return(size_t index);

  std::byte* const memory_;
  const size_t mapped_bytes_;
  const size_t slab_bytes_;
  const size_t num_slabs_;
  const bool huge_pages_advised_;
  std::unique_ptr<MemoryRegion> region_;
  mutable absl::Mutex mu_;
  std::vector<size_t> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_SLAB_POOL_H_
