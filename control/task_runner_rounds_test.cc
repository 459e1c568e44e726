// Coordinated reads on one TaskRunner (TaskRunner::Fetch with a RoundRequest): rounds of
// consecutive batches, served again after a lost reply, and the round wait.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"

#include "control/task_runner_test_fixture.h"

namespace sluice::control::testing {
namespace {

TEST_F(DeliveryTest, ARoundLostWithItsConnectionIsServedAgainWithTheSameBatch) {
  StartRunner(kEndless, /*num_consumers=*/2, 16);
  absl::StatusOr<int64_t> first;
  std::thread consumer0([&] { first = GetRound(0, 0, {}); });
  absl::StatusOr<int64_t> second = GetRound(1, 0, {});
  consumer0.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, 0);
  EXPECT_EQ(*second, 1);
  // Consumer 1 never saw its reply: asking for round 0 again gets batch 1 again, at once
  // (not a fresh batch after the round wait, as before acknowledgements).
  EXPECT_EQ(GetRound(1, 0, {}).value_or(-1), 1);
  EXPECT_EQ(runner_->stats().batches_redelivered, 1);
  // Acknowledged, round 0 is gone: the next round takes the next two batches.
  std::thread consumer0_next([&] { first = GetRound(0, 1, {0}); });
  second = GetRound(1, 1, {0});
  consumer0_next.join();
  EXPECT_EQ(first.value_or(-1), 2);
  EXPECT_EQ(second.value_or(-1), 3);
  EXPECT_EQ(runner_->stats().batches_served, 5);
}

TEST_F(DeliveryTest, ARepeatedRequestForAWaitingRoundReplacesTheFirst) {
  StartRunner(kEndless, /*num_consumers=*/2, 16);
  // Consumer 0 waits for consumer 1; its request is then "lost" and sent again.
  absl::StatusOr<int64_t> lost;
  const int fetched = fetches_.load();
  std::thread stale([&] { lost = GetRound(0, 0, {}); });
  // EXPECT, not ASSERT: returning with a thread still joinable would terminate the test.
  EXPECT_TRUE(AwaitFetches(fetched + 1)) << "the first request never reached the task";
  absl::StatusOr<int64_t> again;
  std::thread repeated([&] { again = GetRound(0, 0, {}); });
  stale.join();  // answered once the repeat arrived, without a batch
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kAborted) << lost.status();
  EXPECT_EQ(GetRound(1, 0, {}).value_or(-1), 1);
  repeated.join();
  EXPECT_EQ(again.value_or(-1), 0) << "the repeat gets consumer 0's batch of the round";
  EXPECT_EQ(runner_->stats().batches_served, 2);
}

// A finite pipeline (a coordinated recovery task's) ends mid-round: the round takes what is
// left and the consumer it cannot serve is told the end. It used to wait for a full round
// that never came, and every consumer stalled on it until its deadline.
TEST_F(DeliveryTest, TheLastRoundOfAFinitePipelineTakesWhatIsLeft) {
  StartRunner("range(30) | batch(10)", /*num_consumers=*/2, 16);
  absl::StatusOr<int64_t> first;
  std::thread consumer0([&] { first = GetRound(0, 0, {}); });
  absl::StatusOr<int64_t> second = GetRound(1, 0, {});
  consumer0.join();
  EXPECT_EQ(first.value_or(-100), 0);
  EXPECT_EQ(second.value_or(-100), 1);
  std::thread consumer0_next([&] { first = GetRound(0, 1, {0}); });
  second = GetRound(1, 1, {0});
  consumer0_next.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT((std::set<int64_t>{*first, *second}), ::testing::ElementsAre(kEnd, 2));
}

// A consumer held up elsewhere (by a lost worker's round) asks late, after the others asked
// this round and the next. Within the round wait the rounds wait for it, and each round's
// batches stay consecutive. With the old fixed 1 s wait both rounds went ahead without it,
// and it got batches 2 and 3 for rounds 0 and 1 while the other got 0 and 1.
TEST_F(DeliveryTest, ARoundWaitsTheTaskRoundWaitForALateConsumer) {
  StartRunner(kEndless, /*num_consumers=*/2, 16, absl::Seconds(4));
  absl::StatusOr<int64_t> early0;
  absl::StatusOr<int64_t> early1;
  std::thread early([&] {
    early0 = GetRound(1, 0, {});
    early1 = GetRound(1, 1, {0});
  });
  absl::SleepFor(absl::Milliseconds(1500));
  runner_->Poll();  // as the worker does: past 1 s, nothing may go ahead yet
  absl::SleepFor(absl::Milliseconds(300));  // time for the early one to ask for round 1
  absl::StatusOr<int64_t> late0 = GetRound(0, 0, {});
  absl::StatusOr<int64_t> late1 = GetRound(0, 1, {0});
  early.join();
  ASSERT_TRUE(early0.ok() && early1.ok() && late0.ok() && late1.ok());
  EXPECT_THAT((std::set<int64_t>{*early0, *late0}), ::testing::ElementsAre(0, 1));
  EXPECT_THAT((std::set<int64_t>{*early1, *late1}), ::testing::ElementsAre(2, 3));
}

// A consumer whose reply was lost asks again for a round whose kept batch was let go (the
// kept budget): that batch is lost, and the consumer gets the next one at once. It used to
// wait for the others' requests for a round they had long finished: the round wait (here 30
// s) or, for a round still open, until the round was forgotten a minute later.
TEST_F(DeliveryTest, ARepeatedRoundWhoseBatchWasLetGoGetsTheNextBatchAtOnce) {
  using Pair = std::pair<int64_t, int64_t>;
  StartRunner(kSlabEach, /*num_consumers=*/2, 8, absl::Seconds(30));  // keeps at most 4 slabs
  auto round = [this](int64_t r) {
    absl::StatusOr<int64_t> first;
    std::thread consumer0([&] { first = GetRound(0, r, {}); });
    absl::StatusOr<int64_t> second = GetRound(1, r, {});
    consumer0.join();
    EXPECT_TRUE(first.ok()) << "round " << r << ", consumer 0: " << first.status();
    EXPECT_TRUE(second.ok()) << "round " << r << ", consumer 1: " << second.status();
    return std::pair{first.value_or(-100), second.value_or(-100)};
  };
  EXPECT_EQ(round(0), (Pair{0, 1}));
  EXPECT_EQ(round(1), (Pair{2, 3}));
  EXPECT_EQ(round(2), (Pair{4, 5}));  // nothing acknowledged
  EXPECT_EQ(runner_->stats().kept_batches_released, 2) << "round 0's batches went";
  const absl::Time asked = absl::Now();
  EXPECT_EQ(GetRound(0, 0, {}).value_or(-100), 6);
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5));
  EXPECT_EQ(runner_->stats().batches_redelivered, 0);
  // The rounds go on as before, each with consecutive batches.
  EXPECT_EQ(round(3), (Pair{7, 8}));
}

// Calls Poll every 10 ms while it lives, as the worker does.
class Poller {
 public:
  explicit Poller(TaskRunner* runner)
      : thread_([this, runner] {
          while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(10))) runner->Poll();
        }) {}
  ~Poller() {
    stop_.Notify();
    thread_.join();
  }

 private:
  absl::Notification stop_;
  std::thread thread_;
};

// A consumer that stopped asking (it died): the rounds the others read without it are
// forgotten once served, not kept a minute each (at thousands of rounds a second, every
// match walked all of them). Asking late after all, it gets the next batch at once.
TEST_F(DeliveryTest, RoundsThatWentAheadWithoutAConsumerAreForgottenOnceServed) {
  StartRunner(kEndless, /*num_consumers=*/2, 16, absl::Seconds(5));
  Poller poller(runner_.get());
  for (int64_t r = 0; r < 20; ++r) {
    std::vector<int64_t> acked;
    if (r > 0) acked.push_back(r - 1);
    EXPECT_EQ(GetRound(0, r, acked).value_or(-100), r) << "consumer 0 reads on alone";
  }
  EXPECT_LE(runner_->rounds_remembered(), 1u);
  const absl::Time asked = absl::Now();
  EXPECT_EQ(GetRound(1, 5, {}).value_or(-100), 20) << "consumer 1, late, gets the next batch";
  // Far from a round wait: a loaded machine's slow call is not taken for one.
  EXPECT_LT(absl::Now() - asked, absl::Seconds(3)) << "it waited a round wait (5 s)";
}

}  // namespace
}  // namespace sluice::control::testing
