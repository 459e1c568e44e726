// The bootstrap hello on a real socket pair, and the rule both ends apply to it.
#include "transport/bootstrap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <string>

namespace sluice::transport {
namespace {

using ::testing::HasSubstr;

struct SocketPair {
  SocketPair() {
    int fds[2] = {-1, -1};
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    a = ScopedFd(fds[0]);
    b = ScopedFd(fds[1]);
  }
  ScopedFd a;
  ScopedFd b;
};

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

TEST(HelloTest, EveryFieldCrossesTheSocket) {
  SocketPair pair;
  const Hello sent{42, std::string(300, 'w'), "boot;ipc=1", PeerWatch::kSocketForLocalPeers};
  ASSERT_TRUE(SendHello(pair.a.get(), sent, Soon()).ok());
  absl::StatusOr<Hello> received = ReceiveHello(pair.b.get(), HelloTransport::kUcx, Soon());
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(received->token, 42u);
  EXPECT_EQ(received->worker_address, sent.worker_address);
  EXPECT_EQ(received->locality, "boot;ipc=1");
  EXPECT_EQ(received->peer_watch, PeerWatch::kSocketForLocalPeers);
}

TEST(HelloTest, AnUnknownPeerWatchIsRefused) {
  SocketPair pair;
  Hello sent{1, "address", "", PeerWatch::kUcx};
  sent.peer_watch = static_cast<PeerWatch>(7);
  ASSERT_TRUE(SendHello(pair.a.get(), sent, Soon()).ok());
  absl::StatusOr<Hello> received = ReceiveHello(pair.b.get(), HelloTransport::kUcx, Soon());
  EXPECT_EQ(received.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(received.status().message(), HasSubstr("peer watch 7"));
}

TEST(HelloTest, AnythingButAHelloIsRefused) {
  SocketPair pair;
  ASSERT_EQ(write(pair.a.get(), "GET / HTTP/1.1\r\n", 16), 16);
  EXPECT_THAT(ReceiveHello(pair.b.get(), HelloTransport::kUcx, Soon()).status().message(),
              HasSubstr("bad hello magic"));
}

// A hello of the other transport is refused by name on either side: a UCX dispatcher
// handed a libfabric address aborted in UCX's address unpacking (`sluice status
// --dispatcher ofi://...` against a UCX dispatcher killed it).
TEST(HelloTest, AHelloOfTheOtherTransportIsRefusedByName) {
  for (HelloTransport sender : {HelloTransport::kUcx, HelloTransport::kOfi}) {
    const HelloTransport receiver =
        sender == HelloTransport::kUcx ? HelloTransport::kOfi : HelloTransport::kUcx;
    SocketPair pair;
    Hello sent{7, "address"};
    sent.transport = sender;
    ASSERT_TRUE(SendHello(pair.a.get(), sent, Soon()).ok());
    absl::StatusOr<Hello> received = ReceiveHello(pair.b.get(), receiver, Soon());
    EXPECT_EQ(received.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(received.status().message(), HasSubstr("give both ends the same transport"));
  }
  SocketPair pair;
  Hello sent{7, "address"};
  sent.transport = HelloTransport::kOfi;
  ASSERT_TRUE(SendHello(pair.a.get(), sent, Soon()).ok());
  absl::StatusOr<Hello> received = ReceiveHello(pair.b.get(), HelloTransport::kOfi, Soon());
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(received->transport, HelloTransport::kOfi);
}

// The bytes SendHello puts on the wire for `hello`.
std::string WireBytes(const Hello& hello) {
  SocketPair pair;
  EXPECT_TRUE(SendHello(pair.a.get(), hello, Soon()).ok());
  std::string bytes(1 << 16, '\0');
  const ssize_t n = read(pair.b.get(), bytes.data(), bytes.size());
  EXPECT_GT(n, 0);
  bytes.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return bytes;
}

// What an accepting transport does with a hello that comes a byte at a time: it is
// incomplete until its last byte, each step asks for no byte past its end, and the whole is
// the hello sent.
TEST(ParseHelloTest, AHelloInPiecesAsksForNoBytePastItsEnd) {
  const Hello sent{9, std::string(200, 'w'), "host;ipc=2", PeerWatch::kSocket};
  const std::string wire = WireBytes(sent);
  size_t needed = 0;
  for (size_t have = 0; have < wire.size(); ++have) {
    absl::StatusOr<std::optional<Hello>> parsed =
        ParseHello(absl::string_view(wire).substr(0, have), HelloTransport::kUcx, &needed);
    ASSERT_TRUE(parsed.ok()) << parsed.status() << " at " << have;
    EXPECT_FALSE(parsed->has_value()) << "complete at " << have << " of " << wire.size();
    EXPECT_GT(needed, have);
    EXPECT_LE(needed, wire.size());
  }
  absl::StatusOr<std::optional<Hello>> parsed = ParseHello(wire, HelloTransport::kUcx, &needed);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_EQ(needed, wire.size());
  EXPECT_EQ((*parsed)->token, 9u);
  EXPECT_EQ((*parsed)->worker_address, sent.worker_address);
  EXPECT_EQ((*parsed)->locality, "host;ipc=2");
  EXPECT_EQ((*parsed)->peer_watch, PeerWatch::kSocket);
}

// A bad length is refused as soon as it has come, not after waiting for 4 GiB.
TEST(ParseHelloTest, AnOversizedAddressIsRefusedBeforeItsBytes) {
  std::string wire = WireBytes(Hello{1, "address"});
  const uint32_t huge = 0xffffffff;
  wire.replace(12, sizeof(huge), reinterpret_cast<const char*>(&huge), sizeof(huge));
  size_t needed = 0;
  absl::StatusOr<std::optional<Hello>> parsed =
      ParseHello(absl::string_view(wire).substr(0, 16), HelloTransport::kUcx, &needed);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("4294967295 bytes"));
}

Hello From(std::string locality, PeerWatch watch) {
  return Hello{1, "a", std::move(locality), watch};
}

TEST(SocketAloneWatchesTest, BothEndsMustWishIt) {
  const Hello local_here = From("host-a", PeerWatch::kSocketForLocalPeers);
  // Same host, both content with the socket for local peers.
  EXPECT_TRUE(SocketAloneWatches(local_here, From("host-a", PeerWatch::kSocketForLocalPeers)));
  EXPECT_TRUE(SocketAloneWatches(local_here, From("host-a", PeerWatch::kSocket)));
  // Another host, or a peer that wants UCX to watch: UCX watches, on both ends.
  EXPECT_FALSE(SocketAloneWatches(local_here, From("host-b", PeerWatch::kSocketForLocalPeers)));
  EXPECT_FALSE(SocketAloneWatches(local_here, From("host-b", PeerWatch::kSocket)));
  EXPECT_FALSE(SocketAloneWatches(local_here, From("host-a", PeerWatch::kUcx)));
  EXPECT_FALSE(SocketAloneWatches(From("host-a", PeerWatch::kSocket),
                                  From("host-b", PeerWatch::kSocketForLocalPeers)));
  EXPECT_TRUE(
      SocketAloneWatches(From("host-a", PeerWatch::kSocket), From("host-b", PeerWatch::kSocket)));
  // An unknown locality matches nothing, not even another unknown one.
  EXPECT_FALSE(SocketAloneWatches(From("", PeerWatch::kSocketForLocalPeers),
                                  From("", PeerWatch::kSocketForLocalPeers)));
  // The rule is symmetric.
  for (PeerWatch a : {PeerWatch::kUcx, PeerWatch::kSocket, PeerWatch::kSocketForLocalPeers}) {
    for (PeerWatch b : {PeerWatch::kUcx, PeerWatch::kSocket, PeerWatch::kSocketForLocalPeers}) {
      for (const char* other : {"host-a", "host-b"}) {
        EXPECT_EQ(SocketAloneWatches(From("host-a", a), From(other, b)),
                  SocketAloneWatches(From(other, b), From("host-a", a)));
      }
    }
  }
}

}  // namespace
}  // namespace sluice::transport
