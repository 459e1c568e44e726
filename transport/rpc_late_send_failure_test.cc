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
#include "transport/transport_test_util.h"

namespace sluice::transport {
namespace {

constexpr uint32_t kBig = 1;
constexpr size_t kReplyBytes = 1 << 20;  // rendezvous on every transport

class FailsRequestSendsLate final : public ForwardingTransport {
 public:
  ~FailsRequestSendsLate() override { DestroyInner(); }

  void Send(ConnectionId to, absl::string_view header, Payload payload,
            SendCallback done) override {
    {
      absl::MutexLock lock(&mu_);
      held_ = std::move(done);
    }
    inner().Send(to, header, payload, nullptr);
  }
  PayloadDestination ChoosePayloadDestination(ConnectionId from, absl::string_view header,
                                              size_t payload_size) override {
    const PayloadDestination destination =
        ForwardingTransport::ChoosePayloadDestination(from, header, payload_size);
    SendCallback held;
    {
      absl::MutexLock lock(&mu_);
      held = std::move(held_);
    }
    if (held) held(absl::UnavailableError("the request's acknowledgement went with the peer"));
    return destination;
  }

 private:
  absl::Mutex mu_;
  SendCallback held_ ABSL_GUARDED_BY(mu_);
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
        return ForwardingTransport::Make<FailsRequestSendsLate>(options, endpoint);
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
