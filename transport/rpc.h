// Request/response calls with deadlines over a Transport: the control channel's engine.
//
// A call sends a small frame (method, request id) plus a serialized protobuf; the reply comes
// back on the same connection. A caller that expects a data payload (a batch) names a
// `landing` buffer in CallOptions: the payload then moves by rendezvous straight into it.
// Server handlers run on a small thread pool so they may block; replies may be sent from any
// thread, later, which is how a worker answers a fetch once a batch is ready.
//
//   auto rpc = RpcEndpoint::Create(options);
//   (*rpc)->Handle(kGetSplit, [](std::shared_ptr<ServerCall> call) { call->Reply(Ok(), bytes); });
//   (*rpc)->Listen(address);
//   absl::StatusOr<CallResult> r = (*rpc)->Call(connection, kGetSplit, request, {});
#ifndef SLUICE_TRANSPORT_RPC_H_
#define SLUICE_TRANSPORT_RPC_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/small_bytes.h"
#include "common/thread_pool.h"
#include "google/protobuf/message_lite.h"
#include "transport/id_slot_table.h"
#include "transport/transport.h"

namespace sluice::transport {

struct RpcOptions {
  std::string scheme = "ucx";
  TransportOptions transport;
  int handler_threads = 2;
};

struct CallOptions {
  absl::Duration timeout = absl::Seconds(30);
  // Where a response payload should land; without one it is received into heap memory.
  PayloadDestination landing;
  // Calls started with the same non-null group can be given up together (CancelGroup): a
  // reader that stops names itself, so as not to wait for replies it no longer wants.
  const void* group = nullptr;
};

// A serialized response up to this size is held in the CallResult itself: a batch's reply
// (GetElementResponse, 20-60 bytes) costs the reader no allocation.
inline constexpr size_t kInlineResponseBytes = 112;
using ResponseBytes = SmallBytes<kInlineResponseBytes>;

struct CallResult {
  ResponseBytes response;  // the serialized response message
  InboundPayload payload;  // the response's data payload, if any
};

using CallCallback = std::function<void(absl::StatusOr<CallResult>)>;
using ConnectCallback = std::function<void(absl::StatusOr<ConnectionId>)>;

// True for the failure of a call that gave up while its payload was still landing (its
// connection was aborted and the transport never ended the receive): the landing buffer may
// still be written later, so it must not be reused.
[[nodiscard]] bool LandingMayStillBeWritten(const absl::Status& status);

class RpcEndpoint;

// One incoming request. Reply exactly once, from any thread.
class ServerCall {
 public:
  // `request` is copied: into the call itself when it is short, as a control request is.
  ServerCall(RpcEndpoint* endpoint, ConnectionId peer, uint32_t method, uint64_t request_id,
             absl::string_view request);
  ServerCall(const ServerCall&) = delete;
  ServerCall& operator=(const ServerCall&) = delete;

  [[nodiscard]] ConnectionId peer() const { return peer_; }
  [[nodiscard]] uint32_t method() const { return method_; }
  // The request's bytes, valid while the call lives.
  [[nodiscard]] absl::string_view request() const { return request_.view(); }
  // The largest response body that can go with a payload: a longer one cannot (Reply
  // answers the caller with ResourceExhausted instead). Without a payload any size goes.
  [[nodiscard]] size_t max_body_with_payload() const;

  // A non-OK status is delivered to the caller as that status. `response` is copied before
  // Reply returns (a caller may serialize into a stack buffer); `payload` must stay valid
  // until `on_sent` runs.
  void Reply(const absl::Status& status, absl::string_view response = {}, Payload payload = {},
             SendCallback on_sent = {});
  void Reply(const google::protobuf::MessageLite& response) {
    Reply(absl::OkStatus(), response.SerializeAsString());
  }

 private:
  // Requests up to this size (a fetch with its acknowledgements is 20-100 bytes) live in
  // the call, whose block RpcEndpoint takes from the receiving thread's recycled ones: no
  // allocation per request where the call ends on that thread (an inline handler's reply).
  static constexpr size_t kInlineRequestBytes = 192;

  RpcEndpoint* endpoint_;
  ConnectionId peer_;
  uint32_t method_;
  uint64_t request_id_;
  SmallBytes<kInlineRequestBytes> request_;
};

using MethodHandler = std::function<void(std::shared_ptr<ServerCall>)>;

enum class HandlerThread {
  // On the endpoint's handler pool: the handler may block.
  kPool,
  // On the thread driving the transport (its progress thread, or a caller driving it during
  // a Call): saves two thread hand-offs per call, so the handler must never block (reply
  // now, or park the call and reply later from another thread).
  kInline,
};

// Makes the transport an endpoint runs over, given the endpoint (its handler).
using TransportMaker =
    std::function<absl::StatusOr<std::unique_ptr<Transport>>(MessageHandler* handler)>;

class RpcEndpoint final : public MessageHandler {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RpcEndpoint>> Create(
      const RpcOptions& options);
  // As Create, over the transport `make` returns instead of options.scheme's (e.g. the
  // in-process loopback that perf/rpc_benchmark.cc times the RPC layer's own work over).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RpcEndpoint>> CreateOver(
      const RpcOptions& options, const TransportMaker& make);
  ~RpcEndpoint() override;

  // Registers a handler; call before Listen. Methods are small numbers (above 4096 aborts:
  // handlers are a vector indexed by method); an empty handler answers Unimplemented.
  void Handle(uint32_t method, MethodHandler handler, HandlerThread thread = HandlerThread::kPool);
  [[nodiscard]] absl::StatusOr<Address> Listen(const Address& bind);
  // Returns the live connection to `peer`, connecting if there is none. `known`, a
  // connection an earlier ConnectTo returned, is returned at once while it still is the
  // live one to `peer`: a reader asks before every fetch, and hashing the address was ~250
  // instructions of its ~7,000 per batch. While another thread connects to `peer`, waits
  // for that connect and shares its outcome; on the thread driving the transport, where
  // waiting could deadlock, fails Unavailable at once instead (retry later). Gives up at
  // `deadline` (DeadlineExceeded) when that comes before the transport's connect timeout.
  [[nodiscard]] absl::StatusOr<ConnectionId> ConnectTo(
      const Address& peer, ConnectionId known = kNoConnection,
      absl::Time deadline = absl::InfiniteFuture());
  // The live connection to `peer` (`known` while it still is that one), if there is one:
  // never connects, never waits. A thread that must not block on a connect (a reader's
  // fetch) asks this, and has ConnectInBackground make a missing connection.
  [[nodiscard]] std::optional<ConnectionId> LiveConnection(const Address& peer,
                                                           ConnectionId known = kNoConnection);
  // Connects to `peer` as ConnectTo does, on a thread of the endpoint's, then calls `done`
  // with the outcome on that thread (never inside this call). Calls for a peer that thread
  // is still connecting share its outcome; those that come after a failed connect, within
  // 200 ms of it, are connected for after that pause. ~RpcEndpoint ends a connect under way
  // at once (Transport::StopConnecting) and waits for these threads; callers it finds
  // waiting, or that ask once it started (then inside this call), are told Cancelled.
  // A callback must not destroy the endpoint.
  void ConnectInBackground(const Address& peer, ConnectCallback done);
  // Gives up on `connection` (its peer is known lost, e.g. behind a partition): the calls
  // pending on it fail with `why`, each once the transport has let go of its landing buffer,
  // and the next ConnectTo of that peer connects afresh. A no-op for a connection already
  // replaced or gone.
  void Disconnect(ConnectionId connection, const absl::Status& why);
  // Gives up on the pending calls started with CallOptions::group == `group`: each fails
  // with `why` at once, on this thread, except one whose payload is landing, which ends when
  // the payload has landed (its buffer is in use until then). The peer is not told; a reply
  // that comes later is dropped. Other calls on the same connections go on.
  void CancelGroup(const void* group, const absl::Status& why);

  // `request` is copied into the message before these return.
  void CallAsync(ConnectionId to, uint32_t method, absl::string_view request,
                 const CallOptions& options, CallCallback done);
  [[nodiscard]] absl::StatusOr<CallResult> Call(ConnectionId to, uint32_t method,
                                                absl::string_view request,
                                                const CallOptions& options);
  // Connects to `peer` if needed, calls, and parses the response into `response`; `timeout`
  // bounds the connect and the call together. `group`: as CallOptions::group (the call, not
  // the connect, can be given up).
  [[nodiscard]] absl::Status CallProto(const Address& peer, uint32_t method,
                                       const google::protobuf::MessageLite& request,
                                       google::protobuf::MessageLite* response,
                                       absl::Duration timeout, const void* group = nullptr);

  // Stops serving: from now on a request is answered Unavailable, not handled; pool
  // handlers already queued run to their end (an inline one already under way on the
  // progress thread is not waited for). Replies and calls still go out until destruction, so
  // an owner can answer what it holds (e.g. calls awaiting its journal) before it goes. The
  // destructor calls this; a second call does nothing. Not from a pool handler (it waits
  // for them).
  void StopServing();

  [[nodiscard]] Transport& transport() { return *transport_; }
  // How long a thread that waits for what the progress thread hands it polls before it
  // sleeps (TransportOptions::wait_spin, resolved; zero under caller-driven progress).
  [[nodiscard]] absl::Duration wait_spin() const { return wait_spin_; }
  // Calls whose reply this endpoint's callers took while polling, without sleeping.
  [[nodiscard]] int64_t replies_taken_spinning() const {
    return replies_taken_spinning_.load(std::memory_order_relaxed);
  }
  // ConnectTo calls that waited for another thread's connect to the same peer.
  [[nodiscard]] int64_t connects_waited_for() const {
    return connects_waited_for_.load(std::memory_order_relaxed);
  }

  // MessageHandler (on the thread driving the transport).
  PayloadDestination ChoosePayloadDestination(ConnectionId from, absl::string_view header,
                                              size_t payload_size) override;
  void OnMessage(ConnectionId from, absl::string_view header, InboundPayload payload) override;
  void OnDisconnect(ConnectionId connection, absl::Status why) override;
  void OnTick() override;

 private:
  friend class ServerCall;
  struct CallWaiter;  // a synchronous Call's, in rpc.cc
  struct PendingCall {
    ConnectionId connection;
    uint32_t method;
    int64_t deadline_ns;  // on CoarseMonotonicNs()'s clock
    PayloadDestination landing;
    bool receiving = false;  // a payload is landing: the landing buffer is in use
    // Its connection is gone while the payload was landing: left to the transport, failed
    // when the receive ends (whatever landed: the sender may have reused its memory), or
    // at the deadline if the transport never ends it.
    bool orphaned = false;
    const void* group = nullptr;  // CallOptions::group
    // Either: CallAsync's callback, or the waiter a synchronous Call polls (its reply is
    // written there with no callback in between).
    CallCallback done;
    CallWaiter* waiter = nullptr;
  };
  // Hands a finished call its outcome, through its waiter or its callback.
  static void Complete(PendingCall& call, absl::StatusOr<CallResult> result);

  explicit RpcEndpoint(const RpcOptions& options);
  // `body` is copied into the frame (or, too long for a header, into the payload) before it
  // returns; `on_sent` is taken by reference to what the caller gives up.
  void SendFrame(ConnectionId to, uint8_t kind, uint32_t method, uint64_t request_id,
                 const absl::Status& status, absl::string_view body, Payload payload,
                 SendCallback&& on_sent);
  // ConnectTo's transport connect, for the one caller that makes it; records the connection.
  absl::StatusOr<ConnectionId> ConnectOnce(const Address& peer, absl::Time deadline);
  void FailCall(uint64_t request_id, const absl::Status& status);
  // Enters a call in the pending table and sends its request. The call completes through
  // `waiter` when set, else through `done`; one that cannot start completes at once.
  void StartCall(ConnectionId to, uint32_t method, absl::string_view request,
                 const CallOptions& options, CallCallback&& done, CallWaiter* waiter);

  std::optional<ConnectionId> LiveConnectionLocked(const Address& peer, ConnectionId known)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ConnectInBackground's thread for `peer`: connects, hands the outcome to the callers
  // waiting for it, and ends when none came meanwhile.
  void ConnectForCallers(Address peer);

  const absl::Duration wait_spin_;
  std::atomic<int64_t> replies_taken_spinning_{0};
  std::atomic<int64_t> connects_waited_for_{0};
  std::unique_ptr<ThreadPool> handlers_pool_;
  std::atomic<bool> shutting_down_{false};  // set first by the destructor
  std::unique_ptr<Transport> transport_;
  struct Handler {
    MethodHandler handle;  // empty: no such method
    HandlerThread thread = HandlerThread::kPool;
  };
  // By method number (methods are small numbers): a request finds its handler by index.
  // Written before Listen only.
  std::vector<Handler> handlers_;

  absl::Mutex mu_;
  IdSlotTable<PendingCall> pending_ ABSL_GUARDED_BY(mu_);  // by request id
  // A reader looks its worker up on every fetch: keyed by the address, not its text.
  absl::flat_hash_map<Address, ConnectionId> connections_ ABSL_GUARDED_BY(mu_);
  struct Peer {
    Address address;
    bool live = true;  // connections_ maps `address` to this connection
  };
  absl::flat_hash_map<ConnectionId, Peer> peer_of_ ABSL_GUARDED_BY(mu_);
  // ConnectTo calls waiting for the transport's Connect, and the connections the transport
  // reported gone meanwhile that were not (yet) in peer_of_: one of them may be a connection
  // being made. Cleared when none is in flight, so incoming ones do not pile up.
  int connects_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // The connect in progress to a peer, whose outcome other ConnectTo calls wait for.
  struct ConnectAttempt {
    absl::Time deadline;  // its caller's
    bool done = false;
    absl::StatusOr<ConnectionId> result;
  };
  absl::flat_hash_map<Address, std::shared_ptr<ConnectAttempt>> connecting_ ABSL_GUARDED_BY(mu_);
  // ConnectInBackground: the callers waiting for each peer's connector thread, and the
  // threads, joined as they are replaced and by the destructor. Its own mutex: a callback
  // runs without it, and may call ConnectInBackground again.
  absl::Mutex background_mu_;
  bool background_stopping_ ABSL_GUARDED_BY(background_mu_) = false;  // set by ~RpcEndpoint
  static constexpr absl::Duration kBackgroundRetryPause = absl::Milliseconds(200);
  struct BackgroundCallers {
    bool thread_running = false;  // the peer's connector thread has not ended
    std::vector<ConnectCallback> waiting;
  };
  absl::flat_hash_map<Address, BackgroundCallers> background_callers_
      ABSL_GUARDED_BY(background_mu_);
  struct Connector {
    std::thread thread;
    bool finished = false;
  };
  std::vector<std::shared_ptr<Connector>> connectors_ ABSL_GUARDED_BY(background_mu_);
  static constexpr size_t kMaxClosedWhileConnecting = 4096;
  absl::flat_hash_map<ConnectionId, absl::Status> closed_while_connecting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_RPC_H_
