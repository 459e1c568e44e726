// Delivery without loss on one TaskRunner (TaskRunner::Fetch with a Delivery): batches
// numbered per client and kept until acknowledged, served again after a break, let go
// under slab pressure, handed on from a forgotten client; and the bound on parked requests.
// Coordinated rounds are in task_runner_rounds_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "control/task_runner_test_fixture.h"

namespace sluice::control::testing {
namespace {

TEST_F(DeliveryTest, ABatchLostWithItsConnectionIsServedAgainToItsClientOnly) {
  EXPECT_EQ(Get(7, 1, {}), 0);
  EXPECT_EQ(Get(7, 1, {0}), 1);  // 1 is out, not acknowledged
  EXPECT_EQ(Get(8, 1, {}), 2);   // another client's, not acknowledged either
  // Client 7's connection broke and it never saw 1: its next epoch gets 1 again.
  EXPECT_EQ(Get(7, 2, {}), 1);
  EXPECT_EQ(runner_->stats().batches_redelivered, 1);
  // Client 8 did get 2 (it acknowledges it as it moves to a new epoch): nothing again.
  EXPECT_EQ(Get(8, 2, {2}), 3);
  EXPECT_EQ(Get(7, 2, {1}), 4);
  EXPECT_EQ(Get(7, 2, {4}), -1);
  EXPECT_EQ(Get(8, 2, {3}), -1);
  EXPECT_EQ(runner_->stats().batches_redelivered, 1);
  EXPECT_EQ(runner_->stats().batches_served, 6);
  EXPECT_TRUE(AwaitFinished());
}

// The numbers a client orders its batches by (GetElementResponse.client_sequence): dense
// per client, kept by a batch served again, and each client's own stream.
TEST_F(DeliveryTest, EachClientsBatchesAreNumberedInTheOrderTheyWereMade) {
  proto::GetElementResponse first = GetResponse(7, 1, {});
  EXPECT_EQ(first.batch_index(), 0);
  EXPECT_EQ(first.client_sequence(), 1);
  EXPECT_EQ(first.sequence_floor(), 1);
  EXPECT_NE(first.sequence_stream(), 0u);
  proto::GetElementResponse other = GetResponse(8, 1, {});
  EXPECT_EQ(other.batch_index(), 1);
  EXPECT_EQ(other.client_sequence(), 1) << "client 8's own numbering";
  EXPECT_NE(other.sequence_stream(), first.sequence_stream());
  // Two in flight for client 7 (nothing acknowledged): the floor stays at the first.
  proto::GetElementResponse second = GetResponse(7, 1, {});
  EXPECT_EQ(second.batch_index(), 2);
  EXPECT_EQ(second.client_sequence(), 2);
  EXPECT_EQ(second.sequence_floor(), 1);
  EXPECT_EQ(second.sequence_stream(), first.sequence_stream());
  // 0 arrived, 2 was lost with the connection: served again under its number.
  proto::GetElementResponse again = GetResponse(7, 2, {0});
  EXPECT_EQ(again.batch_index(), 2);
  EXPECT_EQ(again.client_sequence(), 2);
  EXPECT_EQ(again.sequence_floor(), 2);
  proto::GetElementResponse third = GetResponse(7, 2, {2});
  EXPECT_EQ(third.batch_index(), 3);
  EXPECT_EQ(third.client_sequence(), 3);
  EXPECT_EQ(third.sequence_floor(), 3);
}

// Clients that do not acknowledge keep no state on the worker, and get no numbers.
TEST_F(DeliveryTest, ClientsThatDoNotAcknowledgeGetNoNumbers) {
  proto::GetElementResponse response = GetResponse(7, 0, {});
  EXPECT_EQ(response.batch_index(), 0);
  EXPECT_EQ(response.client_sequence(), 0);
  EXPECT_EQ(response.sequence_stream(), 0u);
}

TEST_F(DeliveryTest, AnAcknowledgementThatArrivesWithTheNewEpochPreventsTheResend) {
  EXPECT_EQ(Get(7, 1, {}), 0);
  EXPECT_EQ(Get(7, 2, {0}), 1);  // 0 arrived before the break: not sent again
  EXPECT_EQ(runner_->stats().batches_redelivered, 0);
}

TEST_F(DeliveryTest, ARequestOfAnEpochItsClientLeftBehindGetsNoBatch) {
  EXPECT_EQ(Get(7, 1, {}), 0);
  EXPECT_EQ(Get(7, 3, {0}), 1);  // over a new connection, overtaking ...
  // ... a request sent before the break: a batch for it would most likely be lost, and
  // kept under epoch 2 it would never be served again.
  EXPECT_EQ(Get(7, 2, {}), kRetryLater);
  EXPECT_EQ(Get(7, 3, {1}), 2);
  EXPECT_EQ(runner_->stats().batches_served, 3);
}

TEST_F(DeliveryTest, ClientsThatDoNotAcknowledgeGetNothingTwice) {
  EXPECT_EQ(Get(7, 0, {}), 0);
  EXPECT_EQ(Get(7, 0, {}), 1);
  EXPECT_EQ(Get(7, 0, {}), 2);
  EXPECT_EQ(runner_->stats().batches_redelivered, 0);
}

TEST_F(DeliveryTest, KeptBatchesAreBoundedByHalfThePool) {
  StartRunner(kSlabEach, /*num_consumers=*/0, 8);               // keeps at most 4 slabs
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(Get(7, 1, {}), i);  // none acknowledged
  EXPECT_EQ(runner_->stats().kept_batches_released, 2);
  // The break loses what is still kept, the newest four, which come again in order.
  for (int64_t i = 2; i < 6; ++i) EXPECT_EQ(Get(7, 2, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 6);
  EXPECT_EQ(runner_->stats().batches_redelivered, 4);
}

TEST_F(DeliveryTest, TheBoundCountsSlabsNotBatches) {
  // A cached batch is served from one slab again and again: keeping many of them costs one
  // slab, so only the per-client bound (64) lets any go.
  StartRunner("range(10) | batch(10) | take(1) | cache() | repeat()", /*num_consumers=*/0, 8);
  for (int64_t i = 0; i < 70; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(runner_->stats().kept_batches_released, 6);
  EXPECT_GT(runner_->stats().bytes_reused, 0) << "the batches did share their slab";
}

// Small batches are packed into shared slabs, so four clients that acknowledge nothing keep
// 32 of them in one slab and none is let go. Before packing each held a slab of its own:
// the budget of 4 let 28 go, and a break lost them.
TEST_F(DeliveryTest, SmallKeptBatchesShareSlabs) {
  StartRunner(kEndless, /*num_consumers=*/0, 8);
  std::set<int64_t> served;
  for (int64_t client = 0; client < 4; ++client) {
    for (int i = 0; i < 8; ++i) served.insert(Get(client, 1, {}));
  }
  EXPECT_EQ(served.size(), 32u);
  EXPECT_EQ(runner_->stats().kept_batches_released, 0);
  EXPECT_GE(pool_->free_slabs(), 6u) << "32 kept batches of ~100 bytes fill one slab";
  // Client 2's connection breaks: its eight come again.
  std::set<int64_t> again;
  for (int i = 0; i < 8; ++i) again.insert(Get(2, 2, {}));
  EXPECT_EQ(again.size(), 8u);
  EXPECT_EQ(runner_->stats().batches_redelivered, 8);
}

// A reader of small batches with 16 requests in flight has about 16 unacknowledged at any
// time: all are kept. With a per-client bound of 8, `sluice-perf service --max-outstanding
// 16` saw 2 of 3 batches let go.
TEST_F(DeliveryTest, AClientWithSixteenRequestsInFlightKeepsThemAll) {
  StartRunner(kEndless, /*num_consumers=*/0, 8);
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(runner_->stats().kept_batches_released, 0);
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(Get(7, 2, {}), i);
  EXPECT_EQ(runner_->stats().batches_redelivered, 16);
}

// Letting a packed batch go alone would free nothing; its slab-mates go with it.
TEST_F(DeliveryTest, OverTheBudgetAWholeSlabOfKeptBatchesGoes) {
  StartRunner(kThreePerSlab, /*num_consumers=*/0, 4);  // keeps at most 2 slabs
  // 0-2 share a slab, 3-5 the next, 6-7 a third: keeping 6 lets 0, 1 and 2 go.
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(runner_->stats().kept_batches_released, 3);
  for (int64_t i = 3; i < 8; ++i) EXPECT_EQ(Get(7, 2, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 8);
  EXPECT_EQ(runner_->stats().batches_redelivered, 5);
}

TEST_F(DeliveryTest, ASilentClientCannotStarveThePipeline) {
  // Two slabs: the kept batches of a silent client would hold every slab of the pool; the
  // producer lets the oldest go instead of waiting for an acknowledgement for ever.
  StartRunner(kSlabEach, /*num_consumers=*/0, 2);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_GE(runner_->stats().kept_batches_released, 4);
}

// A batch let go before its client acknowledged it may still be on its way, or lost: the
// floor stays at its number until the client acknowledges it or reports a break, and only
// then moves past it, so the client neither waits for ever nor skips a batch in flight.
TEST_F(DeliveryTest, TheFloorPassesABatchLetGoOnceItsFateIsKnown) {
  StartRunner(kSlabEach, /*num_consumers=*/0, 8);  // keeps at most 4 slabs
  for (int64_t i = 0; i < 6; ++i) {
    proto::GetElementResponse response = GetResponse(7, 1, {});
    EXPECT_EQ(response.batch_index(), i);
    EXPECT_EQ(response.client_sequence(), i + 1);
    EXPECT_EQ(response.sequence_floor(), 1) << "batch 0 may still be on its way";
  }
  EXPECT_EQ(runner_->stats().kept_batches_released, 2);  // batches 0 and 1
  // 0 arrived; 1 may still be on its way. Batch 6 takes a slab, and 2 is let go too.
  proto::GetElementResponse next = GetResponse(7, 1, {0});
  EXPECT_EQ(next.batch_index(), 6);
  EXPECT_EQ(next.client_sequence(), 7);
  EXPECT_EQ(next.sequence_floor(), 2);
  EXPECT_EQ(runner_->stats().kept_batches_released, 3);
  // A break: 1 and 2 were let go and are lost for good; the floor passes them. 3-6 come
  // again under their numbers.
  for (int64_t i = 3; i <= 6; ++i) {
    proto::GetElementResponse response = GetResponse(7, 2, {});
    EXPECT_EQ(response.batch_index(), i);
    EXPECT_EQ(response.client_sequence(), i + 1);
    EXPECT_EQ(response.sequence_floor(), 4);
  }
  EXPECT_EQ(GetResponse(7, 2, {3, 4, 5, 6}).sequence_floor(), 8);
}

// A client that broke its connection and then left for good keeps nothing on the worker
// once the dispatcher stops listing it: its lost batches no longer hold slabs, and the task
// can finish. Before ForgetClients they were kept for ever, and the task never finished.
// Here the other reader was told the end before client 7 came back and found batches lost:
// no reader would ask for them, so they are dropped.
TEST_F(DeliveryTest, AForgottenClientsLostBatchesGoAndTheTaskFinishes) {
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  // Client 8 reads the rest and is told the end: no batch is known lost yet.
  EXPECT_EQ(Get(8, 1, {}), 3);
  EXPECT_EQ(Get(8, 1, {3}), 4);
  EXPECT_EQ(Get(8, 1, {4}), kEnd);
  EXPECT_EQ(Get(7, 2, {}), 0);  // a break: 0, 1 and 2 were lost; 0 comes again
  EXPECT_FALSE(runner_->finished()) << "1 and 2 wait for client 7";

  // A client that asked after the heartbeat went out is spared, listed or not.
  runner_->ForgetClients({8}, absl::Now() - absl::Hours(1));
  EXPECT_FALSE(runner_->finished());
  EXPECT_EQ(runner_->stats().clients_forgotten, 0);
  runner_->ForgetClients({8}, absl::Now());
  // Once the resend of 0 has left (its send completes on the transport's thread).
  EXPECT_TRUE(AwaitFinished());
  EXPECT_EQ(runner_->stats().clients_forgotten, 1);
  EXPECT_EQ(runner_->stats().batches_handed_on, 0);
  EXPECT_EQ(runner_->stats().lost_batches_dropped, 2);
  EXPECT_EQ(runner_->stats().unacked_batches_forgotten, 1) << "0, sent again";
  // Should it come back after all, nothing is served to it again.
  EXPECT_EQ(Get(7, 3, {}), kEnd);
  EXPECT_EQ(runner_->stats().batches_redelivered, 1);
}

// Forgotten while others still read, a client's lost batches (they never reached it) go
// to them: nothing of the task is lost with the client but what it was sent.
TEST_F(DeliveryTest, AForgottenClientsLostBatchesGoToTheReadersStillThere) {
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 0);  // a break: 1 and 2 are lost
  EXPECT_EQ(Get(8, 1, {}), 3);
  runner_->ForgetClients({8}, absl::Now());
  EXPECT_EQ(runner_->stats().batches_handed_on, 2);
  proto::GetElementResponse next = GetResponse(8, 1, {3});
  EXPECT_EQ(next.batch_index(), 1) << "the lost batches first";
  EXPECT_EQ(next.client_sequence(), 2) << "numbered in what client 8 got";
  EXPECT_EQ(next.sequence_floor(), 2);
  EXPECT_EQ(Get(8, 1, {1}), 2);
  EXPECT_EQ(Get(8, 1, {2}), 4);
  EXPECT_EQ(Get(8, 1, {4}), kEnd);
  EXPECT_TRUE(AwaitFinished());
}

// A reader asking a task that has nothing left to make is not told the end while another
// client's lost batches wait to be served again: should that client leave, they are this
// reader's. Before, it was told the end, and the batches were dropped once the other client
// was forgotten (a `read --take` that left batches lost with a broken connection behind).
TEST_F(DeliveryTest, AReaderAwaitingTheEndGetsTheLostBatchesOfAClientThatLeft) {
  std::future<int64_t> last = LastRequestBesideALostClient();
  EXPECT_EQ(last.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "told the end while client 7's batches were lost";
  runner_->ForgetClients({8}, absl::Now());
  EXPECT_EQ(last.get(), 1);
  EXPECT_EQ(Get(8, 1, {1}), 2);
  EXPECT_EQ(Get(8, 1, {2}), kEnd);
  EXPECT_EQ(runner_->stats().batches_handed_on, 2);
  EXPECT_EQ(runner_->stats().lost_batches_dropped, 0);
  EXPECT_TRUE(AwaitFinished());
}

// Held back from the end, a request is not held past its deadline: after kEndHeldAtMost
// the worker's periodic Poll tells it to retry (a reply, where a deadline passed would
// count towards the reader's giving up on the worker).
TEST_F(DeliveryTest, ARequestHeldBackFromTheEndIsToldToRetryWithinASecondOrSo) {
  std::future<int64_t> held = LastRequestBesideALostClient();
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!runner_->produced_all() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  runner_->Poll();  // notes the end held back
  EXPECT_EQ(held.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  // A little past it: Poll reads the wall clock, which may be slewed.
  absl::SleepFor(TaskRunner::kEndHeldAtMost + absl::Milliseconds(100));
  runner_->Poll();
  EXPECT_EQ(held.get(), kRetryLater);
  // Client 7 takes what it lost: the end is held back no more.
  EXPECT_EQ(Get(7, 2, {0}), 1);
  EXPECT_EQ(Get(7, 2, {1}), 2);
  EXPECT_EQ(Get(8, 1, {4}), kEnd);
}

// Numbers need not rise with the batch index (a batch handed on from a forgotten client
// comes after later ones): the floor is the lowest number still on its way, not the number
// of the lowest index.
TEST_F(DeliveryTest, TheFloorIsTheLowestNumberOnItsWayWhateverItsIndex) {
  StartRunner(kEndless, /*num_consumers=*/0, 8);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 0);  // 1 and 2 are lost
  EXPECT_EQ(Get(8, 1, {}), 3);  // number 1 of client 8, not acknowledged
  runner_->ForgetClients({8}, absl::Now());
  proto::GetElementResponse handed_on = GetResponse(8, 1, {});
  EXPECT_EQ(handed_on.batch_index(), 1);
  EXPECT_EQ(handed_on.client_sequence(), 2);
  EXPECT_EQ(handed_on.sequence_floor(), 1) << "batch 3, number 1, may still be on its way";
  EXPECT_EQ(GetResponse(8, 1, {}).sequence_floor(), 1);  // batch 2, handed on too
  // Batch 4 comes in index order, but batch 3 still holds the lowest number.
  proto::GetElementResponse in_order = GetResponse(8, 1, {});
  EXPECT_EQ(in_order.batch_index(), 4);
  EXPECT_EQ(in_order.sequence_floor(), 1);
  // Once batch 3 is acknowledged the lowest index has the lowest number again.
  EXPECT_EQ(GetResponse(8, 1, {3}).sequence_floor(), 2);
}

// Batches lost with a connection hold their slabs until served again: they count against
// the kept budget like batches awaiting acknowledgement. Those awaiting acknowledgement go
// first, oldest first: they have most likely arrived, while a lost one let go is lost.
TEST_F(DeliveryTest, LostBatchesCountAgainstTheKeptBudget) {
  StartRunner(kSlabEach, /*num_consumers=*/0, 8);  // keeps at most 4 slabs
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 0);  // a break: 1, 2 and 3 are lost, 0 is kept again
  EXPECT_EQ(Get(8, 1, {}), 4);  // five slabs: 0 goes (its client may have it by now)
  EXPECT_EQ(runner_->stats().kept_batches_released, 1);
  EXPECT_EQ(Get(8, 1, {}), 5);  // five again: 4 goes, not the lost 1
  EXPECT_EQ(runner_->stats().kept_batches_released, 2);
  proto::GetElementResponse next = GetResponse(7, 2, {0});
  EXPECT_EQ(next.batch_index(), 1);
  EXPECT_EQ(next.client_sequence(), 2);
  EXPECT_EQ(next.sequence_floor(), 2) << "nothing of client 7 was lost for good";
}

// Lets a kept batch go as a starving producer does, once the send of the batch that holds
// its slab has completed (the transport's copy of the slab then drops).
bool ReleaseWithin(TaskRunner& runner, TaskRunner::LostBatches lost, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (!runner.ReleaseKeptBatch(lost)) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Only when nothing awaits an acknowledgement does a lost batch go, for good: its client
// stops waiting for it. Another job's producer never lets one go.
TEST_F(DeliveryTest, ALostBatchGoesOnlyWhenNothingElseIsKept) {
  StartRunner(kSlabEach, /*num_consumers=*/0, 8);  // keeps at most 4 slabs
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 0);  // 1, 2 and 3 are lost, 0 is kept again
  // 0, awaiting its acknowledgement.
  EXPECT_TRUE(ReleaseWithin(*runner_, TaskRunner::LostBatches::kLetGo, absl::Seconds(5)));
  EXPECT_FALSE(runner_->ReleaseKeptBatch(TaskRunner::LostBatches::kKeep))
      << "only lost batches are left, and they are not given up for another job";
  EXPECT_TRUE(runner_->ReleaseKeptBatch(TaskRunner::LostBatches::kLetGo));  // 1, lost
  EXPECT_EQ(runner_->stats().kept_batches_released, 2);
  proto::GetElementResponse next = GetResponse(7, 2, {0});
  EXPECT_EQ(next.batch_index(), 2);
  EXPECT_EQ(next.sequence_floor(), 3) << "client 7 stops waiting for batch 1 (number 2)";
}

// A cached batch is served from the slab the producer holds for the next replay: letting
// the copies kept for acknowledgements go would give no memory back, only lose the
// protection against a broken connection. A starving producer of another job used to let
// them go every 100 ms.
TEST_F(DeliveryTest, KeptBatchesStayWhenLettingThemGoFreesNoSlab) {
  StartRunner("range(10) | batch(10) | take(1) | cache() | repeat()", /*num_consumers=*/0, 8);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_FALSE(runner_->ReleaseKeptBatch(TaskRunner::LostBatches::kKeep));
  EXPECT_FALSE(runner_->ReleaseKeptBatch(TaskRunner::LostBatches::kLetGo));
  EXPECT_EQ(runner_->stats().kept_batches_released, 0);
  // The connection breaks: all five come again.
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(Get(7, 2, {}), i);
  EXPECT_EQ(runner_->stats().batches_redelivered, 5);
}

// DYNAMIC splits that never come (a dispatcher that stopped answering), until cancelled.
class StalledFeed : public engine::SplitFeed {
 public:
  absl::Status GetNext(int64_t, proto::Split*, bool*) override {
    cancelled_.WaitForNotification();
    return absl::CancelledError("stopping");
  }
  void Cancel() override {
    if (!cancelled_.HasBeenNotified()) cancelled_.Notify();
  }

 private:
  absl::Notification cancelled_;
};

// A request parked behind a pipeline slower than max_request_hold is told to retry, at a
// Poll past the hold, before its deadline: it passed the deadline, and its reader took the
// worker for one it could not reach (a second time failed the read).
TEST_F(DeliveryTest, ARequestHeldPastTheHoldIsToldToRetryBeforeItsDeadline) {
  max_request_hold_ = absl::Milliseconds(300);
  StartRunner("range(100) | batch(10)", /*num_consumers=*/0, 8, absl::ZeroDuration(),
              std::make_unique<StalledFeed>());
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok()) << connection.status();
  struct Outcome {
    absl::Mutex mu;
    bool answered = false;
    bool retry_later = false;
  };
  auto outcome = std::make_shared<Outcome>();
  proto::GetElementRequest request;
  request.set_task_id(kTaskId);
  request.set_client_id(7);
  request.set_max_batch_bytes(1 << 16);
  request.set_delivery_epoch(1);
  transport::CallOptions options;
  options.timeout = absl::Seconds(20);
  const absl::Time sent = absl::Now();
  client_->CallAsync(*connection, proto::GET_ELEMENT, request.SerializeAsString(), options,
                     [outcome](absl::StatusOr<transport::CallResult> result) {
                       absl::MutexLock lock(&outcome->mu);
                       proto::GetElementResponse response;
                       outcome->answered = true;
                       outcome->retry_later =
                           result.ok() &&
                           response.ParseFromArray(result->response.data(),
                                                   static_cast<int>(result->response.size())) &&
                           response.retry_later();
                     });
  absl::Time answered_at = absl::InfiniteFuture();
  for (const absl::Time give_up = sent + absl::Seconds(10); absl::Now() < give_up;) {
    runner_->Poll();  // as the worker does at each heartbeat
    absl::MutexLock lock(&outcome->mu);
    if (outcome->answered) {
      answered_at = absl::Now();
      EXPECT_TRUE(outcome->retry_later);
      break;
    }
    outcome->mu.AwaitWithTimeout(absl::Condition(&outcome->answered), absl::Milliseconds(50));
  }
  ASSERT_LT(answered_at, sent + absl::Seconds(10)) << "the request was held on";
  EXPECT_GE(answered_at - sent, absl::Milliseconds(300)) << "told to retry before its hold";
  EXPECT_EQ(runner_->stats().requests_held_too_long, 1);
  StopRunner();
}

// Requests parked behind a pipeline that makes nothing are bounded: past the bound the
// oldest is told to retry, as a reader that is still there would be by a restarted worker.
TEST_F(DeliveryTest, ParkedRequestsAreBoundedAndTheOldestIsToldToRetry) {
  StartRunner("range(100) | batch(10)", /*num_consumers=*/0, 8, absl::ZeroDuration(),
              std::make_unique<StalledFeed>(), /*max_parked_requests=*/2);
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok()) << connection.status();
  // Shared with the callbacks, which the client's teardown may run after a failed check.
  struct Outcomes {
    absl::Mutex mu;
    std::vector<int> retried;  // which requests were told to retry, in order
    int failed = 0;
  };
  auto outcomes = std::make_shared<Outcomes>();
  for (int i = 0; i < 3; ++i) {
    proto::GetElementRequest request;
    request.set_task_id(kTaskId);
    request.set_client_id(7);
    request.set_max_batch_bytes(1 << 16);
    request.set_delivery_epoch(1);
    transport::CallOptions options;
    options.timeout = absl::Seconds(20);
    client_->CallAsync(*connection, proto::GET_ELEMENT, request.SerializeAsString(), options,
                       [outcomes, i](absl::StatusOr<transport::CallResult> result) {
                         absl::MutexLock lock(&outcomes->mu);
                         proto::GetElementResponse response;
                         if (result.ok() &&
                             response.ParseFromArray(result->response.data(),
                                                     static_cast<int>(result->response.size())) &&
                             response.retry_later()) {
                           outcomes->retried.push_back(i);
                         } else {
                           ++outcomes->failed;  // the runner's shutdown answers the rest
                         }
                       });
    if (i == 0) absl::SleepFor(absl::Milliseconds(50));  // parked first
  }
  {
    absl::MutexLock lock(&outcomes->mu);
    auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(outcomes->mu) {
      return !outcomes->retried.empty();
    };
    EXPECT_TRUE(outcomes->mu.AwaitWithTimeout(absl::Condition(&answered), absl::Seconds(10)));
    EXPECT_THAT(outcomes->retried, ::testing::ElementsAre(0));
    EXPECT_EQ(outcomes->failed, 0) << "the other two stay parked";
  }
  EXPECT_EQ(runner_->stats().parked_requests_evicted, 1);
  StopRunner();  // cancels the feed and answers the requests still parked
  absl::MutexLock lock(&outcomes->mu);
  auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(outcomes->mu) {
    return outcomes->retried.size() + outcomes->failed == 3;
  };
  EXPECT_TRUE(outcomes->mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(10)));
}

// A request sent before its client's connection broke, arriving after one of the newer
// epoch, is told to retry at once, even while nothing is ready. (Since parked requests are
// walked only when something can be matched, it would otherwise wait for the next batch.)
TEST_F(DeliveryTest, ARequestOvertakenByANewerEpochIsToldToRetryWhileNothingIsReady) {
  StartRunner("range(100) | batch(10)", /*num_consumers=*/0, 8, absl::ZeroDuration(),
              std::make_unique<StalledFeed>());
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok()) << connection.status();
  proto::GetElementRequest newer;
  newer.set_task_id(kTaskId);
  newer.set_client_id(7);
  newer.set_max_batch_bytes(1 << 16);
  newer.set_delivery_epoch(2);
  auto parked = std::make_shared<absl::Notification>();
  client_->CallAsync(*connection, proto::GET_ELEMENT, newer.SerializeAsString(), {},
                     [parked](absl::StatusOr<transport::CallResult>) { parked->Notify(); });
  absl::SleepFor(absl::Milliseconds(50));  // the epoch-2 request is parked first
  const absl::Time start = absl::Now();
  EXPECT_EQ(Get(7, 1, {}), kRetryLater);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(parked->HasBeenNotified()) << "the newer request stays parked";
  StopRunner();  // cancels the feed and answers the parked request
}

// A task stopped while its pipeline still runs (its worker shutting down, or the dispatcher
// deleting it) answers its parked requests Cancelled: the pipeline was cut short, not
// finished. They were told the end of the sequence, so an uncoordinated reader took the
// task as done, and a coordinated one failed the whole read ("coordinated reads need an
// infinite pipeline") where a Cancelled worker is one it skips the rounds of.
TEST_F(DeliveryTest, AStoppedTaskTellsItsParkedRequestsItStoppedNotThatItEnded) {
  for (const int num_consumers : {0, 2}) {
    SCOPED_TRACE(num_consumers);
    StartRunner("range(100) | batch(10)", num_consumers, 8, absl::ZeroDuration(),
                std::make_unique<StalledFeed>());
    const int fetched_before = fetches_.load();
    std::vector<std::future<absl::StatusOr<int64_t>>> parked;
    for (int32_t i = 0; i < 2; ++i) {
      parked.push_back(std::async(std::launch::async, [this, num_consumers, i] {
        if (num_consumers > 0) return GetRound(i, 0, {});
        proto::GetElementResponse response;
        const absl::Status status = client_->CallProto(
            address_, proto::GET_ELEMENT, Request(7 + i, 1, {}), &response, absl::Seconds(10));
        if (!status.ok()) return absl::StatusOr<int64_t>(status);
        return absl::StatusOr<int64_t>(response.end_of_sequence() ? kEnd : response.batch_index());
      }));
    }
    ASSERT_TRUE(AwaitFetches(fetched_before + 2)) << "the requests never reached the task";
    StopRunner();
    for (std::future<absl::StatusOr<int64_t>>& reply : parked) {
      const absl::StatusOr<int64_t> outcome = reply.get();
      EXPECT_TRUE(absl::IsCancelled(outcome.status()))
          << (!outcome.ok()      ? outcome.status().ToString()
              : *outcome == kEnd ? std::string("told the end of the sequence")
                                 : std::string("given a batch"));
    }
  }
}

}  // namespace
}  // namespace sluice::control::testing
