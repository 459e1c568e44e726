#include "transport/ofi/ofi_endpoint.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/ofi/shm_names.h"

namespace sluice::transport::ofi {
namespace {

// Completions read per fi_cq_read call.
constexpr int kCompletionBatch = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<OfiEndpoint>> OfiEndpoint::Open(std::shared_ptr<OfiDomain> domain) {
  std::unique_ptr<OfiEndpoint> self(new OfiEndpoint(domain));
  const fi_info* info = domain->info();
  const std::string& provider = domain->provider();

  self->tx_share_ = std::max<size_t>(16, info->tx_attr->size / 4);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_MSG;
  cq_attr.size = info->tx_attr->size + info->rx_attr->size;
  // A wait fd lets the progress thread sleep in epoll; shm has none and is polled instead.
  cq_attr.wait_obj = FI_WAIT_FD;
  fid_cq* cq = nullptr;
  int rc = fi_cq_open(domain->domain(), &cq_attr, &cq, nullptr);
  if (rc == -FI_ENOSYS || rc == -FI_EOPNOTSUPP || rc == -FI_EINVAL) {
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain->domain(), &cq_attr, &cq, nullptr);
  }
  if (rc != 0) return OfiError(rc, absl::StrCat("fi_cq_open (", provider, ")"));
  self->cq_.reset(cq);
  if (cq_attr.wait_obj == FI_WAIT_FD) {
    if (rc = fi_control(&cq->fid, FI_GETWAIT, &self->wait_fd_); rc != 0) {
      return OfiError(rc, absl::StrCat("fi_control(FI_GETWAIT) (", provider, ")"));
    }
  }

  fi_av_attr av_attr{};
  av_attr.type =
      info->domain_attr->av_type != FI_AV_UNSPEC ? info->domain_attr->av_type : FI_AV_TABLE;
  fid_av* av = nullptr;
  if (rc = fi_av_open(domain->domain(), &av_attr, &av, nullptr); rc != 0) {
    return OfiError(rc, absl::StrCat("fi_av_open (", provider, ")"));
  }
  self->av_.reset(av);

  // shm regions get a name of our own that a reused pid cannot collide with (shm_names.h).
  FiInfoPtr named;
  if (provider == "shm") {
    RemoveStaleShmRegions("/dev/shm");
    named.reset(fi_dupinfo(info));
    if (named == nullptr) return absl::ResourceExhaustedError("fi_dupinfo failed");
    const std::string name = UniqueShmEndpointName();
    free(named->src_addr);
    named->src_addr = strdup(name.c_str());
    named->src_addrlen = name.size() + 1;
    info = named.get();
  }
  fid_ep* ep = nullptr;
  if (rc = fi_endpoint(domain->domain(), const_cast<fi_info*>(info), &ep, nullptr); rc != 0) {
    return OfiError(rc, absl::StrCat("fi_endpoint (", provider, ")"));
  }
  self->ep_.reset(ep);
  if (rc = fi_ep_bind(ep, &av->fid, 0); rc != 0) return OfiError(rc, "fi_ep_bind(av)");
  if (rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV); rc != 0) {
    return OfiError(rc, "fi_ep_bind(cq)");
  }
  if (rc = fi_enable(ep); rc != 0) return OfiError(rc, absl::StrCat("fi_enable (", provider, ")"));

  size_t length = 64;
  std::string name(length, '\0');
  rc = fi_getname(&ep->fid, name.data(), &length);
  if (rc == -FI_ETOOSMALL) {
    name.resize(length);
    rc = fi_getname(&ep->fid, name.data(), &length);
  }
  if (rc != 0) return OfiError(rc, "fi_getname");
  name.resize(length);
  self->name_ = std::move(name);
  return self;
}

OfiEndpoint::~OfiEndpoint() {
  // Closing the endpoint ends libfabric's use of the ops' buffers; only then may they go.
  ep_.reset();
  inflight_.clear();
  backlogs_.clear();
  refused_.clear();
}

bool OfiEndpoint::CanBlock() {
  fid* fids[] = {&cq_->fid};
  return fi_trywait(domain_->fabric(), fids, 1) == FI_SUCCESS;
}

absl::StatusOr<fi_addr_t> OfiEndpoint::Insert(const std::string& peer_name) {
  if (auto known = peers_.find(peer_name); known != peers_.end()) {
    ++known->second.users;
    return known->second.address;
  }
  fi_addr_t address = FI_ADDR_UNSPEC;
  int inserted = fi_av_insert(av_.get(), peer_name.data(), 1, &address, 0, nullptr);
  if (inserted != 1) {
    return OfiError(inserted < 0 ? inserted : -FI_EINVAL,
                    absl::StrCat("fi_av_insert of the peer's ", domain_->provider(), " address"));
  }
  peers_[peer_name] = Peer{address, 1};
  peer_names_[address] = peer_name;
  return address;
}

void OfiEndpoint::Remove(fi_addr_t address) {
  auto name = peer_names_.find(address);
  if (name == peer_names_.end()) return;
  auto peer = peers_.find(name->second);
  if (--peer->second.users > 0) return;
  peers_.erase(peer);
  peer_names_.erase(name);
  fi_av_remove(av_.get(), &address, 1, 0);
}

void OfiEndpoint::Send(std::unique_ptr<OfiOp> op, fi_addr_t to, const void* data, size_t size,
                       void* desc) {
  Submit(
      std::move(op),
      [this, to, data, size, desc](void* context) {
        return fi_send(ep_.get(), data, size, desc, to, context);
      },
      "fi_send", /*transmits=*/true);
}

void OfiEndpoint::Receive(std::unique_ptr<OfiOp> op, void* data, size_t size, void* desc) {
  Submit(
      std::move(op),
      [this, data, size, desc](void* context) {
        return fi_recv(ep_.get(), data, size, desc, FI_ADDR_UNSPEC, context);
      },
      "fi_recv", /*transmits=*/false);
}

void OfiEndpoint::Read(std::unique_ptr<OfiOp> op, fi_addr_t from, void* data, size_t size,
                       void* desc, uint64_t remote_addr, uint64_t remote_key) {
  Submit(
      std::move(op),
      [=, this](void* context) {
        return fi_read(ep_.get(), data, size, desc, from, remote_addr, remote_key, context);
      },
      "fi_read", /*transmits=*/true);
}

void OfiEndpoint::Submit(std::unique_ptr<OfiOp> op, Poster post, const char* what, bool transmits) {
  const ConnectionId connection = op->connection();
  Count(connection, +1);
  Deferred deferred{std::move(op), std::move(post), what, transmits};
  if (auto backlog = backlogs_.find(connection); backlog != backlogs_.end()) {
    backlog->second.push_back(std::move(deferred));  // nothing overtakes a deferred op
    return;
  }
  const ssize_t rc = Post(deferred);
  if (rc == -FI_EAGAIN) {
    backlogs_[connection].push_back(std::move(deferred));
  } else if (rc != 0) {
    // Reported from the next Progress, so Complete never runs inside the caller's Send.
    refused_.push_back(Refused{std::move(deferred.op), OfiError(rc, what)});
  }
}

ssize_t OfiEndpoint::Post(Deferred& deferred) {
  const ConnectionId connection = deferred.op->connection();
  if (deferred.transmits) {
    auto transmitting = transmitting_.find(connection);
    if (transmitting != transmitting_.end() && transmitting->second >= tx_share_) {
      return -FI_EAGAIN;
    }
  }
  const ssize_t rc = deferred.post(deferred.op->context());
  if (rc != 0) return rc;
  if (deferred.transmits) ++transmitting_[connection];
  OfiOp* raw = deferred.op.get();
  inflight_.emplace(raw, InFlight{std::move(deferred.op), deferred.transmits});
  return 0;
}

int OfiEndpoint::Progress() {
  int handled = 0;
  // Ops refused here join refused_, finished below: an op's Complete may submit more ops.
  for (auto backlog = backlogs_.begin(); backlog != backlogs_.end();) {
    std::deque<Deferred>& deferred = backlog->second;
    while (!deferred.empty()) {
      Deferred& next = deferred.front();
      const ssize_t rc = Post(next);
      if (rc == -FI_EAGAIN) break;
      if (rc != 0) refused_.push_back(Refused{std::move(next.op), OfiError(rc, next.what)});
      deferred.pop_front();
    }
    if (deferred.empty()) {
      backlogs_.erase(backlog++);
    } else {
      ++backlog;
    }
  }
  while (!refused_.empty()) {
    Refused refused = std::move(refused_.front());
    refused_.pop_front();
    Count(refused.op->connection(), -1);
    OfiOp* raw = refused.op.get();
    raw->Complete(std::move(refused.op), std::move(refused.status), 0);
    ++handled;
  }

  fi_cq_msg_entry entries[kCompletionBatch];
  while (true) {
    ssize_t n = fi_cq_read(cq_.get(), entries, kCompletionBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        Finish(OfiOp::FromContext(entries[i].op_context), absl::OkStatus(), entries[i].len);
      }
      handled += static_cast<int>(n);
      if (n < kCompletionBatch) break;
      continue;
    }
    if (n != -FI_EAVAIL) break;  // -FI_EAGAIN: nothing more now
    fi_cq_err_entry error{};
    if (fi_cq_readerr(cq_.get(), &error, 0) != 1) break;
    char detail[256] = "";
    const char* text =
        fi_cq_strerror(cq_.get(), error.prov_errno, error.err_data, detail, sizeof(detail));
    absl::Status status = OfiError(
        -error.err,
        absl::StrCat("completion error (", domain_->provider(), ": ", text ? text : "", ")"));
    ++handled;
    if (error.op_context != nullptr) {
      Finish(OfiOp::FromContext(error.op_context), status, 0);
    } else if (!warned_contextless_error_) {
      // No op to end (a provider's own transfer): said once, so that an op it leaves
      // hanging is not a mystery.
      warned_contextless_error_ = true;
      std::fprintf(stderr, "sluice: libfabric reported a %s with no operation to end it\n",
                   std::string(status.message()).c_str());
    }
  }
  return handled;
}

void OfiEndpoint::Finish(OfiOp* op, absl::Status status, size_t length) {
  auto it = inflight_.find(op);
  if (it == inflight_.end()) return;  // not ours (should not happen)
  InFlight owned = std::move(it->second);
  inflight_.erase(it);
  if (owned.transmits) {
    auto transmitting = transmitting_.find(op->connection());
    if (--transmitting->second == 0) transmitting_.erase(transmitting);
  }
  Count(op->connection(), -1);
  op->Complete(std::move(owned.op), std::move(status), length);
}

void OfiEndpoint::FailBacklog(ConnectionId connection, const absl::Status& why) {
  for (Refused& refused : refused_) {
    if (refused.op->connection() == connection) refused.status = why;
  }
  auto backlog = backlogs_.extract(connection);
  if (backlog.empty()) return;
  for (Deferred& d : backlog.mapped()) {
    Count(connection, -1);
    OfiOp* raw = d.op.get();
    raw->Complete(std::move(d.op), why, 0);
  }
}

void OfiEndpoint::Count(ConnectionId connection, int delta) {
  int& count = op_counts_[connection];
  count += delta;
  if (count == 0) op_counts_.erase(connection);
}

}  // namespace sluice::transport::ofi
