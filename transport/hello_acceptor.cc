#include "transport/hello_acceptor.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
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

void HelloAcceptor::AcceptAll(int listen_fd) {
  while (true) {
    sockaddr_storage from{};
    socklen_t length = sizeof(from);
    ScopedFd socket(accept4(listen_fd, reinterpret_cast<sockaddr*>(&from), &length,
                            SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (socket.get() < 0) {
      // A peer that reset its connection in the backlog is skipped; anything else (nothing
      // waiting, out of fds) waits for the next readable.
      if (errno == ECONNABORTED || errno == EINTR) continue;
      return;
    }
    if (pending_.size() >= kMaxPending) {
      auto oldest = pending_.begin();
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (it->second.deadline < oldest->second.deadline) oldest = it;
      }
      Drop(oldest->first);
    }
    char host[NI_MAXHOST] = "?";
    char port[NI_MAXSERV] = "?";
    getnameinfo(reinterpret_cast<sockaddr*>(&from), length, host, sizeof(host), port, sizeof(port),
                NI_NUMERICHOST | NI_NUMERICSERV);
    const int fd = socket.get();
    Pending& pending = pending_[fd];
    pending.socket = std::move(socket);
    pending.peer = absl::StrCat(host, ":", port);
    pending.deadline = absl::Now() + timeout_;
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

void HelloAcceptor::DropOverdue(absl::Time now) {
  std::vector<int> overdue;
  for (const auto& [fd, pending] : pending_) {
    if (pending.deadline <= now) overdue.push_back(fd);
  }
  for (int fd : overdue) Drop(fd);
}

void HelloAcceptor::Clear() {
  while (!pending_.empty()) Drop(pending_.begin()->first);
}

void HelloAcceptor::Drop(int fd) {
  auto it = pending_.find(fd);
  if (it == pending_.end()) return;
  unwatch_(fd);
  pending_.erase(it);  // closes the socket: the peer sees its connection end
}

}  // namespace sluice::transport
