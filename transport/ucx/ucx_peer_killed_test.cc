// A peer killed in the middle of an exchange over UCX's shared memory (where UCX itself does
// not watch peers): real processes, SIGKILL. A sender killed mid-message must not stall what
// other peers send to the same receiver (ucx_queue_probe.h); sends to a receiver killed
// before it took them must still complete, so that their payloads are free again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport::ucx {
namespace {

constexpr char kSharedMemory[] = "posix,sysv,cma,self";
// The stall needs a kill between a sender's claim of a FIFO element and its flip, that is,
// while it copies into the element. With UCX's default 8 KiB elements that copy is a small
// part of a sender's time: a kill landed there in 15-20% of rounds on an idle 2-core VM,
// 7% with a second copy of the test running beside it, and in none of 40 rounds in one CI
// run. With 64 KiB elements the copy dominates: 50% idle, 25-35% beside a second copy.
constexpr char kFifoElementBytes[] = "65536";
constexpr size_t kStreamPayload = 60000;  // eager, one FIFO element per message

// Counts what arrives from the two peers: the first connection to say "stream" or "ping".
class Counter final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId, absl::string_view header, InboundPayload) override {
    if (header == "ping") pings_.fetch_add(1);
    if (header == "stream") streamed_.fetch_add(1);
  }
  void OnDisconnect(ConnectionId, absl::Status) override { disconnects_.fetch_add(1); }

  std::atomic<int64_t> pings_{0};
  std::atomic<int64_t> streamed_{0};
  std::atomic<int> disconnects_{0};
};

// A sender's handler: only whether its connection ended.
class SenderHandler final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload) override {}
  void OnDisconnect(ConnectionId, absl::Status) override { disconnected_.store(true); }

  std::atomic<bool> disconnected_{false};
};

// Child: connects to 127.0.0.1:port and sends forever, `header` messages with `payload_bytes`
// each, at most 64 in flight; a ping every 2 ms when `pace`. Reconnects when disconnected.
[[noreturn]] void RunSender(int port_fd, const char* header, size_t payload_bytes, bool pace) {
  uint16_t port = 0;
  if (read(port_fd, &port, sizeof(port)) != sizeof(port)) _exit(2);
  SenderHandler handler;
  TransportOptions options;
  options.ucx_tls = kSharedMemory;
  // Eager, in 8 KiB fragments copied into the receiver's FIFO elements.
  options.rendezvous_threshold = 1 << 20;
  setenv("UCX_RNDV_THRESH", "inf", 1);
  auto transport = UcxTransport::Create(options, &handler);
  if (!transport.ok()) _exit(3);
  const Address receiver{"ucx", "127.0.0.1", port};
  auto connection = (*transport)->Connect(receiver);
  if (!connection.ok()) _exit(4);
  std::vector<std::byte> payload(payload_bytes, std::byte{7});
  std::atomic<int> in_flight{0};
  while (true) {
    if (handler.disconnected_.exchange(false)) {
      connection = (*transport)->Connect(receiver);
      if (!connection.ok()) _exit(5);
    }
    if (in_flight.load() >= 64) {
      absl::SleepFor(absl::Microseconds(20));
      continue;
    }
    in_flight.fetch_add(1);
    (*transport)
        ->Send(*connection, header, Payload{payload.data(), payload.size()},
               [&](absl::Status) { in_flight.fetch_sub(1); });
    if (pace) absl::SleepFor(absl::Milliseconds(2));
  }
}

pid_t ForkSender(int port_fds[2], const char* header, size_t payload_bytes, bool pace) {
  pid_t child = fork();
  if (child == 0) {
    close(port_fds[1]);
    RunSender(port_fds[0], header, payload_bytes, pace);
  }
  close(port_fds[0]);
  return child;
}

// Sets an environment variable for its lifetime, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool Eventually(const std::function<bool()>& done, absl::Duration within) {
  const absl::Time deadline = absl::Now() + within;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// Rounds until the stall has been seen (and cured) a few times.
TEST(UcxPeerKilledTest, OtherSendersGetThroughAgainAfterTheQueueStalls) {
  // Read by every UCX context made from here on, the senders' (forked) included; all sides
  // must agree on the element size.
  ScopedEnv posix_elements("UCX_POSIX_SEG_SIZE", kFifoElementBytes);
  ScopedEnv sysv_elements("UCX_SYSV_SEG_SIZE", kFifoElementBytes);
  constexpr int kMaxRounds = 40;
  constexpr uint64_t kEnoughRestarts = 2;
  uint64_t restarts = 0;
  int rounds = 0;
  for (; rounds < kMaxRounds && restarts < kEnoughRestarts; ++rounds) {
    int stream_fds[2], ping_fds[2];
    ASSERT_EQ(pipe(stream_fds), 0);
    ASSERT_EQ(pipe(ping_fds), 0);
    const pid_t streamer = ForkSender(stream_fds, "stream", kStreamPayload, false);
    const pid_t pinger = ForkSender(ping_fds, "ping", 0, true);
    Counter counter;
    TransportOptions options;
    options.ucx_tls = kSharedMemory;
    auto receiver = UcxTransport::Create(options, &counter);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    auto address = (*receiver)->Listen(Address{"ucx", "127.0.0.1", 0});
    ASSERT_TRUE(address.ok()) << address.status();
    const uint16_t port = address->port;
    ASSERT_EQ(write(stream_fds[1], &port, sizeof(port)), sizeof(port));
    ASSERT_EQ(write(ping_fds[1], &port, sizeof(port)), sizeof(port));
    ASSERT_TRUE(Eventually([&] { return counter.streamed_ > 1000 && counter.pings_ > 10; },
                           absl::Seconds(10)));
    absl::SleepFor(absl::Milliseconds(rounds * 7 % 50));
    kill(streamer, SIGKILL);
    waitpid(streamer, nullptr, 0);
    // The streamer's death is noticed even while the stuck queue keeps the worker busy.
    EXPECT_TRUE(Eventually([&] { return counter.disconnects_ > 0; }, absl::Seconds(5)));
    const int64_t pings = counter.pings_;
    EXPECT_TRUE(Eventually([&] { return counter.pings_ > pings + 20; }, absl::Seconds(10)))
        << "round " << rounds << ": the pinger's messages stopped after the streamer's death";
    restarts += (*receiver)->stats().worker_restarts.load();
    kill(pinger, SIGKILL);
    waitpid(pinger, nullptr, 0);
    receiver->reset();
    close(stream_fds[1]);
    close(ping_fds[1]);
    if (HasFailure()) break;
  }
  EXPECT_GE(restarts, 1u) << "no kill stalled the queue in " << rounds
                          << " rounds: the cure was not exercised";
}

// The child listens, then is stopped before it can take the parent's rendezvous sends, then
// killed: UCX never completes those sends (no peer watch, and UCX 1.13 refuses to close such
// an endpoint by force), so the transport must, once the bootstrap socket says the peer died.
TEST(UcxPeerKilledTest, SendsToAReceiverKilledBeforeTakingThemComplete) {
  int port_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(port_pipe[0]);
    Counter counter;
    TransportOptions options;
    options.ucx_tls = kSharedMemory;
    auto transport = UcxTransport::Create(options, &counter);
    auto address = transport.ok() ? (*transport)->Listen(Address{"ucx", "127.0.0.1", 0})
                                  : absl::StatusOr<Address>(transport.status());
    const uint16_t port = address.ok() ? address->port : 0;
    (void)!write(port_pipe[1], &port, sizeof(port));
    while (true) absl::SleepFor(absl::Seconds(1));
  }
  close(port_pipe[1]);
  uint16_t port = 0;
  ASSERT_EQ(read(port_pipe[0], &port, sizeof(port)), sizeof(port));
  close(port_pipe[0]);
  ASSERT_NE(port, 0);

  SenderHandler handler;
  // Before the sender: should a check below fail, its destruction may still complete sends,
  // which read the payload and count into these.
  constexpr int kSends = 4;
  std::vector<std::byte> payload(1 << 20, std::byte{1});  // rendezvous
  std::atomic<int> completed{0};
  std::atomic<int> failed{0};
  std::atomic<bool> refused{false};
  TransportOptions options;
  options.ucx_tls = kSharedMemory;
  auto sender = UcxTransport::Create(options, &handler);
  ASSERT_TRUE(sender.ok()) << sender.status();
  auto connection = (*sender)->Connect(Address{"ucx", "127.0.0.1", port});
  ASSERT_TRUE(connection.ok()) << connection.status();
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  // kill() returns before the child stops: on a busy machine its progress thread could
  // still take the first payload (one CI run saw a send complete). Wait until it stopped.
  int stopped_status = 0;
  ASSERT_EQ(waitpid(child, &stopped_status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(stopped_status));
  for (int i = 0; i < kSends; ++i) {
    (*sender)->Send(*connection, "batch", Payload{payload.data(), payload.size()},
                    [&](absl::Status status) {
                      if (!status.ok()) failed.fetch_add(1);
                      completed.fetch_add(1);
                    });
  }
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(completed.load(), 0) << "a stopped receiver cannot have taken a rendezvous payload";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(Eventually([&] { return completed.load() == kSends; }, absl::Seconds(5)))
      << completed.load() << " of " << kSends << " sends completed after the receiver died";
  EXPECT_EQ(failed.load(), kSends);
  EXPECT_TRUE(Eventually([&] { return handler.disconnected_.load(); }, absl::Seconds(2)));
  // The connection is gone for good: a later send fails at once.
  (*sender)->Send(*connection, "late", {}, [&](absl::Status status) { refused = !status.ok(); });
  EXPECT_TRUE(Eventually([&] { return refused.load(); }, absl::Seconds(2)));
}

}  // namespace
}  // namespace sluice::transport::ucx
