// A listening transport keeps serving while peers connect and send no hello, or part of
// one: before hellos were read as they came (hello_acceptor.h), the progress thread waited
// up to 2 s for each such peer in turn, and every connection of the transport, new and
// old, stalled behind it. Over every transport, with the progress thread or the caller
// driving it.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "transport/bootstrap.h"
#include "transport/hello_acceptor.h"
#include "transport/rpc_test_fixture.h"

namespace sluice::transport {
namespace {

using SilentPeerTest = RpcTest;

constexpr int kSilentPeers = 4;

// Connections to `to` that say nothing, and one that sends the first half of a hello.
std::vector<ScopedFd> ConnectSilentPeers(const Address& to) {
  std::vector<ScopedFd> peers;
  for (int i = 0; i < kSilentPeers; ++i) {
    absl::StatusOr<ScopedFd> socket = ConnectSocket(to, absl::Seconds(5));
    EXPECT_TRUE(socket.ok()) << socket.status();
    if (socket.ok()) peers.push_back(*std::move(socket));
  }
  const char* magic = to.scheme == "ofi" ? "SLO2" : "SLC2";
  if (!peers.empty()) {
    EXPECT_EQ(write(peers.back().get(), magic, 4), 4);
  }
  return peers;
}

absl::Duration TimeToEcho(RpcEndpoint& client, ConnectionId to) {
  const absl::Time start = absl::Now();
  absl::StatusOr<CallResult> reply = client.Call(to, kEcho, "hi", {});
  EXPECT_TRUE(reply.ok()) << reply.status();
  if (reply.ok()) {
    EXPECT_EQ(reply->response.view(), "echo:hi");
  }
  return absl::Now() - start;
}

// The waits this guards against were 2 s per silent peer, 8 s for the four; half of that
// says nobody waited, with room for a loaded machine.
constexpr absl::Duration kNoWait = absl::Seconds(4);

TEST_P(SilentPeerTest, ANewPeerIsAcceptedPastSilentOnes) {
  std::vector<ScopedFd> silent = ConnectSilentPeers(address_);
  absl::SleepFor(absl::Milliseconds(20));  // for the server to take them first
  const absl::Time start = absl::Now();
  absl::StatusOr<ConnectionId> connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok()) << connection.status();
  TimeToEcho(*client_, *connection);
  EXPECT_LT(absl::Now() - start, kNoWait);
}

TEST_P(SilentPeerTest, AConnectedPeerIsServedWhileSilentOnesConnect) {
  absl::StatusOr<ConnectionId> connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok()) << connection.status();
  TimeToEcho(*client_, *connection);
  std::vector<ScopedFd> silent = ConnectSilentPeers(address_);
  absl::SleepFor(absl::Milliseconds(20));  // for the server to take them
  absl::Duration slowest;
  for (int i = 0; i < 10; ++i) slowest = std::max(slowest, TimeToEcho(*client_, *connection));
  EXPECT_LT(slowest, kNoWait);
}

TEST_P(SilentPeerTest, ASilentPeerIsHungUpOnWhenItsTimeIsUp) {
  const absl::Time start = absl::Now();
  std::vector<ScopedFd> silent = ConnectSilentPeers(address_);
  for (const ScopedFd& peer : silent) {
    pollfd p{peer.get(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10'000), 1) << "not hung up on in 10 s";
    char byte;
    const ssize_t n = read(peer.get(), &byte, 1);
    EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << errno;
  }
  // Given its time first (HelloAcceptor::kTimeout), then dropped within a few ticks.
  EXPECT_GE(absl::Now() - start, HelloAcceptor::kTimeout - absl::Milliseconds(100));
  EXPECT_LT(absl::Now() - start, HelloAcceptor::kTimeout + absl::Seconds(3));
}

INSTANTIATE_TEST_SUITE_P(Transports, SilentPeerTest, AllTransportCases(), TransportCaseName);

}  // namespace
}  // namespace sluice::transport
