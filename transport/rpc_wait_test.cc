// How a caller waits for its reply: driving the transport itself (caller-driven progress),
// polling before it sleeps (TransportOptions::wait_spin), or sleeping while the progress
// thread receives; with several callers at once and replies slower than any spin. Over
// every transport of rpc_test_fixture.h.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "transport/rpc.h"
#include "transport/rpc_test_fixture.h"

namespace sluice::transport {
namespace {

class RpcWaitTest : public RpcTest {};

// With caller-driven progress a synchronous caller handles its own reply; without it (and on
// libfabric, which does not offer it) the progress thread does.
TEST_P(RpcWaitTest, CallerDrivesProgressOnlyWhenAskedTo) {
  // A driver gives up after spin_before_sleep without events. With the default 50 µs, a
  // loaded CI machine (other test binaries spinning on the same two vCPUs) delayed every one
  // of 20 replies past it; 20 ms keeps this test about who drives, not about timing.
  RpcOptions patient = options_;
  patient.transport.spin_before_sleep = absl::Milliseconds(20);
  patient.transport.max_spin_before_sleep = absl::Milliseconds(20);
  auto created = RpcEndpoint::Create(patient);
  ASSERT_TRUE(created.ok()) << created.status();
  client_ = std::move(*created);
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  // Some replies may still be handled by the progress thread; count over several calls.
  int drove_calls = 0;
  for (int call = 0; call < 20; ++call) {
    // Shared with the callback, which may run after a failed check left the test.
    struct Reply {
      absl::Notification done;
      std::thread::id replied_on;
    };
    auto reply = std::make_shared<Reply>();
    const bool drove = client_->transport().DriveUntil(
        [&] {
          client_->CallAsync(*connection, kEcho, "x", {}, [reply](absl::StatusOr<CallResult> r) {
            EXPECT_TRUE(r.ok()) << r.status();
            reply->replied_on = std::this_thread::get_id();
            reply->done.Notify();
          });
        },
        [&] { return reply->done.HasBeenNotified(); });
    ASSERT_TRUE(reply->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    if (drove) {
      ++drove_calls;
      // While this thread holds the worker, no other thread runs its callbacks.
      EXPECT_EQ(reply->replied_on, std::this_thread::get_id());
    } else {
      EXPECT_NE(reply->replied_on, std::this_thread::get_id());
    }
  }
  if (GetParam().caller_driven) {
    EXPECT_GT(drove_calls, 0);
  } else {
    EXPECT_EQ(drove_calls, 0);
  }
}

TEST_P(RpcWaitTest, ConcurrentCallersAndSlowRepliesAllComplete) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  std::vector<std::thread> callers;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        const std::string text = std::to_string(t) + "/" + std::to_string(i);
        const bool slow = i % 50 == 0;  // a few replies outlast any spin
        auto result = client_->Call(*connection, slow ? kSlowEcho : kEcho, text, {});
        if (result.ok() && result->response == (slow ? "slow:" : "echo:") + text) ++good;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(good.load(), 4 * 150);
}

// A caller that polls for its reply first (TransportOptions::wait_spin; 5 ms, so that most
// replies come within it even on a busy machine) gets every reply: those that came while it
// polled, a slow one it went to sleep for, and a failure. A caller that drives the transport
// waits on its own thread and does not spin.
TEST_P(RpcWaitTest, ACallerThatSpinsFirstGetsEveryReply) {
  RpcOptions spinning = options_;
  spinning.transport.wait_spin = absl::Milliseconds(5);
  auto client = RpcEndpoint::Create(spinning);
  ASSERT_TRUE(client.ok()) << client.status();
  const bool spins = !GetParam().caller_driven;
  EXPECT_EQ((*client)->wait_spin(), spins ? absl::Milliseconds(5) : absl::ZeroDuration());
  auto connection = (*client)->ConnectTo(address_);
  ASSERT_TRUE(connection.ok()) << connection.status();
  int good = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string text = std::to_string(i);
    const bool slow = i % 100 == 99;  // 50 ms: past the spin
    auto result = (*client)->Call(*connection, slow ? kSlowEcho : kEcho, text, {});
    if (result.ok() && result->response == (slow ? "slow:" : "echo:") + text) ++good;
  }
  EXPECT_EQ(good, 300);
  auto unknown = (*client)->Call(*connection, 999, "", {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  if (spins) {
    EXPECT_GT((*client)->replies_taken_spinning(), 0) << "no reply came while the caller polled";
  } else {
    EXPECT_EQ((*client)->replies_taken_spinning(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RpcWaitTest, AllTransportCases(), TransportCaseName);

}  // namespace
}  // namespace sluice::transport
