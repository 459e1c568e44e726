// A peer killed in the middle of a rendezvous over libfabric's tcp provider: real
// processes, SIGKILL. A sender killed while the receiver reads its payload: the bytes the
// kernel already holds may still drain into the landing buffer after the bootstrap socket
// reports the death, and libfabric cannot cancel the read, so the read is left to end by
// itself (the provider ends it once it sees its own connection gone) rather than reported
// failed at once and its buffer handed out again while it is written. It must still end,
// and promptly. A receiver killed before it read: a dead process reads nothing, so the
// send's payload is free again at once (not held as one a live peer might still read).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "transport/payload_retention.h"
#include "transport/transport.h"
#include "transport/transport_test_util.h"

namespace sluice::transport {
namespace {

constexpr size_t kPayloadBytes = 512 << 20;  // on its way for a while over loopback

TransportOptions OverTcp() {
  TransportOptions options;
  options.ofi_provider = "tcp;ofi_rxm";
  return options;
}

class Receiver final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    asked.Notify();
    return PayloadDestination{};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload payload) override {
    absl::MutexLock lock(&mu);
    received = payload.status;
  }
  void OnDisconnect(ConnectionId, absl::Status why) override {
    absl::MutexLock lock(&mu);
    disconnect = why;
  }

  absl::Notification asked;
  absl::Mutex mu;
  std::optional<absl::Status> received ABSL_GUARDED_BY(mu);
  std::optional<absl::Status> disconnect ABSL_GUARDED_BY(mu);
};

// The child: connects to the port it reads from `port_fd`, sends one large payload, and
// waits to be killed.
[[noreturn]] void RunSender(int port_fd) {
  int port = 0;
  if (read(port_fd, &port, sizeof(port)) != sizeof(port)) _exit(1);
  const std::vector<char> payload(kPayloadBytes, 'p');
  NullHandler handler;
  absl::StatusOr<std::unique_ptr<Transport>> sender = CreateTransport("ofi", OverTcp(), &handler);
  if (!sender.ok()) _exit(2);
  absl::StatusOr<ConnectionId> connection =
      (*sender)->Connect(Address{"ofi", "127.0.0.1", static_cast<uint16_t>(port)});
  if (!connection.ok()) _exit(3);
  (*sender)->Send(*connection, "payload", Payload{payload.data(), payload.size()}, nullptr);
  absl::SleepFor(absl::Seconds(120));
  _exit(0);
}

TEST(OfiPeerKilledTest, AReadFromAKilledSenderEndsFailedAndItsBufferIsSaidToBeInUse) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    int port_fds[2];
    ASSERT_EQ(pipe(port_fds), 0);
    // Forked before this process starts a transport's threads.
    const pid_t child = fork();
    if (child == 0) {
      close(port_fds[1]);
      RunSender(port_fds[0]);
    }
    close(port_fds[0]);
    Receiver receiver;
    absl::StatusOr<std::unique_ptr<Transport>> transport =
        CreateTransport("ofi", OverTcp(), &receiver);
    ASSERT_TRUE(transport.ok()) << transport.status();
    absl::StatusOr<Address> bound = (*transport)->Listen(Address{"ofi", "127.0.0.1", 0});
    ASSERT_TRUE(bound.ok()) << bound.status();
    const int port = bound->port;
    ASSERT_EQ(write(port_fds[1], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
    close(port_fds[1]);
    const bool asked = receiver.asked.WaitForNotificationWithTimeout(absl::Seconds(30));
    if (asked) absl::SleepFor(absl::Milliseconds(5 * round));
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    ASSERT_TRUE(asked) << "the payload was never offered";

    absl::MutexLock lock(&receiver.mu);
    auto both = [&receiver]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(receiver.mu) {
      return receiver.received.has_value() && receiver.disconnect.has_value();
    };
    ASSERT_TRUE(receiver.mu.AwaitWithTimeout(absl::Condition(&both), absl::Seconds(10)))
        << "read ended: " << receiver.received.has_value()
        << ", disconnect told: " << receiver.disconnect.has_value();
    if (receiver.received->ok()) continue;  // it landed whole before the kill
    // The caller learns to keep a landing buffer for a read in flight until it ends.
    EXPECT_TRUE(receiver.disconnect->GetPayload(kReceivesOutstandingPayload).has_value())
        << *receiver.disconnect;
  }
}

// The child: listens, tells the parent its port, and on the first payload offered tells
// the parent so and stops its progress for good (it never reads), until killed.
class NeverReads final : public MessageHandler {
 public:
  explicit NeverReads(int asked_fd) : asked_fd_(asked_fd) {}
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    const char byte = 1;
    if (write(asked_fd_, &byte, 1) != 1) _exit(4);
    absl::SleepFor(absl::Seconds(120));
    return PayloadDestination{};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload) override {}
  void OnDisconnect(ConnectionId, absl::Status) override {}

 private:
  int asked_fd_;
};

[[noreturn]] void RunReceiver(int port_fd, int asked_fd) {
  NeverReads handler(asked_fd);
  absl::StatusOr<std::unique_ptr<Transport>> receiver = CreateTransport("ofi", OverTcp(), &handler);
  if (!receiver.ok()) _exit(2);
  absl::StatusOr<Address> bound = (*receiver)->Listen(Address{"ofi", "127.0.0.1", 0});
  if (!bound.ok()) _exit(3);
  const int port = bound->port;
  if (write(port_fd, &port, sizeof(port)) != sizeof(port)) _exit(1);
  absl::SleepFor(absl::Seconds(120));
  _exit(0);
}

TEST(OfiPeerKilledTest, ASendToAReceiverKilledBeforeItReadFailsWithItsPayloadFree) {
  int port_fds[2];
  int asked_fds[2];
  ASSERT_EQ(pipe(port_fds), 0);
  ASSERT_EQ(pipe(asked_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(port_fds[0]);
    close(asked_fds[0]);
    RunReceiver(port_fds[1], asked_fds[1]);
  }
  close(port_fds[1]);
  close(asked_fds[1]);
  int port = 0;
  const bool got_port = read(port_fds[0], &port, sizeof(port)) == sizeof(port);
  close(port_fds[0]);
  if (!got_port) kill(child, SIGKILL);
  ASSERT_TRUE(got_port);

  const std::vector<char> payload(1 << 20, 'p');
  NullHandler handler;
  absl::StatusOr<std::unique_ptr<Transport>> sender = CreateTransport("ofi", OverTcp(), &handler);
  ASSERT_TRUE(sender.ok()) << sender.status();
  absl::StatusOr<ConnectionId> connection =
      (*sender)->Connect(Address{"ofi", "127.0.0.1", static_cast<uint16_t>(port)});
  ASSERT_TRUE(connection.ok()) << connection.status();
  absl::Notification sent;
  absl::Status outcome;
  (*sender)->Send(*connection, "payload", Payload{payload.data(), payload.size()},
                  [&](absl::Status status) {
                    outcome = std::move(status);
                    sent.Notify();
                  });
  pollfd asked{asked_fds[0], POLLIN, 0};
  const bool offered = poll(&asked, 1, 30000) == 1;
  close(asked_fds[0]);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_TRUE(offered) << "the payload was never offered";
  ASSERT_TRUE(sent.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(outcome.ok());
  EXPECT_FALSE(PayloadMayStillBeRead(outcome)) << outcome;
}

}  // namespace
}  // namespace sluice::transport
