#include "transport/rpc.h"

#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/destroy_in_place.h"
#include "common/recycling_allocator.h"
#include "common/status_macros.h"
#include "transport/payload_retention.h"
#include "transport/spin_wait.h"

namespace sluice::transport {
namespace {

constexpr uint8_t kRequest = 1;
constexpr uint8_t kResponse = 2;
// The body (protobuf bytes) travels as the payload because it exceeds the header limit.
constexpr uint8_t kBodyInPayload = 1;

// Fixed-size prefix of every message header; the body follows it.
struct Frame {
  uint8_t kind = 0;
  uint8_t flags = 0;
  uint16_t reserved = 0;
  uint32_t method = 0;
  uint64_t request_id = 0;
  int32_t code = 0;
  uint32_t body_size = 0;
};
static_assert(sizeof(Frame) == 24);

// Frames up to this size are encoded on the stack: a control message costs no allocation.
constexpr size_t kStackFrameBytes = 256;

// Encodes frame + body into `stack` when it fits, else into `heap`; returns the bytes.
absl::string_view EncodeFrame(const Frame& frame, absl::string_view body,
                              char (&stack)[kStackFrameBytes], std::string& heap) {
  const size_t size = sizeof(Frame) + body.size();
  char* out = stack;
  if (size > kStackFrameBytes) {
    heap.resize(size);
    out = heap.data();
  }
  std::memcpy(out, &frame, sizeof(Frame));
  if (!body.empty()) std::memcpy(out + sizeof(Frame), body.data(), body.size());
  return {out, size};
}

// Call deadlines are checked on a 5 ms tick, so the coarse clock (one kernel tick, ~4 ms)
// does: it costs 5 ns against 24 ns for a precise read in a VM, and every call reads it.
int64_t CoarseMonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

int64_t DeadlineAfter(absl::Duration timeout) {
  const int64_t now = CoarseMonotonicNs();
  // A thread's calls mostly share one timeout; ToInt64Nanoseconds is out of line in Debian's
  // Abseil, a comparison is not.
  thread_local absl::Duration last_timeout = absl::ZeroDuration();
  thread_local int64_t last_timeout_ns = 0;
  if (timeout != last_timeout) {
    last_timeout_ns = absl::ToInt64Nanoseconds(timeout);  // saturates when infinite
    last_timeout = timeout;
  }
  const int64_t timeout_ns = last_timeout_ns;
  return timeout_ns > std::numeric_limits<int64_t>::max() - now
             ? std::numeric_limits<int64_t>::max()
             : now + timeout_ns;
}

// The frame of a message received from the network; nullopt when it is not a valid one
// (such a message is dropped: without a valid frame there is no request id to answer).
std::optional<Frame> DecodeFrame(absl::string_view header) {
  if (header.size() < sizeof(Frame)) return std::nullopt;
  Frame frame;
  std::memcpy(&frame, header.data(), sizeof(Frame));
  if (frame.kind != kRequest && frame.kind != kResponse) return std::nullopt;
  const bool in_payload = frame.flags & kBodyInPayload;
  if (!in_payload && frame.body_size != header.size() - sizeof(Frame)) return std::nullopt;
  return frame;
}

// Marks a failure whose landing buffer may still be written (LandingMayStillBeWritten).
constexpr char kLandingInUse[] = "sluice.transport/landing-in-use";

}  // namespace

// What a synchronous Call waits on. The thread that receives the reply writes it here and
// flips `state`; the caller polls `state` while it drives, and only a caller that goes to
// sleep makes `wake` (Debian's Abseil is built without NDEBUG, so making and destroying a
// Mutex, the Notification's, updates the deadlock detector's lock graph under a global
// lock: a driving caller must not pay that on every call).
struct RpcEndpoint::CallWaiter {
  enum : int { kWaiting, kSleeping, kDone };
  std::atomic<int> state{kWaiting};
  std::optional<absl::Notification> wake;
  absl::StatusOr<CallResult>* result;  // the caller's, returned without a move

  [[nodiscard]] bool done() const { return state.load(std::memory_order_acquire) == kDone; }
  // Call once `*result` is written.
  void Signal() {
    // Past this exchange a caller that did not sleep may return and destroy the waiter;
    // one that sleeps made `wake` before it said so.
    if (state.exchange(kDone, std::memory_order_acq_rel) == kSleeping) wake->Notify();
  }
};

void RpcEndpoint::Complete(PendingCall& call, absl::StatusOr<CallResult> result) {
  if (call.waiter != nullptr) {
    *call.waiter->result = std::move(result);
    call.waiter->Signal();
  } else {
    call.done(std::move(result));
  }
}

bool LandingMayStillBeWritten(const absl::Status& status) {
  return status.GetPayload(kLandingInUse).has_value();
}

ServerCall::ServerCall(RpcEndpoint* endpoint, ConnectionId peer, uint32_t method,
                       uint64_t request_id, absl::string_view request)
    : endpoint_(endpoint),
      peer_(peer),
      method_(method),
      request_id_(request_id),
      request_(request) {}

size_t ServerCall::max_body_with_payload() const {
  return endpoint_->transport_->max_header_size() - sizeof(Frame);
}

void ServerCall::Reply(const absl::Status& status, absl::string_view response, Payload payload,
                       SendCallback on_sent) {
  endpoint_->SendFrame(peer_, kResponse, method_, request_id_, status, response, payload,
                       std::move(on_sent));
}

absl::StatusOr<std::unique_ptr<RpcEndpoint>> RpcEndpoint::Create(const RpcOptions& options) {
  return CreateOver(options, [&options](MessageHandler* handler) {
    return CreateTransport(options.scheme, options.transport, handler);
  });
}

absl::StatusOr<std::unique_ptr<RpcEndpoint>> RpcEndpoint::CreateOver(const RpcOptions& options,
                                                                     const TransportMaker& make) {
  std::unique_ptr<RpcEndpoint> endpoint(new RpcEndpoint(options));
  SLUICE_ASSIGN_OR_RETURN(endpoint->transport_, make(endpoint.get()));
  if (endpoint->transport_ == nullptr) {
    return absl::InvalidArgumentError("RpcEndpoint::CreateOver: the maker returned no transport");
  }
  return endpoint;
}

RpcEndpoint::RpcEndpoint(const RpcOptions& options)
    // A caller that drives waits on its own thread; one whose drive ended early sleeps.
    : wait_spin_(options.transport.caller_driven_progress
                     ? absl::ZeroDuration()
                     : ResolveWaitSpin(options.transport.wait_spin)),
      handlers_pool_(std::make_unique<ThreadPool>("rpc", options.handler_threads)) {}

void RpcEndpoint::StopServing() {
  // From here a request is answered Unavailable, not handled: its handler could reach an
  // owner being torn down, and its caller learns at once to go elsewhere (over shared
  // memory nothing else would tell it before its deadline).
  shutting_down_.store(true);
  // Handlers still queued may reply through the transport: drain them before it goes. The
  // pool stays (a request that finds it shut down is refused): a reset would leave the
  // progress thread a null pool to schedule on.
  handlers_pool_->Shutdown();
}

RpcEndpoint::~RpcEndpoint() {
  // CreateOver failed to make the transport: nothing was served or connected.
  if (transport_ == nullptr) return;
  // First: a handler that StopServing waits for may be connecting to a peer that never
  // answers (its outgoing CallProto), and background connects may be too. Both end now.
  transport_->StopConnecting();
  StopServing();
  // Background connects use the transport: no new one starts, and those in progress ended
  // above (a peer that never answers would hold this for the connect timeout).
  std::vector<std::shared_ptr<Connector>> connectors;
  {
    absl::MutexLock lock(&background_mu_);
    background_stopping_ = true;
    connectors.swap(connectors_);
  }
  for (const std::shared_ptr<Connector>& connector : connectors) {
    if (connector->thread.get_id() == std::this_thread::get_id()) {
      // The thread would go on inside this endpoint once it is gone: said, not hidden.
      std::fprintf(stderr,
                   "sluice: an RpcEndpoint was destroyed from one of its own "
                   "ConnectInBackground callbacks\n");
      std::abort();
    }
    connector->thread.join();
  }
  // Not reset: until its destructor has stopped the progress thread, a reply may still be
  // sent there through transport_.
  DestroyInPlace(transport_);
  std::vector<PendingCall> pending;
  {
    absl::MutexLock lock(&mu_);
    pending = pending_.TakeIf([](uint64_t, PendingCall&) { return true; });
  }
  for (PendingCall& call : pending) Complete(call, absl::CancelledError("RPC endpoint shut down"));
}

void RpcEndpoint::Handle(uint32_t method, MethodHandler handler, HandlerThread thread) {
  // Methods index a vector: a number this large is a mistake, not a method.
  constexpr uint32_t kMaxMethod = 4096;
  if (method > kMaxMethod) {
    std::fprintf(stderr, "sluice: RPC method number %u is above %u\n", method, kMaxMethod);
    std::abort();
  }
  if (method >= handlers_.size()) handlers_.resize(method + 1);
  handlers_[method] = Handler{std::move(handler), thread};
}

absl::StatusOr<Address> RpcEndpoint::Listen(const Address& bind) {
  return transport_->Listen(bind);
}

void RpcEndpoint::SendFrame(ConnectionId to, uint8_t kind, uint32_t method, uint64_t request_id,
                            const absl::Status& status, absl::string_view body, Payload payload,
                            SendCallback&& on_sent) {
  Frame frame;
  frame.kind = kind;
  frame.method = method;
  frame.request_id = request_id;
  // Status::code() is out of line in Debian's shared Abseil: asked only of a failure.
  if (!status.ok()) {
    frame.code = static_cast<int32_t>(status.code());
    body = status.message();  // `status` outlives this call
  }
  frame.body_size = static_cast<uint32_t>(body.size());
  char stack[kStackFrameBytes];
  std::string heap;
  if (sizeof(Frame) + body.size() <= transport_->max_header_size()) {
    transport_->Send(to, EncodeFrame(frame, body, stack, heap), payload, std::move(on_sent));
    return;
  }
  if (payload.size != 0) {
    const absl::Status too_big = absl::ResourceExhaustedError(
        absl::StrCat("a message body of ", body.size(), " bytes cannot go with a data payload (",
                     transport_->max_header_size() - sizeof(Frame), " bytes at most)"));
    // A caller waiting for this reply is told now, not at its deadline.
    if (kind == kResponse) {
      SendFrame(to, kResponse, method, request_id,
                absl::Status(too_big.code(), absl::StrCat("the reply: ", too_big.message())),
                std::string(), {}, {});
    }
    if (on_sent) on_sent(too_big);
    return;
  }
  // Too big for a header: the body rides as the payload, kept alive until sent.
  frame.flags |= kBodyInPayload;
  auto owned = std::make_shared<std::string>(body);
  Payload as_payload{owned->data(), owned->size()};
  transport_->Send(to, EncodeFrame(frame, {}, stack, heap), as_payload,
                   [owned, on_sent = std::move(on_sent)](absl::Status s) mutable {
                     if (PayloadMayStillBeRead(s)) KeepForPeerReads(std::move(owned));
                     if (on_sent) on_sent(s);
                   });
}

void RpcEndpoint::StartCall(ConnectionId to, uint32_t method, absl::string_view request,
                            const CallOptions& options, CallCallback&& done, CallWaiter* waiter) {
  const int64_t deadline_ns = DeadlineAfter(options.timeout);
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    // Made in its slot: a PendingCall moved is a dozen fields and a std::function.
    if (PendingCall* call = pending_.Add(&id)) {
      call->connection = to;
      call->method = method;
      call->deadline_ns = deadline_ns;
      call->landing = options.landing;
      call->group = options.group;
      call->waiter = waiter;
      if (waiter == nullptr) call->done = std::move(done);
    }
  }
  if (id == 0) {
    PendingCall refused{.done = std::move(done), .waiter = waiter};
    Complete(refused, absl::ResourceExhaustedError("too many calls pending on this RPC endpoint"));
    return;
  }
  SendFrame(to, kRequest, method, id, absl::OkStatus(), request, {}, [this, id](absl::Status s) {
    if (!s.ok()) FailCall(id, s);
  });
}

void RpcEndpoint::CallAsync(ConnectionId to, uint32_t method, absl::string_view request,
                            const CallOptions& options, CallCallback done) {
  StartCall(to, method, request, options, std::move(done), nullptr);
}

absl::StatusOr<CallResult> RpcEndpoint::Call(ConnectionId to, uint32_t method,
                                             absl::string_view request,
                                             const CallOptions& options) {
  absl::StatusOr<CallResult> result;
  CallWaiter waiter{.result = &result};
  // With caller-driven progress the request goes out and its reply is handled on this
  // thread, written into `result` without a callback.
  const bool drove = transport_->DriveUntil(
      [&] { StartCall(to, method, request, options, CallCallback(), &waiter); },
      [&waiter] { return waiter.done(); });
  // Not driven: the progress thread receives the reply. A reply that comes within the spin
  // is taken without a sleep, a wake-up and the Notification's making.
  if (!drove) {
    if (wait_spin_ > absl::ZeroDuration() &&
        SpinUntil([&waiter] { return waiter.done(); }, wait_spin_)) {
      replies_taken_spinning_.fetch_add(1, std::memory_order_relaxed);
    } else {
      waiter.wake.emplace();
      int expected = CallWaiter::kWaiting;
      if (waiter.state.compare_exchange_strong(expected, CallWaiter::kSleeping,
                                               std::memory_order_acq_rel)) {
        waiter.wake->WaitForNotification();
      }
    }
  }
  return result;
}

absl::Status RpcEndpoint::CallProto(const Address& peer, uint32_t method,
                                    const google::protobuf::MessageLite& request,
                                    google::protobuf::MessageLite* response, absl::Duration timeout,
                                    const void* group) {
  // The timeout bounds the connect too: a goodbye to a dispatcher behind a partition must
  // not wait out the whole connect timeout first.
  const absl::Time deadline = absl::Now() + timeout;
  SLUICE_ASSIGN_OR_RETURN(ConnectionId connection, ConnectTo(peer, kNoConnection, deadline));
  CallOptions options;
  options.timeout = deadline - absl::Now();
  options.group = group;
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(
        absl::StrCat("the call to ", peer.ToString(), " timed out while connecting"));
  }
  SLUICE_ASSIGN_OR_RETURN(CallResult result,
                          Call(connection, method, request.SerializeAsString(), options));
  if (!response->ParseFromArray(result.response.data(), static_cast<int>(result.response.size()))) {
    return absl::DataLossError(
        absl::StrCat("malformed ", response->GetTypeName(), " from ", peer.ToString()));
  }
  return absl::OkStatus();
}

void RpcEndpoint::CancelGroup(const void* group, const absl::Status& why) {
  if (group == nullptr) return;
  std::vector<PendingCall> cancelled;
  {
    absl::MutexLock lock(&mu_);
    cancelled = pending_.TakeIf([group](uint64_t, const PendingCall& call) {
      return call.group == group && !call.receiving;
    });
  }
  for (PendingCall& call : cancelled) Complete(call, why);
}

void RpcEndpoint::FailCall(uint64_t request_id, const absl::Status& status) {
  std::optional<PendingCall> call;
  {
    absl::MutexLock lock(&mu_);
    // A call whose reply is landing got its request through, whatever its send says (the
    // acknowledgement went with the peer): it ends with its receive, its landing buffer in
    // use until then (or at its deadline, marked LandingMayStillBeWritten).
    const PendingCall* pending = pending_.Find(request_id);
    if (pending == nullptr || pending->receiving) return;
    call = pending_.Take(request_id);
  }
  if (call) Complete(*call, status);
}

PayloadDestination RpcEndpoint::ChoosePayloadDestination(ConnectionId from,
                                                         absl::string_view header,
                                                         size_t payload_size) {
  std::optional<Frame> frame = DecodeFrame(header);
  if (!frame) return {.discard = true};  // OnMessage would drop it anyway
  // A payload is a request's body, or a reply's body or data. One that cannot be its
  // message's body is not taken in (a peer's bytes are not received to be dropped).
  const bool body = (frame->flags & kBodyInPayload) != 0;
  if (body && payload_size != frame->body_size) return {.discard = true};
  if (frame->kind != kResponse) {
    return body ? PayloadDestination{} : PayloadDestination{.discard = true};  // on the heap
  }
  absl::MutexLock lock(&mu_);
  PendingCall* call = pending_.Find(frame->request_id);
  // A reply to a call that timed out or was cancelled (a stopping reader's) goes nowhere:
  // its payload, a whole batch perhaps, need not cross, and a receive left in flight into a
  // heap buffer would be one more thing the transport's teardown must wait for.
  if (call == nullptr || call->connection != from) return {.discard = true};
  // A second reply while the first's payload lands (a server that replied twice): it must
  // not land in the same buffer at once, nor end the call under the first.
  if (call->receiving) return {.discard = true};
  if (frame->flags & kBodyInPayload) return {};
  if (call->landing.data != nullptr) call->receiving = true;
  return call->landing;
}

void RpcEndpoint::OnMessage(ConnectionId from, absl::string_view header, InboundPayload payload) {
  const std::optional<Frame> frame = DecodeFrame(header);
  if (!frame) return;
  // The body, as a view: copied once, into the ServerCall or the CallResult that keeps it.
  absl::string_view body = header.substr(sizeof(Frame));
  if (frame->flags & kBodyInPayload) {
    if (!payload.status.ok() || payload.size != frame->body_size) return;
    body = absl::string_view(reinterpret_cast<const char*>(payload.data), payload.size);
  }

  if (frame->kind == kRequest) {
    // Made and dropped for every request: its block is recycled.
    auto call = std::allocate_shared<ServerCall>(RecyclingAllocator<ServerCall>(), this, from,
                                                 frame->method, frame->request_id, body);
    payload = InboundPayload{};  // a body that came as the payload is not held twice
    if (frame->method >= handlers_.size() || !handlers_[frame->method].handle) {
      call->Reply(absl::UnimplementedError(absl::StrCat("unknown method ", frame->method)));
      return;
    }
    if (shutting_down_.load(std::memory_order_relaxed)) {
      call->Reply(absl::UnavailableError("the server is shutting down"));
      return;
    }
    const Handler& handler = handlers_[frame->method];
    // Handed over, not copied: each copy of a shared_ptr is two locked instructions.
    switch (handler.thread) {
      case HandlerThread::kInline:
        handler.handle(std::move(call));
        break;
      case HandlerThread::kPool: {
        ServerCall* const raw = call.get();
        std::function<void()> task = [handle = &handler.handle, call = std::move(call)]() mutable {
          (*handle)(std::move(call));
        };
        // Shut down since the check above: refused as the requests after it are, rather than
        // run here, on the transport's thread, which a handler may block.
        if (!handlers_pool_->TrySchedule(task)) {
          raw->Reply(absl::UnavailableError("the server is shutting down"));
        }
        break;
      }
    }
    return;
  }

  // Only the waiter or the callback leaves the table: moving the whole call out costs a
  // reply more.
  PendingCall finished;
  bool orphaned = false;
  {
    absl::MutexLock lock(&mu_);
    PendingCall* call = pending_.Find(frame->request_id);
    if (call == nullptr || call->connection != from) return;  // late or forged
    // Only the message whose payload lands (or failed to) ends a call that is receiving: a
    // header-only second reply would end it while the first still wrote into its buffer.
    const bool landing_message = payload.data != nullptr || !payload.status.ok();
    if (call->receiving && !landing_message) return;
    finished.waiter = call->waiter;
    if (call->waiter == nullptr) finished.done = std::move(call->done);
    orphaned = call->orphaned;
    static_cast<void>(pending_.Erase(frame->request_id));  // found just above
  }
  if (orphaned) {
    // Its connection was given up while the payload landed, and the sender was told so:
    // it may have reused the payload's memory while the transfer still read it. The bytes
    // that landed cannot be trusted; the receive has ended, so the buffer is free again.
    Complete(finished, absl::UnavailableError(
                           "the connection was given up while this reply's payload landed"));
    return;
  }
  auto code = static_cast<absl::StatusCode>(frame->code);
  if (code != absl::StatusCode::kOk) {
    Complete(finished, absl::Status(code, body));
  } else if (frame->flags & kBodyInPayload) {
    CallResult result{ResponseBytes(body), InboundPayload{}};
    payload = InboundPayload{};  // not held twice while the caller runs
    Complete(finished, std::move(result));
  } else if (!payload.status.ok()) {
    Complete(finished, payload.status);
  } else if (finished.waiter != nullptr) {
    // Straight into the caller's result, built there: a CallResult's move copies its
    // inline bytes.
    CallResult& result = finished.waiter->result->emplace();
    result.response.assign(body);
    result.payload = std::move(payload);
    finished.waiter->Signal();
  } else {
    Complete(finished, CallResult{ResponseBytes(body), std::move(payload)});
  }
}

void RpcEndpoint::OnDisconnect(ConnectionId connection, absl::Status why) {
  const bool receives_outstanding = why.GetPayload(kReceivesOutstandingPayload).has_value();
  std::vector<PendingCall> failed;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = peer_of_.find(connection); it != peer_of_.end()) {
      // Disconnect may already have replaced it with a new connection to the same peer.
      if (auto c = connections_.find(it->second.address);
          c != connections_.end() && c->second == connection) {
        connections_.erase(c);
      }
      peer_of_.erase(it);
    } else if (connects_in_flight_ > 0) {
      // Bounded should connects overlap for ever (each is short, so they do not): past the
      // cap the table starts over, and a connection lost as it opened may then be handed
      // out, to fail its calls until given up, as before this table.
      if (closed_while_connecting_.size() >= kMaxClosedWhileConnecting) {
        closed_while_connecting_.clear();
      }
      closed_while_connecting_.emplace(connection, why);
    }
    // A call whose payload is landing is left to the transport when it says the receive may
    // still write (it completes the call when the receive ends): a dead peer's receives
    // write nothing more, but a libfabric read cannot be cancelled.
    failed = pending_.TakeIf([&](uint64_t, PendingCall& call) {
      if (call.connection != connection) return false;
      if (call.receiving && receives_outstanding) {
        call.orphaned = true;
        return false;
      }
      return true;
    });
  }
  for (PendingCall& call : failed) Complete(call, why);
}

void RpcEndpoint::OnTick() {
  std::vector<std::pair<PendingCall, absl::Status>> expired;
  const int64_t now_ns = CoarseMonotonicNs();
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty()) return;
    // A call whose payload is landing is left to finish: its buffer is in use.
    std::vector<PendingCall> late = pending_.TakeIf([now_ns](uint64_t, const PendingCall& call) {
      return call.deadline_ns <= now_ns && (!call.receiving || call.orphaned);
    });
    for (PendingCall& call : late) {
      auto peer = peer_of_.find(call.connection);
      absl::Status status = absl::DeadlineExceededError(
          absl::StrCat("no reply to method ", call.method, " from ",
                       peer != peer_of_.end() ? peer->second.address.ToString()
                                              : absl::StrCat("connection ", call.connection),
                       " before the deadline"));
      if (call.orphaned) status.SetPayload(kLandingInUse, absl::Cord("1"));
      expired.emplace_back(std::move(call), std::move(status));
    }
  }
  for (auto& [call, status] : expired) Complete(call, std::move(status));
}

}  // namespace sluice::transport
