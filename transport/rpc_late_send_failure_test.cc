// A request whose send is reported failed after its reply has begun to land. libfabric
// completes a rendezvous send only when the receiver's "done" comes back; a peer that
// dies, or is given up on (Abort), after it answered takes that "done" with it, so the
// request's send fails while the reply's payload is still being read into the caller's
// landing buffer. The call must not end then: the buffer would be handed out again while
// the read still writes it, and the reply proves the request got through.
//
// Made certain with a thin wrapper over the real transport: it holds back the request's
// send callback and runs it, failed, right after the reply's payload was given its
// landing buffer.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "transport/rpc.h"

namespace sluice::transport {
namespace {

constexpr uint32_t kBig = 1;
constexpr size_t kReplyBytes = 1 << 20;  // rendezvous on every transport

class FailsRequestSendsLate final : public Transport, public MessageHandler {
 public:
  static absl::StatusOr<std::unique_ptr<Transport>> Make(const RpcOptions& options,
                                                         MessageHandler* endpoint) {
    auto self = std::unique_ptr<FailsRequestSendsLate>(new FailsRequestSendsLate());
    self->endpoint_ = endpoint;
    absl::StatusOr<std::unique_ptr<Transport>> inner =
        CreateTransport(options.scheme, options.transport, self.get());
    if (!inner.ok()) return inner.status();
    self->inner_ = *std::move(inner);
    return std::unique_ptr<Transport>(std::move(self));
  }

  // Transport
  absl::string_view scheme() const override { return inner_->scheme(); }
  std::string Describe() const override { return inner_->Describe(); }
  absl::StatusOr<Address> Listen(const Address& bind) override { return inner_->Listen(bind); }
  void StopConnecting() override { inner_->StopConnecting(); }
  absl::StatusOr<ConnectionId> ConnectBefore(const Address& peer, absl::Time before) override {
    return inner_->ConnectBefore(peer, before);
  }
  void Send(ConnectionId to, absl::string_view header, Payload payload,
            SendCallback done) override {
    {
      absl::MutexLock lock(&mu_);
      held_ = std::move(done);
    }
    inner_->Send(to, header, payload, nullptr);
  }
  void Close(ConnectionId connection) override { inner_->Close(connection); }
  void Abort(ConnectionId connection, absl::Status why) override {
    inner_->Abort(connection, std::move(why));
  }
  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* base, size_t size) override {
    return inner_->RegisterMemory(base, size);
  }
  size_t max_header_size() const override { return inner_->max_header_size(); }
  const TransportStats& stats() const override { return inner_->stats(); }
  bool DrivenByThisThread() const override { return inner_->DrivenByThisThread(); }

  // MessageHandler
  PayloadDestination ChoosePayloadDestination(ConnectionId from, absl::string_view header,
                                              size_t payload_size) override {
    const PayloadDestination destination =
        endpoint_->ChoosePayloadDestination(from, header, payload_size);
    SendCallback held;
    {
      absl::MutexLock lock(&mu_);
      held = std::move(held_);
    }
    if (held) held(absl::UnavailableError("the request's acknowledgement went with the peer"));
    return destination;
  }
  void OnMessage(ConnectionId from, absl::string_view header, InboundPayload payload) override {
    endpoint_->OnMessage(from, header, std::move(payload));
  }
  void OnDisconnect(ConnectionId connection, absl::Status why) override {
    endpoint_->OnDisconnect(connection, std::move(why));
  }
  void OnTick() override { endpoint_->OnTick(); }

 private:
  FailsRequestSendsLate() = default;

  MessageHandler* endpoint_ = nullptr;
  absl::Mutex mu_;
  SendCallback held_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Transport> inner_;
};

class RpcLateSendFailureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RpcLateSendFailureTest, ACallWhoseReplyIsLandingOutlivesItsRequestsFailedSend) {
  RpcOptions options;
  options.scheme = GetParam();
  const std::string reply(kReplyBytes, 'r');
  absl::StatusOr<std::unique_ptr<RpcEndpoint>> server = RpcEndpoint::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Handle(kBig, [&reply](std::shared_ptr<ServerCall> call) {
    call->Reply(absl::OkStatus(), "big", Payload{reply.data(), reply.size()});
  });
  absl::StatusOr<Address> bound = (*server)->Listen(Address{options.scheme, "127.0.0.1", 0});
  ASSERT_TRUE(bound.ok()) << bound.status();
  absl::StatusOr<std::unique_ptr<RpcEndpoint>> client =
      RpcEndpoint::CreateOver(options, [&options](MessageHandler* endpoint) {
        return FailsRequestSendsLate::Make(options, endpoint);
      });
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<ConnectionId> connection = (*client)->ConnectTo(*bound);
  ASSERT_TRUE(connection.ok()) << connection.status();

  std::vector<char> landing(2 * kReplyBytes);
  CallOptions call_options;
  call_options.landing = PayloadDestination{landing.data(), landing.size()};
  absl::StatusOr<CallResult> result = (*client)->Call(*connection, kBig, "", call_options);
  ASSERT_TRUE(result.ok()) << result.status() << " (failed while its reply was landing)";
  EXPECT_EQ(result->payload.size, kReplyBytes);
  EXPECT_EQ(std::string(landing.data(), kReplyBytes), reply);
}

INSTANTIATE_TEST_SUITE_P(Transports, RpcLateSendFailureTest, ::testing::Values("ucx"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace sluice::transport
