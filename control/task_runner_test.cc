// Delivery without loss (TaskRunner::Fetch with a Delivery): a real worker-side runner behind
// a real RPC endpoint over UCX, and a client sending GetElement requests by hand, so that
// each acknowledgement and epoch is chosen by the test.
#include "control/task_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

constexpr int64_t kTaskId = 1;

class DeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    transport::RpcOptions options;
    options.transport.ucx_tls = "posix,sysv,cma,self";
    auto server = transport::RpcEndpoint::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto pool = transport::SlabPool::Create(server_->transport(), 1 << 16, 8);
    ASSERT_TRUE(pool.ok()) << pool.status();
    proto::TaskDef task;
    task.set_task_id(kTaskId);
    auto pipeline = engine::ParsePipeline("range(50) | batch(10)");
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    *task.mutable_pipeline() = *pipeline;
    auto runner = TaskRunner::Start(task, *pool, nullptr, {.buffer_batches = 2});
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = std::move(*runner);
    server_->Handle(proto::GET_ELEMENT, [this](std::shared_ptr<transport::ServerCall> call) {
      proto::GetElementRequest request;
      ASSERT_TRUE(request.ParseFromString(call->request()));
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
    client_.reset();
    server_.reset();  // no more calls into the runner
    runner_.reset();
  }

  static constexpr int64_t kEnd = -1;
  static constexpr int64_t kRetryLater = -2;

  // The batch index the worker answers `client` with, or kEnd, or kRetryLater.
  int64_t Get(int64_t client, int64_t epoch, std::vector<int64_t> acked) {
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
    if (response.end_of_sequence()) return kEnd;
    if (response.retry_later()) return kRetryLater;
    EXPECT_GT(response.batch_bytes(), 0u);
    return response.batch_index();
  }

  std::unique_ptr<transport::RpcEndpoint> server_;
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

}  // namespace
}  // namespace sluice::control
