#include "transport/slab_pool.h"

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/await.h"
#include "common/capability.h"
#include "common/status_macros.h"

namespace sluice::transport {
namespace {
// Slabs start on cache-line-and-more boundaries so tensor alignment inside them holds.
constexpr size_t kSlabAlignment = 4096;

size_t RoundUp(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

// An anonymous private mapping of `bytes`, starting on a multiple of `alignment` (a power of
// two, or 0 for the page alignment mmap gives). Over-maps and trims, as mmap cannot align.
void* MapAligned(size_t bytes, size_t alignment) {
  const size_t slack = alignment > kSlabAlignment ? alignment : 0;
  void* raw =
      mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED || slack == 0) return raw;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + alignment - 1) & ~(uintptr_t{alignment} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const size_t tail = start + bytes + slack - (aligned + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  return reinterpret_cast<void*>(aligned);
}
}  // namespace

size_t TransparentHugePageBytes() {
  static const size_t bytes = [] {
    std::string enabled;
    std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), enabled);
    if (enabled.empty() || absl::StrContains(enabled, "[never]")) return size_t{0};
    std::string size_text;
    std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"), size_text);
    size_t size = 0;
    if (!absl::SimpleAtoi(size_text, &size) || size < kSlabAlignment || (size & (size - 1)) != 0) {
      return size_t{0};
    }
    return size;
  }();
  return bytes;
}

PageBacking DefaultPageBacking() {
  const char* choice = std::getenv("SLUICE_HUGE_PAGES");
  if (choice == nullptr || *choice == '\0' || absl::EqualsIgnoreCase(choice, "auto")) {
    return PageBacking::kHugeWhereAvailable;
  }
  if (absl::EqualsIgnoreCase(choice, "off")) return PageBacking::kBasePages;
  // Said once per process: a misspelt "of" must not pass for the default unseen.
  static std::once_flag warned;
  std::call_once(warned, [choice] {
    std::fprintf(stderr,
                 "sluice: SLUICE_HUGE_PAGES='%s' is neither 'auto' nor 'off'; using huge pages "
                 "where available (auto)\n",
                 choice);
  });
  return PageBacking::kHugeWhereAvailable;
}

bool DefaultPoolsUseHugePages() {
  return DefaultPageBacking() == PageBacking::kHugeWhereAvailable &&
         TransparentHugePageBytes() != 0;
}

absl::Status ExplainRegistrationFailure(const absl::Status& why, size_t bytes,
                                        uint64_t memlock_limit) {
  const std::string what =
      absl::StrCat("registering a slab pool of ", bytes, " bytes: ", why.message());
  if (memlock_limit == RLIM_INFINITY || memlock_limit >= bytes) {
    return absl::Status(why.code(), what);
  }
  return absl::Status(
      why.code(),
      absl::StrCat(what, " (RLIMIT_MEMLOCK is ", memlock_limit,
                   " bytes, below the pool: if the transport pins registered memory, as RDMA "
                   "does, raise it for this process, e.g. `ulimit -l unlimited`; "
                   "`sluice-perf doctor` checks the host)"));
}

Slab Slab::OnHeap(size_t capacity) {
  // Its bytes are only sent, never parsed in place: new[]'s alignment will do.
  return Slab(nullptr, kNotPooled, new std::byte[std::max<size_t>(capacity, 1)], capacity);
}

void Slab::Release() {
  if (data_ == nullptr) return;
  if (pool_ != nullptr) {
    pool_->Return(index_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  capacity_ = 0;
  pool_.reset();
}

absl::StatusOr<std::shared_ptr<SlabPool>> SlabPool::Create(Transport& transport, size_t slab_bytes,
                                                           size_t num_slabs, PageBacking backing) {
  if (slab_bytes == 0 || num_slabs == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slab pool needs slab_bytes > 0 and num_slabs > 0, got ", slab_bytes, " and ", num_slabs));
  }
  // Past these no machine has the memory (nor the free list's 8 bytes per slab), and the
  // products below stay far from wrapping (2^32 slabs of 4 GiB wrapped to 0 bytes, and the
  // mapping "succeeded"). Counted in whole slabs as mapped (each rounded to a page).
  constexpr size_t kMaxPoolBytes = size_t{1} << 48;
  constexpr size_t kMaxSlabs = size_t{1} << 32;
  if (slab_bytes > kMaxPoolBytes || num_slabs > kMaxSlabs ||
      num_slabs > kMaxPoolBytes / RoundUp(slab_bytes, kSlabAlignment)) {
    return absl::InvalidArgumentError(absl::StrCat("a slab pool of ", num_slabs, " slabs of ",
                                                   slab_bytes, " bytes is more than ", kMaxSlabs,
                                                   " slabs or ", kMaxPoolBytes, " bytes"));
  }
  const size_t rounded = RoundUp(slab_bytes, kSlabAlignment);
  const size_t total = rounded * num_slabs;
  // Not MAP_POPULATE: pages are committed as batches first write them, so a pool sized for
  // 16 MiB batches that carries 8 KiB ones costs a (huge) page per slab in use, not 16 MiB
  // (with Acquire's most-recently-returned-first order, few slabs are ever touched). A NIC
  // that needs pinned pages has its registration pin them all here anyway. Huge pages need
  // the mapping aligned to and sized in whole huge pages; nothing writes the rounding past
  // the last slab, it only shares that slab's last huge page.
  size_t huge_page = 0;
  switch (backing) {
    case PageBacking::kHugeWhereAvailable:
      huge_page = TransparentHugePageBytes();
      break;
    case PageBacking::kBasePages:
      break;
  }
  const size_t mapped = huge_page != 0 ? RoundUp(total, huge_page) : total;
  void* memory = MapAligned(mapped, huge_page);
  if (memory == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", mapped, " bytes for a slab pool (", num_slabs, " slabs of ",
                     rounded, " bytes): ", std::strerror(errno)));
  }
  // Advice only: a kernel that refuses it leaves base pages, which work, slower.
  const bool huge_pages_advised = huge_page != 0 && madvise(memory, mapped, MADV_HUGEPAGE) == 0;
  if (backing == PageBacking::kBasePages) madvise(memory, mapped, MADV_NOHUGEPAGE);
  std::shared_ptr<SlabPool> pool(new SlabPool(static_cast<std::byte*>(memory), mapped, rounded,
                                              num_slabs, huge_pages_advised));
  absl::StatusOr<std::unique_ptr<MemoryRegion>> region = transport.RegisterMemory(memory, total);
  if (!region.ok()) {
    rlimit memlock{RLIM_INFINITY, RLIM_INFINITY};
    // CAP_IPC_LOCK (root has it) lifts the limit.
    if (!HasEffectiveCapability(CAP_IPC_LOCK)) getrlimit(RLIMIT_MEMLOCK, &memlock);
    return ExplainRegistrationFailure(region.status(), total, memlock.rlim_cur);
  }
  pool->region_ = *std::move(region);
  return pool;
}

SlabPool::SlabPool(std::byte* memory, size_t mapped_bytes, size_t slab_bytes, size_t num_slabs,
                   bool huge_pages_advised)
    : memory_(memory),
      mapped_bytes_(mapped_bytes),
      slab_bytes_(slab_bytes),
      num_slabs_(num_slabs),
      huge_pages_advised_(huge_pages_advised) {
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
  // A zero timeout must not sleep: a reader polls its pool after every batch (see
  // common/await.h).
  if (!AwaitAtMost(mu_, absl::Condition(&available), timeout)) {
    return std::nullopt;
  }
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
