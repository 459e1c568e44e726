// RpcEndpoint::ConnectTo when the transport reports a new connection gone before Connect
// has even returned it (the peer died as it was reached): the endpoint must not record that
// connection as the peer's live one, or every later call to the peer would go to a dead id.
//
// The race is made certain, not hoped for: the real transport runs under a thin wrapper
// that, inside Connect, aborts the connection it just made and waits until the transport's
// own OnDisconnect for it has reached the endpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "transport/rpc.h"

namespace sluice::transport {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kEcho = 1;

// Forwards to a real transport, which reports to this object; this object forwards to the
// endpoint. While `lose_next_connection` is set, Connect gives up the connection it made and
// returns it only once the endpoint has been told it is gone.
class LosesConnectionsAsTheyOpen final : public Transport, public MessageHandler {
 public:
  static absl::StatusOr<std::unique_ptr<Transport>> Make(const RpcOptions& options,
                                                         MessageHandler* endpoint,
                                                         LosesConnectionsAsTheyOpen** made) {
    auto self = std::unique_ptr<LosesConnectionsAsTheyOpen>(new LosesConnectionsAsTheyOpen());
    self->endpoint_ = endpoint;
    auto inner = CreateTransport(options.scheme, options.transport, self.get());
    if (!inner.ok()) return inner.status();
    self->inner_ = *std::move(inner);
    *made = self.get();
    return std::unique_ptr<Transport>(std::move(self));
  }

  void LoseNextConnection() {
    absl::MutexLock lock(&mu_);
    lose_next_ = true;
  }

  // Transport
  absl::string_view scheme() const override { return inner_->scheme(); }
  std::string Describe() const override { return inner_->Describe(); }
  absl::StatusOr<Address> Listen(const Address& bind) override { return inner_->Listen(bind); }
  absl::StatusOr<ConnectionId> Connect(const Address& peer) override {
    absl::StatusOr<ConnectionId> id = inner_->Connect(peer);
    if (!id.ok()) return id;
    {
      absl::MutexLock lock(&mu_);
      if (!std::exchange(lose_next_, false)) return id;
      losing_ = *id;
    }
    // Not under mu_: a transport may report the abort from within Abort.
    inner_->Abort(*id, absl::UnavailableError("the peer died as it was reached"));
    absl::MutexLock lock(&mu_);
    auto told = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return losing_ == kNoConnection; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&told), absl::Seconds(10))) {
      return absl::DeadlineExceededError("the transport never reported the aborted connection");
    }
    return id;
  }
  void Send(ConnectionId to, absl::string_view header, Payload payload,
            SendCallback done) override {
    inner_->Send(to, header, payload, std::move(done));
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

  // MessageHandler
  PayloadDestination ChoosePayloadDestination(ConnectionId from, absl::string_view header,
                                              size_t payload_size) override {
    return endpoint_->ChoosePayloadDestination(from, header, payload_size);
  }
  void OnMessage(ConnectionId from, absl::string_view header, InboundPayload payload) override {
    endpoint_->OnMessage(from, header, std::move(payload));
  }
  void OnDisconnect(ConnectionId connection, absl::Status why) override {
    endpoint_->OnDisconnect(connection, std::move(why));
    absl::MutexLock lock(&mu_);
    if (connection == losing_) losing_ = kNoConnection;
  }
  void OnTick() override { endpoint_->OnTick(); }

 private:
  LosesConnectionsAsTheyOpen() = default;

  MessageHandler* endpoint_ = nullptr;
  absl::Mutex mu_;
  bool lose_next_ ABSL_GUARDED_BY(mu_) = false;
  ConnectionId losing_ ABSL_GUARDED_BY(mu_) = kNoConnection;
  // Last: destroyed first, as its shutdown may still report to OnDisconnect, which locks mu_.
  std::unique_ptr<Transport> inner_;
};

struct Case {
  const char* name;
  const char* scheme;
  const char* setting;  // UCX_TLS, or the libfabric provider
};

class RpcConnectTest : public ::testing::TestWithParam<Case> {};

TEST_P(RpcConnectTest, AConnectionReportedGoneBeforeItIsRecordedIsNotHandedOut) {
  const bool ofi = std::string(GetParam().scheme) == "ofi";
#ifndef SLUICE_HAVE_LIBFABRIC
  if (ofi) GTEST_SKIP() << "built without libfabric (libfabric-dev was not found at configure)";
#endif
  RpcOptions options;
  options.scheme = GetParam().scheme;
  (ofi ? options.transport.ofi_provider : options.transport.ucx_tls) = GetParam().setting;
  auto server = RpcEndpoint::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Handle(kEcho, [](std::shared_ptr<ServerCall> call) {
    call->Reply(absl::OkStatus(), absl::StrCat("echo:", call->request()));
  });
  auto address = (*server)->Listen(Address{GetParam().scheme, "127.0.0.1", 0});
  ASSERT_TRUE(address.ok()) << address.status();

  LosesConnectionsAsTheyOpen* transport = nullptr;
  auto client = RpcEndpoint::CreateOver(options, [&](MessageHandler* endpoint) {
    return LosesConnectionsAsTheyOpen::Make(options, endpoint, &transport);
  });
  ASSERT_TRUE(client.ok()) << client.status();

  transport->LoseNextConnection();
  auto lost = (*client)->ConnectTo(*address);
  ASSERT_FALSE(lost.ok()) << "connection " << *lost << " was handed out after it was reported gone";
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_THAT(lost.status().message(), HasSubstr("closed as it opened"));
  EXPECT_THAT(lost.status().message(), HasSubstr("the peer died as it was reached"));

  // The next attempt connects afresh, and that connection works and is kept.
  auto again = (*client)->ConnectTo(*address);
  ASSERT_TRUE(again.ok()) << again.status();
  auto echo = (*client)->Call(*again, kEcho, "after", {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->response.view(), "echo:after");
  auto kept = (*client)->ConnectTo(*address);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, *again);
}

INSTANTIATE_TEST_SUITE_P(Transports, RpcConnectTest,
                         ::testing::Values(Case{"shm", "ucx", "posix,sysv,cma,self"},
                                           Case{"tcp", "ucx", "tcp,self"},
                                           Case{"ofi_tcp", "ofi", "tcp;ofi_rxm"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace sluice::transport
