// OfiTransport: lifecycle, the public entry points, and connections. The data path is in
// ofi_data_path.cc.
#include "transport/ofi/ofi_transport.h"

#include <rdma/fabric.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "transport/ofi/ofi_memory.h"
#include "transport/ofi/shm_endpoint_keeper.h"
#include "transport/spin_wait.h"

namespace sluice::transport::ofi {
namespace {

// How long the destructor lets closing connections finish their transfers.
constexpr auto kCloseGrace = std::chrono::seconds(2);
// How long an ended connection's peer address stays in the AV (RemoveRetiredAddresses).
constexpr auto kAddressGrace = std::chrono::seconds(1);
// How long at most a connection given up on keeps its socket for our reads in flight
// (Retired::socket): kPeerReadHold.
constexpr auto kKeptSocketHold = std::chrono::seconds(60);

}  // namespace

absl::StatusOr<std::unique_ptr<OfiTransport>> OfiTransport::Create(const TransportOptions& options,
                                                                   MessageHandler* handler) {
  std::unique_ptr<OfiTransport> transport(new OfiTransport(options, handler));
  SLUICE_RETURN_IF_ERROR(transport->Start());
  return transport;
}

OfiTransport::OfiTransport(const TransportOptions& options, MessageHandler* handler)
    : options_(options), handler_(handler) {}

absl::Status OfiTransport::Start() {
  SLUICE_ASSIGN_OR_RETURN(domain_, OfiDomain::Open(options_.ofi_provider));
  SLUICE_ASSIGN_OR_RETURN(endpoint_, OfiEndpoint::Open(domain_));
  if (domain_->provider() == "shm") ShmEndpointKeeper::Opened();
  eager_limit_ = std::min(options_.rendezvous_threshold, kMaxEagerPayload);
  buffer_size_ = sizeof(WireHeader) + kMaxHeaderSize + eager_limit_;
  receive_buffers_.reset(new std::byte[buffer_size_ * kReceiveBuffers]);
  SLUICE_ASSIGN_OR_RETURN(receive_registration_, domain_->Register(receive_buffers_.get(),
                                                                   buffer_size_ * kReceiveBuffers));
  hello_address_ = EncodePeerAddress(PeerAddress{eager_limit_, endpoint_->name()});
  // No thread runs yet, so these calls need no owner.
  for (size_t slot = 0; slot < kReceiveBuffers; ++slot) PostReceive(slot);

  progress_ = std::make_shared<ProgressThread>();
  ProgressThread::Hooks hooks;
  hooks.progress = [this] { return endpoint_->Progress(); };
  hooks.can_block = [this] { return endpoint_->CanBlock(); };
  hooks.on_ready = [this](int fd) { OnSocketReady(fd); };
  hooks.on_tick = [this] {
    RetireOverdueCloses();
    RemoveRetiredAddresses();
    if (acceptor_.pending() > 0) acceptor_.DropOverdue(std::chrono::steady_clock::now());
    handler_->OnTick();
  };
  domain_->SetOwner(progress_);
  return progress_->Start(std::move(hooks), endpoint_->wait_fd(), options_.spin_before_sleep,
                          options_.max_spin_before_sleep);
}

OfiTransport::~OfiTransport() {
  if (progress_ != nullptr && progress_->running()) {
    progress_->RunSync([this] {
      if (listen_socket_.get() >= 0) progress_->Unwatch(listen_socket_.get());
      listen_socket_.reset();
      acceptor_.Clear();
      std::vector<ConnectionId> ids;
      for (const auto& [id, connection] : connections_) ids.push_back(id);
      for (ConnectionId id : ids) CloseConnection(id);
    });
    // Give transfers in flight a bounded time; a dead peer must not hang shutdown.
    auto deadline = std::chrono::steady_clock::now() + kCloseGrace;
    while (std::chrono::steady_clock::now() < deadline) {
      bool done = false;
      progress_->RunSync([&] { done = connections_.empty(); });
      if (done) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    progress_->RunSync([this] { FailEverything(); });
    progress_->Stop();
  }
  if (endpoint_ != nullptr && domain_->provider() == "shm") {
    // In-process shm peers may still touch this endpoint's region (shm_endpoint_keeper.h).
    ShmEndpointKeeper::Close(ShmEndpointParts{domain_, std::move(receive_buffers_),
                                              std::move(receive_registration_),
                                              std::move(endpoint_)});
  } else if (domain_ != nullptr) {
    // The endpoint goes before the receive buffers' registration, both before the domain.
    domain_->RunUnowned([this] {
      endpoint_.reset();
      receive_registration_.reset();
    });
  }
}

absl::StatusOr<Address> OfiTransport::Listen(const Address& bind) {
  Address bound = bind;
  SLUICE_ASSIGN_OR_RETURN(ScopedFd socket, ListenSocket(bind, &bound.port));
  if (!progress_->RunSync([&] {
        progress_->Watch(socket.get());
        listen_socket_ = std::move(socket);
        acceptor_.PrepareToListen();
      })) {
    return absl::CancelledError("the libfabric transport is shutting down");
  }
  return bound;
}

absl::StatusOr<ConnectionId> OfiTransport::ConnectBefore(const Address& peer, absl::Time before) {
  const absl::Time now = absl::Now();
  const absl::Time deadline = std::min(now + options_.connect_timeout, before);
  SLUICE_ASSIGN_OR_RETURN(
      ScopedFd socket,
      ConnectSocket(peer, std::max(deadline - now, absl::ZeroDuration()), connect_stop_.fd()));
  ConnectionId id = next_connection_id_.fetch_add(1);
  SLUICE_RETURN_IF_ERROR(SendHello(socket.get(), OwnHello(id), deadline, connect_stop_.fd()));
  absl::StatusOr<Hello> remote =
      ReceiveHello(socket.get(), HelloTransport::kOfi, deadline, connect_stop_.fd());
  if (!remote.ok()) {
    return absl::Status(remote.status().code(), absl::StrCat("connecting to ", peer.ToString(),
                                                             ": ", remote.status().message()));
  }
  // Stopped, it added nothing: an id for no connection would be given out.
  absl::Status status = absl::CancelledError("the libfabric transport is shutting down");
  progress_->RunSync(
      [&] { status = AddConnection(id, *remote, peer.ToString(), std::move(socket)); });
  SLUICE_RETURN_IF_ERROR(status);
  return id;
}

void OfiTransport::Send(ConnectionId to, absl::string_view header, Payload payload,
                        SendCallback done) {
  if (progress_->OnThread()) {
    // Replies from handlers on the progress thread go out at once, without a trip through
    // the queue.
    DoSend(to, header, payload, std::move(done));
    return;
  }
  // A named type, not a lambda: when the thread has ended (the transport is being
  // destroyed) Post leaves it untouched, and its callback is still told.
  struct QueuedSend {
    void operator()() { transport->DoSend(to, header, payload, std::move(done)); }
    OfiTransport* transport;
    ConnectionId to;
    std::string header;
    Payload payload;
    SendCallback done;
  };
  QueuedSend send{this, to, std::string(header), payload, std::move(done)};
  // Moved from only when queued (ProgressThread::Post). A reply's callback may be empty.
  if (!progress_->Post(std::move(send)) && send.done) {
    send.done(absl::CancelledError("the libfabric transport is shutting down"));
  }
}

void OfiTransport::Close(ConnectionId connection) {
  progress_->Post([this, connection] { CloseConnection(connection); });
}

void OfiTransport::Abort(ConnectionId connection, absl::Status why) {
  // libfabric cannot cancel an fi_read: a peer behind a partition may still complete one
  // into its landing buffer, so reads in flight end only when libfabric ends them.
  why.SetPayload(kReceivesOutstandingPayload, absl::Cord("1"));
  progress_->Post([this, connection, why = std::move(why)] {
    FailConnection(connection, why, /*fail_reads=*/false, /*peer_alive=*/true);
  });
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> OfiTransport::RegisterMemory(void* base,
                                                                           size_t size) {
  absl::StatusOr<std::unique_ptr<MemoryRegion>> region =
      absl::InternalError("the progress thread has stopped");
  progress_->RunSync([&] { region = OfiMemoryRegion::Register(domain_, base, size); });
  return region;
}

absl::Status OfiTransport::AddConnection(ConnectionId id, const Hello& remote, std::string peer,
                                         ScopedFd socket) {
  absl::StatusOr<PeerAddress> remote_address = DecodePeerAddress(remote.worker_address);
  if (!remote_address.ok()) {
    return absl::Status(
        remote_address.status().code(),
        absl::StrCat("connection to ", peer, ": ", remote_address.status().message()));
  }
  absl::StatusOr<fi_addr_t> address = endpoint_->Insert(remote_address->name);
  if (!address.ok()) {
    return absl::Status(address.status().code(),
                        absl::StrCat("connection to ", peer, ": ", address.status().message()));
  }
  progress_->Watch(socket.get());
  connection_by_socket_[socket.get()] = id;
  Connection& connection = connections_[id];
  connection.address = *address;
  connection.peer = std::move(peer);
  connection.remote_token = remote.token;
  connection.eager_limit = std::min<uint64_t>(eager_limit_, remote_address->eager_limit);
  connection.socket = std::move(socket);
  return absl::OkStatus();
}

void OfiTransport::OnSocketReady(int fd) {
  if (fd == listen_socket_.get()) {
    AcceptConnections();
    return;
  }
  if (acceptor_.Owns(fd)) {
    FinishAccept(fd);
    return;
  }
  auto it = connection_by_socket_.find(fd);
  if (it == connection_by_socket_.end()) return;
  // Nothing is sent on a bootstrap socket after the hello: readable means closed.
  const ConnectionId id = it->second;
  // What it sent before it hung up is taken first (spin_wait.h).
  ProgressUntilQuiet([this] { return endpoint_->Progress(); }, std::chrono::milliseconds(1),
                     std::chrono::milliseconds(10));
  auto connection = connections_.find(id);
  if (connection == connections_.end()) return;  // closed meanwhile
  absl::Status why = absl::UnavailableError(absl::StrCat("connection to ", connection->second.peer,
                                                         " closed by the peer (process exited?)"));
  // A dead shm peer serves no read of ours any more, so those fail now. Over tcp the bytes
  // the kernel already holds still drain into a read's landing buffer on the next progress
  // (libfabric cannot cancel it), and the provider ends it once it sees the connection
  // gone: the read stays until then, and its call with it, so that the buffer is not handed
  // out again while it is written.
  const bool reads_end_now = provider() == "shm";
  if (!reads_end_now) why.SetPayload(kReceivesOutstandingPayload, absl::Cord("1"));
  FailConnection(id, why, /*fail_reads=*/reads_end_now);
}

void OfiTransport::AcceptConnections() {
  acceptor_.DropOverdue(std::chrono::steady_clock::now());
  acceptor_.AcceptAll(listen_socket_.get());
}

void OfiTransport::FinishAccept(int fd) {
  std::optional<AcceptedPeer> accepted = acceptor_.OnReadable(fd);
  if (!accepted.has_value()) return;
  ConnectionId id = next_connection_id_.fetch_add(1);
  if (!AddConnection(id, accepted->hello, std::move(accepted->peer), std::move(accepted->socket))
           .ok()) {
    return;
  }
  // A fresh socket's send buffer takes the hello at once: this does not wait on the peer.
  // The handler has not seen this connection yet: drop it without an OnDisconnect.
  if (!SendHello(fd, OwnHello(id), absl::Now() + HelloAcceptor::kTimeout).ok()) {
    CloseConnection(id);
  }
}

void OfiTransport::FailConnection(ConnectionId id, const absl::Status& why, bool fail_reads,
                                  bool peer_alive) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  const bool notify = !it->second.closing;  // a closed connection gets no OnDisconnect
  ScopedFd kept_socket;
  if (int fd = it->second.socket.get(); fd >= 0) {
    progress_->Unwatch(fd);
    connection_by_socket_.erase(fd);
    if (fail_reads) {
      it->second.socket.reset();
    } else {
      kept_socket = std::move(it->second.socket);  // until our reads end (Retired::socket)
    }
  }
  // Mark it first so nothing below sends on it, then fail what it had pending.
  it->second.closing = true;
  it->second.failed = true;
  FailPendingOf(id, why, fail_reads, peer_alive);
  if (auto again = connections_.find(id); again != connections_.end()) {
    retired_.push_back(
        {id, again->second.address, std::chrono::steady_clock::now(), std::move(kept_socket)});
    connections_.erase(again);
  }
  if (notify) handler_->OnDisconnect(id, why);
}

void OfiTransport::CloseConnection(ConnectionId id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (!it->second.closing) it->second.closing_since = std::chrono::steady_clock::now();
  it->second.closing = true;
  RetireIfDone(id);
}

void OfiTransport::RetireIfDone(ConnectionId id) {
  auto it = connections_.find(id);
  if (it == connections_.end() || !it->second.closing || it->second.pending > 0) return;
  // Its last replies (kReadDone, kDeclined) leave before the socket closes: the peer takes
  // the close for the end of everything and fails each send whose kReadDone has not come,
  // though it was read. A peer that stopped reading holds them kCloseGrace at most
  // (RetireOverdueCloses).
  if (!endpoint_->Idle(id) &&
      std::chrono::steady_clock::now() - it->second.closing_since < kCloseGrace) {
    return;
  }
  // Closing the bootstrap socket is what tells the peer.
  if (int fd = it->second.socket.get(); fd >= 0) {
    progress_->Unwatch(fd);
    connection_by_socket_.erase(fd);
  }
  retired_.push_back({id, it->second.address, std::chrono::steady_clock::now()});
  connections_.erase(it);
}

void OfiTransport::RetireOverdueCloses() {
  std::vector<ConnectionId> overdue;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [id, connection] : connections_) {
    if (connection.closing && connection.pending == 0 &&
        now - connection.closing_since >= kCloseGrace) {
      overdue.push_back(id);
    }
  }
  for (ConnectionId id : overdue) RetireIfDone(id);
}

void OfiTransport::RemoveRetiredAddresses() {
  // An address leaves the AV only when libfabric holds no op for it: a provider may still
  // be retrying a send to a dead peer, and removal under it is not safe in every provider.
  // The grace covers what the peer sent before it saw the connection end: libfabric's shm
  // provider still answers those messages into the peer's region, which removal unmaps.
  const auto now = std::chrono::steady_clock::now();
  for (Retired& entry : retired_) {
    // Past kPeerReadHold the peer has given up on what it told us of, as we have on our
    // reads (a dead shm peer never ends them).
    if (entry.socket.get() >= 0 &&
        (endpoint_->Idle(entry.id) || now - entry.since >= kKeptSocketHold)) {
      entry.socket.reset();
    }
  }
  std::erase_if(retired_, [&](const Retired& entry) {
    if (now - entry.since < kAddressGrace || !endpoint_->Idle(entry.id)) return false;
    endpoint_->Remove(entry.address);
    return true;
  });
}

void OfiTransport::FailEverything() {
  const absl::Status why = absl::CancelledError("the ofi transport is shutting down");
  std::vector<ConnectionId> ids;
  for (const auto& [id, connection] : connections_) ids.push_back(id);
  // Their peers may be alive, only slow (still open after kCloseGrace): the payloads they
  // were told of may still be read, over shm straight out of this process's memory.
  for (ConnectionId id : ids) FailConnection(id, why, /*fail_reads=*/true, /*peer_alive=*/true);
}

std::string OfiTransport::Describe() const {
  const uint32_t version = fi_version();
  return absl::StrCat("libfabric ", FI_MAJOR(version), ".", FI_MINOR(version), ": provider ",
                      domain_ != nullptr ? provider() : std::string("(not started)"),
                      "; dead peers: bootstrap socket");
}

}  // namespace sluice::transport::ofi
