// UcxTransport, third part: messages. Sending (a small header-only message from the stack when
// UCX takes it at once, else with recycled send operations, so a small message costs no
// allocation once warm) and receiving active messages, eager or rendezvous.
// Everything here runs on the thread that drives the worker, except Send. See ucx_transport.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "transport/payload_retention.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport::ucx {
namespace {

constexpr unsigned kActiveMessageId = 0;

// The token that prefixes every message header.
using Token = uint64_t;

// Send operations kept for reuse; more than this in flight at once are freed on completion.
constexpr size_t kMaxSpareSendOps = 64;
// A recycled operation gives back header capacity above this (a rare large header).
constexpr size_t kMaxKeptHeaderCapacity = 1024;

// Header-only messages up to this size, token included, are first tried from the stack
// (UcxTransport::SendAtOnce); control messages are 40-200 bytes.
constexpr size_t kAtOnceMessageBytes = 256;

}  // namespace

void UcxTransport::Send(ConnectionId to, absl::string_view header, Payload payload,
                        SendCallback done) {
  if (DrivesWorker()) {
    // Replies from inline handlers and requests of a caller that drives go out at once,
    // without a trip through the queue.
    DoSend(to, header, payload, std::move(done));
    return;
  }
  // With caller-driven progress the worker is lent between two driven calls, and nothing
  // polls it until the next one or the parked thread's next look (up to ~1 ms): a request
  // posted then, say a reader's next fetch while it consumes a prefetched batch, would sit
  // in the queue. Taking a lent worker sends it now, behind what was queued before it (a
  // connection's messages keep their order).
  if (options_.caller_driven_progress && baton_.TryTakeLent()) {
    DrainQueue();
    DoSend(to, header, payload, std::move(done));
    baton_.Lend();
    return;
  }
  PostSend(to, header, payload, std::move(done));
}

std::unique_ptr<UcxTransport::SendOp> UcxTransport::AcquireSendOp() {
  if (spare_send_ops_.empty()) {
    auto op = std::make_unique<SendOp>();
    op->self = this;
    return op;
  }
  std::unique_ptr<SendOp> op = std::move(spare_send_ops_.back());
  spare_send_ops_.pop_back();
  return op;
}

void UcxTransport::RecycleSendOp(std::unique_ptr<SendOp> op) {
  if (spare_send_ops_.size() >= kMaxSpareSendOps) return;
  op->done = nullptr;
  op->peer_may_read = false;
  if (op->header.capacity() > kMaxKeptHeaderCapacity) op->header = std::string();
  spare_send_ops_.push_back(std::move(op));
}

void UcxTransport::DoSend(ConnectionId to, absl::string_view header, Payload payload,
                          SendCallback&& done) {
  const Endpoint* found = FindEndpoint(to);
  if (found == nullptr || found->failed) {
    if (done) done(absl::UnavailableError(absl::StrCat("connection ", to, " is closed")));
    return;
  }
  if (header.size() > max_header_size()) {
    if (done) {
      done(absl::InvalidArgumentError(absl::StrCat("message header of ", header.size(),
                                                   " bytes exceeds UCX's limit of ",
                                                   max_header_size())));
    }
    return;
  }
  const Endpoint& endpoint = *found;
  // Inside ucp_worker_progress only where every lane is shared memory (see RunDeferred for
  // tcp's hazard), only behind nothing deferred (a connection's messages keep their order),
  // and only on a progress thread: for a reader driving its own transport (caller progress)
  // sending its next fetch from inside the last reply's callback gained nothing (4 KiB
  // batches: 137-203k/s against 152-206k; the ~200 µs stalls session 27 blamed on it were the
  // slab pool's sleeping TryAcquire; perf/RESULTS.md, sessions 27 and 29).
  // While RunDeferred issues a batch, a send from one of its callbacks waits behind the rest.
  const bool may_send_now =
      endpoint.ep != nullptr && !running_deferred_ &&
      (!in_ucp_progress_ || (endpoint.sends_inside_progress && deferred_sends_.empty() &&
                             !options_.caller_driven_progress));
  if (may_send_now && payload.size == 0 && SendAtOnce(endpoint, header, done)) return;
  std::unique_ptr<SendOp> op = AcquireSendOp();
  const Token token = endpoint.remote_token;
  op->header.assign(reinterpret_cast<const char*>(&token), sizeof(token));
  op->header.append(header.data(), header.size());
  op->done = std::move(done);
  op->to = to;
  op->payload = payload;
  if (in_ucp_progress_ || running_deferred_ || endpoint.ep == nullptr) {
    // Not from inside ucp_worker_progress, nor before the endpoint exists: see RunDeferred.
    deferred_sends_.push_back(std::move(op));
    return;
  }
  IssueSend(endpoint, std::move(op));
}

bool UcxTransport::SendAtOnce(const Endpoint& endpoint, absl::string_view header,
                              SendCallback& done) {
  if (!send_at_once_ || sizeof(Token) + header.size() > kAtOnceMessageBytes) return false;
  char message[kAtOnceMessageBytes];
  const Token token = endpoint.remote_token;
  std::memcpy(message, &token, sizeof(token));
  std::memcpy(message + sizeof(token), header.data(), header.size());
  ucp_request_param_t param;
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
  param.flags = UCP_AM_SEND_FLAG_EAGER;  // header-only, as in IssueSend
  const ucs_status_ptr_t request = ucp_am_send_nbx(endpoint.ep, kActiveMessageId, nullptr, 0,
                                                   message, sizeof(token) + header.size(), &param);
  if (UCS_PTR_IS_PTR(request)) {
    // UCX would read `message` after this frame is gone. Start enables this path only for a
    // UCX known to honour the flag: reaching here means UCX broke its documented contract.
    std::fprintf(stderr,
                 "sluice: UCX returned a request for a send it was told to complete "
                 "at once or refuse (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL)\n");
    std::abort();
  }
  const ucs_status_t status = UCS_PTR_STATUS(request);
  if (status == UCS_ERR_NO_RESOURCE) return false;  // not at once: the operation path queues it
  AddSingleWriter(stats_.messages_sent, 1);  // as IssueSend counts: issued, whatever came of it
  if (status == UCS_OK) AddSingleWriter(stats_.messages_sent_at_once, 1);
  if (done) done(status == UCS_OK ? absl::OkStatus() : UcsError(status, "send"));
  return true;
}

void UcxTransport::RunDeferred() {
  // A send made meanwhile (a completion callback's) joins deferred_sends_ for the next turn,
  // behind the batch this turn still holds (DoSend): a connection's messages keep the order
  // they were sent in.
  running_deferred_ = true;
  while (!deferred_endpoints_.empty() || !deferred_sends_.empty()) {
    // Endpoints first: the sends may be for them.
    std::vector<DeferredEndpoint> endpoints;
    endpoints.swap(deferred_endpoints_);
    for (DeferredEndpoint& pending : endpoints) {
      absl::Status created = CreateEndpoint(pending.id, pending.remote, std::move(pending.peer),
                                            std::move(pending.socket));
      if (created.ok()) continue;
      // Its sends fail below; the RPC layer forgets the connection.
      EraseEndpoint(pending.id);
      handler_->OnDisconnect(pending.id, created);
    }
    // Issuing may complete a send at once, and its callback may send again (into the list,
    // for the next turn). The two vectors trade places, so that deferring allocates nothing
    // once warm.
    std::vector<std::unique_ptr<SendOp>> sends;
    sends.swap(spare_deferred_sends_);
    sends.swap(deferred_sends_);
    for (auto& op : sends) {
      const Endpoint* endpoint = FindEndpoint(op->to);
      if (endpoint == nullptr || endpoint->failed) {
        // The connection failed or closed while the send waited.
        SendCallback done = std::move(op->done);
        const ConnectionId to = op->to;
        RecycleSendOp(std::move(op));
        if (done) done(absl::UnavailableError(absl::StrCat("connection ", to, " is closed")));
        continue;
      }
      IssueSend(*endpoint, std::move(op));
    }
    sends.clear();
    spare_deferred_sends_.swap(sends);
  }
  running_deferred_ = false;
}

void UcxTransport::IssueSend(const Endpoint& endpoint, std::unique_ptr<SendOp> op) {
  ucp_ep_h ep = endpoint.ep;
  op->peer_reads_payload = endpoint.peer_reads_our_memory;
  const Payload payload = op->payload;
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = 0;
  // A message without a payload travels as the AM's data with no AM header: UCX then uses
  // its plain short send, not the header-plus-data variant (OnActiveMessage tells them apart:
  // every Sluice header carries the token, so only these arrive without an AM header). It
  // must stay eager, whatever UCX_RNDV_THRESH says: the receiver reads it as a header.
  const bool header_only = payload.size == 0;
  if (header_only) {
    param.flags |= UCP_AM_SEND_FLAG_EAGER;
  } else if (payload.size >= options_.rendezvous_threshold) {
    param.flags |= UCP_AM_SEND_FLAG_RNDV;
  }
  param.cb.send = &UcxTransport::OnSendComplete;
  param.user_data = op.get();
  AddSingleWriter(stats_.messages_sent, 1);
  AddSingleWriter(stats_.payload_bytes_sent, payload.size);
  ucs_status_ptr_t request =
      header_only ? ucp_am_send_nbx(ep, kActiveMessageId, nullptr, 0, op->header.data(),
                                    op->header.size(), &param)
                  : ucp_am_send_nbx(ep, kActiveMessageId, op->header.data(), op->header.size(),
                                    payload.data, payload.size, &param);
  SendOp* raw = op.release();
  if (UCS_PTR_IS_PTR(request)) {  // completes in OnSendComplete
    raw->request = request;
    TrackSend(raw);
    return;
  }
  OnSendComplete(nullptr, UCS_PTR_STATUS(request), raw);
}

void UcxTransport::TrackSend(SendOp* op) {
  op->in_flight = true;
  op->prev = nullptr;
  op->next = sends_in_flight_;
  if (sends_in_flight_ != nullptr) sends_in_flight_->prev = op;
  sends_in_flight_ = op;
}

void UcxTransport::UntrackSend(SendOp* op) {
  if (op->prev != nullptr) op->prev->next = op->next;
  if (op->next != nullptr) op->next->prev = op->prev;
  if (sends_in_flight_ == op) sends_in_flight_ = op->next;
  op->in_flight = false;
  op->prev = op->next = nullptr;
}

bool UcxTransport::HasSendsInFlight(ConnectionId id) const {
  for (const SendOp* op = sends_in_flight_; op != nullptr; op = op->next) {
    if (op->to == id) return true;
  }
  return false;
}

void UcxTransport::AbandonSends(ConnectionId id, std::optional<absl::Status> why) {
  // Callbacks first collected: one may send, and so change the list.
  std::vector<std::pair<SendCallback, bool>> callbacks;  // and whether the peer may read
  for (SendOp* op = sends_in_flight_; op != nullptr; op = op->next) {
    if (op->request == nullptr || (id != kNoConnection && op->to != id)) continue;
    // A released request is not called back (ucp.h: "no further notifications or
    // callbacks"), and UCX may still read the op's header until it ends the send: the op
    // stays listed, and keeps its endpoint open, until ForgetSends at the worker's
    // destruction or restart (CloseEndpoint). A few hundred bytes per send to a dead peer.
    ucp_request_free(op->request);
    op->request = nullptr;
    if (op->done && why.has_value()) callbacks.emplace_back(std::move(op->done), op->peer_may_read);
    op->done = nullptr;
  }
  for (auto& [done, peer_may_read] : callbacks) {
    done(peer_may_read ? PayloadMayStillBeReadError(*why) : *why);
  }
}

void UcxTransport::MarkSendsThePeerMayRead(ConnectionId id, bool ucx_keeps_sending) {
  for (SendOp* op = sends_in_flight_; op != nullptr; op = op->next) {
    if (id != kNoConnection && op->to != id) continue;
    if (ucx_keeps_sending || op->peer_reads_payload) op->peer_may_read = true;
  }
}

void UcxTransport::ForgetSends() {
  while (sends_in_flight_ != nullptr) {
    SendOp* op = sends_in_flight_;
    UntrackSend(op);
    delete op;
  }
}

void UcxTransport::OnSendComplete(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<SendOp> op(static_cast<SendOp*>(user_data));
  // Null: completed at once. An abandoned operation's request was released already.
  if (request != nullptr && (!op->in_flight || op->request != nullptr)) ucp_request_free(request);
  if (op->in_flight) op->self->UntrackSend(op.get());
  op->request = nullptr;
  // Recycled before `done` runs: `done` may send again and reuse it.
  SendCallback done = std::move(op->done);
  const bool peer_may_read = op->peer_may_read;
  op->self->RecycleSendOp(std::move(op));
  if (!done) return;
  if (status == UCS_OK) {
    done(absl::OkStatus());
  } else {
    absl::Status failed = UcsError(status, "send");
    done(peer_may_read ? PayloadMayStillBeReadError(std::move(failed)) : std::move(failed));
  }
}

ucs_status_t UcxTransport::ActiveMessageCallback(void* arg, const void* header,
                                                 size_t header_length, void* data, size_t length,
                                                 const ucp_am_recv_param_t* param) {
  return static_cast<UcxTransport*>(arg)->OnActiveMessage(header, header_length, data, length,
                                                          param);
}

ucs_status_t UcxTransport::OnActiveMessage(const void* header, size_t header_length, void* data,
                                           size_t length, const ucp_am_recv_param_t* param) {
  if (header_length == 0 && !(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    // A header-only message (DoSend): the data is the header.
    header = data;
    header_length = length;
    length = 0;
  }
  Token token = 0;
  if (header_length < sizeof(token)) return UCS_OK;  // not from a Sluice peer: drop
  std::memcpy(&token, header, sizeof(token));
  const ConnectionId from = FindEndpoint(token) != nullptr ? token : kNoConnection;
  // Valid during this callback only; a rendezvous receive keeps a copy.
  const absl::string_view header_bytes(static_cast<const char*>(header) + sizeof(token),
                                       header_length - sizeof(token));
  AddSingleWriter(stats_.messages_received, 1);
  if (length == 0) {
    handler_->OnMessage(from, header_bytes, InboundPayload{});
    return UCS_OK;
  }
  PayloadDestination dest = handler_->ChoosePayloadDestination(from, header_bytes, length);
  if (dest.discard) {
    // A rendezvous left unreceived is dropped by UCX, which completes the sender's send: no
    // transfer, and no receive of ours left in flight when this worker goes.
    AddSingleWriter(stats_.payloads_discarded, 1);
    return UCS_OK;
  }
  InboundPayload payload;
  payload.size = length;
  if (dest.data != nullptr && dest.capacity < length) {
    payload.status = absl::ResourceExhaustedError(absl::StrCat(
        "payload of ", length, " bytes does not fit the receive buffer of ", dest.capacity));
    payload.size = 0;
    handler_->OnMessage(from, header_bytes, std::move(payload));
    return UCS_OK;  // for rendezvous this drops the data descriptor
  }
  std::byte* landing = static_cast<std::byte*>(dest.data);
  if (landing == nullptr) {
    // The size came from the wire: one the heap cannot hold fails this message, where
    // std::bad_alloc on the progress thread would end the process (as ofi's data path).
    payload.owned.reset(new (std::nothrow) std::byte[length]);
    if (payload.owned == nullptr) {
      payload.status = absl::ResourceExhaustedError(
          absl::StrCat("no memory for a payload of ", length, " bytes"));
      payload.size = 0;
      handler_->OnMessage(from, header_bytes, std::move(payload));
      return UCS_OK;  // for rendezvous this drops the data descriptor
    }
    landing = payload.owned.get();
  }
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    auto* op = new RecvOp{this,    from,   std::string(header_bytes),
                          landing, length, std::move(payload.owned)};
    ucp_request_param_t rparam{};
    rparam.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rparam.cb.recv_am = &UcxTransport::OnReceiveComplete;
    rparam.user_data = op;
    ucs_status_ptr_t request = ucp_am_recv_data_nbx(worker_.get(), data, landing, length, &rparam);
    if (UCS_PTR_IS_PTR(request)) {
      op->request = request;
      receives_in_flight_.insert(op);
    } else {
      OnReceiveComplete(nullptr, UCS_PTR_STATUS(request), length, op);
    }
    return UCS_OK;
  }
  // Eager: the bytes are in UCX's buffer only for the duration of this callback.
  std::memcpy(landing, data, length);
  AddSingleWriter(stats_.payload_bytes_copied, length);
  AddSingleWriter(stats_.payload_bytes_received, length);
  payload.data = landing;
  handler_->OnMessage(from, header_bytes, std::move(payload));
  return UCS_OK;
}

void UcxTransport::OnReceiveComplete(void* request, ucs_status_t status, size_t length,
                                     void* user_data) {
  std::unique_ptr<RecvOp> op(static_cast<RecvOp*>(user_data));
  UcxTransport* self = op->self;
  if (request != nullptr) {
    self->receives_in_flight_.erase(op.get());
    // Released already when its worker was restarted (RestartWorker).
    if (op->request != nullptr) ucp_request_free(request);
  }
  InboundPayload payload;
  if (status != UCS_OK) {
    payload.status = UcsError(status, "receiving payload");
  } else {
    AddSingleWriter(self->stats_.payload_bytes_received, length);
  }
  payload.data = op->data;
  payload.size = length;
  payload.owned = std::move(op->owned);
  self->handler_->OnMessage(op->from, op->header, std::move(payload));
}

}  // namespace sluice::transport::ucx
