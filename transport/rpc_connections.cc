// RpcEndpoint's connections: one connect per peer at a time, shared by the threads that
// want it, each bounded by its caller's deadline; and giving a connection up.
#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "transport/rpc.h"

namespace sluice::transport {

absl::StatusOr<ConnectionId> RpcEndpoint::ConnectTo(const Address& peer, ConnectionId known,
                                                    absl::Time deadline) {
  std::shared_ptr<ConnectAttempt> attempt;
  {
    absl::MutexLock lock(&mu_);
    while (true) {
      if (std::optional<ConnectionId> live = LiveConnectionLocked(peer, known)) return *live;
      // One connect per peer at a time: the others wait for its outcome. Two connections
      // made at once, one then closed as a duplicate, broke UCX: it pairs the endpoints two
      // workers make to each other in the order each side made them, and the sides' orders
      // can differ. A reply that needs the pairing (a rendezvous payload) was then lost on
      // the closed one.
      std::shared_ptr<ConnectAttempt>& slot = connecting_[peer];
      if (slot == nullptr) {
        slot = attempt = std::make_shared<ConnectAttempt>();
        attempt->deadline = deadline;
        ++connects_in_flight_;
        break;
      }
      // The connect in progress may need this very thread (UCX makes the endpoint on the
      // thread that drives it): waiting would deadlock. The caller retries, as it does for
      // a peer it could not reach (or asks LiveConnection, and ConnectInBackground, as a
      // reader's fetch does: it may run in a reply callback).
      if (transport_->DrivenByThisThread()) {
        return absl::UnavailableError(absl::StrCat("connecting to ", peer.ToString(),
                                                   ": another thread's connect is in progress"));
      }
      std::shared_ptr<ConnectAttempt> awaited = slot;
      connects_waited_for_.fetch_add(1, std::memory_order_relaxed);
      if (!mu_.AwaitWithDeadline(absl::Condition(
                                     +[](ConnectAttempt* a) { return a->done; }, awaited.get()),
                                 deadline)) {
        return absl::DeadlineExceededError(
            absl::StrCat("connecting to ", peer.ToString(),
                         ": the call's deadline passed while another thread connected"));
      }
      // That connect gave up at its caller's deadline (a 1 s goodbye): a caller with time
      // left connects again rather than inherit the shorter deadline's failure.
      if (absl::IsDeadlineExceeded(awaited->result.status()) && awaited->deadline < deadline) {
        continue;
      }
      return awaited->result;
    }
  }
  absl::StatusOr<ConnectionId> connected = ConnectOnce(peer, deadline);
  absl::MutexLock lock(&mu_);
  attempt->result = connected;
  attempt->done = true;
  connecting_.erase(peer);
  return connected;
}

absl::StatusOr<ConnectionId> RpcEndpoint::ConnectOnce(const Address& peer, absl::Time deadline) {
  absl::StatusOr<ConnectionId> connected = transport_->ConnectBefore(peer, deadline);
  std::optional<absl::Status> closed;  // why, when it was reported gone meanwhile
  {
    absl::MutexLock lock(&mu_);
    // The transport may report a connection gone as soon as it exists (the peer died as it
    // was reached), before it is recorded here: kept, that id would be handed out as the
    // peer's live connection until someone gave it up.
    if (connected.ok()) {
      if (auto it = closed_while_connecting_.find(*connected);
          it != closed_while_connecting_.end()) {
        closed = std::move(it->second);
        closed_while_connecting_.erase(it);
      } else {
        // No other connection to the peer was made meanwhile: ConnectTo lets one at a time.
        connections_[peer] = *connected;
        peer_of_[*connected] = Peer{peer};
      }
    }
    if (--connects_in_flight_ == 0) closed_while_connecting_.clear();
  }
  SLUICE_RETURN_IF_ERROR(connected.status());
  if (closed.has_value()) {
    return absl::UnavailableError(absl::StrCat("connection to ", peer.ToString(),
                                               " closed as it opened: ", closed->message()));
  }
  return *connected;
}

std::optional<ConnectionId> RpcEndpoint::LiveConnection(const Address& peer, ConnectionId known) {
  absl::MutexLock lock(&mu_);
  return LiveConnectionLocked(peer, known);
}

std::optional<ConnectionId> RpcEndpoint::LiveConnectionLocked(const Address& peer,
                                                              ConnectionId known) {
  if (known != kNoConnection) {
    // Compared, not assumed: a caller's stale or mixed-up id must not send elsewhere.
    auto it = peer_of_.find(known);
    if (it != peer_of_.end() && it->second.live && it->second.address == peer) return known;
  }
  if (auto it = connections_.find(peer); it != connections_.end()) return it->second;
  return std::nullopt;
}

void RpcEndpoint::ConnectInBackground(const Address& peer, ConnectCallback done) {
  std::vector<std::shared_ptr<Connector>> finished;
  // Said, not read off `done`: a moved-from std::function is empty in libstdc++, but
  // libc++ leaves a small one callable, which would then run twice.
  bool taken = false;
  {
    absl::MutexLock lock(&background_mu_);
    if (!background_stopping_) {
      BackgroundCallers& callers = background_callers_[peer];
      callers.waiting.push_back(std::move(done));
      taken = true;
      if (callers.thread_running) return;  // that thread will call it
      callers.thread_running = true;
      // Threads that ended are joined here, off the lock, so they do not pile up.
      auto ended = std::stable_partition(connectors_.begin(), connectors_.end(),
                                         [](const auto& c) { return !c->finished; });
      finished.assign(std::make_move_iterator(ended), std::make_move_iterator(connectors_.end()));
      connectors_.erase(ended, connectors_.end());
      auto connector = std::make_shared<Connector>();
      connector->thread = std::thread([this, peer, connector] {
        ConnectForCallers(peer);
        absl::MutexLock lock(&background_mu_);
        connector->finished = true;
      });
      connectors_.push_back(std::move(connector));
    }
  }
  if (!taken && done) done(absl::CancelledError("the RPC endpoint is shutting down"));
  for (const std::shared_ptr<Connector>& connector : finished) connector->thread.join();
}

void RpcEndpoint::ConnectForCallers(Address peer) {
  while (true) {
    const absl::StatusOr<ConnectionId> connected = ConnectTo(peer);
    std::vector<ConnectCallback> callers;
    {
      absl::MutexLock lock(&background_mu_);
      callers.swap(background_callers_[peer].waiting);
    }
    for (ConnectCallback& done : callers) done(connected);
    // Callers that came meanwhile are answered by this thread too: at once when the
    // connection is live, after a pause when it failed (a peer that refuses at once must
    // not be retried in a tight loop by callers that ask again from their callback).
    std::vector<ConnectCallback> cancelled;
    {
      absl::MutexLock lock(&background_mu_);
      if (!connected.ok() && !background_callers_[peer].waiting.empty()) {
        background_mu_.AwaitWithTimeout(absl::Condition(&background_stopping_),
                                        kBackgroundRetryPause);
      }
      auto entry = background_callers_.find(peer);
      if (background_stopping_) cancelled.swap(entry->second.waiting);
      if (entry->second.waiting.empty()) {
        // With none left the entry goes, and the next caller starts a thread of its own.
        background_callers_.erase(entry);
      } else {
        continue;
      }
    }
    for (ConnectCallback& done : cancelled) {
      done(absl::CancelledError("the RPC endpoint is shutting down"));
    }
    return;
  }
}

void RpcEndpoint::Disconnect(ConnectionId connection, const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    auto peer = peer_of_.find(connection);
    if (peer == peer_of_.end()) return;
    if (auto it = connections_.find(peer->second.address);
        it != connections_.end() && it->second == connection) {
      connections_.erase(it);
    }
    peer->second.live = false;
  }
  // OnDisconnect (from the transport, once it cancelled what it could) fails the rest.
  transport_->Abort(connection, why);
}

}  // namespace sluice::transport
