// A task's pipeline error reaches its reader at once, whatever its code. Worker and reader
// also say Unavailable, DeadlineExceeded, Aborted and Cancelled of a worker out of reach,
// where the reader waits (up to its request_timeout) for the worker or the dispatcher's word
// on it; a pipeline's own error with one of those codes (a plugin's lookup service down, a
// file read interrupted) must not be taken for that.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "control/client.h"
#include "control/local_cluster.h"
#include "engine/functions.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

// One worker in this process (which runs the dispatcher too, so both know the functions
// registered here), a client of it, and `pipeline` registered.
struct Served {
  std::unique_ptr<LocalCluster> cluster;
  std::unique_ptr<Client> client;  // after the cluster: gone before it
  std::string dataset;
};

absl::StatusOr<Served> Serve(std::string_view pipeline_text) {
  constexpr const char* kTls = "posix,sysv,cma,self";
  LocalClusterOptions options;
  options.num_workers = 1;
  options.dispatcher.transport.ucx_tls = kTls;
  options.worker.transport.ucx_tls = kTls;
  Served served;
  SLUICE_ASSIGN_OR_RETURN(served.cluster, LocalCluster::Start(options));
  ClientOptions client_options;
  client_options.dispatcher = served.cluster->dispatcher_address();
  client_options.transport.ucx_tls = kTls;
  SLUICE_ASSIGN_OR_RETURN(served.client, Client::Connect(client_options));
  SLUICE_ASSIGN_OR_RETURN(proto::PipelineDef pipeline, engine::ParsePipeline(pipeline_text));
  SLUICE_ASSIGN_OR_RETURN(served.dataset, served.client->RegisterDataset(pipeline));
  return served;
}

struct FailingCase {
  const char* name;
  absl::StatusCode code;
  bool coordinated;
};

class TaskErrorTest : public ::testing::TestWithParam<FailingCase> {};

TEST_P(TaskErrorTest, ReachesTheReaderAtOnceWithItsCode) {
  const FailingCase& c = GetParam();
  // In this process, which runs the dispatcher and the worker: both know the function.
  const std::string function = absl::StrCat("task_error_test.", c.name);
  ASSERT_TRUE(engine::GlobalFunctions()
                  .Register(function,
                            [code = c.code](engine::Element, engine::Element*) {
                              return absl::Status(code, "the feature store did not answer");
                            })
                  .ok());

  auto served = Serve(absl::StrCat("range(100) | repeat() | map(", function, ")"));
  ASSERT_TRUE(served.ok()) << served.status();
  Client* client = served->client.get();
  const std::string& dataset = served->dataset;

  ReadOptions read;
  read.mode = proto::OFF;
  // Long enough that an error taken for an unreachable worker would miss the bound below.
  read.request_timeout = absl::Seconds(40);
  if (c.coordinated) {
    read.job_name = absl::StrCat("rounds-", c.name);
    read.num_consumers = 1;
    read.consumer_index = 0;
  }
  auto reader = client->Read(dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const absl::Time start = absl::Now();
  auto batch = (*reader)->Next();
  const absl::Duration waited = absl::Now() - start;
  ASSERT_FALSE(batch.ok()) << "a batch came from a pipeline that fails on every element";
  EXPECT_EQ(batch.status().code(), c.code) << batch.status();
  EXPECT_THAT(std::string(batch.status().message()),
              testing::HasSubstr("the feature store did not answer"));
  EXPECT_LT(waited, absl::Seconds(15)) << batch.status();
}

// A shared job whose task failed does not end for the readers that come after the first
// one met the error: each of them is told the error too, not an end of data.
TEST(TaskErrorSharedJobTest, EveryReaderOfTheJobIsToldTheError) {
  ASSERT_TRUE(engine::GlobalFunctions()
                  .Register("task_error_test.fail_at_50",
                            [](engine::Element in, engine::Element* out) {
                              if (in[0].values<int64_t>()[0] == 50) {
                                return absl::DataLossError("record 50 is corrupt");
                              }
                              *out = std::move(in);
                              return absl::OkStatus();
                            })
                  .ok());
  auto served = Serve("range(100) | map(task_error_test.fail_at_50) | batch(10)");
  ASSERT_TRUE(served.ok()) << served.status();
  Client* client = served->client.get();
  const std::string& dataset = served->dataset;

  ReadOptions read;
  read.mode = proto::OFF;
  read.job_name = "shared";
  auto read_to_the_end = [&]() -> absl::Status {
    auto reader = client->Read(dataset, read);
    if (!reader.ok()) return reader.status();
    while (true) {
      auto batch = (*reader)->Next();
      if (!batch.ok()) return batch.status();
      if (!batch->has_value()) return absl::OkStatus();
    }
  };
  const absl::Status first = read_to_the_end();
  EXPECT_EQ(first.code(), absl::StatusCode::kDataLoss) << first;
  // Time for the worker's heartbeats to report the task (100 ms apart) and the readers'.
  absl::SleepFor(absl::Seconds(1));
  const absl::Status second = read_to_the_end();
  EXPECT_EQ(second.code(), absl::StatusCode::kDataLoss) << second;
  EXPECT_THAT(std::string(second.message()), testing::HasSubstr("record 50 is corrupt"));
}

INSTANTIATE_TEST_SUITE_P(
    Codes, TaskErrorTest,
    ::testing::Values(FailingCase{"unavailable", absl::StatusCode::kUnavailable, false},
                      FailingCase{"deadline", absl::StatusCode::kDeadlineExceeded, false},
                      FailingCase{"aborted_in_rounds", absl::StatusCode::kAborted, true}),
    [](const ::testing::TestParamInfo<FailingCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sluice::control
