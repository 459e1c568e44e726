// A worker started before its dispatcher: Worker::Start keeps trying for
// WorkerOptions::register_timeout (a cluster's processes start in any order), pacing its
// tries through on_register_retry, which may also give up.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "control/dispatcher.h"
#include "control/worker.h"

namespace sluice::control {
namespace {

constexpr const char* kTls = "posix,sysv,cma,self";

DispatcherOptions DispatcherOn(uint16_t port) {
  DispatcherOptions options;
  options.bind = transport::Address{"ucx", "127.0.0.1", port};
  options.transport.ucx_tls = kTls;
  return options;
}

// A port nothing listens on now: one a dispatcher had, and gave back.
uint16_t FreePort() {
  auto dispatcher = Dispatcher::Start(DispatcherOn(0));
  EXPECT_TRUE(dispatcher.ok()) << dispatcher.status();
  return dispatcher.ok() ? (*dispatcher)->address().port : 0;
}

WorkerOptions WorkerOf(uint16_t dispatcher_port) {
  WorkerOptions options;
  options.dispatcher = transport::Address{"ucx", "127.0.0.1", dispatcher_port};
  options.bind = transport::Address{"ucx", "127.0.0.1", 0};
  options.slab_bytes = 1 << 20;
  options.num_slabs = 2;
  options.dispatcher_timeout = absl::Seconds(2);
  options.transport.ucx_tls = kTls;
  return options;
}

TEST(WorkerRegisterTest, AWorkerStartedFirstRegistersOnceTheDispatcherComesUp) {
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  WorkerOptions options = WorkerOf(port);
  options.register_timeout = absl::Seconds(30);
  std::atomic<int> retries{0};
  options.on_register_retry = [&retries](const absl::Status& why) {
    EXPECT_TRUE(absl::IsUnavailable(why) || absl::IsDeadlineExceeded(why)) << why;
    ++retries;
    absl::SleepFor(absl::Milliseconds(100));
    return true;
  };
  absl::StatusOr<std::unique_ptr<Worker>> worker = absl::UnknownError("not started");
  std::thread starting([&] { worker = Worker::Start(options); });
  // Until the dispatcher is up the worker keeps trying.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (retries.load() < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  auto dispatcher = Dispatcher::Start(DispatcherOn(port));
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  starting.join();
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_GE(retries.load(), 3);
  EXPECT_FALSE((*worker)->address().empty());
}

TEST(WorkerRegisterTest, GivesUpWhenTheRetryCallbackSaysSoOrAtOnceWithoutATimeout) {
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  WorkerOptions options = WorkerOf(port);
  options.register_timeout = absl::Minutes(5);
  int retries = 0;
  options.on_register_retry = [&retries](const absl::Status&) { return ++retries < 2; };
  const absl::Time start = absl::Now();
  auto worker = Worker::Start(options);
  EXPECT_FALSE(worker.ok());
  EXPECT_TRUE(absl::IsUnavailable(worker.status()) || absl::IsDeadlineExceeded(worker.status()))
      << worker.status();
  EXPECT_EQ(retries, 2);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));

  // The default: one try, no callback.
  options.register_timeout = absl::ZeroDuration();
  retries = 0;
  EXPECT_FALSE(Worker::Start(options).ok());
  EXPECT_EQ(retries, 0);
}

// A dispatcher whose name does not resolve yet (its DNS record comes with it, as a
// cluster's service names do) is waited for too, not refused as a bad address.
TEST(WorkerRegisterTest, ADispatcherNameThatDoesNotResolveYetIsWaitedFor) {
  WorkerOptions options = WorkerOf(5050);
  options.dispatcher.host = "sluice-dispatcher.invalid";  // .invalid never resolves
  options.register_timeout = absl::Minutes(5);
  int retries = 0;
  options.on_register_retry = [&retries](const absl::Status&) { return ++retries < 3; };
  auto worker = Worker::Start(options);
  EXPECT_FALSE(worker.ok());
  EXPECT_EQ(retries, 3) << worker.status();
  EXPECT_NE(worker.status().message().find("sluice-dispatcher.invalid"), std::string::npos)
      << worker.status();
}

}  // namespace
}  // namespace sluice::control
