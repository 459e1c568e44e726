// A fault-tolerant dispatcher that stops (SIGTERM, a rolling restart) answers the changes
// it already made: their callers hear the change is durable instead of an error or, over
// shared memory, silence until their deadline.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "control/dispatcher.h"
#include "control/journal_test_util.h"
#include "engine/pipeline_text.h"
#include "transport/rpc.h"

namespace sluice::control {
namespace {

using journal_test::TempDir;

class DispatcherShutdownTest : public ::testing::TestWithParam<const char*> {
 protected:
  DispatcherOptions Options(const std::string& work_dir) const {
    DispatcherOptions options;
    options.bind = transport::Address{"ucx", "127.0.0.1", 0};
    options.transport.ucx_tls = GetParam();
    options.fault_tolerant = true;
    options.work_dir = work_dir;
    return options;
  }
};

TEST_P(DispatcherShutdownTest, AChangeAwaitingTheJournalIsAnsweredWhenTheDispatcherStops) {
  TempDir dir;
  DispatcherOptions options = Options(dir.path());
  // The journal holds every batch back for a minute: the change waits for it when the
  // dispatcher is told to stop.
  options.journal.max_delay = absl::Minutes(1);
  absl::StatusOr<std::unique_ptr<Dispatcher>> dispatcher = Dispatcher::Start(options);
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  const transport::Address address = (*dispatcher)->address();

  transport::RpcOptions client_options;
  client_options.scheme = "ucx";
  client_options.transport.ucx_tls = GetParam();
  absl::StatusOr<std::unique_ptr<transport::RpcEndpoint>> client =
      transport::RpcEndpoint::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  proto::RegisterDatasetRequest request;
  *request.mutable_pipeline() = *engine::ParsePipeline("range(100) | batch(10)");
  request.set_dataset_id("kept");
  proto::RegisterDatasetResponse response;
  absl::Status answered = absl::UnknownError("no answer yet");
  absl::Duration waited;
  std::thread caller([&] {
    const absl::Time start = absl::Now();
    answered = (*client)->CallProto(address, proto::REGISTER_DATASET, request, &response,
                                    absl::Minutes(2));
    waited = absl::Now() - start;
  });

  DispatcherState& state = (*dispatcher)->state();
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
       state.journaled_updates() == 0 && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  // EXPECT, not ASSERT: the caller thread is joined below in any case.
  EXPECT_EQ(state.journaled_updates(), 1) << "the dispatcher never made the change";
  const absl::Time stop = absl::Now();
  dispatcher->reset();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(20)) << "stopping waited for the journal's delay";
  caller.join();

  ASSERT_TRUE(answered.ok()) << answered << " after " << waited;
  EXPECT_EQ(response.dataset_id(), "kept");
  EXPECT_LT(waited, absl::Seconds(30));

  // What it answered is what a restart recovers.
  absl::StatusOr<std::unique_ptr<Dispatcher>> restarted = Dispatcher::Start(Options(dir.path()));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  const proto::GetStatusResponse status = (*restarted)->state().Status();
  ASSERT_EQ(status.datasets_size(), 1);
  EXPECT_EQ(status.datasets(0).dataset_id(), "kept");
}

INSTANTIATE_TEST_SUITE_P(Transports, DispatcherShutdownTest,
                         ::testing::Values("posix,sysv,cma,self", "tcp,self"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.index == 0 ? "SharedMemory" : "Tcp");
                         });

}  // namespace
}  // namespace sluice::control
