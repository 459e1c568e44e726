#include "transport/hello_acceptor.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice::transport {

HelloAcceptor::HelloAcceptor(HelloTransport expected, absl::Duration timeout,
                             std::function<void(int)> watch, std::function<void(int)> unwatch)
    : expected_(expected),
      timeout_(timeout),
      watch_(std::move(watch)),
      unwatch_(std::move(unwatch)) {}

void HelloAcceptor::PrepareToListen() {
  if (reserve_.get() < 0) reserve_ = ScopedFd(open("/dev/null", O_RDONLY | O_CLOEXEC));
}

void HelloAcceptor::AcceptAll(int listen_fd) {
  PrepareToListen();  // again, if a thread took the reserve's number when it was shed
  while (true) {
    sockaddr_storage from{};
    socklen_t length = sizeof(from);
    ScopedFd socket(accept4(listen_fd, reinterpret_cast<sockaddr*>(&from), &length,
                            SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (socket.get() < 0) {
      // A peer that reset its connection in the backlog is skipped; with nothing waiting,
      // the next readable comes back here.
      if (errno == ECONNABORTED || errno == EINTR) continue;
      if ((errno == EMFILE || errno == ENFILE) && FreeADescriptor(listen_fd)) continue;
      return;
    }
    if (pending_.size() >= kMaxPending) DropOldest();
    char host[NI_MAXHOST] = "?";
    char port[NI_MAXSERV] = "?";
    getnameinfo(reinterpret_cast<sockaddr*>(&from), length, host, sizeof(host), port, sizeof(port),
                NI_NUMERICHOST | NI_NUMERICSERV);
    const int fd = socket.get();
    Pending& pending = pending_[fd];
    pending.socket = std::move(socket);
    pending.peer = absl::StrCat(host, ":", port);
    pending.deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout_);
    // Nothing to parse yet: ParseHello asks for the first bytes it needs.
    (void)ParseHello("", expected_, &pending.needed);
    watch_(fd);
  }
}

std::optional<AcceptedPeer> HelloAcceptor::OnReadable(int fd) {
  auto it = pending_.find(fd);
  if (it == pending_.end()) return std::nullopt;
  Pending& pending = it->second;
  while (true) {
    // Exactly what the hello needs is read: nothing follows it on this socket but its close,
    // which the transport watches for from then on.
    const size_t have = pending.bytes.size();
    pending.bytes.resize(pending.needed);
    const ssize_t n = recv(fd, pending.bytes.data() + have, pending.needed - have, 0);
    if (n < 0 && errno == EINTR) {
      pending.bytes.resize(have);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pending.bytes.resize(have);
      return std::nullopt;
    }
    if (n <= 0) {  // closed, or reset
      Drop(fd);
      return std::nullopt;
    }
    pending.bytes.resize(have + static_cast<size_t>(n));
    if (pending.bytes.size() < pending.needed) continue;
    absl::StatusOr<std::optional<Hello>> hello =
        ParseHello(pending.bytes, expected_, &pending.needed);
    if (!hello.ok()) {
      Drop(fd);
      return std::nullopt;
    }
    if (!hello->has_value()) continue;
    unwatch_(fd);
    AcceptedPeer peer{std::move(pending.socket), **std::move(hello), std::move(pending.peer)};
    pending_.erase(it);
    return peer;
  }
}

void HelloAcceptor::DropOverdue(std::chrono::steady_clock::time_point now) {
  std::vector<int> overdue;
  for (const auto& [fd, pending] : pending_) {
    if (pending.deadline <= now) overdue.push_back(fd);
  }
  for (int fd : overdue) Drop(fd);
}

void HelloAcceptor::Clear() {
  while (!pending_.empty()) Drop(pending_.begin()->first);
}

bool HelloAcceptor::FreeADescriptor(int listen_fd) {
  // Linux takes the descriptor before it looks for a connection: EMFILE says nothing of
  // whether one waits.
  pollfd waiting{listen_fd, POLLIN, 0};
  if (poll(&waiting, 1, 0) != 1) return false;
  if (!said_out_of_descriptors_) {
    said_out_of_descriptors_ = true;
    std::fprintf(stderr,
                 "sluice: out of file descriptors (%s) accepting connections: peers still to "
                 "send their hello are dropped, or new connections hung up on; raise `ulimit "
                 "-n`\n",
                 std::strerror(errno));
  }
  if (!pending_.empty()) {
    DropOldest();
    return true;
  }
  if (reserve_.get() < 0) return false;
  // Takes one connection with the reserve's descriptor and hangs up on it.
  reserve_.reset();
  const bool shed = ScopedFd(accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC)).get() >= 0;
  reserve_ = ScopedFd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  return shed;
}

void HelloAcceptor::DropOldest() {
  auto oldest = pending_.begin();
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->second.deadline < oldest->second.deadline) oldest = it;
  }
  Drop(oldest->first);
}

void HelloAcceptor::Drop(int fd) {
  auto it = pending_.find(fd);
  if (it == pending_.end()) return;
  unwatch_(fd);
  pending_.erase(it);  // closes the socket: the peer sees its connection end
}

}  // namespace sluice::transport
