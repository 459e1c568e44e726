// Who watches a UCX connection's peer, decided per connection (PeerWatch in bootstrap.h):
// real UCX endpoints between transports in this process, or in a child process that left
// this host's IPC namespace, and the lanes UCX actually picked for each.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport::ucx {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr size_t kPayloadBytes = 1 << 20;  // sent by rendezvous: exercises the RMA lanes
constexpr char kMixed[] = "tcp,posix,sysv,cma,self";
constexpr UcxPeerFailure kLocal = UcxPeerFailure::kSocketForLocalPeers;

// Keeps the payloads it receives and which connection they came on.
class Receiver final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view,
                                              size_t size) override {
    absl::MutexLock lock(&mu_);
    buffers_.emplace_back(size);
    return {buffers_.back().data(), size};
  }
  void OnMessage(ConnectionId from, absl::string_view, InboundPayload payload) override {
    absl::MutexLock lock(&mu_);
    if (payload.status.ok() && payload.size == kPayloadBytes &&
        payload.data[kPayloadBytes - 1] == std::byte{0x5a}) {
      from_ = from;
    }
  }
  void OnDisconnect(ConnectionId, absl::Status) override {}

  // The connection a whole payload arrived on, or kNoConnection after a few seconds.
  ConnectionId AwaitPayload() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](ConnectionId* from) { return *from != kNoConnection; }, &from_),
                         absl::Seconds(10));
    return from_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<std::byte>> buffers_ ABSL_GUARDED_BY(mu_);
  ConnectionId from_ ABSL_GUARDED_BY(mu_) = kNoConnection;
};

std::unique_ptr<UcxTransport> Start(
    const std::string& tls, MessageHandler* handler,
    UcxPeerFailure peer_failure = UcxPeerFailure::kAuto,
    size_t tcp_segment_bytes = TransportOptions().ucx_tcp_segment_bytes) {
  TransportOptions options;
  options.ucx_tls = tls;
  options.ucx_peer_failure = peer_failure;
  options.ucx_tcp_segment_bytes = tcp_segment_bytes;
  auto created = UcxTransport::Create(options, handler);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? std::move(*created) : nullptr;
}

// Connects `client` to `server` and sends it one payload.
ConnectionId ConnectAndSend(UcxTransport& client, const Address& server) {
  auto connection = client.Connect(server);
  EXPECT_TRUE(connection.ok()) << connection.status();
  if (!connection.ok()) return kNoConnection;
  static const std::vector<std::byte> payload(kPayloadBytes, std::byte{0x5a});
  client.Send(*connection, "hi", Payload{payload.data(), payload.size()}, [](absl::Status) {});
  return *connection;
}

// The server lives in a child process with its own IPC namespace (sysv segments of this
// one are invisible there): not the same locality, so tcp with UCX's watch, and data flows.
// First in this file so that the fork happens before this process has started UCX.
TEST(UcxPeerWatchTest, APeerInAnotherIpcNamespaceIsWatchedByUcx) {
  int port_pipe[2];
  int done_pipe[2];  // closed by the parent once it has looked at its connection
  ASSERT_EQ(pipe(port_pipe), 0);
  ASSERT_EQ(pipe(done_pipe), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(port_pipe[0]);
    close(done_pipe[1]);
    uint16_t port = 0;  // 0 tells the parent that the child could not start
    if (unshare(CLONE_NEWIPC) == 0) {
      Receiver handler;
      auto server = Start(kMixed, &handler, kLocal);
      auto address = server ? server->Listen(Address{"ucx", "127.0.0.1", 0})
                            : absl::StatusOr<Address>(absl::InternalError("no transport"));
      if (address.ok()) port = address->port;
      (void)!write(port_pipe[1], &port, sizeof(port));
      bool received = port != 0 && handler.AwaitPayload() != kNoConnection;
      char unused;
      (void)!read(done_pipe[0], &unused, 1);
      _exit(received ? 0 : 1);
    }
    (void)!write(port_pipe[1], &port, sizeof(port));
    _exit(2);
  }
  close(port_pipe[1]);
  close(done_pipe[0]);
  uint16_t port = 0;
  bool read_port = read(port_pipe[0], &port, sizeof(port)) == sizeof(port);
  close(port_pipe[0]);
  if (!read_port || port == 0) {
    close(done_pipe[1]);
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
      GTEST_SKIP() << "unshare(CLONE_NEWIPC) needs root";
    }
    FAIL() << "the child could not start a transport";
  }
  Receiver client_handler;
  auto client = Start(kMixed, &client_handler, kLocal);
  ASSERT_NE(client, nullptr);
  ConnectionId connection = ConnectAndSend(*client, Address{"ucx", "127.0.0.1", port});
  auto client_side = client->DescribeConnection(connection);
  close(done_pipe[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the payload did not arrive";
  ASSERT_TRUE(client_side.ok()) << client_side.status();
  EXPECT_THAT(*client_side, HasSubstr("tcp"));
  EXPECT_THAT(*client_side, HasSubstr("dead peers: UCX (peer mode)"));
}

// A server and a client transport in this process, the client connected and its payload
// received by the server.
struct Pair {
  Receiver server_handler;  // declared first: outlive the transports that call them
  Receiver client_handler;
  std::unique_ptr<UcxTransport> server;
  std::unique_ptr<UcxTransport> client;
  ConnectionId connection = kNoConnection;  // the client's
  ConnectionId on_server = kNoConnection;
};

// Starts both ends, connects and sends one payload; nullptr (with the failure reported) if
// any step fails.
std::unique_ptr<Pair> Connected(const std::string& server_tls, UcxPeerFailure server_watch,
                                const std::string& client_tls, UcxPeerFailure client_watch) {
  auto pair = std::make_unique<Pair>();
  pair->server = Start(server_tls, &pair->server_handler, server_watch);
  pair->client = Start(client_tls, &pair->client_handler, client_watch);
  if (pair->server == nullptr || pair->client == nullptr) return nullptr;
  auto address = pair->server->Listen(Address{"ucx", "127.0.0.1", 0});
  EXPECT_TRUE(address.ok()) << address.status();
  if (!address.ok()) return nullptr;
  pair->connection = ConnectAndSend(*pair->client, *address);
  pair->on_server = pair->server_handler.AwaitPayload();
  EXPECT_NE(pair->on_server, kNoConnection) << "the payload did not arrive";
  return pair->on_server == kNoConnection ? nullptr : std::move(pair);
}

// What `transport` says of `connection`; "" (with the failure reported) if it cannot.
std::string Described(UcxTransport& transport, ConnectionId connection) {
  absl::StatusOr<std::string> described = transport.DescribeConnection(connection);
  EXPECT_TRUE(described.ok()) << described.status();
  return described.ok() ? *described : "";
}

TEST(UcxPeerWatchTest, SameHostPeersUseSharedMemoryWatchedByTheSocket) {
  auto pair = Connected(kMixed, kLocal, kMixed, kLocal);
  ASSERT_NE(pair, nullptr);
  // UCX's peer mode would have cost this pair its shared memory (tcp over loopback).
  for (const std::string& side :
       {Described(*pair->client, pair->connection), Described(*pair->server, pair->on_server)}) {
    EXPECT_THAT(side, HasSubstr("dead peers: bootstrap socket"));
    EXPECT_THAT(side, Not(HasSubstr("tcp")));
    EXPECT_THAT(side, HasSubstr("cma"));  // the rendezvous lane
  }
  EXPECT_THAT(pair->client->Describe(), HasSubstr("bootstrap socket for same-host peers"));
}

// The default (kAuto) with tcp and shared memory among the transports (the default UCX_TLS
// of a host without RDMA) keeps a same-host pair on shared memory, watched by the socket:
// with UCX's watch it would talk over tcp on loopback.
TEST(UcxPeerWatchTest, ByDefaultSameHostPeersKeepSharedMemory) {
  auto pair = Connected(kMixed, UcxPeerFailure::kAuto, kMixed, UcxPeerFailure::kAuto);
  ASSERT_NE(pair, nullptr);
  for (const std::string& side :
       {Described(*pair->client, pair->connection), Described(*pair->server, pair->on_server)}) {
    EXPECT_THAT(side, HasSubstr("dead peers: bootstrap socket"));
    EXPECT_THAT(side, Not(HasSubstr("tcp")));
  }
  EXPECT_THAT(pair->client->Describe(), HasSubstr("bootstrap socket for same-host peers"));
}

// An explicit kUcx on both sides still puts a same-host pair on tcp, watched by UCX.
TEST(UcxPeerWatchTest, AskedForUcxSameHostPeersTalkOverTcp) {
  auto pair = Connected(kMixed, UcxPeerFailure::kUcx, kMixed, UcxPeerFailure::kUcx);
  ASSERT_NE(pair, nullptr);
  const std::string client_side = Described(*pair->client, pair->connection);
  EXPECT_THAT(client_side, HasSubstr("tcp"));
  EXPECT_THAT(client_side, HasSubstr("dead peers: UCX (peer mode)"));
}

TEST(UcxPeerWatchTest, APeerWithoutSharedMemoryIsWatchedByUcx) {
  auto pair = Connected("tcp,self", UcxPeerFailure::kAuto, kMixed, kLocal);
  ASSERT_NE(pair, nullptr);
  const std::string client_side = Described(*pair->client, pair->connection);
  EXPECT_THAT(client_side, HasSubstr("tcp"));
  EXPECT_THAT(client_side, HasSubstr("dead peers: UCX (peer mode)"));
  EXPECT_EQ(pair->client->DescribeConnection(pair->connection + 1000).status().code(),
            absl::StatusCode::kNotFound);
}

// Both ends must agree: with NONE on one and PEER on the other, UCX 1.13 never delivered
// the payload over tcp. A wish for the socket alone gives way to a peer that wants UCX.
TEST(UcxPeerWatchTest, ASocketOnlyWishGivesWayToAPeerThatWantsUcx) {
  auto pair = Connected("tcp,self", UcxPeerFailure::kAuto, "tcp,self", UcxPeerFailure::kSocketOnly);
  ASSERT_NE(pair, nullptr);
  EXPECT_THAT(Described(*pair->client, pair->connection), HasSubstr("dead peers: UCX (peer mode)"));
}

// The largest message UCX sends eagerly by copy ("<egr/short>..N.." in the connection's
// description), which is bounded by its tcp send segment; -1 if not described.
int64_t LargestShortSend(UcxTransport& client, const Address& server) {
  auto connection = client.Connect(server);
  if (!connection.ok()) return -1;
  auto described = client.DescribeConnection(*connection);
  if (!described.ok()) return -1;
  const size_t at = described->find("<egr/short>..");
  if (at == std::string::npos) return -1;
  return std::strtoll(described->c_str() + at + 13, nullptr, 10);
}

// Over tcp with UCX's peer watch, UCX moves payloads one segment at a time: Sluice asks for
// 512 KiB segments unless told otherwise, and an environment setting wins.
TEST(UcxPeerWatchTest, TcpSegmentsFollowTheOptionUnlessTheEnvironmentSetsThem) {
  Receiver server_handler;
  auto server = Start("tcp,self", &server_handler);
  ASSERT_NE(server, nullptr);
  auto address = server->Listen(Address{"ucx", "127.0.0.1", 0});
  ASSERT_TRUE(address.ok()) << address.status();
  Receiver client_handler;
  auto by_default = Start("tcp,self", &client_handler);
  auto ucx_defaults = Start("tcp,self", &client_handler, UcxPeerFailure::kAuto, 0);
  setenv("UCX_TCP_TX_SEG_SIZE", "16K", 1);
  auto from_environment = Start("tcp,self", &client_handler);
  unsetenv("UCX_TCP_TX_SEG_SIZE");
  ASSERT_NE(by_default, nullptr);
  ASSERT_NE(ucx_defaults, nullptr);
  ASSERT_NE(from_environment, nullptr);
  EXPECT_GT(LargestShortSend(*by_default, *address), 256 << 10);
  const int64_t ucx_default = LargestShortSend(*ucx_defaults, *address);
  EXPECT_GT(ucx_default, 0);
  EXPECT_LT(ucx_default, 64 << 10);  // UCX's own 8 KiB
  const int64_t environment = LargestShortSend(*from_environment, *address);
  EXPECT_GT(environment, 8 << 10);
  EXPECT_LE(environment, 16 << 10);
}

}  // namespace
}  // namespace sluice::transport::ucx
