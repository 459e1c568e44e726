// Delivery without loss (TaskRunner::Fetch with a Delivery or a RoundRequest): a real
// worker-side runner behind a real RPC endpoint over UCX, and a client sending GetElement
// requests by hand, so that each acknowledgement, epoch and round is chosen by the test.
#include "control/task_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

constexpr int64_t kTaskId = 1;

class DeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override { StartRunner("range(50) | batch(10)", /*num_consumers=*/0, 8); }

  // A runner for `pipeline` (coordinated when num_consumers > 0) over a pool of `slabs`.
  void StartRunner(const std::string& pipeline_text, int num_consumers, size_t slabs,
                   absl::Duration round_wait = absl::ZeroDuration(),
                   std::unique_ptr<engine::SplitFeed> feed = nullptr,
                   size_t max_parked_requests = TaskRunnerOptions().max_parked_requests) {
    TearDown();
    transport::RpcOptions options;
    options.transport.ucx_tls = "posix,sysv,cma,self";
    auto server = transport::RpcEndpoint::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto pool = transport::SlabPool::Create(server_->transport(), 1 << 16, slabs);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *pool;
    proto::TaskDef task;
    task.set_task_id(kTaskId);
    task.set_num_consumers(num_consumers);
    task.set_round_wait_ms(absl::ToInt64Milliseconds(round_wait));
    auto pipeline = engine::ParsePipeline(pipeline_text);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    *task.mutable_pipeline() = *pipeline;
    auto runner =
        TaskRunner::Start(task, *pool, std::move(feed),
                          {.buffer_batches = 2, .max_parked_requests = max_parked_requests});
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = std::move(*runner);
    server_->Handle(proto::GET_ELEMENT, [this](std::shared_ptr<transport::ServerCall> call) {
      proto::GetElementRequest request;
      ASSERT_TRUE(request.ParseFromString(call->request()));
      if (request.coordinated()) {
        runner_->Fetch(
            std::move(call), request.max_batch_bytes(),
            RoundRequest{request.consumer_index(),
                         request.round(),
                         request.delivery_epoch() > 0,
                         {request.acked_rounds().begin(), request.acked_rounds().end()}});
        return;
      }
      runner_->Fetch(
          std::move(call), request.max_batch_bytes(),
          Delivery{request.client_id(),
                   request.delivery_epoch(),
                   {request.acked_batch_indices().begin(), request.acked_batch_indices().end()}});
    });
    auto address = server_->Listen(transport::Address{"ucx", "127.0.0.1", 0});
    ASSERT_TRUE(address.ok()) << address.status();
    address_ = *address;
    auto client = transport::RpcEndpoint::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  void TearDown() override {
    // Requests of other threads end with the server (nothing answers them any more).
    client_.reset();
    server_.reset();  // no more calls into the runner
    runner_.reset();
    pool_.reset();
  }

  static constexpr int64_t kEnd = -1;
  static constexpr int64_t kRetryLater = -2;

  // The batch index the worker answers `client` with, or kEnd, or kRetryLater.
  int64_t Get(int64_t client, int64_t epoch, std::vector<int64_t> acked) {
    proto::GetElementResponse response = GetResponse(client, epoch, std::move(acked));
    if (response.end_of_sequence()) return kEnd;
    if (response.retry_later()) return kRetryLater;
    EXPECT_GT(response.batch_bytes(), 0u);
    return response.batch_index();
  }

  // The worker's whole answer to `client`.
  proto::GetElementResponse GetResponse(int64_t client, int64_t epoch, std::vector<int64_t> acked) {
    proto::GetElementRequest request;
    request.set_task_id(kTaskId);
    request.set_client_id(client);
    request.set_max_batch_bytes(1 << 16);
    request.set_delivery_epoch(epoch);
    for (int64_t index : acked) request.add_acked_batch_indices(index);
    proto::GetElementResponse response;
    absl::Status status =
        client_->CallProto(address_, proto::GET_ELEMENT, request, &response, absl::Seconds(10));
    EXPECT_TRUE(status.ok()) << status;
    return response;
  }

  // Coordinated: the batch index `consumer` gets for `round`, or kEnd, or the call's
  // failure (code).
  absl::StatusOr<int64_t> GetRound(int32_t consumer, int64_t round, std::vector<int64_t> acked) {
    proto::GetElementRequest request;
    request.set_task_id(kTaskId);
    request.set_client_id(100 + consumer);
    request.set_max_batch_bytes(1 << 16);
    request.set_delivery_epoch(1);
    request.set_coordinated(true);
    request.set_consumer_index(consumer);
    request.set_round(round);
    for (int64_t r : acked) request.add_acked_rounds(r);
    proto::GetElementResponse response;
    SLUICE_RETURN_IF_ERROR(
        client_->CallProto(address_, proto::GET_ELEMENT, request, &response, absl::Seconds(10)));
    EXPECT_FALSE(response.retry_later());
    if (response.end_of_sequence()) return kEnd;
    return response.batch_index();
  }

  std::unique_ptr<transport::RpcEndpoint> server_;
  std::shared_ptr<transport::SlabPool> pool_;
  std::unique_ptr<TaskRunner> runner_;
  std::unique_ptr<transport::RpcEndpoint> client_;
  transport::Address address_;
};

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
  EXPECT_TRUE(runner_->finished());
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

constexpr const char* kEndless = "range(1000) | batch(10) | repeat()";

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
  // The sleeps order the requests' arrival (there is no waiting-request counter to poll);
  // 300 ms leaves room for a loaded machine.
  std::thread stale([&] { lost = GetRound(0, 0, {}); });
  absl::SleepFor(absl::Milliseconds(300));
  absl::StatusOr<int64_t> again;
  std::thread repeated([&] { again = GetRound(0, 0, {}); });
  absl::SleepFor(absl::Milliseconds(300));
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

// Batches of 40,000 bytes: over half a 64 KiB slab, so each takes a slab of its own.
constexpr const char* kSlabEach = "range(5000) | batch(5000) | repeat()";
// Batches of 20,000 bytes: three share a slab.
constexpr const char* kThreePerSlab = "range(2500) | batch(2500) | repeat()";

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
TEST_F(DeliveryTest, AForgottenClientsLostBatchesGoAndTheTaskFinishes) {
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 0);  // a break: 0, 1 and 2 were lost; 0 comes again
  // Client 7 is gone; client 8 reads the rest.
  EXPECT_EQ(Get(8, 1, {}), 3);
  EXPECT_EQ(Get(8, 1, {3}), 4);
  EXPECT_EQ(Get(8, 1, {4}), kEnd);
  EXPECT_FALSE(runner_->finished()) << "1 and 2 wait for client 7";
  // Client 8 was told the end: no reader is left to take 1 and 2 when 7 is forgotten.

  // A client that asked after the heartbeat went out is spared, listed or not.
  runner_->ForgetClients({8}, absl::Now() - absl::Hours(1));
  EXPECT_FALSE(runner_->finished());
  EXPECT_EQ(runner_->stats().clients_forgotten, 0);
  runner_->ForgetClients({8}, absl::Now());
  EXPECT_TRUE(runner_->finished());
  EXPECT_EQ(runner_->stats().clients_forgotten, 1);
  EXPECT_EQ(runner_->stats().batches_handed_on, 0);
  EXPECT_EQ(runner_->stats().lost_batches_dropped, 2);
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
  EXPECT_TRUE(runner_->finished());
}

// Numbers need not rise with the batch index (a batch handed on from a forgotten client
// comes after later ones): the floor is the lowest number still on its way, not the number
// of the lowest index.
TEST_F(DeliveryTest, TheFloorIsTheLowestNumberOnItsWayWhateverItsIndex) {
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 0);  // 1 and 2 are lost
  EXPECT_EQ(Get(8, 1, {}), 3);  // number 1 of client 8, not acknowledged
  runner_->ForgetClients({8}, absl::Now());
  proto::GetElementResponse handed_on = GetResponse(8, 1, {});
  EXPECT_EQ(handed_on.batch_index(), 1);
  EXPECT_EQ(handed_on.client_sequence(), 2);
  EXPECT_EQ(handed_on.sequence_floor(), 1) << "batch 3, number 1, may still be on its way";
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

// Only when nothing awaits an acknowledgement does a lost batch go, for good: its client
// stops waiting for it.
TEST_F(DeliveryTest, ALostBatchGoesOnlyWhenNothingElseIsKept) {
  StartRunner(kSlabEach, /*num_consumers=*/0, 8);  // keeps at most 4 slabs
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(Get(7, 1, {}), i);
  EXPECT_EQ(Get(7, 2, {}), 0);               // 1, 2 and 3 are lost, 0 is kept again
  EXPECT_TRUE(runner_->ReleaseKeptBatch());  // 0, awaiting its acknowledgement
  EXPECT_TRUE(runner_->ReleaseKeptBatch());  // 1, lost
  EXPECT_EQ(runner_->stats().kept_batches_released, 2);
  proto::GetElementResponse next = GetResponse(7, 2, {0});
  EXPECT_EQ(next.batch_index(), 2);
  EXPECT_EQ(next.sequence_floor(), 3) << "client 7 stops waiting for batch 1 (number 2)";
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
    client_->CallAsync(
        *connection, proto::GET_ELEMENT, request.SerializeAsString(), options,
        [outcomes, i](absl::StatusOr<transport::CallResult> result) {
          absl::MutexLock lock(&outcomes->mu);
          proto::GetElementResponse response;
          if (result.ok() && response.ParseFromString(result->response) && response.retry_later()) {
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
  runner_.reset();  // cancels the feed and answers the requests still parked
  absl::MutexLock lock(&outcomes->mu);
  auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(outcomes->mu) {
    return outcomes->retried.size() + outcomes->failed == 3;
  };
  EXPECT_TRUE(outcomes->mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(10)));
}

}  // namespace
}  // namespace sluice::control
