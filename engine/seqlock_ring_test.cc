#include "engine/seqlock_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "absl/time/clock.h"

namespace sluice::engine {
namespace {

struct Record {
  int64_t n;
  int64_t triple;   // 3n
  int64_t negated;  // -n
};

Record Make(int64_t n) { return Record{n, 3 * n, -n}; }

TEST(SeqlockRingTest, FindsTheNewestMatchAmongTheLatestN) {
  SeqlockRing<Record, 8> ring;
  EXPECT_FALSE(ring.FindNewest([](const Record&) { return true; }).has_value());
  for (int64_t n = 0; n < 20; ++n) ring.Push(Make(n));
  std::optional<Record> newest = ring.FindNewest([](const Record&) { return true; });
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->n, 19);
  std::optional<Record> even = ring.FindNewest([](const Record& r) { return r.n % 2 == 0; });
  ASSERT_TRUE(even.has_value());
  EXPECT_EQ(even->n, 18);
  EXPECT_EQ(ring.FindNewest([](const Record& r) { return r.n <= 12; })->n, 12);
  // 12 is the oldest of the 8 kept (12..19).
  EXPECT_FALSE(ring.FindNewest([](const Record& r) { return r.n <= 11; }).has_value());
}

// Readers racing a writer that laps the ring many times over see whole records only: each
// one found is a record pushed, never words of two.
TEST(SeqlockRingTest, ReadersRacingTheWriterNeverSeeATornRecord) {
  SeqlockRing<Record, 4> ring;
  std::atomic<bool> done{false};
  std::atomic<int> started{0};
  std::atomic<int64_t> found{0};
  std::atomic<int64_t> torn{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      started.fetch_add(1);
      while (!done.load(std::memory_order_relaxed)) {
        std::optional<Record> r = ring.FindNewest([](const Record& r) { return r.n % 3 == 0; });
        if (!r.has_value()) continue;
        found.fetch_add(1, std::memory_order_relaxed);
        if (r->triple != 3 * r->n || r->negated != -r->n || r->n % 3 != 0) {
          torn.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  // Both readers read while every record is written, not after.
  while (started.load() < 2) std::this_thread::yield();
  // At least 3 million, and on until the readers found some: on a loaded machine they may
  // get no CPU while the first million are written.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  for (int64_t n = 0;; ++n) {
    ring.Push(Make(n));
    if (n >= 3'000'000 && n % 4096 == 0 &&
        (found.load(std::memory_order_relaxed) >= 1000 || absl::Now() > give_up)) {
      break;
    }
  }
  done.store(true);
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(torn.load(), 0) << "of " << found.load() << " records found";
  EXPECT_GT(found.load(), 0);
}

}  // namespace
}  // namespace sluice::engine
