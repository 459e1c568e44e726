// One reader that stops reading holds up only what goes to it. A worker serves several
// trainers; one of them stopped in a debugger, swapped out or with its progress thread
// blocked fills its socket, and the sends to it stop completing. libfabric's RDM endpoint
// serves every peer through one transmit queue: those sends used to take every slot, and
// the sends to all other peers were refused and queued behind them (ofi_endpoint.h).
//
// Real transports over loopback, each kind: reader `a` blocks inside its first OnMessage,
// so its progress thread stops reading; the server sends it eager messages until they back
// up, then sends one to reader `b`, which must arrive while `a` is still stalled.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "transport/transport.h"
#include "transport/transport_test_util.h"

namespace sluice::transport {
namespace {

// Records what arrived; when `stall` is set, the first message blocks its OnMessage (and so
// the transport's progress thread) until `stall` is notified.
class Reader final : public MessageHandler {
 public:
  explicit Reader(absl::Notification* stall = nullptr) : stall_(stall) {}

  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return PayloadDestination{};
  }
  void OnMessage(ConnectionId from, absl::string_view header, InboundPayload) override {
    {
      absl::MutexLock lock(&mu_);
      ++messages_;
      last_from_ = from;
      last_header_ = std::string(header);
      numbers_.push_back(std::atoi(last_header_.c_str()));
    }
    if (stall_ != nullptr && !stalled_.exchange(true)) {
      stall_->WaitForNotificationWithTimeout(absl::Seconds(60));
    }
  }
  void OnDisconnect(ConnectionId, absl::Status) override {}

  // Waits until `n` messages arrived or `timeout` passed; returns how many did.
  int WaitForMessages(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return messages_ >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
    return messages_;
  }
  ConnectionId last_from() {
    absl::MutexLock lock(&mu_);
    return last_from_;
  }
  std::string last_header() {
    absl::MutexLock lock(&mu_);
    return last_header_;
  }
  // The number each message's header began with, in the order they arrived.
  std::vector<int> numbers() {
    absl::MutexLock lock(&mu_);
    return numbers_;
  }

 private:
  absl::Notification* stall_;
  std::atomic<bool> stalled_{false};
  absl::Mutex mu_;
  int messages_ ABSL_GUARDED_BY(mu_) = 0;
  ConnectionId last_from_ ABSL_GUARDED_BY(mu_) = kNoConnection;
  std::string last_header_ ABSL_GUARDED_BY(mu_);
  std::vector<int> numbers_ ABSL_GUARDED_BY(mu_);
};

class StalledReaderTest : public ::testing::TestWithParam<LoopbackCase> {};

TEST_P(StalledReaderTest, AStalledReaderDoesNotHoldUpSendsToOthers) {
  const std::optional<TransportOptions> found = OptionsFor(GetParam());
  if (!found.has_value()) {
    GTEST_SKIP() << "built without libfabric (libfabric-dev was not found at configure)";
  }
  const TransportOptions options = *found;
  const char* scheme = GetParam().scheme;
  // Before the transports: the server's send callbacks and sends may use them until it is
  // gone.
  const std::vector<char> payload(8000, 'p');
  std::atomic<int> sent_to_a{0};
  Reader server_handler;
  absl::StatusOr<std::unique_ptr<Transport>> server =
      CreateTransport(scheme, options, &server_handler);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<Address> bound = (*server)->Listen(Address{scheme, "127.0.0.1", 0});
  ASSERT_TRUE(bound.ok()) << bound.status();

  absl::Notification release_a;
  Reader a_handler(&release_a), b_handler;
  absl::StatusOr<std::unique_ptr<Transport>> a = CreateTransport(scheme, options, &a_handler);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<Transport>> b = CreateTransport(scheme, options, &b_handler);
  ASSERT_TRUE(b.ok()) << b.status();
  // However the test ends, a reads again before the transports go (a's would otherwise
  // wait for its progress thread, blocked in OnMessage).
  absl::Cleanup let_a_go = [&release_a] {
    if (!release_a.HasBeenNotified()) release_a.Notify();
  };
  // Each reader says hello, so the server learns its connection.
  ConnectionId to_a = kNoConnection, to_b = kNoConnection;
  for (auto [reader, id] : {std::pair{a->get(), &to_a}, std::pair{b->get(), &to_b}}) {
    absl::StatusOr<ConnectionId> connection = reader->Connect(*bound);
    ASSERT_TRUE(connection.ok()) << connection.status();
    const int before = server_handler.WaitForMessages(0, absl::ZeroDuration());
    reader->Send(*connection, "hello", Payload{}, nullptr);
    ASSERT_EQ(server_handler.WaitForMessages(before + 1, absl::Seconds(10)), before + 1);
    *id = server_handler.last_from();
  }

  // Eager messages to a until the provider refuses them (a's socket is full): those still
  // unsent after a pause are backlogged.
  constexpr int kToA = 4000;
  for (int i = 1; i <= kToA; ++i) {
    std::string header = absl::StrCat(i, ":");
    header.resize(4000, 'h');
    (*server)->Send(to_a, header, Payload{payload.data(), payload.size()},
                    [&sent_to_a](absl::Status) { sent_to_a.fetch_add(1); });
  }
  absl::SleepFor(absl::Seconds(1));
  ASSERT_LT(sent_to_a.load(), kToA) << "a's socket took every message: nothing backed up";

  (*server)->Send(to_b, "for b", Payload{}, nullptr);
  const int got = b_handler.WaitForMessages(1, absl::Seconds(5));
  const int a_sent_meanwhile = sent_to_a.load();
  release_a.Notify();
  EXPECT_EQ(got, 1) << "b waited behind a's sends (" << a_sent_meanwhile << " of " << kToA
                    << " sent to a)";
  EXPECT_EQ(b_handler.last_header(), "for b");
  // a gets all of its messages, in order, once it reads again.
  ASSERT_EQ(a_handler.WaitForMessages(kToA, absl::Seconds(30)), kToA);
  std::vector<int> numbers = a_handler.numbers();
  std::vector<int> in_order(kToA);
  std::iota(in_order.begin(), in_order.end(), 1);
  EXPECT_EQ(numbers, in_order);
}

INSTANTIATE_TEST_SUITE_P(Transports, StalledReaderTest, LoopbackCases(), LoopbackCaseName);

}  // namespace
}  // namespace sluice::transport
