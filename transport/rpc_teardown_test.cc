// An RPC server destroyed while requests still arrive, over every transport of
// rpc_test_fixture.h: a worker or dispatcher shut down under its clients' traffic.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string_view>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "transport/rpc.h"
#include "transport/rpc_test_fixture.h"

namespace sluice::transport {
namespace {

class RpcTeardownTest : public RpcTest {};

constexpr uint32_t kFirstIsSlow = 40;

// Shared with the callbacks, which may run after a failed check left the test body.
struct Outcomes {
  absl::Mutex mu;
  int sent = 0;
  int answered = 0;
  int failed = 0;
  absl::StatusOr<CallResult> first = absl::UnknownError("no reply yet");
};

// Destroys a server whose first request's handler, on `thread`, takes 300 ms, while a client
// keeps sending: each request is answered or failed, and the first one's reply is not lost.
void StopUnderTraffic(const RpcOptions& options, const TransportCase& transport,
                      RpcEndpoint& client, HandlerThread thread) {
  auto created = RpcEndpoint::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<RpcEndpoint> server = std::move(*created);
  auto handled = std::make_shared<std::atomic<int>>(0);
  // The first request holds the pool's drain for a while; the rest are answered at once.
  server->Handle(
      kFirstIsSlow,
      [handled](std::shared_ptr<ServerCall> call) {
        if (handled->fetch_add(1) == 0) absl::SleepFor(absl::Milliseconds(300));
        call->Reply(absl::OkStatus(), "done");
      },
      thread);
  auto address = server->Listen(Address{transport.scheme, "127.0.0.1", 0});
  ASSERT_TRUE(address.ok()) << address.status();
  auto connection = client.ConnectTo(*address);
  ASSERT_TRUE(connection.ok()) << connection.status();

  auto outcomes = std::make_shared<Outcomes>();
  auto send = [&, outcomes](bool first) {
    CallOptions options;
    options.timeout = absl::Seconds(5);
    {
      absl::MutexLock lock(&outcomes->mu);
      ++outcomes->sent;
    }
    client.CallAsync(*connection, kFirstIsSlow, "", options,
                     [outcomes, first](absl::StatusOr<CallResult> result) {
                       absl::MutexLock lock(&outcomes->mu);
                       ++(result.ok() ? outcomes->answered : outcomes->failed);
                       if (first) outcomes->first = std::move(result);
                     });
  };
  send(/*first=*/true);
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10);
       handled->load() == 0 && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(handled->load(), 1) << "the first request never reached its handler";

  std::atomic<bool> stop{false};
  std::thread sender([&] {
    while (!stop.load()) {
      send(/*first=*/false);
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  for (int i = 0; i < 10; ++i) send(/*first=*/false);  // some wait behind the slow one
  server.reset();                                      // while requests keep coming
  stop.store(true);
  sender.join();

  absl::MutexLock lock(&outcomes->mu);
  auto all_ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(outcomes->mu) {
    return outcomes->answered + outcomes->failed == outcomes->sent;
  };
  EXPECT_TRUE(outcomes->mu.AwaitWithTimeout(absl::Condition(&all_ended), absl::Seconds(30)))
      << outcomes->answered << " answered and " << outcomes->failed << " failed of "
      << outcomes->sent;
  if (std::string_view(transport.setting).find("tcp") != std::string_view::npos) {
    // Over tcp the reply and the hang-up travel on two sockets, and on a loaded machine the
    // reply may lose (TakeWhatArrived narrows the race): its call then fails as any call to
    // a stopped server does.
    EXPECT_TRUE(outcomes->first.ok() ||
                outcomes->first.status().code() == absl::StatusCode::kUnavailable)
        << outcomes->first.status();
    return;
  }
  ASSERT_TRUE(outcomes->first.ok()) << outcomes->first.status();
  EXPECT_EQ(outcomes->first->response.view(), "done") << "the slow handler's reply was lost";
}

// The server drains the handlers it queued while its transport still receives. Before, its
// pool was gone (a null pointer) while it drained, and the next request's handler was
// scheduled on it: the process crashed.
TEST_P(RpcTeardownTest, RequestsArrivingWhileThePoolDrainsAreAnsweredOrFailed) {
  StopUnderTraffic(options_, GetParam(), *client_, HandlerThread::kPool);
}

// A handler on the progress thread replies while the transport's destructor waits for that
// thread. Before, the endpoint had already nulled its transport pointer: a crash.
TEST_P(RpcTeardownTest, AnInlineHandlerRunningAsTheTransportStopsStillReplies) {
  StopUnderTraffic(options_, GetParam(), *client_, HandlerThread::kInline);
}

INSTANTIATE_TEST_SUITE_P(Transports, RpcTeardownTest, AllTransportCases(), TransportCaseName);

// A transport that cannot be made (an unknown UCX_TLS, an absent libfabric provider) fails
// Create with its reason. Before, the half-made endpoint's destructor used the transport it
// never got, and every command run with a bad UCX_TLS died of a segfault.
TEST(RpcCreateTest, ATransportThatCannotBeMadeFailsCreateWithItsReason) {
  RpcOptions ucx;
  ucx.scheme = "ucx";
  ucx.transport.ucx_tls = "no-such-transport";
  absl::StatusOr<std::unique_ptr<RpcEndpoint>> made = RpcEndpoint::Create(ucx);
  EXPECT_FALSE(made.ok()) << "an endpoint over UCX_TLS=no-such-transport";
  RpcOptions refused;
  auto failing_maker = [](MessageHandler*) -> absl::StatusOr<std::unique_ptr<Transport>> {
    return absl::FailedPreconditionError("no transport here");
  };
  made = RpcEndpoint::CreateOver(refused, failing_maker);
  EXPECT_EQ(made.status(), absl::FailedPreconditionError("no transport here"));
}

}  // namespace
}  // namespace sluice::transport
