// The TCP bootstrap that introduces two transport instances (UCX workers, libfabric
// endpoints) to each other: each side sends its own address bytes and a token.
//
// Why not ucp_listener (UCX): with UCX 1.13 an endpoint made through the sockaddr connection
// manager gets lanes of CM-capable transports only, so co-located peers never use shared
// memory, and UCX_TLS=posix,sysv,cma,self cannot connect at all ("Destination is
// unreachable"). Exchanging worker addresses over our own socket and creating endpoints with
// UCP_EP_PARAM_FIELD_REMOTE_ADDRESS lets UCX pick shm for local peers and tcp (or RDMA) for
// remote ones. The socket stays open for the life of the connection: when a peer process
// dies the kernel closes it, which reports the failure at once on every transport.
// libfabric's RDM endpoints have no per-peer failure event, so ofi:// relies on it too.
//
// Hello (both directions): "SLC2", uint64 token, uint32 length, address bytes (a UCX worker
// address, or a libfabric endpoint name from fi_getname), uint32 length, locality bytes,
// uint8 peer watch.
// `token` is the sender's id for this connection; the receiver stamps it on every message it
// sends back so the sender knows which connection a message came from.
//
//   absl::StatusOr<ScopedFd> fd = ConnectSocket(address, absl::Seconds(5));
//   SLUICE_RETURN_IF_ERROR(SendHello(fd->get(), {token, my_address}, deadline));
#ifndef SLUICE_TRANSPORT_BOOTSTRAP_H_
#define SLUICE_TRANSPORT_BOOTSTRAP_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "transport/address.h"

namespace sluice::transport {

// Owns a file descriptor.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ~ScopedFd() { reset(); }
  [[nodiscard]] int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

// Who notices that a connection's peer died, as one side wishes it. The bootstrap socket
// always watches; UCX's peer-failure mode (UCP_ERR_HANDLING_MODE_PEER) may watch too. Both
// ends of a UCX connection must agree: with NONE on one side and PEER on the other, tcp
// messages were never delivered (ucx_peer_watch_test). See UcxContext for who wishes what.
enum class PeerWatch : uint8_t {
  kUcx = 0,                  // UCX watches every peer
  kSocket = 1,               // the socket alone watches every peer
  kSocketForLocalPeers = 2,  // the socket alone watches peers of the same HostLocality
};

// Which transport's address a hello carries: each has its own magic, so that a peer of the
// other transport is refused by name (a UCX dispatcher handed a libfabric address
// aborted in UCX's address unpacking).
enum class HelloTransport : uint8_t { kUcx, kOfi };

struct Hello {
  uint64_t token = 0;
  std::string worker_address;
  std::string locality;  // the sender's HostLocality() (host_locality.h), "" if unknown
  PeerWatch peer_watch = PeerWatch::kUcx;
  HelloTransport transport = HelloTransport::kUcx;
};

// Whether the connection between the senders of `mine` and `theirs` is watched by its socket
// alone: both wish it. Both ends reach the same answer.
[[nodiscard]] bool SocketAloneWatches(const Hello& mine, const Hello& theirs);

// Once raised, ends at once (Cancelled) the waits of the connects given its fd, in progress
// or to come: an owner about to destroy a transport raises it rather than wait out a
// connect to a peer that never answers. Raised for good.
class ConnectStop {
 public:
  ConnectStop();  // an eventfd; without one (fd() -1), nothing stops early
  void Raise();
  [[nodiscard]] int fd() const { return fd_.get(); }

 private:
  ScopedFd fd_;
};

// A listening socket bound to `bind` (port 0 picks one); `*port` receives the bound port.
[[nodiscard]] absl::StatusOr<ScopedFd> ListenSocket(const Address& bind, uint16_t* port);
// Connects within `timeout`; a refused or unreachable peer is Unavailable, naming it.
// `stop_fd` (ConnectStop::fd(), or -1) here and below: its raising ends the wait, Cancelled.
[[nodiscard]] absl::StatusOr<ScopedFd> ConnectSocket(const Address& peer, absl::Duration timeout,
                                                     int stop_fd = -1);
[[nodiscard]] absl::Status SendHello(int fd, const Hello& hello, absl::Time deadline,
                                     int stop_fd = -1);
// A hello of the `expected` transport; one of the other is InvalidArgument naming both.
// Reads exactly the hello's bytes.
[[nodiscard]] absl::StatusOr<Hello> ReceiveHello(int fd, HelloTransport expected,
                                                 absl::Time deadline, int stop_fd = -1);
// The hello at the front of `bytes` (as ReceiveHello), or nullopt while it is incomplete:
// then `*needed` is how many bytes it needs at least (more may be asked once they came).
// On success `*needed` is the hello's size.
[[nodiscard]] absl::StatusOr<std::optional<Hello>> ParseHello(absl::string_view bytes,
                                                              HelloTransport expected,
                                                              size_t* needed);

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_BOOTSTRAP_H_
