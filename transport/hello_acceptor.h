// Takes connections from a transport's listening socket and reads their hellos without
// blocking, for a progress thread that must keep serving its other connections meanwhile.
// A transport that waited for each hello in turn stalled all its traffic for up to the
// hello timeout behind one peer that connected and said nothing (a port scanner, a peer
// whose process stopped, a partition after the TCP handshake).
//
// For the thread driving the transport only (its progress thread; UCX's baton holder may ask
// Owns). Each accepted socket is watched (the `watch` given) until its hello
// is complete, it is found bad, or its time is up; the finished peer is handed back with
// its socket unwatched.
//
//   HelloAcceptor acceptor(HelloTransport::kUcx, absl::Seconds(2), watch, unwatch);
//   // listening socket readable:
//   acceptor.AcceptAll(listen_fd);
//   // another socket readable:
//   if (acceptor.Owns(fd)) {
//     if (std::optional<AcceptedPeer> peer = acceptor.OnReadable(fd)) Connect(*peer);
//   }
//   // now and then:
//   acceptor.DropOverdue(std::chrono::steady_clock::now());
#ifndef SLUICE_TRANSPORT_HELLO_ACCEPTOR_H_
#define SLUICE_TRANSPORT_HELLO_ACCEPTOR_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "transport/bootstrap.h"

namespace sluice::transport {

// A connection taken from a listening socket, with the hello its peer sent.
struct AcceptedPeer {
  ScopedFd socket;
  Hello hello;
  std::string peer;  // "host:port", for messages
};

class HelloAcceptor {
 public:
  // Peers are given `timeout` from their accept to send their hello. `watch(fd)` adds a
  // socket to the caller's poll set (readable wakes it), `unwatch(fd)` takes it out.
  HelloAcceptor(HelloTransport expected, absl::Duration timeout, std::function<void(int)> watch,
                std::function<void(int)> unwatch);
  HelloAcceptor(const HelloAcceptor&) = delete;
  HelloAcceptor& operator=(const HelloAcceptor&) = delete;
  // Closes the sockets of the peers still pending (closing takes them out of any epoll set).
  ~HelloAcceptor() = default;

  // Takes the reserve descriptor (below): for a transport about to listen, so that only
  // transports that listen hold one.
  void PrepareToListen();
  // Accepts every connection waiting on the non-blocking `listen_fd`. Past kMaxPending
  // peers pending at once, the one accepted first is dropped for each new one. Out of file
  // descriptors, pending peers are dropped, oldest first, to make room; with none pending,
  // the waiting connections are hung up on (the listen socket would otherwise stay
  // readable and its caller spin).

  void AcceptAll(int listen_fd);
  [[nodiscard]] bool Owns(int fd) const { return pending_.contains(fd); }
  // Reads what the peer on `fd` sent. Returns it once its hello is complete; nullopt while
  // more is to come, or when it was dropped: a bad hello, or closed (the connecting side
  // gets its own error). Any fd is taken: one not pending is ignored.
  [[nodiscard]] std::optional<AcceptedPeer> OnReadable(int fd);
  // Drops the peers whose hello has not come by `now`.
  void DropOverdue(std::chrono::steady_clock::time_point now);
  // Drops every pending peer.
  void Clear();
  [[nodiscard]] size_t pending() const { return pending_.size(); }

  static constexpr size_t kMaxPending = 256;
  // What the transports give a peer to send its hello.
  static constexpr absl::Duration kTimeout = absl::Seconds(2);

 private:
  struct Pending {
    ScopedFd socket;
    std::string peer;
    std::string bytes;                               // of the hello so far
    size_t needed = 0;                               // ParseHello's
    std::chrono::steady_clock::time_point deadline;  // not the wall clock, which may step
  };

  void Drop(int fd);
  void DropOldest();
  // Out of descriptors: makes room for one accept; false if there is none to free.
  bool FreeADescriptor(int listen_fd);

  const HelloTransport expected_;
  const absl::Duration timeout_;
  const std::function<void(int)> watch_;
  const std::function<void(int)> unwatch_;
  absl::flat_hash_map<int, Pending> pending_;
  // Held to be closed when accept runs out of descriptors, so that one waiting connection
  // can be taken and hung up on (reopened after; opened by PrepareToListen).
  ScopedFd reserve_;
  bool said_out_of_descriptors_ = false;
};

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_HELLO_ACCEPTOR_H_
