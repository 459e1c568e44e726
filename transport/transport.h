// The transport interface: connections, messages with zero-copy payloads, registered memory.
//
// A message is a small `header` (opaque bytes; the RPC layer puts a frame and a protobuf in
// it) plus an optional `payload`. Large payloads move by rendezvous straight into a buffer
// the *receiver* chooses (MessageHandler::ChoosePayloadDestination), so a batch goes from
// the worker's registered slab into the client's registered slab with no copy in between.
//
// Threading: every implementation runs one progress thread that owns its C handles. Send,
// Connect, Close and RegisterMemory may be called from any thread; they hand work to the
// progress thread. MessageHandler callbacks run on the thread that drives progress (the
// progress thread, or a caller inside DriveUntil) and must not block.
//
//   auto t = CreateTransport(options, &handler);
//   absl::StatusOr<Address> bound = (*t)->Listen(*ParseAddress("ucx://0.0.0.0:0"));
//   absl::StatusOr<ConnectionId> c = (*t)->Connect(peer);
//   (*t)->Send(*c, header_bytes, Payload{slab, n}, [](absl::Status s) { /* slab reusable */ });
#ifndef SLUICE_TRANSPORT_TRANSPORT_H_
#define SLUICE_TRANSPORT_TRANSPORT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/inline_function.h"
#include "transport/address.h"

namespace sluice::transport {

using ConnectionId = uint64_t;
inline constexpr ConnectionId kNoConnection = 0;

// Memory registered with a transport once, so that sends from it and receives into it need
// no per-message registration. Deregistered when destroyed.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  [[nodiscard]] virtual std::byte* base() const = 0;
  [[nodiscard]] virtual size_t size() const = 0;
  [[nodiscard]] bool Contains(const void* p, size_t n) const {
    auto* b = static_cast<const std::byte*>(p);
    return b >= base() && b + n <= base() + size();
  }
};

// Bytes to send. They must stay valid and unmodified until the send callback runs.
struct Payload {
  const void* data = nullptr;
  size_t size = 0;
};

// Where a receiver wants an incoming payload to land; `data == nullptr` asks the transport
// to allocate a heap buffer instead.
struct PayloadDestination {
  void* data = nullptr;
  size_t capacity = 0;
  // Nobody wants the payload (a reply to a call given up): the transport drops the message
  // without moving its bytes, and OnMessage is not called. The sender's send completes.
  bool discard = false;
};

// A received payload: either in the chosen destination or in `owned` (heap).
struct InboundPayload {
  absl::Status status;  // not OK when the transfer failed
  const std::byte* data = nullptr;
  size_t size = 0;
  std::unique_ptr<std::byte[]> owned;
};

// Move-only: a send's completion on the data path holds its slab, and keeping it in place
// spares an allocation per batch (common/inline_function.h).
using SendCallback = InlineFunction<void(absl::Status)>;

// Status payload on an OnDisconnect reason: receives into buffers the handler chose may still
// complete on this connection (libfabric reads cannot be cancelled), so those buffers stay in
// use until each receive ends. Without it, no receive on the connection will write any more.
inline constexpr char kReceivesOutstandingPayload[] = "sluice.transport/receives-outstanding";

class MessageHandler {
 public:
  virtual ~MessageHandler() = default;
  // A message with a payload of `payload_size` bytes arrived; its bytes have not moved yet.
  virtual PayloadDestination ChoosePayloadDestination(ConnectionId from, absl::string_view header,
                                                      size_t payload_size) = 0;
  // A complete message. `payload.size == 0` when there was none. `header` is valid for the
  // duration of the call only (it may lie in the transport's receive buffer).
  virtual void OnMessage(ConnectionId from, absl::string_view header, InboundPayload payload) = 0;
  // The connection failed or was closed by the peer; no more messages will come from it.
  virtual void OnDisconnect(ConnectionId connection, absl::Status why) = 0;
  // Called every few milliseconds by whichever thread drives progress (deadlines,
  // housekeeping).
  virtual void OnTick() {}
};

// Counters of the data path, for tests and perf tools. Monotonic.
struct TransportStats {
  std::atomic<uint64_t> payload_bytes_sent{0};
  std::atomic<uint64_t> payload_bytes_received{0};
  // Bytes the transport itself copied on receive (eager messages copied into a destination).
  std::atomic<uint64_t> payload_bytes_copied{0};
  std::atomic<uint64_t> messages_sent{0};
  std::atomic<uint64_t> messages_received{0};
  // Messages whose payload the handler did not want (PayloadDestination::discard): dropped
  // before a byte of it moved.
  std::atomic<uint64_t> payloads_discarded{0};
  // UCX: workers replaced because a dead same-host peer left their receive queue stuck
  // (ucx/ucx_queue_probe.h); each failed every connection of the transport.
  std::atomic<uint64_t> worker_restarts{0};
  // UCX: messages its short protocol sent before ucp_am_send_nbx returned, with no send
  // operation of Sluice's (header-only control messages; ucx_transport.h, SendAtOnce).
  std::atomic<uint64_t> messages_sent_at_once{0};
};

// Adds to a TransportStats counter that one thread at a time writes: the one driving the
// transport, handed on with acquire and release (progress_baton.h). A plain load and store
// instead of a locked read-modify-write: UCX counts three per message on each side.
inline void AddSingleWriter(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// Who notices that a UCX peer has died. Sluice always watches each connection's bootstrap
// socket (closed by the kernel when the peer's process ends); UCX can watch too
// (UCP_ERR_HANDLING_MODE_PEER), which also fails the requests in flight to that peer at
// once. In UCX 1.13 that mode costs tcp its zero-copy rendezvous: payloads then travel as
// fragments UCX copies out of its tcp segments (`ucp_am_bw -e` runs at ~0.6x `ucp_am_bw`
// with UCX's 8/64 KiB segments; Sluice's 512 KiB ones, ucx_tcp_segment_bytes, win it back).
enum class UcxPeerFailure {
  // By the transports UCX opened: shared memory and self only, the socket; shared memory
  // and tcp, kSocketForLocalPeers; RDMA present, or tcp alone, UCX. UCX 1.13 without PEER
  // mode left a failed tcp endpoint unpurged and once aborted on it (docs/design.md, "Peer
  // failure").
  kAuto,
  kUcx,  // ask UCX for UCP_ERR_HANDLING_MODE_PEER wherever a transport supports it
  // UCP_ERR_HANDLING_MODE_NONE; the bootstrap socket reports dead peers. Zero-copy tcp
  // rendezvous, at the risk above when a tcp peer dies; needs the peer to agree.
  kSocketOnly,
  // The socket alone for peers on this host (UCX then picks shared memory, not tcp over
  // loopback), UCX for the others; needs the peer to agree. Over UCX's shared memory a peer
  // killed mid-send can stall a receiver's queue for every sender, cured by restarting the
  // receiver's UCX worker (ucx/ucx_queue_probe.h), which fails all of its connections; they
  // reconnect and nothing is lost (docs/design.md, "Peer failure"). tcp cannot stall, but
  // runs same-host peers 2-2.5x slower.
  kSocketForLocalPeers,
};

struct TransportOptions {
  // For UCX: the value of UCX_TLS for this instance ("" keeps the environment's).
  std::string ucx_tls;
  // For UCX: see UcxPeerFailure. kAuto reads $SLUICE_UCX_PEER_FAILURE (auto, ucx, socket,
  // local).
  UcxPeerFailure ucx_peer_failure = UcxPeerFailure::kAuto;
  // For UCX over tcp: the size of UCX's send and receive segments (UCX_TCP_TX_SEG_SIZE and
  // UCX_TCP_RX_SEG_SIZE, which win when set; 0 keeps UCX's 8 KiB / 64 KiB). With UCX's peer
  // watch, UCX 1.13 moves a tcp rendezvous payload one segment at a time through its own
  // buffers: 1 MiB batches ran at 3.1-3.3 GB/s with the defaults, 5.4-5.7 GB/s with 512 KiB
  // (perf/RESULTS.md). A busy tcp connection may hold one segment each way.
  size_t ucx_tcp_segment_bytes = 512 * 1024;
  // For libfabric (ofi://): the provider, e.g. "tcp;ofi_rxm" or "shm". "" means
  // $SLUICE_OFI_PROVIDER, else "tcp;ofi_rxm". "sockets" is refused (unusable in 1.17).
  std::string ofi_provider;
  // Payloads at least this large are sent by rendezvous into the receiver's buffer.
  size_t rendezvous_threshold = 16 * 1024;
  // How long the progress thread keeps polling after the last event before it sleeps, at
  // first. When events keep arriving soon after it went to sleep (streaming), the spin grows
  // up to max_spin_before_sleep, and shrinks back once sleeps run long (AdaptiveSpin).
  // Measured on 2 vCPUs: 200 µs catches the ~100 µs gaps of 1 MiB batches over shm as well
  // as 1 ms did, while 1 ms starved the other threads of multi-process tests (a fault test
  // ran 41 s instead of 22 s; 24 s at 200 µs).
  absl::Duration spin_before_sleep = absl::Microseconds(50);
  absl::Duration max_spin_before_sleep = absl::Microseconds(200);
  // Lets a thread waiting for a reply drive progress itself (Transport::DriveUntil) instead
  // of sleeping until the progress thread wakes it: one thread hop less per round trip, at
  // the price of the caller polling while it waits (never longer than spin_before_sleep
  // without an event; then it sleeps in epoll, about 2 ms, before it hands over). UCX only;
  // the others ignore it.
  bool caller_driven_progress = false;
  // After a driven call completes, how long the progress thread leaves the engine to the
  // next call before taking it back (see progress_baton.h); clamped to [10 µs, 10 ms].
  // Nothing progresses the engine meanwhile: a send from another thread takes the lent
  // engine and goes out at once, but other posted work, and replies, wait up to twice
  // max(1 ms, this) after the last call. Callers never keep it from the progress thread
  // for much more than 10 ms.
  absl::Duration caller_linger = absl::Microseconds(200);
  // Where the progress thread hands replies and batches to the thread waiting for them (not
  // caller-driven): how long that thread polls before it sleeps (spin_wait.h). Unset: 50 µs
  // on more than two usable CPUs, none on two or fewer; zero: never.
  std::optional<absl::Duration> wait_spin;
  // Bound on establishing a connection (socket connect plus the address exchange).
  absl::Duration connect_timeout = absl::Seconds(10);
  // Name used in log lines and error messages.
  std::string name = "sluice";
};

class Transport {
 public:
  virtual ~Transport() = default;

  [[nodiscard]] virtual absl::string_view scheme() const = 0;
  // One line for logs and perf reports: the library, what it picked, and who notices dead
  // peers (e.g. "UCX 1.13.1: self,tcp,posix; dead peers: bootstrap socket").
  [[nodiscard]] virtual std::string Describe() const = 0;
  // Starts accepting connections; port 0 picks a free port. Returns the bound address.
  [[nodiscard]] virtual absl::StatusOr<Address> Listen(const Address& bind) = 0;
  // Connects to `peer` within TransportOptions::connect_timeout (the socket and the address
  // exchange). Failures to reach the peer after that arrive through OnDisconnect (and fail
  // the messages sent meanwhile); bad addresses fail here.
  [[nodiscard]] absl::StatusOr<ConnectionId> Connect(const Address& peer) {
    return ConnectBefore(peer, absl::InfiniteFuture());
  }
  // As Connect, but gives up at `deadline` when that comes first: a call with a short
  // deadline must not wait out a whole connect timeout for a peer behind a partition.
  [[nodiscard]] virtual absl::StatusOr<ConnectionId> ConnectBefore(const Address& peer,
                                                                   absl::Time deadline) = 0;
  // Connects in progress, and any asked for later, fail Cancelled as soon as they wait on
  // their socket (connecting, the hello): for an owner about to destroy the transport,
  // which would otherwise wait out each connect to a peer that never answers
  // (RpcEndpoint's background connects). A host name lookup is not cut short. For good.
  // (The accepting side does not wait for a peer's hello: it is read as it comes,
  // hello_acceptor.h.)
  virtual void StopConnecting() = 0;
  // Sends header + payload; `done` runs on the thread driving progress once the payload may
  // be reused. The header is copied before Send returns (a small message then costs no
  // allocation on the thread that drives progress).
  virtual void Send(ConnectionId to, absl::string_view header, Payload payload,
                    SendCallback done) = 0;
  // Closes a connection (no OnDisconnect for it).
  virtual void Close(ConnectionId connection) = 0;
  // Gives up on a connection whose peer is presumed gone (e.g. unreachable behind a network
  // partition, where nothing ever closes): its sends and receives in flight are cancelled,
  // so no buffer they named is touched afterwards, then OnDisconnect(connection, why) runs.
  virtual void Abort(ConnectionId connection, absl::Status why) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(
      void* base, size_t size) = 0;
  // Largest header Send accepts; bigger control messages must travel as the payload.
  [[nodiscard]] virtual size_t max_header_size() const = 0;
  [[nodiscard]] virtual const TransportStats& stats() const = 0;
  // Runs `start` (it typically sends a request), then drives progress on the
  // calling thread until `done()` holds (true), or until the reply is slow (UCX: nothing
  // happened for TransportOptions::spin_before_sleep, then nothing woke its epoll sleep for
  // 2 ms), another thread drives, or the transport does not offer it (false: wait the usual
  // way). `start` runs exactly once in every case. Callbacks,
  // `done()` included, run on this thread meanwhile. Not for use inside a transport callback.
  // Both are called, never kept: a FunctionRef wraps a caller's lambda at no cost, where
  // a std::function made for each call was a few percent of a round trip.
  [[nodiscard]] virtual bool DriveUntil(absl::FunctionRef<void()> start,
                                        absl::FunctionRef<bool()> done) {
    (void)done;
    start();
    return false;
  }
  // True on the thread driving progress now (the progress thread, or a caller inside
  // DriveUntil): a thread that a Connect made elsewhere may need, so it must not wait for one.
  [[nodiscard]] virtual bool DrivenByThisThread() const { return false; }

  // Keeps `held` until the transport is destroyed, when none of its receives can write any
  // more: memory a receive it could not cancel may still land in (LandingMayStillBeWritten
  // in rpc.h) must be neither reused nor unmapped before then, even once its owner is gone.
  void HoldUntilDestroyed(std::shared_ptr<void> held) {
    absl::MutexLock lock(&held_mu_);
    held_until_destroyed_.push_back(std::move(held));
  }

 private:
  // Destroyed after the derived transport's destructor has stopped every receive.
  absl::Mutex held_mu_;
  std::vector<std::shared_ptr<void>> held_until_destroyed_ ABSL_GUARDED_BY(held_mu_);
};

// Creates the transport for `scheme` ("ucx"; "ofi" when built with libfabric). `handler`
// must outlive the transport.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(
    absl::string_view scheme, const TransportOptions& options, MessageHandler* handler);

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_TRANSPORT_H_
