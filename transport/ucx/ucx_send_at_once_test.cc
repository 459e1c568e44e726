// Header-only messages that UCX sends before ucp_am_send_nbx returns (UcxTransport::SendAtOnce,
// UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL): every size arrives whole, whether UCX's short protocol
// takes it or refuses it to the operation path, from a caller and from inside a callback; and
// a callback's messages keep their order behind one that had to wait. Real UCX endpoints
// between two transports in this process, over shared memory and over tcp.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "transport/ucx/ucx_test_pair.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport::ucx {
namespace {

// Keeps every message it receives (header, payload size); answers a request from inside the
// callback, as inline RPC handlers do: "burst N" with a message carrying 1 KiB (its payload
// makes it wait for ucp_worker_progress to return; eager, so it arrives in the order it was
// sent, where a rendezvous payload arrives when its data has landed) then N header-only ones;
// "ping..." with "pong..." (the same size); "chain" with A, whose completion callback sends
// C, then B. It notes the order in which it called Send.
class Peer final : public MessageHandler {
 public:
  void Serve(Transport* transport) { transport_ = transport; }

  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId from, absl::string_view header, InboundPayload payload) override {
    if (transport_ != nullptr && absl::ConsumePrefix(&header, "burst ")) {
      const int n = std::stoi(std::string(header));
      transport_->Send(from, "0", Payload{burst_payload_.data(), burst_payload_.size()},
                       [](absl::Status) {});
      for (int i = 1; i <= n; ++i) transport_->Send(from, absl::StrCat(i), {}, [](absl::Status) {});
      return;
    }
    if (transport_ != nullptr && header == "chain") {
      Note("A");
      transport_->Send(from, "A", {}, [this, from](absl::Status) {
        Note("C");
        transport_->Send(from, "C", {}, [](absl::Status) {});
      });
      Note("B");
      transport_->Send(from, "B", {}, [](absl::Status) {});
      return;
    }
    if (transport_ != nullptr && absl::ConsumePrefix(&header, "ping")) {
      transport_->Send(from, absl::StrCat("pong", header), {}, [](absl::Status) {});
      return;
    }
    absl::MutexLock lock(&mu_);
    received_.push_back({std::string(header), payload.size});
  }
  void OnDisconnect(ConnectionId, absl::Status) override {}

  std::vector<std::string> sent() {
    absl::MutexLock lock(&mu_);
    return sent_;
  }

  // Waits (up to 10 s) until `n` messages arrived; returns those that did.
  std::vector<std::pair<std::string, size_t>> Await(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return received_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return received_;
  }

 private:
  void Note(std::string sent) {
    absl::MutexLock lock(&mu_);
    sent_.push_back(std::move(sent));
  }

  Transport* transport_ = nullptr;
  std::vector<std::byte> burst_payload_ = std::vector<std::byte>(1024, std::byte{7});
  absl::Mutex mu_;
  std::vector<std::pair<std::string, size_t>> received_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> sent_ ABSL_GUARDED_BY(mu_);
};

class SendAtOnceTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    TransportOptions options;
    options.ucx_tls = GetParam();
    absl::StatusOr<UcxPair> pair = ConnectUcxPair(options, &server_peer_, &client_peer_);
    ASSERT_TRUE(pair.ok()) << pair.status();
    server_ = std::move(pair->server);
    client_ = std::move(pair->client);
    connection_ = pair->connection;
    server_peer_.Serve(server_.get());
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  Peer server_peer_;
  Peer client_peer_;
  std::unique_ptr<UcxTransport> server_;
  std::unique_ptr<UcxTransport> client_;
  ConnectionId connection_ = kNoConnection;
};

// Sizes on both sides of UCX's short protocol (about 100 bytes over shared memory) and of
// the stack copy (256 bytes with the token), up to the largest header UCX takes: what the
// short protocol refuses goes the operation path, and every byte arrives.
TEST_P(SendAtOnceTest, EveryHeaderSizeArrivesWholeFromACallerAndFromACallback) {
  const size_t largest = client_->max_header_size();
  std::vector<std::string> expected;
  for (size_t size : {size_t{6}, size_t{90}, size_t{120}, size_t{247}, size_t{248}, size_t{249},
                      size_t{2000}, largest}) {
    if (size > largest) continue;
    std::string ping = "ping";
    for (size_t i = ping.size(); i < size; ++i) ping.push_back(static_cast<char>('a' + i % 26));
    client_->Send(connection_, ping, {}, [](absl::Status s) { EXPECT_TRUE(s.ok()) << s; });
    expected.push_back("pong" + ping.substr(4));
  }
  const auto received = client_peer_.Await(expected.size());
  ASSERT_EQ(received.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(received[i].first, expected[i]) << "message " << i;
    EXPECT_EQ(received[i].second, 0u);
  }
  EXPECT_EQ(server_->stats().messages_sent.load(), expected.size());
  EXPECT_EQ(client_->stats().messages_received.load(), expected.size());
  // The replies left from callbacks: at once over shared memory, but over tcp only once
  // ucp_worker_progress returned (the tcp hazard in ucx_transport.h, RunDeferred). The
  // client's pings left from its progress thread, outside callbacks: over shared memory the
  // short ones at once; over tcp UCX queues what is sent before its connection is up.
  if (std::string(GetParam()).starts_with("tcp")) {
    EXPECT_EQ(server_->stats().messages_sent_at_once.load(), 0u);
  } else {
    EXPECT_GT(server_->stats().messages_sent_at_once.load(), 0u);
    EXPECT_GT(client_->stats().messages_sent_at_once.load(), 0u);
  }
}

// A message sent from the completion callback of another, while sends made from a callback
// wait for ucp_worker_progress to return (tcp), is sent after those already waiting: the
// peer receives them in the order Send was called, whichever way each went out. Over tcp,
// before RunDeferred kept such sends in its list, C overtook B.
TEST_P(SendAtOnceTest, MessagesArriveInTheOrderTheyWereSent) {
  for (int round = 0; round < 3; ++round) {
    client_->Send(connection_, "chain", {}, [](absl::Status) {});
  }
  const auto received = client_peer_.Await(9);
  const std::vector<std::string> sent = server_peer_.sent();
  ASSERT_EQ(received.size(), 9u);
  ASSERT_EQ(sent.size(), 9u);
  for (size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(received[i].first, sent[i]) << "message " << i;
}

// A callback's first message carries a payload and waits for ucp_worker_progress to return
// (RunDeferred); the header-only ones after it may not overtake it, though over shared
// memory a message from a callback otherwise leaves at once.
TEST_P(SendAtOnceTest, ACallbacksMessagesKeepTheirOrderBehindOneThatWaits) {
  constexpr int kFollowers = 5;
  for (int round = 0; round < 3; ++round) {
    client_->Send(connection_, absl::StrCat("burst ", kFollowers), {}, [](absl::Status) {});
  }
  const auto received = client_peer_.Await(3 * (kFollowers + 1));
  ASSERT_EQ(received.size(), 3u * (kFollowers + 1));
  for (size_t i = 0; i < received.size(); ++i) {
    EXPECT_EQ(received[i].first, absl::StrCat(i % (kFollowers + 1))) << "message " << i;
    EXPECT_EQ(received[i].second, i % (kFollowers + 1) == 0 ? 1024u : 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, SendAtOnceTest,
                         ::testing::Values("posix,sysv,cma,self", "tcp,self"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param[0] == 't' ? "tcp" : "shared_memory");
                         });

}  // namespace
}  // namespace sluice::transport::ucx
