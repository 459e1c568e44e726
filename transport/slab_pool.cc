#include "transport/slab_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice::transport {
namespace {
// Slabs start on cache-line-and-more boundaries so tensor alignment inside them holds.
constexpr size_t kSlabAlignment = 4096;
}  // namespace

Slab& Slab::operator=(Slab&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::move(other.pool_);
    index_ = other.index_;
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void Slab::Release() {
  if (data_ == nullptr) return;
  pool_->Return(index_);
  data_ = nullptr;
  capacity_ = 0;
  pool_.reset();
}

absl::StatusOr<std::shared_ptr<SlabPool>> SlabPool::Create(Transport& transport, size_t slab_bytes,
                                                           size_t num_slabs) {
  if (slab_bytes == 0 || num_slabs == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slab pool needs slab_bytes > 0 and num_slabs > 0, got ", slab_bytes, " and ", num_slabs));
  }
  size_t rounded = (slab_bytes + kSlabAlignment - 1) / kSlabAlignment * kSlabAlignment;
  size_t total = rounded * num_slabs;
  // Not MAP_POPULATE: pages are committed as batches first write them, so a pool sized for
  // 16 MiB batches that carries 8 KiB ones costs 8 KiB of RAM per slab in use, not 16 MiB
  // (with Acquire's most-recently-returned-first order, few slabs are ever touched). A NIC
  // that needs pinned pages has its registration pin them all here anyway.
  void* memory = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", total, " bytes for a slab pool: ", std::strerror(errno)));
  }
  std::shared_ptr<SlabPool> pool(
      new SlabPool(static_cast<std::byte*>(memory), total, rounded, num_slabs));
  SLUICE_ASSIGN_OR_RETURN(pool->region_, transport.RegisterMemory(memory, total));
  return pool;
}

SlabPool::SlabPool(std::byte* memory, size_t mapped_bytes, size_t slab_bytes, size_t num_slabs)
    : memory_(memory), mapped_bytes_(mapped_bytes), slab_bytes_(slab_bytes), num_slabs_(num_slabs) {
  free_.reserve(num_slabs);
  for (size_t i = num_slabs; i-- > 0;) free_.push_back(i);
}

SlabPool::~SlabPool() {
  region_.reset();  // deregister before the memory goes away
  munmap(memory_, mapped_bytes_);
}

std::optional<Slab> SlabPool::Acquire(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&available), timeout)) return std::nullopt;
  size_t index = free_.back();
  free_.pop_back();
  return Slab(shared_from_this(), index, memory_ + index * slab_bytes_, slab_bytes_);
}

void SlabPool::Return(size_t index) {
  absl::MutexLock lock(&mu_);
  free_.push_back(index);
}

size_t SlabPool::free_slabs() const {
  absl::MutexLock lock(&mu_);
  return free_.size();
}

}  // namespace sluice::transport
