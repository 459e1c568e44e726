// HelloAcceptor on real loopback sockets: peers that say nothing, or say it slowly, wait
// beside the others instead of in front of them, and are dropped when their time is up.
#include "transport/hello_acceptor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"

namespace sluice::transport {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

class HelloAcceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uint16_t port = 0;
    absl::StatusOr<ScopedFd> listening = ListenSocket(Address{"ucx", "127.0.0.1", 0}, &port);
    ASSERT_TRUE(listening.ok()) << listening.status();
    listening_ = *std::move(listening);
    address_ = Address{"ucx", "127.0.0.1", port};
    acceptor_.PrepareToListen();
  }

  ScopedFd Connect() {
    absl::StatusOr<ScopedFd> socket = ConnectSocket(address_, absl::Seconds(5));
    EXPECT_TRUE(socket.ok()) << socket.status();
    return socket.ok() ? *std::move(socket) : ScopedFd();
  }

  // Accepts until `accepts` connections were taken in all (a loaded machine may queue one
  // on the listening socket a little after its connect returned), or 5 s passed.
  void AcceptUntil(int accepts) {
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    acceptor_.AcceptAll(listening_.get());
    while (watch_calls_ < accepts && absl::Now() < give_up) {
      pollfd p{listening_.get(), POLLIN, 0};
      poll(&p, 1, 100);
      acceptor_.AcceptAll(listening_.get());
    }
    EXPECT_EQ(watch_calls_, accepts);
  }

  // Hands every watched socket to OnReadable until one yields a peer, or none is readable.
  std::optional<AcceptedPeer> ReadWatched() {
    std::vector<int> fds(watched_.begin(), watched_.end());
    for (int fd : fds) {
      if (std::optional<AcceptedPeer> peer = acceptor_.OnReadable(fd)) return peer;
    }
    return std::nullopt;
  }

  // As ReadWatched, again as bytes come, until a peer is complete or 5 s passed (a loaded
  // machine may deliver a loopback write a little later).
  std::optional<AcceptedPeer> ReadUntilAPeer() {
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    do {
      if (std::optional<AcceptedPeer> peer = ReadWatched()) return peer;
      WaitForAWatchedSocket();
    } while (absl::Now() < give_up);
    return std::nullopt;
  }

  // Reads what comes until no peer is pending, or 5 s passed.
  void ReadUntilNonePending() {
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    while (acceptor_.pending() > 0 && absl::Now() < give_up) {
      EXPECT_FALSE(ReadWatched().has_value());
      WaitForAWatchedSocket();
    }
  }

  void WaitForAWatchedSocket() {
    std::vector<pollfd> fds;
    for (int fd : watched_) fds.push_back({fd, POLLIN, 0});
    if (!fds.empty()) poll(fds.data(), fds.size(), 100);
  }

  // Whether the peer's end of `socket` was closed by the acceptor, within `within`: an end
  // of file, or a reset when the acceptor closed with bytes of ours unread.
  static bool ClosedByTheOtherEnd(int socket, absl::Duration within) {
    pollfd p{socket, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(within))) != 1) return false;
    char byte;
    const ssize_t n = read(socket, &byte, 1);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

  static std::string HelloBytes(uint64_t token) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ScopedFd a(fds[0]), b(fds[1]);
    EXPECT_TRUE(SendHello(a.get(), Hello{token, "worker-address", "here"}, Soon()).ok());
    std::string bytes(4096, '\0');
    const ssize_t n = read(b.get(), bytes.data(), bytes.size());
    bytes.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return bytes;
  }

  absl::flat_hash_set<int> watched_;
  int watch_calls_ = 0;
  HelloAcceptor acceptor_{
      HelloTransport::kUcx, absl::Seconds(1),
      [this](int fd) {
        ++watch_calls_;
        EXPECT_TRUE(watched_.insert(fd).second) << "watched twice";
      },
      [this](int fd) { EXPECT_TRUE(watched_.erase(fd)) << "unwatched twice or never watched"; }};
  ScopedFd listening_;
  Address address_;
};

TEST_F(HelloAcceptorTest, APeerThatSaysNothingDoesNotHoldUpTheNext) {
  ScopedFd silent = Connect();
  ScopedFd talker = Connect();
  const std::string hello = HelloBytes(77);
  ASSERT_EQ(write(talker.get(), hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  AcceptUntil(2);
  EXPECT_EQ(acceptor_.pending(), 2u);
  std::optional<AcceptedPeer> peer = ReadUntilAPeer();
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->hello.token, 77u);
  EXPECT_EQ(peer->hello.worker_address, "worker-address");
  EXPECT_TRUE(absl::StartsWith(peer->peer, "127.0.0.1:")) << peer->peer;
  // Handed over unwatched; the silent one still waits.
  EXPECT_FALSE(watched_.contains(peer->socket.get()));
  EXPECT_EQ(acceptor_.pending(), 1u);
  EXPECT_EQ(watched_.size(), 1u);
}

TEST_F(HelloAcceptorTest, AHelloInPiecesIsPutTogether) {
  ScopedFd talker = Connect();
  AcceptUntil(1);
  const std::string hello = HelloBytes(5);
  for (size_t at = 0; at < hello.size(); at += 7) {
    EXPECT_FALSE(ReadWatched().has_value()) << "complete before byte " << at;
    const size_t n = std::min<size_t>(7, hello.size() - at);
    ASSERT_EQ(write(talker.get(), hello.data() + at, n), static_cast<ssize_t>(n));
  }
  std::optional<AcceptedPeer> peer = ReadUntilAPeer();
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->hello.token, 5u);
  EXPECT_EQ(peer->hello.locality, "here");
}

// Nothing past the hello is taken from the socket: what follows is the transport's to see.
TEST_F(HelloAcceptorTest, BytesAfterTheHelloStayOnTheSocket) {
  ScopedFd talker = Connect();
  AcceptUntil(1);
  const std::string sent = HelloBytes(3) + "after";
  ASSERT_EQ(write(talker.get(), sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
  std::optional<AcceptedPeer> peer = ReadUntilAPeer();
  ASSERT_TRUE(peer.has_value());
  char rest[16] = {};
  EXPECT_EQ(read(peer->socket.get(), rest, sizeof(rest)), 5);
  EXPECT_EQ(std::string(rest), "after");
}

TEST_F(HelloAcceptorTest, ABadHelloIsDroppedAndItsPeerSeesTheClose) {
  ScopedFd talker = Connect();
  AcceptUntil(1);
  ASSERT_EQ(write(talker.get(), "GET / HTTP/1.1\r\n", 16), 16);
  ReadUntilNonePending();
  EXPECT_EQ(acceptor_.pending(), 0u);
  EXPECT_TRUE(watched_.empty());
  EXPECT_TRUE(ClosedByTheOtherEnd(talker.get(), absl::Seconds(5)));
}

TEST_F(HelloAcceptorTest, APeerThatHangsUpMidHelloIsDropped) {
  ScopedFd talker = Connect();
  AcceptUntil(1);
  const std::string hello = HelloBytes(5);
  ASSERT_EQ(write(talker.get(), hello.data(), 10), 10);
  talker.reset();
  ReadUntilNonePending();  // the bytes, then the end
  EXPECT_EQ(acceptor_.pending(), 0u);
}

TEST_F(HelloAcceptorTest, AnOverduePeerIsDroppedAndOnlyIt) {
  using std::chrono::milliseconds;
  ScopedFd early = Connect();
  AcceptUntil(1);
  const auto first_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  absl::SleepFor(absl::Milliseconds(600));
  ScopedFd late = Connect();
  AcceptUntil(2);
  acceptor_.DropOverdue(first_deadline - milliseconds(700));
  EXPECT_EQ(acceptor_.pending(), 2u);
  acceptor_.DropOverdue(first_deadline + milliseconds(100));
  EXPECT_EQ(acceptor_.pending(), 1u);
  EXPECT_TRUE(ClosedByTheOtherEnd(early.get(), absl::Seconds(5)));
  EXPECT_FALSE(ClosedByTheOtherEnd(late.get(), absl::Milliseconds(50)));
}

TEST_F(HelloAcceptorTest, PastTheLimitTheOldestPendingPeerMakesRoom) {
  std::vector<ScopedFd> peers;
  // Accepted as they come: the listen backlog is shorter than the limit.
  for (size_t i = 0; i < HelloAcceptor::kMaxPending; ++i) {
    peers.push_back(Connect());
    AcceptUntil(static_cast<int>(i) + 1);
  }
  ASSERT_EQ(acceptor_.pending(), HelloAcceptor::kMaxPending);
  absl::SleepFor(absl::Milliseconds(5));  // a later deadline than all of them
  ScopedFd newest = Connect();
  AcceptUntil(static_cast<int>(HelloAcceptor::kMaxPending) + 1);
  EXPECT_EQ(acceptor_.pending(), HelloAcceptor::kMaxPending);
  EXPECT_EQ(watched_.size(), HelloAcceptor::kMaxPending);
  EXPECT_TRUE(ClosedByTheOtherEnd(peers.front().get(), absl::Seconds(5)));
  int closed = 0;
  for (const ScopedFd& peer : peers) {
    closed += ClosedByTheOtherEnd(peer.get(), absl::ZeroDuration());
  }
  EXPECT_EQ(closed, 1);
  EXPECT_FALSE(ClosedByTheOtherEnd(newest.get(), absl::ZeroDuration()));
}

// Lowers this process's descriptor limit to what is open now and fills every free number
// below it, for as long as it lives.
class OutOfDescriptors {
 public:
  OutOfDescriptors() {
    getrlimit(RLIMIT_NOFILE, &saved_);
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      if (fcntl(fd, F_GETFD) >= 0) highest = fd;
    }
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(highest) + 1;
    EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
    while (true) {
      const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      fillers_.emplace_back(fd);
    }
  }
  ~OutOfDescriptors() {
    fillers_.clear();
    setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  rlimit saved_{};
  std::vector<ScopedFd> fillers_;
};

// Out of descriptors, accept fails and the listening socket stays readable: a caller that
// returned then would be called again at once, for ever. Waiting connections are hung up
// on instead, and a pending peer is dropped to make room for a new one.
TEST_F(HelloAcceptorTest, OutOfDescriptorsConnectionsAreHungUpOnNotLeftWaiting) {
  ScopedFd first = Connect();
  ScopedFd second = Connect();
  absl::SleepFor(absl::Milliseconds(50));  // both in the listening socket's queue
  {
    OutOfDescriptors out;
    acceptor_.AcceptAll(listening_.get());
  }
  EXPECT_EQ(acceptor_.pending(), 0u);
  EXPECT_TRUE(ClosedByTheOtherEnd(first.get(), absl::Seconds(5)));
  EXPECT_TRUE(ClosedByTheOtherEnd(second.get(), absl::Seconds(5)));
  pollfd p{listening_.get(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "the listening socket is still readable";

  // And with a peer pending, that peer makes room for the next.
  ScopedFd pending = Connect();
  AcceptUntil(1);
  ScopedFd next = Connect();
  absl::SleepFor(absl::Milliseconds(50));
  {
    OutOfDescriptors out;
    acceptor_.AcceptAll(listening_.get());
  }
  EXPECT_EQ(acceptor_.pending(), 1u);
  EXPECT_TRUE(ClosedByTheOtherEnd(pending.get(), absl::Seconds(5)));
  EXPECT_FALSE(ClosedByTheOtherEnd(next.get(), absl::Milliseconds(50)));
}

}  // namespace
}  // namespace sluice::transport
