// A reader that gives a connection up (Abort) while it reads a payload over libfabric's tcp
// provider: its read goes on (libfabric cannot cancel an fi_read), so the sender must not
// hand the payload's memory out again until that read ended. The sender takes its bootstrap
// socket closing for the reader's death; before, Abort closed it at once, the sender's
// send failed as one to a dead peer, and the memory, refilled, reached the reader as the
// payload it read, whole and OK.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "transport/payload_retention.h"
#include "transport/transport.h"
#include "transport/transport_test_util.h"

namespace sluice::transport {
namespace {

constexpr size_t kPayloadBytes = 256 << 20;  // on its way for a while over loopback

TransportOptions OverTcp() {
  TransportOptions options;
  options.ofi_provider = "tcp;ofi_rxm";
  return options;
}

// Lands the payload in its own buffer, and gives the connection up as soon as it is asked.
class AbortingReader final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId from, absl::string_view,
                                              size_t size) override {
    landing.resize(size);
    transport->Abort(from, absl::UnavailableError("given up by the test"));
    return PayloadDestination{landing.data(), landing.size()};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload payload) override {
    absl::MutexLock lock(&mu);
    if (payload.status.ok()) {
      refilled_bytes = std::count(payload.data, payload.data + payload.size, std::byte{'B'});
    }
    received = payload.status;
  }
  void OnDisconnect(ConnectionId, absl::Status) override {}

  Transport* transport = nullptr;
  std::vector<std::byte> landing;
  absl::Mutex mu;
  std::optional<absl::Status> received ABSL_GUARDED_BY(mu);
  int64_t refilled_bytes ABSL_GUARDED_BY(mu) = 0;
};

TEST(OfiAbortTest, AnAbortingReadersReadEndsBeforeTheSenderReusesThePayload) {
  AbortingReader reader;
  absl::StatusOr<std::unique_ptr<Transport>> receiving = CreateTransport("ofi", OverTcp(), &reader);
  ASSERT_TRUE(receiving.ok()) << receiving.status();
  reader.transport = receiving->get();
  absl::StatusOr<Address> bound = (*receiving)->Listen(Address{"ofi", "127.0.0.1", 0});
  ASSERT_TRUE(bound.ok()) << bound.status();

  NullHandler handler;
  absl::StatusOr<std::unique_ptr<Transport>> sending = CreateTransport("ofi", OverTcp(), &handler);
  ASSERT_TRUE(sending.ok()) << sending.status();
  // A registered region, as a worker's slab pool is: the reader reads straight out of it.
  auto payload = std::make_shared<std::vector<char>>(kPayloadBytes, 'A');
  absl::StatusOr<std::unique_ptr<MemoryRegion>> region =
      (*sending)->RegisterMemory(payload->data(), payload->size());
  ASSERT_TRUE(region.ok()) << region.status();
  absl::StatusOr<ConnectionId> connection = (*sending)->Connect(*bound);
  ASSERT_TRUE(connection.ok()) << connection.status();
  absl::Notification sent;
  absl::Status outcome;
  (*sending)->Send(*connection, "payload", Payload{payload->data(), payload->size()},
                   [&, payload](absl::Status status) {
                     // As a worker refills a slab handed back: unless the peer may still
                     // read it.
                     if (!PayloadMayStillBeRead(status)) {
                       std::fill(payload->begin(), payload->end(), 'B');
                     }
                     outcome = std::move(status);
                     sent.Notify();
                   });
  ASSERT_TRUE(sent.WaitForNotificationWithTimeout(absl::Seconds(60))) << "the send never ended";
  absl::MutexLock lock(&reader.mu);
  ASSERT_TRUE(reader.mu.AwaitWithTimeout(
      absl::Condition(
          +[](std::optional<absl::Status>* received) { return received->has_value(); },
          &reader.received),
      absl::Seconds(60)))
      << "the read never ended";
  if (!reader.received->ok()) GTEST_SKIP() << "the read failed: " << *reader.received;
  EXPECT_EQ(reader.refilled_bytes, 0)
      << "a read reported OK holds bytes written after the send ended (" << outcome << ")";
}

}  // namespace
}  // namespace sluice::transport
