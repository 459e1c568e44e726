#include "transport/bootstrap.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice::transport {
namespace {

constexpr char kUcxMagic[4] = {'S', 'L', 'C', '2'};
constexpr char kOfiMagic[4] = {'S', 'L', 'O', '2'};

const char* MagicOf(HelloTransport transport) {
  switch (transport) {
    case HelloTransport::kUcx:
      return kUcxMagic;
    case HelloTransport::kOfi:
      return kOfiMagic;
  }
  return kUcxMagic;
}

const char* NameOf(HelloTransport transport) {
  switch (transport) {
    case HelloTransport::kUcx:
      return "UCX (ucx://)";
    case HelloTransport::kOfi:
      return "libfabric (ofi://)";
  }
  return "?";
}
// A worker address is a few hundred bytes; anything far larger is not a Sluice peer.
constexpr uint32_t kMaxWorkerAddress = 64 * 1024;
constexpr uint32_t kMaxLocality = 1024;

int MillisUntil(absl::Time deadline) {
  int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return ms < 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// `stop_fd` (ConnectStop::fd(), or -1) ends the wait with Cancelled once it is readable.
absl::Status WaitFor(int fd, short events, absl::Time deadline, absl::string_view what,
                     int stop_fd) {
  pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
  int rc;
  do {
    rc = poll(p, stop_fd >= 0 ? 2 : 1, MillisUntil(deadline));
  } while (rc < 0 && errno == EINTR);
  if (rc == 0) return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
  if (rc < 0) return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
  if (stop_fd >= 0 && p[1].revents != 0) {
    return absl::CancelledError(absl::StrCat(what, ": the endpoint is shutting down"));
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* data, size_t size, absl::Time deadline, int stop_fd) {
  auto* p = static_cast<const char*>(data);
  while (size > 0) {
    SLUICE_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "sending the connection hello", stop_fd));
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, void* data, size_t size, absl::Time deadline, int stop_fd) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    SLUICE_RETURN_IF_ERROR(
        WaitFor(fd, POLLIN, deadline, "waiting for the connection hello", stop_fd));
    ssize_t n = recv(fd, p, size, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    // A peer that refused our hello (another transport's endpoint, say) closes, or resets
    // a connection it left data on.
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      return absl::UnavailableError(
          "peer closed the connection during the hello (is it a Sluice endpoint of the same "
          "transport, ucx:// or ofi://?)");
    }
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<addrinfo*> Lookup(const Address& address, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  std::string port = std::to_string(address.port);
  const char* host = address.host.empty() ? nullptr : address.host.c_str();
  if (int rc = getaddrinfo(host, port.c_str(), &hints, &result); rc != 0 || result == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host '", address.host, "': ", gai_strerror(rc)));
  }
  return result;
}

}  // namespace

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void ScopedFd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

ConnectStop::ConnectStop() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_.get() < 0) {
    std::fprintf(stderr,
                 "sluice: eventfd failed (%s): a transport being destroyed waits out the "
                 "connects in progress\n",
                 std::strerror(errno));
  }
}

void ConnectStop::Raise() {
  if (fd_.get() < 0) return;
  const uint64_t one = 1;
  // Never read: the count stays above zero, so the fd stays readable for every wait.
  [[maybe_unused]] ssize_t written = write(fd_.get(), &one, sizeof(one));
}

absl::StatusOr<ScopedFd> ListenSocket(const Address& bind, uint16_t* port) {
  SLUICE_ASSIGN_OR_RETURN(addrinfo * info, Lookup(bind, /*passive=*/true));
  ScopedFd fd(socket(info->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc = fd.get() < 0 ? -1 : ::bind(fd.get(), info->ai_addr, info->ai_addrlen);
  freeaddrinfo(info);
  if (rc != 0 || listen(fd.get(), 128) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", bind.ToString(), ": ", std::strerror(errno)));
  }
  sockaddr_storage self{};
  socklen_t len = sizeof(self);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&self), &len);
  *port = ntohs(reinterpret_cast<sockaddr_in*>(&self)->sin_port);  // same offset in sin6
  return fd;
}

absl::StatusOr<ScopedFd> ConnectSocket(const Address& peer, absl::Duration timeout, int stop_fd) {
  absl::Time deadline = absl::Now() + timeout;
  SLUICE_ASSIGN_OR_RETURN(addrinfo * info, Lookup(peer, /*passive=*/false));
  ScopedFd fd(socket(info->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  int rc = fd.get() < 0 ? -1 : connect(fd.get(), info->ai_addr, info->ai_addrlen);
  freeaddrinfo(info);
  if (rc != 0 && errno != EINPROGRESS) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", peer.ToString(), ": ", std::strerror(errno)));
  }
  if (rc != 0) {
    absl::Status waited = WaitFor(fd.get(), POLLOUT, deadline, "connecting", stop_fd);
    if (absl::IsCancelled(waited)) {
      return absl::CancelledError(
          absl::StrCat("connecting to ", peer.ToString(), ": ", waited.message()));
    }
    if (!waited.ok()) {
      return absl::Status(waited.code(),
                          absl::StrCat("cannot connect to ", peer.ToString(), " within ",
                                       absl::FormatDuration(timeout), ": ", waited.message()));
    }
    int error = 0;
    socklen_t len = sizeof(error);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot connect to ", peer.ToString(), ": ", std::strerror(error)));
    }
  }
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

absl::Status SendHello(int fd, const Hello& hello, absl::Time deadline, int stop_fd) {
  std::string message(MagicOf(hello.transport), sizeof(kUcxMagic));
  uint32_t length = static_cast<uint32_t>(hello.worker_address.size());
  message.append(reinterpret_cast<const char*>(&hello.token), sizeof(hello.token));
  message.append(reinterpret_cast<const char*>(&length), sizeof(length));
  message.append(hello.worker_address);
  uint32_t locality_length = static_cast<uint32_t>(hello.locality.size());
  message.append(reinterpret_cast<const char*>(&locality_length), sizeof(locality_length));
  message.append(hello.locality);
  message.push_back(static_cast<char>(hello.peer_watch));
  return WriteAll(fd, message.data(), message.size(), deadline, stop_fd);
}

absl::StatusOr<std::optional<Hello>> ParseHello(absl::string_view bytes, HelloTransport expected,
                                                size_t* needed) {
  size_t at = 0;
  // Takes the next `size` bytes into `out` once they have come; until then says how many
  // the hello needs so far.
  auto take = [&](void* out, size_t size) {
    if (bytes.size() - at < size) {
      *needed = at + size;
      return false;
    }
    std::memcpy(out, bytes.data() + at, size);
    at += size;
    return true;
  };
  char magic[sizeof(kUcxMagic)];
  if (!take(magic, sizeof(magic))) return std::nullopt;
  if (std::memcmp(magic, MagicOf(expected), sizeof(magic)) != 0) {
    for (HelloTransport other : {HelloTransport::kUcx, HelloTransport::kOfi}) {
      if (other != expected && std::memcmp(magic, MagicOf(other), sizeof(magic)) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the peer is a Sluice endpoint over ", NameOf(other), ", this one is over ",
            NameOf(expected), ": give both ends the same transport"));
      }
    }
    return absl::InvalidArgumentError("peer is not a Sluice endpoint (bad hello magic)");
  }
  Hello hello;
  hello.transport = expected;
  uint32_t length = 0;
  if (!take(&hello.token, sizeof(hello.token)) || !take(&length, sizeof(length))) {
    return std::nullopt;
  }
  if (length == 0 || length > kMaxWorkerAddress) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello announces a worker address of ", length, " bytes"));
  }
  if (bytes.size() - at < length) {
    *needed = at + length;
    return std::nullopt;
  }
  hello.worker_address.assign(bytes.data() + at, length);
  at += length;
  if (!take(&length, sizeof(length))) return std::nullopt;
  if (length > kMaxLocality) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello announces a locality of ", length, " bytes"));
  }
  if (bytes.size() - at < length) {
    *needed = at + length;
    return std::nullopt;
  }
  hello.locality.assign(bytes.data() + at, length);
  at += length;
  uint8_t watch = 0;
  if (!take(&watch, sizeof(watch))) return std::nullopt;
  *needed = at;
  switch (static_cast<PeerWatch>(watch)) {
    case PeerWatch::kUcx:
    case PeerWatch::kSocket:
    case PeerWatch::kSocketForLocalPeers:
      hello.peer_watch = static_cast<PeerWatch>(watch);
      return hello;
  }
  return absl::InvalidArgumentError(absl::StrCat("hello announces peer watch ", watch));
}

absl::StatusOr<Hello> ReceiveHello(int fd, HelloTransport expected, absl::Time deadline,
                                   int stop_fd) {
  // Exactly what the hello needs is read, never past it.
  std::string bytes;
  size_t needed = sizeof(kUcxMagic);
  while (true) {
    const size_t have = bytes.size();
    bytes.resize(needed);
    SLUICE_RETURN_IF_ERROR(ReadAll(fd, bytes.data() + have, needed - have, deadline, stop_fd));
    SLUICE_ASSIGN_OR_RETURN(std::optional<Hello> hello, ParseHello(bytes, expected, &needed));
    if (hello.has_value()) return *std::move(hello);
  }
}

bool SocketAloneWatches(const Hello& mine, const Hello& theirs) {
  const bool same_host = !mine.locality.empty() && mine.locality == theirs.locality;
  auto wishes_socket_alone = [same_host](PeerWatch watch) {
    switch (watch) {
      case PeerWatch::kUcx:
        return false;
      case PeerWatch::kSocket:
        return true;
      case PeerWatch::kSocketForLocalPeers:
        return same_host;
    }
    return false;
  };
  return wishes_socket_alone(mine.peer_watch) && wishes_socket_alone(theirs.peer_watch);
}

}  // namespace sluice::transport
