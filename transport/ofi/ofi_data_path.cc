// OfiTransport's data path: eager messages, receiver-pulled (fi_read) payloads, and the
// bookkeeping that fails them when a peer dies. See ofi_transport.h for the protocol.
#include <cstring>
#include <new>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "transport/ofi/ofi_transport.h"
#include "transport/payload_retention.h"

namespace sluice::transport::ofi {

// A receive buffer, posted again as soon as its message has been handled.
class OfiTransport::ReceiveOp final : public OfiOp {
 public:
  ReceiveOp(OfiTransport* transport, size_t slot)
      : OfiOp(kNoConnection), transport_(transport), slot_(slot) {}
  void Complete(std::unique_ptr<OfiOp> self, absl::Status status, size_t length) override {
    // An error here is a message too large for the buffer (not from a Sluice peer): drop it.
    if (status.ok()) transport_->OnReceived(slot_, length);
    transport_->PostReceive(slot_, std::move(self));
  }

 private:
  OfiTransport* transport_;
  size_t slot_;
};

// One wire message on its way out; owns its bytes until libfabric is done with them.
class OfiTransport::SendOp final : public OfiOp {
 public:
  SendOp(OfiTransport* transport, ConnectionId to, std::vector<std::byte> bytes, uint64_t send_id,
         bool completes_send)
      : OfiOp(to),
        transport_(transport),
        bytes_(std::move(bytes)),
        send_id_(send_id),
        completes_send_(completes_send) {}
  void Complete(std::unique_ptr<OfiOp> self, absl::Status status, size_t) override {
    if (send_id_ != 0 && (completes_send_ || !status.ok())) {
      transport_->CompleteSend(send_id_, status);
    } else if (!status.ok()) {
      // A reply (kReadDone, kDeclined) that did not leave: its peer would hold the payload
      // it answers for as long as the connection lives.
      transport_->FailConnectionLater(connection(), status);
    } else {
      // A closing connection's last op (a kReadDone reply; a rendezvous announcement whose
      // kReadDone came first) may have been what held it open.
      transport_->RetireIfDone(connection());
    }
  }
  std::vector<std::byte>& bytes() { return bytes_; }
  MrPtr registration;  // the bytes' registration, for providers with FI_MR_LOCAL

 private:
  OfiTransport* transport_;
  std::vector<std::byte> bytes_;
  uint64_t send_id_;
  bool completes_send_;
};

// A rendezvous payload being read into the destination the handler chose.
class OfiTransport::ReadOp final : public OfiOp {
 public:
  ReadOp(OfiTransport* transport, ConnectionId from) : OfiOp(from), transport_(transport) {}
  void Complete(std::unique_ptr<OfiOp> self, absl::Status status, size_t) override {
    // Already delivered as failed when the connection died; the late completion just ends it.
    if (!delivered) transport_->OnReadComplete(*this, status);
  }

  uint64_t read_id = 0;
  uint64_t peer_op_id = 0;
  std::string header;
  std::byte* data = nullptr;
  size_t size = 0;
  std::unique_ptr<std::byte[]> owned;
  MrPtr registration;  // the destination's registration, for providers with FI_MR_LOCAL
  bool delivered = false;

 private:
  OfiTransport* transport_;
};

void OfiTransport::PostReceive(size_t slot, std::unique_ptr<OfiOp> op) {
  if (op == nullptr) op = std::make_unique<ReceiveOp>(this, slot);
  endpoint_->Receive(std::move(op), receive_buffers_.get() + slot * buffer_size_, buffer_size_,
                     fi_mr_desc(receive_registration_.get()));
}

ConnectionId OfiTransport::OpenConnection(uint64_t token) const {
  auto it = connections_.find(token);
  return it != connections_.end() && !it->second.closing ? token : kNoConnection;
}

void OfiTransport::AddPending(ConnectionId id, int delta) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  it->second.pending += delta;
  if (delta < 0) RetireIfDone(id);
}

void OfiTransport::DoSend(ConnectionId to, absl::string_view header, Payload payload,
                          SendCallback done) {
  auto it = connections_.find(to);
  if (it == connections_.end() || it->second.closing) {
    if (done) done(absl::UnavailableError(absl::StrCat("connection ", to, " is closed")));
    return;
  }
  if (header.size() > kMaxHeaderSize) {
    if (done) {
      done(absl::InvalidArgumentError(absl::StrCat("message header of ", header.size(),
                                                   " bytes exceeds the ofi transport's limit of ",
                                                   kMaxHeaderSize)));
    }
    return;
  }
  const fi_addr_t address = it->second.address;
  WireHeader wire;
  wire.token = it->second.remote_token;
  wire.payload_size = payload.size;
  const uint64_t id = next_op_id_++;
  PendingSend pending{to, std::move(done), nullptr};
  const bool eager = payload.size < it->second.eager_limit || payload.size == 0;
  if (eager) {
    wire.kind = MessageKind::kEager;
  } else {
    // The receiver reads the payload from here: name it by a region's key, or register it.
    MemoryKey key;
    if (std::optional<MemoryKey> found = domain_->FindRegion(payload.data, payload.size)) {
      key = *found;
    } else {
      absl::StatusOr<MrPtr> registration =
          domain_->Register(const_cast<void*>(payload.data), payload.size);
      if (!registration.ok()) {
        if (pending.done) pending.done(registration.status());
        return;
      }
      pending.registration = std::move(*registration);
      key = domain_->KeyFor(pending.registration.get(), payload.data, payload.data);
    }
    wire.kind = MessageKind::kRendezvous;
    wire.op_id = id;
    wire.remote_addr = key.remote_addr;
    wire.remote_key = key.key;
  }
  stats_.messages_sent.fetch_add(1, std::memory_order_relaxed);
  stats_.payload_bytes_sent.fetch_add(payload.size, std::memory_order_relaxed);
  sends_.emplace(id, std::move(pending));
  AddPending(to, +1);
  SendMessage(to, address, wire, header, payload, id, /*completes_send=*/eager);
}

void OfiTransport::SendMessage(ConnectionId to, fi_addr_t address, const WireHeader& wire,
                               absl::string_view header, Payload payload, uint64_t send_id,
                               bool completes_send) {
  auto op = std::make_unique<SendOp>(this, to, EncodeMessage(wire, header, payload), send_id,
                                     completes_send);
  void* desc = nullptr;
  if (domain_->mr_local()) {
    absl::StatusOr<MrPtr> registration = domain_->Register(op->bytes().data(), op->bytes().size());
    if (!registration.ok()) {
      if (send_id != 0) {
        CompleteSend(send_id, registration.status());
      } else {
        FailConnectionLater(to, registration.status());  // a reply, as in SendOp::Complete
      }
      return;
    }
    op->registration = std::move(*registration);
    desc = fi_mr_desc(op->registration.get());
  }
  const void* data = op->bytes().data();
  const size_t size = op->bytes().size();
  endpoint_->Send(std::move(op), address, data, size, desc);
}

void OfiTransport::FailConnectionLater(ConnectionId id, const absl::Status& why) {
  // Posted: called while completions are read or a message is queued, whose state failing
  // the connection would change under them. Our reads of the peer go on (it is alive), and
  // the peer, told by the socket's close once they end, frees what it held for us. Said on
  // the disconnect as Abort says it: the landing buffers of those reads are not free yet.
  absl::Status failed(why.code(), absl::StrCat("a reply could not be sent: ", why.message()));
  failed.SetPayload(kReceivesOutstandingPayload, absl::Cord("1"));
  progress_->Post([this, id, failed = std::move(failed)] {
    FailConnection(id, failed, /*fail_reads=*/false, /*peer_alive=*/true);
  });
}

void OfiTransport::CompleteSend(uint64_t send_id, const absl::Status& status) {
  auto node = sends_.extract(send_id);
  if (node.empty()) return;  // already failed with its connection
  PendingSend& pending = node.mapped();
  pending.registration.reset();  // the peer has read it (or never will)
  if (pending.done) pending.done(status);
  AddPending(pending.connection, -1);
}

void OfiTransport::OnReceived(size_t slot, size_t length) {
  absl::StatusOr<DecodedMessage> message =
      DecodeMessage(receive_buffers_.get() + slot * buffer_size_, length);
  if (!message.ok()) return;  // not from a Sluice peer: nobody to answer
  switch (message->wire.kind) {
    case MessageKind::kEager:
      OnEager(*message);
      break;
    case MessageKind::kRendezvous:
      OnRendezvous(*message);
      break;
    case MessageKind::kReadDone:
      OnReadDone(*message);
      break;
  }
}

void OfiTransport::OnEager(const DecodedMessage& message) {
  const ConnectionId from = OpenConnection(message.wire.token);
  stats_.messages_received.fetch_add(1, std::memory_order_relaxed);
  const absl::string_view header = message.header;  // in the receive buffer until we return
  const size_t size = message.wire.payload_size;
  if (size == 0) {
    handler_->OnMessage(from, header, InboundPayload{});
    return;
  }
  PayloadDestination dest = handler_->ChoosePayloadDestination(from, header, size);
  if (dest.discard) {
    stats_.payloads_discarded.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  InboundPayload payload;
  std::byte* target = nullptr;
  if (dest.data != nullptr && dest.capacity >= size) {
    target = static_cast<std::byte*>(dest.data);
  } else if (dest.data != nullptr) {
    payload.status = absl::ResourceExhaustedError(absl::StrCat(
        "payload of ", size, " bytes does not fit the receive buffer of ", dest.capacity));
    handler_->OnMessage(from, header, std::move(payload));
    return;
  } else {
    payload.owned.reset(new std::byte[size]);
    target = payload.owned.get();
  }
  // The receive buffer is reposted after this returns, so the bytes must move now.
  std::memcpy(target, message.inline_payload, size);
  stats_.payload_bytes_copied.fetch_add(size, std::memory_order_relaxed);
  stats_.payload_bytes_received.fetch_add(size, std::memory_order_relaxed);
  payload.data = target;
  payload.size = size;
  handler_->OnMessage(from, header, std::move(payload));
}

void OfiTransport::OnRendezvous(const DecodedMessage& message) {
  const ConnectionId from = message.wire.token;
  auto it = connections_.find(from);
  // Without a live connection there is no address to answer; the sender learns of the
  // closure from its bootstrap socket.
  if (it == connections_.end() || it->second.failed) return;
  if (it->second.closing) {
    ReplyReadDone(from, message.wire.op_id, ReadOutcome::kDeclined);
    return;
  }
  const fi_addr_t address = it->second.address;
  stats_.messages_received.fetch_add(1, std::memory_order_relaxed);
  auto op = std::make_unique<ReadOp>(this, from);
  op->header = std::string(message.header);
  op->size = message.wire.payload_size;
  op->peer_op_id = message.wire.op_id;
  PayloadDestination dest = handler_->ChoosePayloadDestination(from, op->header, op->size);
  if (dest.discard) {
    // Not read: the sender's send completes (declined) and its buffer is free again.
    stats_.payloads_discarded.fetch_add(1, std::memory_order_relaxed);
    ReplyReadDone(from, op->peer_op_id, ReadOutcome::kDeclined);
    return;
  }
  if (dest.data != nullptr && dest.capacity < op->size) {
    InboundPayload failed;
    failed.status = absl::ResourceExhaustedError(absl::StrCat(
        "payload of ", op->size, " bytes does not fit the receive buffer of ", dest.capacity));
    handler_->OnMessage(from, op->header, std::move(failed));
    ReplyReadDone(from, op->peer_op_id, ReadOutcome::kDeclined);
    return;
  }
  if (dest.data != nullptr) {
    op->data = static_cast<std::byte*>(dest.data);
  } else {
    // The size came from the wire: one the heap cannot hold fails this message, where
    // std::bad_alloc on the progress thread ended the process.
    op->owned.reset(new (std::nothrow) std::byte[op->size]);
    if (op->owned == nullptr) {
      InboundPayload failed;
      failed.status = absl::ResourceExhaustedError(
          absl::StrCat("no memory for a payload of ", op->size, " bytes"));
      handler_->OnMessage(from, op->header, std::move(failed));
      ReplyReadDone(from, op->peer_op_id, ReadOutcome::kDeclined);
      return;
    }
    op->data = op->owned.get();
  }
  void* desc = nullptr;
  if (std::optional<MemoryKey> found = domain_->FindRegion(op->data, op->size)) {
    desc = found->desc;
  } else if (domain_->mr_local()) {
    absl::StatusOr<MrPtr> registration = domain_->Register(op->data, op->size);
    if (!registration.ok()) {
      InboundPayload failed;
      failed.status = registration.status();
      handler_->OnMessage(from, op->header, std::move(failed));
      ReplyReadDone(from, op->peer_op_id, ReadOutcome::kFailed);
      return;
    }
    op->registration = std::move(*registration);
    desc = fi_mr_desc(op->registration.get());
  }
  op->read_id = next_op_id_++;
  reads_[op->read_id] = op.get();
  AddPending(from, +1);
  std::byte* data = op->data;
  const size_t size = op->size;
  endpoint_->Read(std::move(op), address, data, size, desc, message.wire.remote_addr,
                  message.wire.remote_key);
}

void OfiTransport::OnReadDone(const DecodedMessage& message) {
  auto it = sends_.find(message.wire.op_id);
  // The token names the connection the reader sees us on; it must be the send's.
  if (it == sends_.end() || it->second.connection != message.wire.token) return;
  switch (message.wire.outcome) {
    case ReadOutcome::kRead:
      CompleteSend(message.wire.op_id, absl::OkStatus());
      break;
    case ReadOutcome::kDeclined:
      CompleteSend(message.wire.op_id,
                   absl::ResourceExhaustedError("the receiver declined the payload (its "
                                                "destination was too small, or it was closing)"));
      break;
    default:
      CompleteSend(message.wire.op_id,
                   absl::UnavailableError("the receiver failed to read the payload"));
      break;
  }
}

void OfiTransport::OnReadComplete(ReadOp& op, const absl::Status& status) {
  op.delivered = true;
  reads_.erase(op.read_id);
  op.registration.reset();
  const ConnectionId from = op.connection();
  InboundPayload payload;
  if (status.ok()) {
    stats_.payload_bytes_received.fetch_add(op.size, std::memory_order_relaxed);
    payload.data = op.data;
    payload.size = op.size;
    payload.owned = std::move(op.owned);
  } else {
    payload.status = absl::Status(status.code(), absl::StrCat("reading a payload of ", op.size,
                                                              " bytes: ", status.message()));
  }
  handler_->OnMessage(from, op.header, std::move(payload));
  ReplyReadDone(from, op.peer_op_id, status.ok() ? ReadOutcome::kRead : ReadOutcome::kFailed);
  AddPending(from, -1);
}

void OfiTransport::ReplyReadDone(ConnectionId to, uint64_t op_id, ReadOutcome outcome) {
  auto it = connections_.find(to);
  if (it == connections_.end() || it->second.failed) return;
  WireHeader wire;
  wire.kind = MessageKind::kReadDone;
  wire.outcome = outcome;
  wire.token = it->second.remote_token;
  wire.op_id = op_id;
  SendMessage(to, it->second.address, wire, {}, {}, /*send_id=*/0, /*completes_send=*/false);
}

void OfiTransport::FailPendingOf(ConnectionId id, const absl::Status& why, bool fail_reads,
                                 bool peer_alive) {
  // Ops libfabric never accepted complete now, with `why`.
  endpoint_->FailBacklog(id, why);
  // Reads in flight from a dead peer may never complete (a dead shm peer serves nothing):
  // deliver them as failed now; their late completions are ignored.
  std::vector<ReadOp*> reads;
  for (const auto& [read_id, op] : reads_) {
    if (fail_reads && op->connection() == id) reads.push_back(op);
  }
  for (ReadOp* op : reads) OnReadComplete(*op, why);
  std::vector<uint64_t> sends;
  for (const auto& [send_id, pending] : sends_) {
    if (pending.connection == id) sends.push_back(send_id);
  }
  // A peer given up on may be alive, and read the payloads it was told of: their memory
  // must not be reused yet. A dead one reads nothing (its reads of us end with it).
  const absl::Status send_failed = peer_alive ? PayloadMayStillBeReadError(why) : why;
  for (uint64_t send_id : sends) CompleteSend(send_id, send_failed);
}

}  // namespace sluice::transport::ofi
