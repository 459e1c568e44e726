// TaskRunner::SpillIfQuiet: a task nobody asks moves its buffered batches out of the pool,
// and serves them from the heap, intact, once a reader comes back.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "control/task_runner_test_fixture.h"
#include "engine/batch_layout.h"

namespace sluice::control::testing {
namespace {

// 40,000-byte batches, one per 64 KiB slab: batch i holds 5000 * i .. 5000 * i + 4999.
constexpr const char* kCounting = "range(1000000) | batch(5000)";
constexpr int64_t kValuesPerBatch = 5000;

class SpillTest : public DeliveryTest {
 protected:
  // Until the pool has `free` slabs (the producer fills its buffer, or lets a slab go).
  bool WaitForFreeSlabs(size_t free) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (pool_->free_slabs() != free) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  // Until the producer waits for room for the `waits`-th time, holding its last slab.
  bool WaitForFullBuffer(int64_t waits) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (runner_->stats().buffer_full_waits < waits) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  // The first value of the batch the worker answers `client` with (-1: none), checking that
  // its values run on from there.
  int64_t FirstValue(int64_t client, int64_t epoch, std::vector<int64_t> acked) {
    const proto::GetElementRequest request = Request(client, epoch, acked);
    auto connection = client_->ConnectTo(address_);
    EXPECT_TRUE(connection.ok()) << connection.status();
    if (!connection.ok()) return -1;
    auto result = client_->Call(*connection, proto::GET_ELEMENT, request.SerializeAsString(),
                                {.timeout = absl::Seconds(10)});
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return -1;
    proto::GetElementResponse response;
    EXPECT_TRUE(response.ParseFromString(std::string(result->response.view())));
    EXPECT_TRUE(result->payload.status.ok()) << result->payload.status;
    if (response.batch_bytes() == 0) return -1;
    auto batch = engine::BatchView::Parse(
        std::span<const std::byte>(result->payload.data, result->payload.size));
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) return -1;
    auto values = batch->tensor(0).values<int64_t>();
    EXPECT_EQ(values.size(), static_cast<size_t>(kValuesPerBatch));
    if (values.size() != static_cast<size_t>(kValuesPerBatch)) return -1;
    for (size_t i = 1; i < values.size(); ++i) {
      if (values[i] != values[0] + static_cast<int64_t>(i)) {
        ADD_FAILURE() << "value " << i << " of the batch starting at " << values[0] << " is "
                      << values[i];
        return -1;
      }
    }
    return values[0];
  }
};

TEST_F(SpillTest, AQuietTasksBufferLeavesThePoolAndIsServedIntactFromTheHeap) {
  const absl::Time before_start = absl::Now();
  StartRunner(kCounting, /*num_consumers=*/0, /*slabs=*/4);
  // Two batches buffered, the producer waiting for room with the second one's slab.
  ASSERT_TRUE(WaitForFullBuffer(1));
  ASSERT_EQ(pool_->free_slabs(), 2u);
  // Nobody has asked since the task started, but not for long enough yet.
  EXPECT_FALSE(runner_->SpillIfQuiet(before_start));
  EXPECT_EQ(pool_->free_slabs(), 2u);
  ASSERT_TRUE(runner_->SpillIfQuiet(absl::Now() + TaskRunner::kQuietBeforeSpill));
  // Both slabs come back: the producer lets go of the one it was packing into.
  ASSERT_TRUE(WaitForFreeSlabs(4)) << pool_->free_slabs() << " free";
  EXPECT_EQ(runner_->stats().batches_spilled, 2);
  EXPECT_GT(runner_->stats().bytes_spilled, 2 * kValuesPerBatch * 8);
  EXPECT_FALSE(runner_->SpillIfQuiet(absl::Now() + absl::Hours(1)));  // nothing left to move

  // The reader comes back: the moved batches first, then new ones from the pool.
  EXPECT_EQ(FirstValue(-1, 0, {}), 0);
  EXPECT_EQ(FirstValue(-1, 0, {}), kValuesPerBatch);
  EXPECT_EQ(FirstValue(-1, 0, {}), 2 * kValuesPerBatch);
  EXPECT_EQ(runner_->stats().batches_spilled, 2);
}

TEST_F(SpillTest, ATaskAskedForLatelyKeepsItsBuffer) {
  StartRunner(kCounting, /*num_consumers=*/0, /*slabs=*/4);
  // Full before the first request: one asked for earlier leaves a single wait to count.
  ASSERT_TRUE(WaitForFullBuffer(1));
  ASSERT_EQ(FirstValue(-1, 0, {}), 0);
  // Refilled: waiting for room a second time.
  ASSERT_TRUE(WaitForFullBuffer(2));
  const absl::Time now = absl::Now();
  // The request since the task started restarts the count from this call.
  EXPECT_FALSE(runner_->SpillIfQuiet(now + TaskRunner::kQuietBeforeSpill));
  EXPECT_FALSE(
      runner_->SpillIfQuiet(now + TaskRunner::kQuietBeforeSpill + absl::Milliseconds(500)));
  EXPECT_EQ(runner_->stats().batches_spilled, 0);
  EXPECT_TRUE(runner_->SpillIfQuiet(now + 2 * TaskRunner::kQuietBeforeSpill));
  EXPECT_EQ(FirstValue(-1, 0, {}), kValuesPerBatch);
}

// The worker notes each heartbeat turn whether a task was asked (NoteQuiet): when slabs run
// short, a task quiet for long enough moves its buffer at the first SpillIfQuiet, instead of
// starting to count then. Counting only then, a starving pipeline that got a slab meanwhile
// (a kept batch let go) asked no more, and the buffers never moved.
TEST_F(SpillTest, ATaskSeenQuietBeforeSlabsRanShortMovesItsBufferAtOnce) {
  StartRunner(kCounting, /*num_consumers=*/0, /*slabs=*/4);
  ASSERT_TRUE(WaitForFullBuffer(1));
  ASSERT_EQ(FirstValue(-1, 0, {}), 0);
  ASSERT_TRUE(WaitForFullBuffer(2));
  const absl::Time now = absl::Now();
  EXPECT_TRUE(runner_->ReadLately(now + absl::Hours(1))) << "a request NoteQuiet did not see";
  runner_->NoteQuiet(now);  // saw the request
  runner_->NoteQuiet(now + absl::Milliseconds(500));
  EXPECT_TRUE(runner_->ReadLately(now + absl::Milliseconds(900)));
  EXPECT_FALSE(runner_->ReadLately(now + TaskRunner::kQuietBeforeSpill));
  EXPECT_TRUE(runner_->SpillIfQuiet(now + TaskRunner::kQuietBeforeSpill));
  EXPECT_EQ(runner_->stats().batches_spilled, 2);
  EXPECT_EQ(FirstValue(-1, 0, {}), kValuesPerBatch);
}

TEST_F(SpillTest, AMovedBatchLostWithItsConnectionIsServedAgainFromTheHeap) {
  StartRunner(kCounting, /*num_consumers=*/0, /*slabs=*/4);
  ASSERT_TRUE(WaitForFullBuffer(1));
  ASSERT_TRUE(runner_->SpillIfQuiet(absl::Now() + TaskRunner::kQuietBeforeSpill));
  // Kept for the acknowledging client from the heap (verify_kept_slabs checks that the kept
  // slab count leaves it out) and served again under the next epoch.
  EXPECT_EQ(FirstValue(7, 1, {}), 0);
  EXPECT_EQ(FirstValue(7, 2, {}), 0);
  EXPECT_EQ(runner_->stats().batches_redelivered, 1);
  EXPECT_EQ(FirstValue(7, 2, {0}), kValuesPerBatch);
  EXPECT_EQ(FirstValue(7, 2, {1}), 2 * kValuesPerBatch);
}

TEST_F(SpillTest, ACachedBatchServedAgainIsCopiedOnce) {
  StartRunner("range(5000) | batch(5000) | take(1) | cache() | repeat()", /*num_consumers=*/0,
              /*slabs=*/4);
  // Every buffered entry is the one batch in the one slab.
  ASSERT_TRUE(WaitForFullBuffer(1));
  ASSERT_EQ(pool_->free_slabs(), 3u);
  ASSERT_TRUE(runner_->SpillIfQuiet(absl::Now() + TaskRunner::kQuietBeforeSpill));
  ASSERT_TRUE(WaitForFreeSlabs(4));
  EXPECT_EQ(runner_->stats().batches_spilled, 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(FirstValue(-1, 0, {}), 0) << "batch " << i;
}

TEST_F(SpillTest, TheBudgetBoundsTheHeapAndComesBackAsMovedBatchesGo) {
  // Room for one 40,000-byte batch (and its header), not two.
  spill_budget_ = std::make_shared<SpillBudget>(50000);
  StartRunner(kCounting, /*num_consumers=*/0, /*slabs=*/4);
  ASSERT_TRUE(WaitForFullBuffer(1));
  ASSERT_TRUE(runner_->SpillIfQuiet(absl::Now() + TaskRunner::kQuietBeforeSpill));
  EXPECT_EQ(runner_->stats().batches_spilled, 1);
  EXPECT_EQ(pool_->free_slabs(), 3u);
  const size_t held = spill_budget_->held();
  EXPECT_GT(held, static_cast<size_t>(kValuesPerBatch * 8));
  EXPECT_LE(held, 50000u);
  // The next call finds the budget spent.
  EXPECT_FALSE(runner_->SpillIfQuiet(absl::Now() + absl::Hours(1)));
  // Served, the moved batch's heap goes once its send completed.
  EXPECT_EQ(FirstValue(-1, 0, {}), 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (spill_budget_->held() != 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(spill_budget_->held(), 0u);
  EXPECT_EQ(FirstValue(-1, 0, {}), kValuesPerBatch);
}

}  // namespace
}  // namespace sluice::control::testing
