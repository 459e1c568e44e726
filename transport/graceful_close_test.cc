// A receiver that closes a connection while payloads from it are still landing tells the
// sender the truth about each one: a payload the receiver got whole is a send that
// succeeded. libfabric's receiver used to close its bootstrap socket as soon as its last
// read ended, before the acknowledgements of those reads (kReadDone) had left; the sender
// took the hang-up for the end of everything and failed the sends it had no
// acknowledgement for yet, though they were read and delivered.
//
// Real transports over loopback, each kind: the sender sends many large payloads at once;
// the receiver closes the connection on the first one to land.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "transport/transport.h"
#include "transport/transport_test_util.h"

namespace sluice::transport {
namespace {

constexpr int kPayloads = 48;
constexpr size_t kPayloadBytes = 256 << 10;  // far above every transport's eager limit

// Closes the connection its first payload came on; records which payloads came whole.
class ClosingReceiver final : public MessageHandler {
 public:
  void set_transport(Transport* transport) { transport_ = transport; }
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return PayloadDestination{};  // on the heap
  }
  void OnMessage(ConnectionId from, absl::string_view header, InboundPayload payload) override {
    int number = 0;
    if (!absl::SimpleAtoi(header, &number)) return;
    if (!closed_.exchange(true)) transport_->Close(from);
    if (!payload.status.ok() || payload.size != kPayloadBytes) return;
    absl::MutexLock lock(&mu_);
    whole_.insert(number);
  }
  void OnDisconnect(ConnectionId, absl::Status) override {}
  std::set<int> whole() {
    absl::MutexLock lock(&mu_);
    return whole_;
  }

 private:
  Transport* transport_ = nullptr;
  std::atomic<bool> closed_{false};
  absl::Mutex mu_;
  std::set<int> whole_ ABSL_GUARDED_BY(mu_);
};

class GracefulCloseTest : public ::testing::TestWithParam<LoopbackCase> {};

TEST_P(GracefulCloseTest, EveryPayloadTheReceiverGotIsASendThatSucceeded) {
  const char* scheme = GetParam().scheme;
  const std::optional<TransportOptions> found = OptionsFor(GetParam());
  if (!found.has_value()) {
    GTEST_SKIP() << "built without libfabric (libfabric-dev was not found at configure)";
  }
  const TransportOptions options = *found;
  // Declared before the transports: callbacks may use them until both are gone.
  const std::vector<char> payload(kPayloadBytes, 'p');
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    absl::Mutex mu;
    std::map<int, absl::Status> outcomes;  // guarded by mu
    ClosingReceiver receiver_handler;
    NullHandler sender_handler;
    absl::StatusOr<std::unique_ptr<Transport>> receiver =
        CreateTransport(scheme, options, &receiver_handler);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_handler.set_transport(receiver->get());
    absl::StatusOr<Address> bound = (*receiver)->Listen(Address{scheme, "127.0.0.1", 0});
    ASSERT_TRUE(bound.ok()) << bound.status();
    absl::StatusOr<std::unique_ptr<Transport>> sender =
        CreateTransport(scheme, options, &sender_handler);
    ASSERT_TRUE(sender.ok()) << sender.status();
    absl::StatusOr<ConnectionId> connection = (*sender)->Connect(*bound);
    ASSERT_TRUE(connection.ok()) << connection.status();

    for (int i = 0; i < kPayloads; ++i) {
      (*sender)->Send(*connection, absl::StrCat(i), Payload{payload.data(), payload.size()},
                      [&mu, &outcomes, i](absl::Status status) {
                        absl::MutexLock lock(&mu);
                        outcomes[i] = std::move(status);
                      });
    }
    {
      absl::MutexLock lock(&mu);
      auto all_told = [&outcomes] { return outcomes.size() == kPayloads; };
      ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all_told), absl::Seconds(30)))
          << outcomes.size() << " of " << kPayloads << " sends were told their outcome";
    }
    const std::set<int> whole = receiver_handler.whole();
    ASSERT_FALSE(whole.empty()) << "the payload the receiver closed on did not land";
    absl::MutexLock lock(&mu);
    for (int number : whole) {
      EXPECT_TRUE(outcomes[number].ok())
          << "payload " << number << " landed whole, but its send was told " << outcomes[number];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, GracefulCloseTest, LoopbackCases(), LoopbackCaseName);

}  // namespace
}  // namespace sluice::transport
