// A reader's dealings with the dispatcher about its job (control/batch_reader_job.cc): here,
// a job no worker ever joins, which must fail the read after ReadOptions::no_worker_timeout
// and say why, while the dispatcher keeps answering.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "control/client.h"
#include "control/dispatcher.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

// A dispatcher with no worker over shared memory, a client of it, and a dataset it
// registered (range(100) | batch(10)).
struct DispatcherAndClient {
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<Client> client;
  std::string dataset;
};
void StartDispatcherAndClient(DispatcherAndClient* setup) {
  DispatcherOptions dispatcher_options;
  dispatcher_options.bind = transport::Address{"ucx", "127.0.0.1", 0};
  dispatcher_options.transport.ucx_tls = "posix,sysv,cma,self";
  auto dispatcher = Dispatcher::Start(dispatcher_options);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  setup->dispatcher = *std::move(dispatcher);
  ClientOptions client_options;
  client_options.dispatcher = setup->dispatcher->address();
  client_options.transport.ucx_tls = "posix,sysv,cma,self";
  auto client = Client::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  setup->client = *std::move(client);
  auto dataset = setup->client->RegisterDataset(*engine::ParsePipeline("range(100) | batch(10)"));
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  setup->dataset = *dataset;
}

TEST(BatchReaderJobTest, AJobNoWorkerJoinsFailsAfterTheNoWorkerTimeoutAndSaysSo) {
  DispatcherAndClient setup;
  ASSERT_NO_FATAL_FAILURE(StartDispatcherAndClient(&setup));
  std::unique_ptr<Client>& client = setup.client;
  const std::string& dataset = setup.dataset;

  ReadOptions read;
  read.mode = proto::OFF;
  read.no_worker_timeout = absl::Seconds(1);
  // Long enough that a read failed as "lost the dispatcher" (a request timeout after the
  // no-worker verdict, as before) would miss the bound below.
  read.request_timeout = absl::Seconds(40);
  auto reader = client->Read(dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const absl::Time start = absl::Now();
  auto batch = (*reader)->Next();
  const absl::Duration waited = absl::Now() - start;
  ASSERT_FALSE(batch.ok()) << "a batch came with no worker in the cluster";
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kUnavailable) << batch.status();
  EXPECT_THAT(std::string(batch.status().message()), testing::HasSubstr("no worker joined job"));
  EXPECT_THAT(std::string(batch.status().message()),
              testing::Not(testing::HasSubstr("lost the dispatcher")));
  EXPECT_LT(waited, absl::Seconds(15));
}

// Interrupt with an OK status (a handler that has no error to give) still ends a waiting
// Next(): it was taken for no failure at all, and Next() waited on.
TEST(BatchReaderJobTest, AnInterruptWithoutAnErrorStillEndsTheRead) {
  DispatcherAndClient setup;
  ASSERT_NO_FATAL_FAILURE(StartDispatcherAndClient(&setup));
  ReadOptions read;
  read.mode = proto::OFF;
  read.no_worker_timeout = absl::Seconds(30);  // no worker: Next() waits
  auto reader = setup.client->Read(setup.dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::thread handler([&reader] {
    absl::SleepFor(absl::Milliseconds(300));
    (*reader)->Interrupt(absl::OkStatus());
  });
  const absl::Time start = absl::Now();
  auto batch = (*reader)->Next();
  handler.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kCancelled) << batch.status();
}

// A reader whose landing pool cannot be made (here: more than any machine holds) fails
// before it asks for the job: before, the named job was made and left with a client that
// never came.
TEST(BatchReaderJobTest, AReaderWhosePoolCannotBeMadeLeavesNoJob) {
  DispatcherAndClient setup;
  ASSERT_NO_FATAL_FAILURE(StartDispatcherAndClient(&setup));
  std::unique_ptr<Client>& client = setup.client;
  const std::string& dataset = setup.dataset;
  ReadOptions read;
  read.job_name = "never-read";
  read.slab_bytes = size_t{1} << 47;
  auto reader = client->Read(dataset, read);
  ASSERT_FALSE(reader.ok()) << "a landing pool of 2^47-byte slabs";
  EXPECT_THAT(std::string(reader.status().message()),
              testing::HasSubstr("the reader's landing pool"));
  auto status = client->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->jobs_size(), 0) << status->DebugString();
}

}  // namespace
}  // namespace sluice::control
