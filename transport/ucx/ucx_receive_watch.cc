// UcxTransport, third part: the worker. Creating it, watching its shared-memory receive
// queue after a same-host peer died (ucx_queue_probe.h), and replacing it when that queue is
// stuck. Everything but ReplaceWorker at start-up runs on the progress thread.
#include <sys/epoll.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport::ucx {
namespace {

// A late probe sits behind a dead sender's element only if the worker, since the probe went
// into its queue, has read everything it could and not found it. Time alone is no evidence:
// on a starved machine (a `sluice local` of 128 workers on 2 cores) the progress thread
// ran too seldom to read a live queue within a second, and the restart it caused failed
// every connection. A live queue delivers the probe on the next pass; a second leaves room.
constexpr auto kProbeTimeout = std::chrono::seconds(1);
// A probe still waiting for room (the queue is full) after this many ticks that each came
// after a pass that read everything it could: a live queue, read empty, has room at the
// next tick.
constexpr int kFullAfterDrainTicks = 20;

}  // namespace

absl::StatusOr<UcxWorkerPtr> UcxTransport::ReplaceWorker() {
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h created = nullptr;
  if (ucs_status_t s = ucp_worker_create(context_->get(), &worker_params, &created); s != UCS_OK) {
    return UcsError(s, "ucp_worker_create");
  }
  UcxWorkerPtr worker(created);

  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
  if (ucs_status_t s = ucp_worker_query(created, &attr); s != UCS_OK) {
    return UcsError(s, "ucp_worker_query");
  }
  for (auto [id, cb] :
       {std::pair{kActiveMessageId, &UcxTransport::ActiveMessageCallback},
        std::pair{ReceiveQueueProbe::kActiveMessageId, &UcxTransport::ProbeMessageCallback}}) {
    ucp_am_handler_param_t am{};
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    am.id = id;
    am.cb = cb;
    am.arg = this;
    am.flags = UCP_AM_FLAG_WHOLE_MSG;
    if (ucs_status_t s = ucp_worker_set_am_recv_handler(created, &am); s != UCS_OK) {
      return UcsError(s, "ucp_worker_set_am_recv_handler");
    }
  }

  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  if (ucs_status_t s = ucp_worker_get_address(created, &address, &address_length); s != UCS_OK) {
    return UcsError(s, "ucp_worker_get_address");
  }
  std::string address_bytes(reinterpret_cast<const char*>(address), address_length);
  ucp_worker_release_address(created, address);

  int ucx_fd = -1;
  if (ucs_status_t s = ucp_worker_get_efd(created, &ucx_fd); s != UCS_OK) {
    return UcsError(s, "ucp_worker_get_efd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = ucx_fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ucx_fd, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
  }

  // Nothing can fail from here on.
  if (ucx_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, ucx_fd_, nullptr);
  ucx_fd_ = ucx_fd;
  if (worker_ == nullptr) max_header_size_ = attr.max_am_header;
  {
    absl::MutexLock lock(&address_mu_);
    worker_address_ = std::move(address_bytes);
  }
  std::swap(worker, worker_);
  return worker;
}

void UcxTransport::WatchReceiveQueue(absl::string_view dead_peer) {
  probe_wanted_ = true;
  last_dead_peer_ = std::string(dead_peer);
}

void UcxTransport::CheckReceiveQueue(std::chrono::steady_clock::time_point now) {
  // A watch that cannot probe, or whose restart failed, leaves the worker as it is: calls
  // on a stuck queue then time out as they would without it.
  if (probe_broken_) return;
  if (probe_ != nullptr) probe_->Progress();
  const bool drained_since_last_check = drains_ > drains_at_last_check_;
  drains_at_last_check_ = drains_;
  if (probes_sent_ > probes_arrived_) {
    if (!probe_left_ && probe_->left()) {
      probe_left_ = true;
      probe_left_at_ = now;
      drains_when_probe_left_ = drains_;
    }
    if (probe_left_) {
      if (drains_ == drains_when_probe_left_ || now - probe_left_at_ < kProbeTimeout) return;
    } else {
      if (drained_since_last_check) ++full_after_drain_ticks_;
      if (full_after_drain_ticks_ < kFullAfterDrainTicks || now - probe_sent_at_ < kProbeTimeout) {
        return;
      }
    }
    RestartWorker(absl::UnavailableError(
        absl::StrCat("UCX's shared-memory receive queue stalled after ", last_dead_peer_,
                     " died in the middle of a send; the transport restarted its UCX worker, which "
                     "ended all of its connections")));
    return;
  }
  if (!probe_wanted_) return;
  probe_wanted_ = false;
  if (probe_ == nullptr) {
    std::string address;
    {
      absl::MutexLock lock(&address_mu_);
      address = worker_address_;
    }
    absl::StatusOr<std::unique_ptr<ReceiveQueueProbe>> probe =
        ReceiveQueueProbe::Create(context_->get(), address);
    if (!probe.ok()) {
      probe_broken_ = true;
      std::fprintf(stderr, "sluice: cannot watch UCX's shared-memory receive queue: %s\n",
                   probe.status().ToString().c_str());
      return;
    }
    probe_ = std::move(*probe);
  }
  if (absl::Status sent = probe_->Send(probes_sent_ + 1); !sent.ok()) {
    probe_broken_ = true;
    std::fprintf(stderr, "sluice: cannot probe UCX's shared-memory receive queue: %s\n",
                 sent.ToString().c_str());
    return;
  }
  ++probes_sent_;
  probe_sent_at_ = now;
  probe_left_ = false;
  full_after_drain_ticks_ = 0;
}

ucs_status_t UcxTransport::ProbeMessageCallback(void* arg, const void*, size_t, void* data,
                                                size_t length, const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
  uint64_t number = 0;
  if (length == sizeof(number)) {
    std::memcpy(&number, data, sizeof(number));
    self->probes_arrived_ = std::max(self->probes_arrived_, number);
  }
  return UCS_OK;
}

void UcxTransport::RestartWorker(const absl::Status& why) {
  std::fprintf(stderr, "sluice: %s\n", why.ToString().c_str());
  absl::StatusOr<UcxWorkerPtr> replaced = ReplaceWorker();
  if (!replaced.ok()) {
    // The stuck worker stays: its calls time out as they would have without the watch.
    probe_broken_ = true;
    std::fprintf(stderr, "sluice: could not restart the UCX worker: %s\n",
                 replaced.status().ToString().c_str());
    return;
  }
  UcxWorkerPtr old = std::move(*replaced);
  AddSingleWriter(stats_.worker_restarts, 1);
  // The probe's endpoint points at the old worker.
  probe_.reset();
  probes_sent_ = probes_arrived_ = 0;
  probe_wanted_ = false;

  // Every connection lived on the old worker, and goes with it. Nothing is closed first
  // (forcing the close of a live tcp peer's endpoint is not safe in UCX 1.13), but every
  // request of ours is released: UCX asserts when it destroys a worker holding one.
  // Peers that are alive may still read the payloads they were told of.
  MarkSendsThePeerMayRead(kNoConnection, /*ucx_keeps_sending=*/false);  // the worker goes
  std::vector<ConnectionId> told;  // not those failed already: their handler knows
  std::vector<ucp_ep_h> watched;
  for (auto& [id, endpoint] : endpoints_) {
    StopWatching(endpoint);
    if (!endpoint.failed) told.push_back(id);
    if (endpoint.ucx_watches && endpoint.ep != nullptr) watched.push_back(endpoint.ep);
  }
  // Closed, and flushing: a transfer may be under way on them too. The forced close ends
  // the flush (its callback frees its request; what it posts finds nothing to do).
  for (const auto& [ep, flushing] : flushing_) {
    if (flushing.ucx_watches) watched.push_back(ep);
  }
  ClearEndpoints();
  connection_by_ep_.clear();
  flushing_.clear();
  AbandonSends(kNoConnection, why);
  std::vector<RecvOp*> receives(receives_in_flight_.begin(), receives_in_flight_.end());
  for (RecvOp* op : receives) {
    ucp_request_free(op->request);
    op->request = nullptr;
  }
  // A tcp rendezvous under way keeps UCX's own requests on its endpoint, and destroying a
  // worker with such an endpoint fails an assertion (ucp_ep_destroy_base, proto_reqs): a
  // forced close purges them. The worker is not progressed after it.
  for (ucp_ep_h ep : watched) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(request)) ucp_request_free(request);
  }
  // Closes under way on the old worker, forced above or flushing before (their requests
  // wait in its callback queue) are dropped with it.
  ReleaseCloseRequests();
  // UCX lists what the old worker still held (the requests above) as leaks: expected here.
  {
    ScopedUcxLogLevel quiet(UCS_LOG_LEVEL_FATAL);
    old.reset();
  }
  ForgetSends();
  // The receives UCX did not call back for while it went end here, failed. The worker that
  // moved their bytes is gone, so their buffers are free again; a call that waits for its
  // receive to end (its connection given up while the payload landed) is told now rather
  // than at its deadline, and its buffer is not held as still being written.
  std::vector<RecvOp*> ended(receives_in_flight_.begin(), receives_in_flight_.end());
  receives_in_flight_.clear();
  for (RecvOp* raw : ended) {
    std::unique_ptr<RecvOp> op(raw);
    InboundPayload payload;
    payload.status = why;
    payload.data = op->data;
    payload.owned = std::move(op->owned);
    handler_->OnMessage(op->from, op->header, std::move(payload));
  }
  for (ConnectionId id : told) handler_->OnDisconnect(id, why);
}

}  // namespace sluice::transport::ucx
