// UcxTransport, second part: connections. Listening and accepting, connecting, endpoint
// creation, and the three ways a connection ends: the peer fails (FailConnection), the
// application closes it (Close: flush, then close) or gives up on it (Abort: force close).
// Everything here runs on the thread that drives the worker. See ucx_transport.h.
#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport::ucx {
namespace {

// A same-host peer is left to the bootstrap socket on the grounds that UCX reaches it over
// shared memory only; should UCX pick a lane that can fail inside it (tcp, because shared
// memory turned out unreachable), say so, and how to have UCX watch instead.
void WarnIfLanesNeedUcxWatch(const std::vector<std::string>& lanes, absl::string_view peer) {
  if (lanes.empty() || UcxContext::SharedMemoryOnly(lanes)) return;
  std::fprintf(stderr,
               "sluice: UCX connects to same-host peer %.*s over %s without UCX's peer watch; "
               "if that peer dies UCX may misbehave. Set SLUICE_UCX_PEER_FAILURE=ucx.\n",
               static_cast<int>(peer.size()), peer.data(), absl::StrJoin(lanes, ",").c_str());
}

}  // namespace

absl::StatusOr<Address> UcxTransport::Listen(const Address& bind) {
  Address bound = bind;
  SLUICE_ASSIGN_OR_RETURN(ScopedFd socket, ListenSocket(bind, &bound.port));
  RunSync([&] {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = socket.get();
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, socket.get(), &ev);
    listen_socket_ = std::move(socket);
    acceptor_.PrepareToListen();
  });
  return bound;
}

void UcxTransport::AcceptConnections() {
  acceptor_.DropOverdue(std::chrono::steady_clock::now());
  acceptor_.AcceptAll(listen_socket_.get());
}

void UcxTransport::FinishAccept(int fd) {
  std::optional<AcceptedPeer> accepted = acceptor_.OnReadable(fd);
  if (!accepted.has_value()) return;
  ConnectionId id = next_connection_id_.fetch_add(1);
  if (!CreateEndpoint(id, accepted->hello, std::move(accepted->peer), std::move(accepted->socket))
           .ok()) {
    return;
  }
  // A fresh socket's send buffer takes the hello at once: this does not wait on the peer.
  // The handler has not seen this connection yet: drop it without an OnDisconnect.
  if (!SendHello(fd, OwnHello(id), absl::Now() + HelloAcceptor::kTimeout).ok()) {
    CloseEndpoint(id, Closing::kGivenUp);
  }
}

absl::StatusOr<ConnectionId> UcxTransport::ConnectBefore(const Address& peer, absl::Time before) {
  const absl::Time now = absl::Now();
  const absl::Time deadline = std::min(now + options_.connect_timeout, before);
  SLUICE_ASSIGN_OR_RETURN(
      ScopedFd socket,
      ConnectSocket(peer, std::max(deadline - now, absl::ZeroDuration()), connect_stop_.fd()));
  ConnectionId id = next_connection_id_.fetch_add(1);
  const Hello mine = OwnHello(id);
  SLUICE_RETURN_IF_ERROR(SendHello(socket.get(), mine, deadline, connect_stop_.fd()));
  absl::StatusOr<Hello> remote =
      ReceiveHello(socket.get(), HelloTransport::kUcx, deadline, connect_stop_.fd());
  if (!remote.ok()) {
    return absl::Status(remote.status().code(), absl::StrCat("connecting to ", peer.ToString(),
                                                             ": ", remote.status().message()));
  }
  absl::Status status;
  RunSync([&] {
    // The peer answers to the worker our hello named: one restarted since (RestartWorker)
    // would get nothing it sends back, and the calls over this connection would wait out
    // their deadlines. Closing the socket fails the peer's side too.
    if (OwnHello(id).worker_address != mine.worker_address) {
      status = absl::UnavailableError(
          absl::StrCat("connecting to ", peer.ToString(),
                       ": this process's UCX worker was restarted meanwhile; connect again"));
      return;
    }
    if (in_ucp_progress_) {  // from a callback: see RunDeferred
      // Sends stamp the token now; they go out once the endpoint exists.
      endpoints_[id] = Endpoint{.peer = peer.ToString(), .remote_token = remote->token};
      deferred_endpoints_.push_back(
          DeferredEndpoint{id, *std::move(remote), peer.ToString(), std::move(socket)});
      return;
    }
    status = CreateEndpoint(id, *remote, peer.ToString(), std::move(socket));
  });
  SLUICE_RETURN_IF_ERROR(status);
  return id;
}

absl::Status UcxTransport::CreateEndpoint(ConnectionId id, const Hello& remote, std::string peer,
                                          ScopedFd socket) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(remote.worker_address.data());
  params.err_mode = SocketAloneWatches(OwnHello(id), remote) ? UCP_ERR_HANDLING_MODE_NONE
                                                             : UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxTransport::OnEndpointError;
  params.err_handler.arg = this;
  ucp_ep_h ep = nullptr;
  ucs_status_t s = ucp_ep_create(worker_.get(), &params, &ep);
  if (s == UCS_ERR_UNREACHABLE && params.err_mode == UCP_ERR_HANDLING_MODE_PEER) {
    // No transport to this peer handles peer failure (see UcxContext::ucx_peer_failure);
    // the bootstrap socket reports the peer's death instead.
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    s = ucp_ep_create(worker_.get(), &params, &ep);
  }
  if (s != UCS_OK) {
    return UcsError(
        s, absl::StrCat("cannot create endpoint to ", peer, " (UCX_TLS=", context_->tls(), ")"));
  }
  WatchSocket(socket.get());
  connection_by_socket_[socket.get()] = id;
  connection_by_ep_[ep] = id;
  bool ucx_watches = params.err_mode == UCP_ERR_HANDLING_MODE_PEER;
  bool shared_memory = false;
  bool sends_inside_progress = false;
  bool peer_reads_our_memory = false;
  const std::vector<std::string>& opened = context_->transports();
  auto is_shared_memory = [](absl::string_view tl) { return tl == "posix" || tl == "sysv"; };
  auto reads_peer_memory = [&is_shared_memory](absl::string_view tl) {
    return tl != "tcp" && tl != "self" && !is_shared_memory(tl);
  };
  const bool may_warn = !ucx_watches && context_->peer_watch() == PeerWatch::kSocketForLocalPeers;
  if (may_warn || std::any_of(opened.begin(), opened.end(), is_shared_memory) ||
      std::any_of(opened.begin(), opened.end(), reads_peer_memory)) {
    const std::vector<std::string> lanes = DescribeEndpoint(ep).transports;
    shared_memory = std::any_of(lanes.begin(), lanes.end(), is_shared_memory);
    peer_reads_our_memory = std::any_of(lanes.begin(), lanes.end(), reads_peer_memory);
    // Not to this very worker: UCX's self transport runs the handler inside the send, which
    // from a callback would re-enter OnActiveMessage.
    sends_inside_progress = UcxContext::SharedMemoryOnly(lanes) &&
                            std::find(lanes.begin(), lanes.end(), "self") == lanes.end();
    if (may_warn) WarnIfLanesNeedUcxWatch(lanes, peer);
  }
  endpoints_[id] = Endpoint{.ep = ep,
                            .peer = std::move(peer),
                            .remote_token = remote.token,
                            .socket = std::move(socket),
                            .ucx_watches = ucx_watches,
                            .shared_memory = shared_memory,
                            .sends_inside_progress = sends_inside_progress,
                            .peer_reads_our_memory = peer_reads_our_memory};
  return absl::OkStatus();
}

Hello UcxTransport::OwnHello(ConnectionId id) const {
  absl::MutexLock lock(&address_mu_);
  return Hello{id, worker_address_, locality_, context_->peer_watch()};
}

absl::StatusOr<std::string> UcxTransport::DescribeConnection(ConnectionId connection) {
  absl::StatusOr<std::string> described =
      absl::NotFoundError(absl::StrCat("no UCX connection ", connection));
  RunSync([&] {
    auto it = endpoints_.find(connection);
    if (it == endpoints_.end() || it->second.ep == nullptr) return;
    const EndpointInfo info = DescribeEndpoint(it->second.ep);
    described = absl::StrCat(
        absl::StrJoin(info.transports, ","), "; dead peers: ",
        it->second.ucx_watches ? "UCX (peer mode) and bootstrap socket" : "bootstrap socket",
        "; am_send ", info.am_send);
  });
  return described;
}

void UcxTransport::OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<UcxTransport*>(arg);
  auto it = self->connection_by_ep_.find(ep);
  if (it == self->connection_by_ep_.end()) return;
  ConnectionId id = it->second;
  const Endpoint& endpoint = self->endpoints_[id];
  // Over tcp without UCX's peer-failure mode, a peer's death reaches UCX first, as a reset
  // (UCS_ERR_ENDPOINT_TIMEOUT and the like). The bootstrap socket tells what happened.
  pollfd socket{endpoint.socket.get(), POLLIN | POLLRDHUP, 0};
  if (socket.fd >= 0 && poll(&socket, 1, 0) == 1) {
    self->FailConnection(
        id, absl::UnavailableError(absl::StrCat(
                "connection to ", endpoint.peer,
                " closed by the peer (process exited?); UCX: ", ucs_status_string(status))));
    return;
  }
  self->FailConnection(
      id, UcsError(status, absl::StrCat("connection to ", endpoint.peer,
                                        " failed (the peer exited or cannot be reached)")));
}

void UcxTransport::WatchSocket(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void UcxTransport::StopWatching(const Endpoint& endpoint) {
  if (int fd = endpoint.socket.get(); fd >= 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    connection_by_socket_.erase(fd);
  }
}

void UcxTransport::FailConnection(ConnectionId id, const absl::Status& why) {
  auto it = endpoints_.find(id);
  if (it == endpoints_.end()) return;
  // Stop watching now; the endpoint is closed later because UCX does not allow closing an
  // endpoint from inside its own error callback.
  StopWatching(it->second);
  it->second.socket.reset();
  it->second.failed = true;
  connection_by_ep_.erase(it->second.ep);
  if (it->second.shared_memory) WatchReceiveQueue(it->second.peer);
  // The peer is dead: what was queued for it is never read, and without UCX's watch
  // nothing would ever complete it.
  if (!it->second.ucx_watches) AbandonSends(id, why);
  Post([this, id] { CloseEndpoint(id, Closing::kPeerDead); });
  handler_->OnDisconnect(id, why);
}

void UcxTransport::CloseEndpoint(ConnectionId id, Closing how) {
  auto it = endpoints_.find(id);
  if (it == endpoints_.end()) return;
  ucp_ep_h ep = it->second.ep;
  const bool ucx_watches = it->second.ucx_watches;
  StopWatching(it->second);
  ScopedFd socket = std::move(it->second.socket);  // closed once the flush ends
  EraseEndpoint(id);
  if (ep == nullptr) return;  // its creation was deferred and failed (RunDeferred)
  connection_by_ep_.erase(ep);
  switch (how) {
    case Closing::kGraceful:
      break;
    case Closing::kPeerDead:
    case Closing::kGivenUp:
      // Without UCX's watch a close flushes, and a flush waits for ever on sends queued to
      // a dead peer (abandoned, AbandonSends): such an endpoint is left to the worker's
      // destruction.
      if (!ucx_watches && HasSendsInFlight(id)) return;
      CloseUcxEndpoint(ep, /*force=*/ucx_watches && how == Closing::kPeerDead);
      return;
  }
  // Graceful: flush what was sent, then close. A graceful ucp_ep_close_nbx to a peer that
  // never answers would stay pending for good; a flush can be given up on (destructor).
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  flushing_[ep] = Flushing{id, ucx_watches, std::move(socket)};
  param.user_data = new std::pair<UcxTransport*, ucp_ep_h>(this, ep);
  param.cb.send = [](void* request, ucs_status_t, void* user_data) {
    std::unique_ptr<std::pair<UcxTransport*, ucp_ep_h>> op(
        static_cast<std::pair<UcxTransport*, ucp_ep_h>*>(user_data));
    if (request != nullptr) ucp_request_free(request);
    UcxTransport* self = op->first;
    ucp_ep_h ep = op->second;
    // Not from inside UCX's callback (the endpoint may be failing right now): queued, and
    // the queue is FIFO, so the destructor's RunSync checks still see it in order.
    self->Post([self, ep] {
      auto it = self->flushing_.find(ep);
      if (it == self->flushing_.end()) return;
      self->flushing_.erase(it);
      self->CloseUcxEndpoint(ep, /*force=*/false);
    });
  };
  ucs_status_ptr_t request = ucp_ep_flush_nbx(ep, &param);
  if (!UCS_PTR_IS_PTR(request)) param.cb.send(nullptr, UCS_PTR_STATUS(request), param.user_data);
}

void UcxTransport::CloseUcxEndpoint(ucp_ep_h ep, bool force) {
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  param.user_data = this;
  param.cb.send = [](void* request, ucs_status_t, void* user_data) {
    // Not ours any more when a restart released it (ReleaseCloseRequests).
    if (static_cast<UcxTransport*>(user_data)->close_requests_.erase(request) == 0) return;
    ucp_request_free(request);
  };
  ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &param);
  if (UCS_PTR_IS_PTR(request)) close_requests_.insert(request);
}

void UcxTransport::ReleaseCloseRequests() {
  for (void* request : close_requests_) ucp_request_free(request);
  close_requests_.clear();
}

void UcxTransport::Close(ConnectionId connection) {
  Post([this, connection] { CloseEndpoint(connection, Closing::kGraceful); });
}

void UcxTransport::Abort(ConnectionId connection, absl::Status why) {
  Post([this, connection, why = std::move(why)]() mutable {
    // Gone, or failed already (FailConnection told the handler and queued the close).
    auto it = endpoints_.find(connection);
    if (it == endpoints_.end() || !connection_by_ep_.contains(it->second.ep)) return;
    // Where UCX watches the peer, a forced close cancels the endpoint's requests (a
    // rendezvous receive in flight lets go of its buffer and fails its call). Without its
    // watch UCX refuses to force, and nothing cancels: the sends are given up on here (a
    // peer that is alive after all may still read a payload UCX had queued), and a
    // rendezvous receive already pulling its payload may still land it, so the calls
    // waiting on one stay with it (kReceivesOutstandingPayload).
    // Either way the peer may be alive, and read what it was told of; without the forced
    // close UCX goes on sending what it had begun, reading the payloads as it does.
    MarkSendsThePeerMayRead(connection, /*ucx_keeps_sending=*/!it->second.ucx_watches);
    if (it->second.ucx_watches) {
      CloseEndpoint(connection, Closing::kPeerDead);
    } else {
      AbandonSends(connection, why);
      why.SetPayload(kReceivesOutstandingPayload, absl::Cord("1"));
      CloseEndpoint(connection, Closing::kGivenUp);
    }
    handler_->OnDisconnect(connection, why);
  });
}

}  // namespace sluice::transport::ucx
