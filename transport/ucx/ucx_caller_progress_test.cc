// A caller that drives a UCX transport while it waits for a reply (caller_driven_progress,
// Transport::DriveUntil): a reply a little late is still taken by that caller, which sleeps
// for it holding the engine rather than handing it to the progress thread; a reply much later
// is left to the progress thread. Real UCX endpoints between two transports in this process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "transport/ucx/ucx_test_pair.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport::ucx {
namespace {

using std::chrono::steady_clock;

// Echoes each message `delay` after it arrived, from a thread of its own (a transport callback
// must not block), as a server whose handler takes a while does.
class LateEcho final : public MessageHandler {
 public:
  explicit LateEcho(std::chrono::microseconds delay) : delay_(delay) {}
  ~LateEcho() override { Stop(); }

  void Serve(Transport* transport) {
    transport_ = transport;
    replier_ = std::thread([this] { Reply(); });
  }
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (replier_.joinable()) replier_.join();
  }

  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId from, absl::string_view header, InboundPayload) override {
    absl::MutexLock lock(&mu_);
    pending_.push_back({from, std::string(header), steady_clock::now() + delay_});
  }
  void OnDisconnect(ConnectionId, absl::Status) override {}

 private:
  struct Pending {
    ConnectionId from;
    std::string header;
    steady_clock::time_point due;
  };

  void Reply() {
    while (true) {
      Pending next;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !pending_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (stopping_) return;
        next = std::move(pending_.front());
        pending_.pop_front();
      }
      std::this_thread::sleep_until(next.due);
      transport_->Send(next.from, next.header, {}, [](absl::Status) {});
    }
  }

  const std::chrono::microseconds delay_;
  Transport* transport_ = nullptr;
  std::thread replier_;
  absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// Notes which thread each reply was handled on.
class ReplyWatcher final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload) override {
    handled_on_ = std::this_thread::get_id();
    replies_.fetch_add(1, std::memory_order_release);
  }
  void OnDisconnect(ConnectionId, absl::Status) override {}

  [[nodiscard]] int replies() const { return replies_.load(std::memory_order_acquire); }
  // Valid once replies() counted the reply.
  [[nodiscard]] std::thread::id handled_on() const { return handled_on_; }

 private:
  std::atomic<int> replies_{0};
  std::thread::id handled_on_;
};

class CallerProgressTest : public ::testing::Test {
 protected:
  void Connect(std::chrono::microseconds reply_delay,
               absl::Duration caller_linger = TransportOptions().caller_linger) {
    TransportOptions options;
    options.ucx_tls = "posix,sysv,cma,self";
    options.caller_driven_progress = true;
    options.caller_linger = caller_linger;
    echo_ = std::make_unique<LateEcho>(reply_delay);
    absl::StatusOr<UcxPair> pair = ConnectUcxPair(options, echo_.get(), &watcher_);
    ASSERT_TRUE(pair.ok()) << pair.status();
    server_ = std::move(pair->server);
    client_ = std::move(pair->client);
    connection_ = pair->connection;
    echo_->Serve(server_.get());
  }

  void TearDown() override {
    if (echo_) echo_->Stop();
    client_.reset();
    server_.reset();
  }

  // One round trip driven by this thread; whether it drove until the reply came.
  bool DrivenRoundTrip() {
    const int before = watcher_.replies();
    return client_->DriveUntil(
        [this] { client_->Send(connection_, "ping", {}, [](absl::Status) {}); },
        [this, before] { return watcher_.replies() > before; });
  }

  // Waits (up to 10 s) for `n` replies in all.
  bool AwaitReplies(int n) {
    auto deadline = steady_clock::now() + std::chrono::seconds(10);
    while (watcher_.replies() < n && steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return watcher_.replies() >= n;
  }

  ReplyWatcher watcher_;
  std::unique_ptr<LateEcho> echo_;
  std::unique_ptr<UcxTransport> server_;
  std::unique_ptr<UcxTransport> client_;
  ConnectionId connection_ = kNoConnection;
};

// 300 µs is six times the caller's spin (spin_before_sleep, 50 µs): before session 20 the
// caller handed the engine back after the spin, and the progress thread took every one of
// these replies. A busy machine (two cores running two test binaries) may delay a reply past
// the caller's 2 ms sleep often, hence ten of up to 200: before, none of them.
TEST_F(CallerProgressTest, AReplyALittleLateIsTakenByTheCallerThatWaitsForIt) {
  Connect(std::chrono::microseconds(300));
  (void)DrivenRoundTrip();  // connects
  ASSERT_TRUE(AwaitReplies(1));
  constexpr int kMaxRoundTrips = 200;
  constexpr int kWanted = 10;
  int driven = 0;
  int trips = 0;
  while (driven < kWanted && trips < kMaxRoundTrips) {
    const bool drove = DrivenRoundTrip();
    ++trips;
    ASSERT_TRUE(AwaitReplies(1 + trips));
    if (drove) {
      ++driven;
      EXPECT_EQ(watcher_.handled_on(), std::this_thread::get_id());
    }
  }
  EXPECT_EQ(driven, kWanted) << driven << " of " << trips
                             << " late replies were taken by the caller";
}

// A reply 300 ms late: the caller gives the engine back long before it (it is not kept from
// the progress thread's other work for the whole wait), and the progress thread takes it.
TEST_F(CallerProgressTest, ACallerHandsTheEngineBackWhenTheReplyIsLongInComing) {
  Connect(std::chrono::milliseconds(300));
  EXPECT_FALSE(DrivenRoundTrip());
  EXPECT_EQ(watcher_.replies(), 0) << "the caller waited for the reply";
  ASSERT_TRUE(AwaitReplies(1));
  EXPECT_NE(watcher_.handled_on(), std::this_thread::get_id());
}

// Between two driven calls the engine is lent and nobody polls it. A send from a thread
// that does not drive (a reader's next fetch, made while it consumes a batch it has) takes
// the lent engine and goes out before Send returns, instead of waiting in the queue for the
// next call or for the parked progress thread to take the engine back (a 10 ms linger here).
TEST_F(CallerProgressTest, ASendWhileTheEngineIsLentGoesOutAtOnce) {
  Connect(std::chrono::microseconds(0), absl::Milliseconds(10));
  (void)DrivenRoundTrip();  // connects
  ASSERT_TRUE(AwaitReplies(1));
  // Counted over driven round trips only: a slow reply hands the engine back, not lent.
  constexpr int kDriven = 20;
  constexpr int kMaxTries = 200;
  int driven = 0;
  int at_once = 0;
  int tries = 0;
  for (; tries < kMaxTries && driven < kDriven; ++tries) {
    const int replies = watcher_.replies();
    if (!DrivenRoundTrip()) {
      ASSERT_TRUE(AwaitReplies(replies + 1));
      continue;
    }
    ++driven;
    ASSERT_EQ(watcher_.replies(), replies + 1);
    const uint64_t sent = client_->stats().messages_sent.load();
    client_->Send(connection_, "ping", {}, [](absl::Status) {});
    if (client_->stats().messages_sent.load() == sent + 1) ++at_once;
    ASSERT_TRUE(AwaitReplies(replies + 2)) << "the send, and its echo, went through";
  }
  // A lent engine is taken back by the parked thread after the linger (10 ms); a machine
  // that preempts this thread that long between the call and the send may see it so.
  ASSERT_EQ(driven, kDriven) << "replies were slow " << tries - driven << " times";
  EXPECT_GE(at_once, driven / 2) << at_once << " of " << driven << " sends went out at once";
}

}  // namespace
}  // namespace sluice::transport::ucx
