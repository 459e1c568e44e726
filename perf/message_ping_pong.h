// Round trips of bare Transport messages (Send and MessageHandler::OnMessage, no RPC), to
// tell what the transport layer costs over UCX apart from what a control call adds.
//
// `sluice-perf transport` reports both: `latency_us` is an RPC (request ids, deadlines,
// a handler, a status) and `message_latency_us` is this: an 8-byte message echoed by the
// peer's progress thread, its reply handled by the caller that drives progress (with
// caller progress) or by the progress thread (without).
//
//   MessageEchoServer echo;
//   absl::StatusOr<Address> bound = echo.Start(bind, options);   // serves until destroyed
//   absl::StatusOr<double> us = MeasureMessageRoundTrip(*bound, options, 20000);
#ifndef SLUICE_PERF_MESSAGE_PING_PONG_H_
#define SLUICE_PERF_MESSAGE_PING_PONG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "transport/address.h"
#include "transport/transport.h"

namespace sluice::perf {

// Sends every message it receives back to its sender, header only, from the thread that
// drives its transport.
class MessageEchoServer final : public transport::MessageHandler {
 public:
  MessageEchoServer() = default;
  ~MessageEchoServer() override;
  [[nodiscard]] absl::StatusOr<transport::Address> Start(
      const transport::Address& bind, const transport::TransportOptions& options);

  transport::PayloadDestination ChoosePayloadDestination(transport::ConnectionId, absl::string_view,
                                                         size_t) override {
    return {};
  }
  void OnMessage(transport::ConnectionId from, absl::string_view header,
                 transport::InboundPayload payload) override;
  void OnDisconnect(transport::ConnectionId, absl::Status) override {}

 private:
  std::unique_ptr<transport::Transport> transport_;
};

// Mean round trip in microseconds of `iterations` sequential 8-byte messages to `server`
// (after 1,000 unmeasured ones).
[[nodiscard]] absl::StatusOr<double> MeasureMessageRoundTrip(
    const transport::Address& server, const transport::TransportOptions& options,
    int64_t iterations);

}  // namespace sluice::perf

#endif  // SLUICE_PERF_MESSAGE_PING_PONG_H_
