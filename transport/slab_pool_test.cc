#include "transport/slab_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice::transport {
namespace {

class NullHandler : public MessageHandler {
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload) override {}
  void OnDisconnect(ConnectionId, absl::Status) override {}
};

// Pools over the UCX transport as UCX_TLS leaves it.
class SlabPoolOverUcxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto transport = CreateTransport("ucx", {}, &handler_);
    ASSERT_TRUE(transport.ok()) << transport.status();
    transport_ = std::move(*transport);
  }
  NullHandler handler_;
  std::unique_ptr<Transport> transport_;
};

TEST_F(SlabPoolOverUcxTest, HandsOutDistinctRegisteredSlabsAndTakesThemBack) {
  auto pool = SlabPool::Create(*transport_, 10000, 3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->slab_bytes() % 4096, 0u);
  EXPECT_GE((*pool)->slab_bytes(), 10000u);
  std::vector<Slab> taken;
  std::set<std::byte*> seen;
  for (int i = 0; i < 3; ++i) {
    auto slab = (*pool)->TryAcquire();
    ASSERT_TRUE(slab.has_value());
    EXPECT_TRUE((*pool)->region().Contains(slab->data(), slab->capacity()));
    seen.insert(slab->data());
    taken.push_back(std::move(*slab));
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_FALSE((*pool)->Acquire(absl::Milliseconds(20)).has_value());
  taken.pop_back();
  EXPECT_EQ((*pool)->free_slabs(), 1u);
  EXPECT_TRUE((*pool)->TryAcquire().has_value());
}

// Sizes whose product does not fit (or is beyond any machine) are refused with both
// figures. Before, 2^32 slabs of 4 GiB wrapped to 0 bytes: the mapping succeeded and the
// free list's 2^32 entries ended the process with bad_alloc.
TEST_F(SlabPoolOverUcxTest, APoolBeyondTheAddressSpaceIsRefused) {
  for (const auto& [slab_bytes, num_slabs] :
       {std::pair<size_t, size_t>{size_t{4} << 30, size_t{1} << 32},
        {size_t{16} << 20, size_t{1} << 40},
        {~size_t{0} - 10, 1}}) {
    auto pool = SlabPool::Create(*transport_, slab_bytes, num_slabs);
    ASSERT_FALSE(pool.ok()) << num_slabs << " slabs of " << slab_bytes << " bytes";
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument) << pool.status();
    EXPECT_THAT(std::string(pool.status().message()),
                ::testing::HasSubstr(absl::StrCat(num_slabs, " slabs of ", slab_bytes)));
  }
}

TEST(SlabTest, AHeapSlabBelongsToNoPoolAndMovesLikeAPooledOne) {
  Slab slab = Slab::OnHeap(1000);
  ASSERT_TRUE(slab);
  EXPECT_FALSE(slab.pooled());
  EXPECT_EQ(slab.index(), Slab::kNotPooled);
  EXPECT_EQ(slab.capacity(), 1000u);
  std::memset(slab.data(), 0xab, slab.capacity());  // all of it is writable (ASan checks)
  Slab moved = std::move(slab);
  EXPECT_FALSE(slab);
  EXPECT_EQ(moved.span()[999], std::byte{0xab});
  moved.Release();  // frees it; a second release is a no-op
  EXPECT_FALSE(moved);
  moved.Release();
}

TEST_F(SlabPoolOverUcxTest, APooledSlabSaysSo) {
  auto pool = SlabPool::Create(*transport_, 4096, 1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::optional<Slab> slab = (*pool)->TryAcquire();
  ASSERT_TRUE(slab.has_value());
  EXPECT_TRUE(slab->pooled());
  EXPECT_EQ(slab->index(), 0u);
}

// A reader that stops with slabs a receive may still write hands them to the transport:
// they, and the pool they keep mapped, go only with the transport.
TEST_F(SlabPoolOverUcxTest, SlabsHeldByTheTransportKeepTheirPoolUntilItIsDestroyed) {
  auto pool = SlabPool::Create(*transport_, 4096, 2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::weak_ptr<SlabPool> watched = *pool;
  std::optional<Slab> slab = (*pool)->TryAcquire();
  ASSERT_TRUE(slab.has_value());
  auto quarantined = std::make_shared<std::vector<Slab>>();
  quarantined->push_back(std::move(*slab));
  transport_->HoldUntilDestroyed(std::move(quarantined));
  pool->reset();
  slab.reset();
  ASSERT_FALSE(watched.expired()) << "the pool went while the transport held one of its slabs";
  EXPECT_EQ(watched.lock()->free_slabs(), 1u);  // the held slab is not handed out again
  transport_.reset();
  EXPECT_TRUE(watched.expired()) << "the transport's destruction let go of what it held";
}

int64_t VoluntaryContextSwitchesOfThisThread() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

// A reader asks for a landing slab after every batch, with all of them in flight most of the
// time. Abseil's AwaitWithTimeout with a zero timeout sleeps in the kernel all the same (a
// voluntary context switch per try, about 1,000 here) and leaves a waiter for the next
// Unlock to wake: 4 KiB batches fell from ~150k to ~6k a second with 32 in flight.
TEST_F(SlabPoolOverUcxTest, TryAcquireOnAnExhaustedPoolAnswersWithoutSleeping) {
  auto pool = SlabPool::Create(*transport_, 4096, 1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::optional<Slab> held = (*pool)->TryAcquire();
  ASSERT_TRUE(held.has_value());
  const int64_t before = VoluntaryContextSwitchesOfThisThread();
  int refused = 0;
  for (int i = 0; i < 1000; ++i) refused += (*pool)->TryAcquire().has_value() ? 0 : 1;
  const int64_t slept = VoluntaryContextSwitchesOfThisThread() - before;
  EXPECT_EQ(refused, 1000);
  EXPECT_LT(slept, 100) << "TryAcquire slept in the kernel " << slept << " times in 1,000 tries";
  held.reset();
  EXPECT_TRUE((*pool)->TryAcquire().has_value());
}

// Resident pages of [data, data + bytes), page-aligned `data`.
size_t ResidentPages(const std::byte* data, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  if (mincore(const_cast<std::byte*>(data), bytes, in_core.data()) != 0) return SIZE_MAX;
  size_t resident = 0;
  for (unsigned char c : in_core) resident += c & 1;
  return resident;
}

// KiB of `region` on anonymous huge pages, from /proc/self/smaps.
size_t AnonHugeKiB(const MemoryRegion& region) {
  const auto begin = reinterpret_cast<uintptr_t>(region.base());
  const uintptr_t end = begin + region.size();
  std::ifstream smaps("/proc/self/smaps");
  size_t kib = 0;
  bool overlaps = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &from, &to) == 2) {
      overlaps = from < end && to > begin;
      continue;
    }
    size_t value = 0;
    if (overlaps && std::sscanf(line.c_str(), "AnonHugePages: %zu kB", &value) == 1) {
      kib += value;
    }
  }
  return kib;
}

TEST_F(SlabPoolOverUcxTest, MemoryIsCommittedOnlyWhereBatchesWereWritten) {
  constexpr size_t kSlabBytes = 4 << 20;
  auto pool = SlabPool::Create(*transport_, kSlabBytes, 8, PageBacking::kBasePages);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_FALSE((*pool)->huge_pages_advised());
  EXPECT_EQ(AnonHugeKiB((*pool)->region()), 0u);
  std::byte* first = nullptr;
  {
    std::optional<Slab> slab = (*pool)->TryAcquire();
    ASSERT_TRUE(slab.has_value());
    first = slab->data();
    // Registered but untouched: 32 MiB mapped, (almost) nothing resident.
    EXPECT_LE(ResidentPages(first, 8 * kSlabBytes), 16u);
    std::memset(slab->data(), 1, 8192);  // an 8 KiB batch
  }
  // The slab just returned comes back first, so small batches keep touching the same pages.
  for (int i = 0; i < 100; ++i) {
    std::optional<Slab> slab = (*pool)->TryAcquire();
    ASSERT_TRUE(slab.has_value());
    EXPECT_EQ(slab->data(), first);
    std::memset(slab->data(), 2, 8192);
  }
  EXPECT_LE(ResidentPages(first, 8 * kSlabBytes), 2u + 16u);
  EXPECT_EQ(AnonHugeKiB((*pool)->region()), 0u);
}

TEST_F(SlabPoolOverUcxTest, HugePagesBackTheSlabsWrittenAndNoOthers) {
  constexpr size_t kSlabBytes = 4 << 20;
  auto pool = SlabPool::Create(*transport_, kSlabBytes, 8, PageBacking::kHugeWhereAvailable);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const size_t huge_page = TransparentHugePageBytes();
  if (!(*pool)->huge_pages_advised()) {
    ASSERT_EQ(huge_page, 0u) << "THP is on with " << huge_page << "-byte pages, yet not advised";
    GTEST_SKIP() << "this kernel offers no transparent huge pages (THP off or absent)";
  }
  ASSERT_GT(huge_page, 0u);
  std::optional<Slab> slab = (*pool)->TryAcquire();
  ASSERT_TRUE(slab.has_value());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slab->data()) % huge_page, 0u);
  EXPECT_EQ(AnonHugeKiB((*pool)->region()), 0u);  // nothing committed before a write
  std::memset(slab->data(), 1, kSlabBytes);       // a whole 4 MiB batch
  // The slab written is on huge pages (the kernel may fall back to base pages only when it
  // has no free huge page, which a test machine has); the seven others stay uncommitted.
  EXPECT_GE(AnonHugeKiB((*pool)->region()), huge_page / 1024);
  EXPECT_LE(ResidentPages((*pool)->region().base(), 8 * kSlabBytes),
            kSlabBytes / static_cast<size_t>(sysconf(_SC_PAGESIZE)));
}

TEST(SlabPoolTest, HugePagesCanBeTurnedOffFromTheEnvironment) {
  ASSERT_EQ(setenv("SLUICE_HUGE_PAGES", "off", 1), 0);
  EXPECT_EQ(DefaultPageBacking(), PageBacking::kBasePages);
  ASSERT_EQ(setenv("SLUICE_HUGE_PAGES", "auto", 1), 0);
  EXPECT_EQ(DefaultPageBacking(), PageBacking::kHugeWhereAvailable);
  ASSERT_EQ(unsetenv("SLUICE_HUGE_PAGES"), 0);
  EXPECT_EQ(DefaultPageBacking(), PageBacking::kHugeWhereAvailable);
}

TEST_F(SlabPoolOverUcxTest, RejectsEmptyPools) {
  EXPECT_FALSE(SlabPool::Create(*transport_, 0, 4).ok());
  EXPECT_FALSE(SlabPool::Create(*transport_, 4096, 0).ok());
}

// A registration that fails under a memlock limit below the pool says so, and how to fix it;
// one under a limit that is not the cause keeps the transport's reason alone.
TEST(SlabPoolTest, ARegistrationFailureNamesALowMemlockLimit) {
  const absl::Status ucx = absl::ResourceExhaustedError("ucp_mem_map: Out of memory");
  const absl::Status low = ExplainRegistrationFailure(ucx, 256 << 20, 8 << 20);
  EXPECT_EQ(low.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(low.message().find("ucp_mem_map: Out of memory"), absl::string_view::npos);
  EXPECT_NE(low.message().find("RLIMIT_MEMLOCK is 8388608 bytes"), absl::string_view::npos) << low;
  EXPECT_NE(low.message().find("ulimit -l unlimited"), absl::string_view::npos);
  for (uint64_t limit : {uint64_t{256} << 20, uint64_t{RLIM_INFINITY}}) {
    const absl::Status fine = ExplainRegistrationFailure(ucx, 256 << 20, limit);
    EXPECT_EQ(fine.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(fine.message().find("RLIMIT_MEMLOCK"), absl::string_view::npos) << fine;
    EXPECT_NE(fine.message().find("268435456 bytes: ucp_mem_map"), absl::string_view::npos);
  }
}

TEST(TransportFactoryTest, UnknownSchemeIsAnError) {
  NullHandler handler;
  auto t = CreateTransport("carrier-pigeon", {}, &handler);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::transport
