// The fixture task_runner_test.cc and task_runner_rounds_test.cc share: a real worker-side
// TaskRunner behind a real RPC endpoint over UCX, and a client sending GetElement requests
// by hand, so that each acknowledgement, epoch and round is chosen by the test.
//
//   TEST_F(DeliveryTest, Something) {
//     StartRunner(kEndless, /*num_consumers=*/2, /*slabs=*/16);
//     EXPECT_EQ(GetRound(0, 0, {}).value_or(-1), 0);
//   }
#ifndef SLUICE_CONTROL_TASK_RUNNER_TEST_FIXTURE_H_
#define SLUICE_CONTROL_TASK_RUNNER_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "control/task_runner.h"
#include "engine/pipeline_text.h"

namespace sluice::control::testing {

inline constexpr int64_t kTaskId = 1;

// An endless pipeline of small batches.
inline constexpr const char* kEndless = "range(1000) | batch(10) | repeat()";
// Batches of 40,000 bytes: over half a 64 KiB slab, so each takes a slab of its own.
inline constexpr const char* kSlabEach = "range(5000) | batch(5000) | repeat()";
// Batches of 20,000 bytes: three share a slab.
inline constexpr const char* kThreePerSlab = "range(2500) | batch(2500) | repeat()";

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
    auto runner = TaskRunner::Start(task, *pool, std::move(feed),
                                    {.buffer_batches = 2,
                                     .max_parked_requests = max_parked_requests,
                                     .max_request_hold = max_request_hold_,
                                     .verify_kept_slabs = true,
                                     .spill_budget = spill_budget_});
    ASSERT_TRUE(runner.ok()) << runner.status();
    {
      absl::MutexLock lock(&runner_mu_);
      runner_ = std::move(*runner);
    }
    // On the progress thread, as the worker has it: requests sent in order on a connection
    // reach Fetch in that order (a pool of handler threads may swap two, and the tests that
    // order requests by a short sleep then saw another request parked or evicted).
    server_->Handle(
        proto::GET_ELEMENT,
        [this](std::shared_ptr<transport::ServerCall> call) {
          proto::GetElementRequest request;
          ASSERT_TRUE(request.ParseFromArray(call->request().data(),
                                             static_cast<int>(call->request().size())));
          // A copy: the test may stop the runner once a reply reached it, while this thread
          // is still inside Fetch (StopRunner waits for it).
          std::shared_ptr<TaskRunner> runner;
          {
            absl::MutexLock lock(&runner_mu_);
            runner = runner_;
          }
          if (runner == nullptr) {
            call->Reply(absl::CancelledError("the test stopped the runner"));
            return;
          }
          if (request.coordinated()) {
            runner->Fetch(
                std::move(call), request.max_batch_bytes(),
                RoundRequest{request.consumer_index(),
                             request.round(),
                             request.delivery_epoch(),
                             {request.acked_rounds().begin(), request.acked_rounds().end()}});
          } else {
            runner->Fetch(std::move(call), request.max_batch_bytes(),
                          Delivery{request.client_id(),
                                   request.delivery_epoch(),
                                   {request.acked_batch_indices().begin(),
                                    request.acked_batch_indices().end()}});
          }
          fetches_.fetch_add(1);
        },
        transport::HandlerThread::kInline);
    auto address = server_->Listen(transport::Address{"ucx", "127.0.0.1", 0});
    ASSERT_TRUE(address.ok()) << address.status();
    address_ = *address;
    auto client = transport::RpcEndpoint::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    // Connected now: the first request of a test is not the one that waits for the connect
    // (two threads' requests ordered by a sleep then left together).
    auto connection = client_->ConnectTo(address_);
    ASSERT_TRUE(connection.ok()) << connection.status();
  }
  void TearDown() override {
    // Requests of other threads end with the client (nothing answers them any more).
    client_.reset();
    // Before the server: the runner answers the requests still parked through it.
    StopRunner();
    server_.reset();
    pool_.reset();
  }

  // Until `count` requests have returned from Fetch in all (up to 10 s): orders requests
  // sent from different threads without guessing how long one takes to arrive.
  bool AwaitFetches(int count) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (fetches_.load() < count && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(2));
    return fetches_.load() >= count;
  }

  // Destroys the runner (which answers the requests still parked) once no handler is inside
  // it: a reply sent from Fetch may reach the test before Fetch returns.
  void StopRunner() {
    std::shared_ptr<TaskRunner> runner;
    {
      absl::MutexLock lock(&runner_mu_);
      runner.swap(runner_);
    }
    // No handler takes a new copy now, so the count only falls.
    while (runner != nullptr && runner.use_count() > 1) absl::SleepFor(absl::Milliseconds(1));
    runner.reset();
  }

  // Until the runner has finished (up to 10 s): the last reply's send completes on the
  // transport's thread, after the reply reached the test.
  bool AwaitFinished() {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!runner_->finished() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
    return runner_->finished();
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

  // An uncoordinated request of `client`, acknowledging `acked`.
  static proto::GetElementRequest Request(int64_t client, int64_t epoch,
                                          const std::vector<int64_t>& acked) {
    proto::GetElementRequest request;
    request.set_task_id(kTaskId);
    request.set_client_id(client);
    request.set_max_batch_bytes(1 << 16);
    request.set_delivery_epoch(epoch);
    for (int64_t index : acked) request.add_acked_batch_indices(index);
    return request;
  }

  // The worker's whole answer to `client`.
  proto::GetElementResponse GetResponse(int64_t client, int64_t epoch, std::vector<int64_t> acked) {
    const proto::GetElementRequest request = Request(client, epoch, acked);
    proto::GetElementResponse response;
    absl::Status status =
        client_->CallProto(address_, proto::GET_ELEMENT, request, &response, absl::Seconds(10));
    EXPECT_TRUE(status.ok()) << status;
    return response;
  }

  // Client 7 reads 0, 1 and 2 and breaks its connection (1 and 2 lost, 0 served again),
  // client 8 reads 3 and 4; the future is client 8's next request, which has reached the
  // task (its acknowledgement counted) when this returns.
  std::future<int64_t> LastRequestBesideALostClient() {
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(Get(7, 1, {}), i);
    proto::GetElementResponse again = GetResponse(7, 2, {});
    EXPECT_EQ(again.batch_index(), 0);
    EXPECT_EQ(again.lost_left(), 2) << "the client learns that 1 and 2 wait for it too";
    EXPECT_EQ(Get(8, 1, {}), 3);
    EXPECT_EQ(Get(8, 1, {3}), 4);
    std::future<int64_t> last = std::async(std::launch::async, [this] { return Get(8, 1, {4}); });
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (runner_->stats().acknowledgements_received < 2 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    return last;
  }

  // Coordinated: the batch index `consumer` gets for `round`, or kEnd, or kRetryLater, or the
  // call's failure (code).
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
    if (response.retry_later()) return kRetryLater;
    if (response.end_of_sequence()) return kEnd;
    return response.batch_index();
  }

  std::shared_ptr<SpillBudget> spill_budget_;  // for the next StartRunner; null: no bound
  absl::Duration max_request_hold_ = TaskRunnerOptions().max_request_hold;  // likewise
  std::unique_ptr<transport::RpcEndpoint> server_;
  std::shared_ptr<transport::SlabPool> pool_;
  absl::Mutex runner_mu_;  // the handler's copy against StopRunner; the test thread alone sets
  std::shared_ptr<TaskRunner> runner_;
  std::atomic<int> fetches_{0};  // requests that have returned from Fetch
  std::unique_ptr<transport::RpcEndpoint> client_;
  transport::Address address_;
};

}  // namespace sluice::control::testing

#endif  // SLUICE_CONTROL_TASK_RUNNER_TEST_FIXTURE_H_
