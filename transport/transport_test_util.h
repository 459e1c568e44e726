// Pieces the transport tests share: a handler that wants nothing, the four loopback
// transports a test runs over, and a wrapper that forwards to a real transport so that a
// test can step into one call or callback of it.
//
//   INSTANTIATE_TEST_SUITE_P(Transports, MyTest, LoopbackCases(), LoopbackCaseName);
//
//   class HoldsSends final : public ForwardingTransport {
//     void Send(...) override { /* hold `done` */ inner().Send(to, header, payload, nullptr); }
//   };
//   RpcEndpoint::CreateOver(options, [&](MessageHandler* endpoint) {
//     return ForwardingTransport::Make<HoldsSends>(options, endpoint);
//   });
#ifndef SLUICE_TRANSPORT_TRANSPORT_TEST_UTIL_H_
#define SLUICE_TRANSPORT_TRANSPORT_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "transport/rpc.h"
#include "transport/transport.h"

namespace sluice::transport {

// Takes any payload onto the heap and ignores every message: a sender's handler.
class NullHandler final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return PayloadDestination{};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload) override {}
  void OnDisconnect(ConnectionId, absl::Status) override {}
};

struct LoopbackCase {
  const char* name;
  const char* scheme;
  const char* setting;  // UCX_TLS, or the libfabric provider
};

// UCX and libfabric, each over shared memory and over tcp.
inline auto LoopbackCases() {
  return ::testing::Values(LoopbackCase{"ucx_shm", "ucx", "posix,sysv,cma,self"},
                           LoopbackCase{"ucx_tcp", "ucx", "tcp,self"},
                           LoopbackCase{"ofi_tcp", "ofi", "tcp;ofi_rxm"},
                           LoopbackCase{"ofi_shm", "ofi", "shm"});
}

inline std::string LoopbackCaseName(const ::testing::TestParamInfo<LoopbackCase>& info) {
  return info.param.name;
}

// Options for `c`; empty (and the test should skip) when this build lacks its transport.
inline std::optional<TransportOptions> OptionsFor(const LoopbackCase& c) {
  TransportOptions options;
  if (std::string(c.scheme) == "ofi") {
#ifndef SLUICE_HAVE_LIBFABRIC
    return std::nullopt;
#endif
    options.ofi_provider = c.setting;
  } else {
    options.ucx_tls = c.setting;
  }
  return options;
}

// A Transport that forwards every call to a real one, which reports to it, and every
// report on to the endpoint it was made for. Subclasses override what they step into; one
// with members of its own calls DestroyInner() first in its destructor, so that the real
// transport's thread stops calling it before those members go.
class ForwardingTransport : public Transport, public MessageHandler {
 public:
  // Makes a T (a subclass, default-constructible) over options.scheme's transport.
  template <typename T>
  static absl::StatusOr<std::unique_ptr<Transport>> Make(const RpcOptions& options,
                                                         MessageHandler* endpoint,
                                                         T** made = nullptr) {
    auto self = std::make_unique<T>();
    self->endpoint_ = endpoint;
    absl::StatusOr<std::unique_ptr<Transport>> inner =
        CreateTransport(options.scheme, options.transport, self.get());
    if (!inner.ok()) return inner.status();
    self->inner_ = *std::move(inner);
    if (made != nullptr) *made = self.get();
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
  bool DrivenByThisThread() const override { return inner_->DrivenByThisThread(); }

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
  }
  void OnTick() override { endpoint_->OnTick(); }

 protected:
  Transport& inner() { return *inner_; }
  MessageHandler& endpoint() { return *endpoint_; }
  void DestroyInner() { inner_.reset(); }

 private:
  MessageHandler* endpoint_ = nullptr;
  std::unique_ptr<Transport> inner_;
};

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_TRANSPORT_TEST_UTIL_H_
