#include "perf/message_ping_pong.h"

#include <atomic>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/destroy_in_place.h"
#include "common/status_macros.h"

namespace sluice::perf {
namespace {

constexpr int64_t kWarmUp = 1000;
constexpr absl::Duration kReplyTimeout = absl::Seconds(10);

// Counts replies without a lock: a caller that drives progress polls the count. Only a
// caller that sleeps (without caller progress) is woken, through the mutex, as a sleeping
// RPC caller would be.
class ReplyCounter final : public transport::MessageHandler {
 public:
  transport::PayloadDestination ChoosePayloadDestination(transport::ConnectionId, absl::string_view,
                                                         size_t) override {
    return {};
  }
  void OnMessage(transport::ConnectionId, absl::string_view, transport::InboundPayload) override {
    replies_.fetch_add(1, std::memory_order_seq_cst);
    // A sleeper re-checks its condition when the mutex is released.
    if (sleeping_.load(std::memory_order_seq_cst)) {
      absl::MutexLock lock(&mu_);
    }
  }
  void OnDisconnect(transport::ConnectionId, absl::Status why) override {
    absl::MutexLock lock(&mu_);
    failure_ = why;
  }

  [[nodiscard]] uint64_t replies() const { return replies_.load(std::memory_order_acquire); }
  // Waits until more than `seen` replies came; the connection's failure, or a timeout.
  [[nodiscard]] absl::Status WaitBeyond(uint64_t seen) {
    sleeping_.store(true, std::memory_order_seq_cst);
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return replies_.load(std::memory_order_seq_cst) > seen || !failure_.ok();
    };
    const bool ready_in_time = mu_.AwaitWithTimeout(absl::Condition(&ready), kReplyTimeout);
    sleeping_.store(false, std::memory_order_relaxed);
    if (!ready_in_time) {
      return absl::DeadlineExceededError(
          absl::StrCat("no echo within ", absl::FormatDuration(kReplyTimeout)));
    }
    return replies() > seen ? absl::OkStatus() : failure_;
  }

 private:
  absl::Mutex mu_;
  std::atomic<uint64_t> replies_{0};
  std::atomic<bool> sleeping_{false};
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

// What one round trip needs, behind one pointer so that the lambdas handed to DriveUntil
// stay within std::function's inline storage (no allocation in the measured loop).
struct RoundTrip {
  transport::Transport* client;
  transport::ConnectionId connection;
  ReplyCounter* counter;
  uint64_t seen = 0;

  absl::Status Run() {
    seen = counter->replies();
    const bool drove = client->DriveUntil([this] { client->Send(connection, "12345678", {}, {}); },
                                          [this] { return counter->replies() > seen; });
    return drove ? absl::OkStatus() : counter->WaitBeyond(seen);
  }
};

}  // namespace

// Not reset: until its destructor has stopped the progress thread (a flush may take
// seconds), an echo may still be sent there through transport_.
MessageEchoServer::~MessageEchoServer() { DestroyInPlace(transport_); }

absl::StatusOr<transport::Address> MessageEchoServer::Start(
    const transport::Address& bind, const transport::TransportOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(transport_, transport::CreateTransport(bind.scheme, options, this));
  return transport_->Listen(bind);
}

void MessageEchoServer::OnMessage(transport::ConnectionId from, absl::string_view header,
                                  transport::InboundPayload) {
  transport_->Send(from, header, {}, {});
}

absl::StatusOr<double> MeasureMessageRoundTrip(const transport::Address& server,
                                               const transport::TransportOptions& options,
                                               int64_t iterations) {
  ReplyCounter counter;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> client,
                          transport::CreateTransport(server.scheme, options, &counter));
  SLUICE_ASSIGN_OR_RETURN(transport::ConnectionId connection, client->Connect(server));
  RoundTrip round_trip{client.get(), connection, &counter};
  for (int64_t i = 0; i < kWarmUp; ++i) SLUICE_RETURN_IF_ERROR(round_trip.Run());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) SLUICE_RETURN_IF_ERROR(round_trip.Run());
  const double total_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return total_us / static_cast<double>(iterations);
}

}  // namespace sluice::perf
