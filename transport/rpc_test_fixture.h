// The fixture shared by the RPC tests: a server and a client endpoint, each with its own
// transport context and progress thread, over every transport this build has (UCX over
// shared memory and TCP on loopback, with the progress thread or the caller driving it;
// libfabric's tcp;ofi_rxm and shm providers when built with libfabric).
//
//   TEST_P(RpcTest, Something) {
//     auto connection = client_->ConnectTo(address_);
//     auto reply = client_->Call(*connection, kEcho, "hi", {});
//   }
//   INSTANTIATE_TEST_SUITE_P(Transports, RpcTest, AllTransportCases(), TransportCaseName);
#ifndef SLUICE_TRANSPORT_RPC_TEST_FIXTURE_H_
#define SLUICE_TRANSPORT_RPC_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transport/rpc.h"

namespace sluice::transport {

constexpr uint32_t kEcho = 1;
constexpr uint32_t kBlob = 2;      // replies with a payload of N bytes (N = request as text)
constexpr uint32_t kNoReply = 3;   // never replies
constexpr uint32_t kSlowEcho = 4;  // replies after 50 ms, from a pool thread
// Replies with a body too long to go with a payload, and a payload: status in `sent_`.
constexpr uint32_t kLongBodyAndPayload = 5;

struct TransportCase {
  const char* name;
  const char* scheme;          // "ucx" or "ofi"
  const char* setting;         // UCX_TLS for ucx, the libfabric provider for ofi
  bool caller_driven = false;  // TransportOptions::caller_driven_progress
  UcxPeerFailure peer_failure = UcxPeerFailure::kAuto;
};

class RpcTest : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override {
    const bool ofi = std::string_view(GetParam().scheme) == "ofi";
#ifndef SLUICE_HAVE_LIBFABRIC
    if (ofi) GTEST_SKIP() << "built without libfabric (libfabric-dev was not found at configure)";
#endif
    RpcOptions& options = options_;
    options.scheme = GetParam().scheme;
    (ofi ? options.transport.ofi_provider : options.transport.ucx_tls) = GetParam().setting;
    options.transport.caller_driven_progress = GetParam().caller_driven;
    options.transport.ucx_peer_failure = GetParam().peer_failure;
    auto server = RpcEndpoint::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->Handle(kEcho, [](std::shared_ptr<ServerCall> call) {
      call->Reply(absl::OkStatus(), absl::StrCat("echo:", call->request()));
    });
    server_->Handle(kBlob, [this](std::shared_ptr<ServerCall> call) {
      size_t n = std::stoul(std::string(call->request()));
      auto blob = std::make_shared<std::vector<uint8_t>>(n);
      std::iota(blob->begin(), blob->end(), uint8_t{7});
      call->Reply(absl::OkStatus(), "blob", Payload{blob->data(), blob->size()},
                  [blob](absl::Status) {});
    });
    server_->Handle(kSlowEcho, [](std::shared_ptr<ServerCall> call) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      call->Reply(absl::OkStatus(), absl::StrCat("slow:", call->request()));
    });
    server_->Handle(kLongBodyAndPayload, [this](std::shared_ptr<ServerCall> call) {
      static const char kData[64] = {};
      call->Reply(absl::OkStatus(), std::string(call->max_body_with_payload() + 1, 'b'),
                  Payload{kData, sizeof(kData)}, [this](absl::Status s) {
                    absl::MutexLock lock(&mu_);
                    sent_ = s;
                  });
    });
    server_->Handle(kNoReply, [this](std::shared_ptr<ServerCall> call) {
      absl::MutexLock lock(&mu_);
      parked_.push_back(call);
    });
    auto bound = server_->Listen(Address{GetParam().scheme, "127.0.0.1", 0});
    ASSERT_TRUE(bound.ok()) << bound.status();
    ASSERT_NE(bound->port, 0);
    address_ = *bound;
    auto client = RpcEndpoint::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // Waits (up to 10 s) until `calls` kNoReply calls have reached the server's handler.
  void WaitUntilTheServerHoldsACall(size_t calls = 1) {
    absl::MutexLock lock(&mu_);
    auto held = [this, calls]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return parked_.size() >= calls; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&held), absl::Seconds(10)))
        << parked_.size() << " of " << calls << " calls reached the server";
  }

  RpcOptions options_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<ServerCall>> parked_;
  std::optional<absl::Status> sent_;  // kLongBodyAndPayload's send, once it ended
  std::unique_ptr<RpcEndpoint> server_;
  std::unique_ptr<RpcEndpoint> client_;
  Address address_;
};

inline auto AllTransportCases() {
  return ::testing::Values(
      TransportCase{"shm", "ucx", "posix,sysv,cma,self"},
      TransportCase{"shm_caller", "ucx", "posix,sysv,cma,self", true},
      TransportCase{"tcp_caller", "ucx", "tcp,self", true},
      TransportCase{"shmalias", "ucx", "shm,self"}, TransportCase{"tcp", "ucx", "tcp,self"},
      TransportCase{"tcp_ucx_peer_failure", "ucx", "tcp,self", false, UcxPeerFailure::kUcx},
      TransportCase{"ofi_tcp", "ofi", "tcp;ofi_rxm"}, TransportCase{"ofi_shm", "ofi", "shm"});
}

inline std::string TransportCaseName(const ::testing::TestParamInfo<TransportCase>& info) {
  return info.param.name;
}

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_RPC_TEST_FIXTURE_H_
