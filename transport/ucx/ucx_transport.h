// The UCX implementation of Transport: one ucp_worker driven by one progress thread.
//
// The worker is created in UCS_THREAD_MODE_SERIALIZED: one thread at a time calls into UCX,
// the progress thread or, with caller_driven_progress, a caller that holds the baton
// (progress_baton.h). Public methods enqueue closures for whichever drives and wake the
// progress thread through an eventfd; methods that must return a result (Listen, Connect,
// RegisterMemory) wait for their closure to run.
// Messages are active messages with one AM id; payloads at or above the rendezvous threshold
// are sent with UCP_AM_SEND_FLAG_RNDV so they land in the buffer the receiver picks.
// A dead peer is noticed by its bootstrap socket, and also by UCX where its peer-failure
// mode costs nothing (UcxPeerFailure in transport.h): it is reported, never a hang. A peer
// that died half way through writing into this worker's shared-memory receive queue leaves
// it stuck for every sender (ucx_queue_probe.h): after a same-host peer's death a probe
// checks the queue, and a stuck worker is replaced, its connections failed
// (ucx_receive_watch.cc).
// Peers find each other through the TCP bootstrap in bootstrap.h (see there for why not
// ucp_listener). Every message header starts with the receiver's token for the connection.
// Connections live in ucx_connections.cc, messages in ucx_messages.cc, the worker's creation
// and replacement in ucx_receive_watch.cc.
//
//   auto t = UcxTransport::Create(options, &handler);
#ifndef SLUICE_TRANSPORT_UCX_UCX_TRANSPORT_H_
#define SLUICE_TRANSPORT_UCX_UCX_TRANSPORT_H_

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "transport/adaptive_spin.h"
#include "transport/bootstrap.h"
#include "transport/hello_acceptor.h"
#include "transport/progress_baton.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_handles.h"
#include "transport/ucx/ucx_queue_probe.h"

namespace sluice::transport::ucx {

class UcxTransport final : public Transport {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<UcxTransport>> Create(
      const TransportOptions& options, MessageHandler* handler);
  ~UcxTransport() override;

  absl::string_view scheme() const override { return "ucx"; }
  std::string Describe() const override;
  absl::StatusOr<Address> Listen(const Address& bind) override;
  absl::StatusOr<ConnectionId> ConnectBefore(const Address& peer, absl::Time before) override;
  void StopConnecting() override { connect_stop_.Raise(); }
  void Send(ConnectionId to, absl::string_view header, Payload payload, SendCallback done) override;
  void Close(ConnectionId connection) override;
  void Abort(ConnectionId connection, absl::Status why) override;
  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* base, size_t size) override;
  size_t max_header_size() const override { return max_header_size_ - sizeof(uint64_t); }
  const TransportStats& stats() const override { return stats_; }
  bool DriveUntil(absl::FunctionRef<void()> start, absl::FunctionRef<bool()> done) override;
  bool DrivenByThisThread() const override { return DrivesWorker(); }

  [[nodiscard]] const std::string& tls() const { return context_->tls(); }
  // The UCT transports of the connection's lanes, who watches its peer and UCX's protocols
  // by message size, e.g. "sysv,posix,cma; dead peers: bootstrap socket; am_send
  // 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)". NotFound for an unknown id.
  [[nodiscard]] absl::StatusOr<std::string> DescribeConnection(ConnectionId connection);
  // Tests: restarts the UCX worker now, as a stalled shared-memory receive queue does
  // (every connection fails with `why`).
  void RestartWorkerForTest(const absl::Status& why) {
    RunSync([this, &why] { RestartWorker(why); });
  }

 private:
  struct Endpoint {
    ucp_ep_h ep = nullptr;
    std::string peer;
    uint64_t remote_token = 0;   // stamped on messages we send, so the peer knows the source
    ScopedFd socket;             // bootstrap socket, watched for the peer's death
    bool ucx_watches = true;     // asked for UCP_ERR_HANDLING_MODE_PEER
    bool shared_memory = false;  // a lane is posix or sysv (ucx_queue_probe.h)
    // Every lane is shared memory: a send from inside ucp_worker_progress cannot meet the
    // tcp hazard RunDeferred avoids, so a reply from a callback goes out at once.
    bool sends_inside_progress = false;
    bool failed = false;  // the peer died: nothing more is sent
    // A lane lets the peer pull a rendezvous payload out of our memory by itself (cma,
    // knem, xpmem, RDMA): it may still read one after we gave up on its send. Over tcp
    // (and posix, sysv AM fragments) the sender pushes, so nothing is read once we stop.
    bool peer_reads_our_memory = false;
  };
  // UCX reads a header until its send completes (1.13 has no UCP_AM_SEND_FLAG_COPY_HEADER),
  // so the operation owns a copy, token first; operations are recycled (ucx_messages.cc).
  // An operation UCX has not completed at once is linked into sends_in_flight_, so that
  // its callback can be run when UCX will not run it (AbandonSends).
  struct SendOp {
    UcxTransport* self = nullptr;
    std::string header;
    SendCallback done;
    ConnectionId to = kNoConnection;
    Payload payload;
    bool in_flight = false;
    // Its endpoint's peer_reads_our_memory, taken when the send is issued (a gracefully
    // closed endpoint is gone from endpoints_ while its sends are still in flight).
    bool peer_reads_payload = false;
    // Given up on while its payload may still be read (MarkSendsThePeerMayRead): a failure
    // is reported PayloadMayStillBeRead.
    bool peer_may_read = false;
    void* request = nullptr;  // UCX's, while in flight; null once given back (AbandonSends)
    SendOp* prev = nullptr;
    SendOp* next = nullptr;
  };
  // A send from a thread that does not drive the worker, queued for the one that does.
  // Recycled with its header's room: a reply a task's producer sends allocates nothing once
  // warm (a lambda holding a header string and the callback made two allocations).
  struct PostedSend {
    ConnectionId to = kNoConnection;
    std::string header;
    Payload payload;
    SendCallback done;
  };
  static constexpr size_t kMaxSparePostedSends = 64;
  // An endpoint being flushed before it is closed. Its bootstrap socket closes with it: the
  // peer takes the hang-up for the end of the connection, so it must come after what the
  // flush sends (a reply sent just before a server stopped was otherwise failed, not taken).
  struct Flushing {
    ConnectionId id;
    bool ucx_watches;
    ScopedFd socket;
  };
  // A rendezvous receive in flight.
  struct RecvOp {
    UcxTransport* self;
    ConnectionId from;
    std::string header;
    std::byte* data;
    size_t size;
    std::unique_ptr<std::byte[]> owned;
    void* request = nullptr;  // UCX's, while in flight; null once released (RestartWorker)
  };
  static constexpr unsigned kActiveMessageId = 0;

  UcxTransport(const TransportOptions& options, MessageHandler* handler);
  absl::Status Start();
  // Creates a worker with Sluice's AM handlers and makes it this transport's: its address
  // goes in hellos from now on, its event fd into the epoll set. Returns the previous
  // worker (null at start-up); on an error nothing changed.
  absl::StatusOr<UcxWorkerPtr> ReplaceWorker();
  // After a same-host peer's death: probe the receive queue (on the next ticks).
  void WatchReceiveQueue(absl::string_view dead_peer);
  // On a tick: sends a probe when one is wanted, restarts the worker when one is late.
  void CheckReceiveQueue(std::chrono::steady_clock::time_point now);
  // Replaces a worker whose receive queue is stuck; every connection fails with `why`.
  void RestartWorker(const absl::Status& why);

  // Runs `task` on the progress thread (asynchronously).
  void Post(absl::AnyInvocable<void()> task);
  // Post for a send, in a recycled PostedSend.
  void PostSend(ConnectionId to, absl::string_view header, Payload payload, SendCallback&& done);
  // After a Post: a sleeping progress thread is woken.
  void WakeForPosts();
  // Runs `task` on the progress thread and waits for it; runs inline on that thread.
  void RunSync(const std::function<void()>& task);
  void ProgressLoop();
  void DrainQueue();
  // Handles what epoll_wait reported: the eventfd, the listening socket, bootstrap sockets.
  void HandleReadyFds(const epoll_event* ready, int n);
  // Before a hung-up peer's connection fails: progresses until quiet, so that what it sent
  // before hanging up is delivered rather than lost with it.
  void TakeWhatArrived();
  // One turn of the progress thread: posted work, UCX until idle, and MessageHandler::OnTick
  // when its interval has passed. Returns the UCX events handled.
  unsigned ProgressOnce();
  // The calling thread may call into the worker (progress thread, or the baton's holder).
  [[nodiscard]] bool DrivesWorker() const;

  // Progress-thread-only helpers.
  absl::Status CreateEndpoint(ConnectionId id, const Hello& remote, std::string peer,
                              ScopedFd socket);
  void AcceptConnections();
  // A pending peer's socket is readable: its endpoint once its hello is complete.
  void FinishAccept(int fd);
  // The hello this transport sends for connection `id`.
  [[nodiscard]] Hello OwnHello(ConnectionId id) const;
  // Readable and hang-up events of a bootstrap socket wake the progress thread.
  void WatchSocket(int fd);
  // No more epoll events for the endpoint's bootstrap socket.
  void StopWatching(const Endpoint& endpoint);
  void FailConnection(ConnectionId id, const absl::Status& why);
  enum class Closing {
    kGraceful,  // Close: flush what was sent, then close
    kPeerDead,  // the peer's process is gone: cancel what UCX can (forced close)
    kGivenUp,   // Abort: the peer may be alive: close without waiting for the flush
  };
  void CloseEndpoint(ConnectionId id, Closing how);
  // ucp_ep_close_nbx, forced or flushing. Forced only where UCX watches the peer (UCX 1.13
  // refuses it otherwise, with UCS_ERR_INVALID_PARAM) and the peer is dead: forcing the
  // close of a live tcp peer's endpoint crashed a later ucp_worker_progress (docs/design.md).
  void CloseUcxEndpoint(ucp_ep_h ep, bool force);
  // Releases every close request (close_requests_) before the worker they belong to goes.
  void ReleaseCloseRequests();
  void TrackSend(SendOp* op);
  void UntrackSend(SendOp* op);
  [[nodiscard]] bool HasSendsInFlight(ConnectionId id) const;
  // Runs the callbacks of the sends in flight to `id` (kNoConnection: all) with `why`, for
  // when UCX will not: the peer is dead and UCX does not watch it (so no forced close), or
  // the worker is about to be destroyed. UCX's requests are released (a worker destroyed
  // with requests the user still holds fails an assertion); the operations stay linked
  // until UCX completes them, if ever. Without `why` (at destruction) nobody is called.
  void AbandonSends(ConnectionId id, std::optional<absl::Status> why);
  // Before giving up on the sends in flight to `id` (kNoConnection: all) without the peer's
  // word: those whose payload may still be read will report their failure as
  // PayloadMayStillBeRead (payload_retention.h). That is those whose endpoint lets the peer
  // read our memory, where UCX stops its own work on them (a forced close, a destroyed
  // worker); every one where it goes on pushing them (`ucx_keeps_sending`: a released send
  // on a live endpoint still reads its payload).
  void MarkSendsThePeerMayRead(ConnectionId id, bool ucx_keeps_sending);
  // Frees the operations still linked, once their worker is gone.
  void ForgetSends();
  // endpoints_'s entry for `id`, or null. A request's reply goes back to where the request
  // came from, and a reader's fetches go to one worker: the last one found is remembered,
  // which saves a hash lookup (~30 instructions) on most sends and receives.
  [[nodiscard]] Endpoint* FindEndpoint(ConnectionId id) {
    if (id == last_found_id_ && id != kNoConnection) return last_found_;
    auto it = endpoints_.find(id);
    if (it == endpoints_.end()) return nullptr;
    last_found_id_ = id;
    last_found_ = &it->second;
    return last_found_;
  }
  // Every erase from endpoints_ goes through these, so that FindEndpoint forgets it.
  void EraseEndpoint(ConnectionId id) {
    if (id == last_found_id_) last_found_id_ = kNoConnection;
    endpoints_.erase(id);
  }
  void ClearEndpoints() {
    last_found_id_ = kNoConnection;
    endpoints_.clear();
  }
  void DoSend(ConnectionId to, absl::string_view header, Payload payload, SendCallback&& done);
  // ucp_am_send_nbx for a prepared operation (its endpoint exists and has not failed).
  void IssueSend(const Endpoint& endpoint, std::unique_ptr<SendOp> op);
  // A header-only message sent from a stack copy, with UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: UCX
  // sends it before returning (its short protocol) or refuses. No operation, no callback
  // from UCX: an 8-byte control round trip on shared memory is ~40% Sluice's own work
  // (perf/RESULTS.md). True when it was sent or failed (`done` ran); false when the
  // caller must take the operation path (`done` untouched).
  [[nodiscard]] bool SendAtOnce(const Endpoint& endpoint, absl::string_view header,
                                SendCallback& done);
  enum class Slept {
    kNot,    // UCX had events pending (ucp_worker_arm said busy): progress it instead
    kRaced,  // work was posted, or the baton asked for, before sleeping_ was set
    kWoke,   // epoll returned: descriptors ready, or the timeout
  };
  // Sleeps in epoll (the worker's fd, the eventfd for posts, the sockets) for up to
  // `timeout_ms`, shared by the progress thread and a caller holding the baton. Posts made
  // before sleeping_ was set wrote no eventfd, nor did a baton request (counted only when
  // `baton_requests_wake` holds), so either makes it return kRaced without sleeping. `n` is
  // the number of `ready` descriptors, 0 unless kWoke; `slept_for`, when set, how long it
  // waited from the raced check on (the adaptive spin's measure; not read when kNot).
  [[nodiscard]] Slept SleepOnEvents(int timeout_ms, bool baton_requests_wake,
                                    epoll_event (&ready)[16], int& n,
                                    std::chrono::steady_clock::duration* slept_for = nullptr);
  // DriveUntil's wait for a slow reply: epoll on the worker, posts and sockets, at most
  // `at_most` (rounded up to milliseconds), by the caller that holds the baton. False when
  // the progress thread should take over (a connection waits to be accepted). Adapts the
  // callers' spin (caller_spin_) to how soon an event ended the sleep.
  [[nodiscard]] bool SleepHoldingBaton(std::chrono::steady_clock::duration at_most);
  // One ucp_worker_progress, then what its callbacks asked for meanwhile (RunDeferred).
  unsigned ProgressWorker();
  // Endpoints created and sends made from inside ucp_worker_progress (from callbacks: an
  // RPC reply's continuation connects and sends) wait for it to return. UCX 1.13's tcp
  // transport handles a batch of socket events per progress call: a send that fails (its
  // peer died) closes its endpoint at once, and an endpoint created meanwhile can take over
  // the socket of one being handled; when such an endpoint's event comes later in the batch,
  // UCX asserts (tcp_iface.c, "conn_state != CLOSED") or frees a receive buffer twice
  // (SIGSEGV at 0xfffffffffffffff8). See docs/design.md.
  void RunDeferred();
  [[nodiscard]] std::unique_ptr<SendOp> AcquireSendOp();
  void RecycleSendOp(std::unique_ptr<SendOp> op);
  ucs_status_t OnActiveMessage(const void* header, size_t header_length, void* data, size_t length,
                               const ucp_am_recv_param_t* param);

  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t ActiveMessageCallback(void* arg, const void* header, size_t header_length,
                                            void* data, size_t length,
                                            const ucp_am_recv_param_t* param);
  static void OnSendComplete(void* request, ucs_status_t status, void* user_data);
  static void OnReceiveComplete(void* request, ucs_status_t status, size_t length, void* user_data);
  static ucs_status_t ProbeMessageCallback(void* arg, const void* header, size_t header_length,
                                           void* data, size_t length,
                                           const ucp_am_recv_param_t* param);

  const TransportOptions options_;
  MessageHandler* const handler_;
  // How long a driving caller polls without an event before it sleeps: adapted as the
  // progress loop's is (a reader streaming 1 MiB batches over shm sees events ~100-200 µs
  // apart, and a fixed 50 µs spin slept before nearly every one). Used and changed only by
  // the baton's holder; caller_spin_now_ is its current value, converted once per change.
  AdaptiveSpin caller_spin_;
  std::chrono::nanoseconds caller_spin_now_;
  std::shared_ptr<UcxContext> context_;
  UcxWorkerPtr worker_;
  // Written by the progress thread when the worker is replaced; read by connecting callers.
  mutable absl::Mutex address_mu_;
  std::string worker_address_ ABSL_GUARDED_BY(address_mu_);
  std::string locality_;  // HostLocality(), sent in hellos
  ScopedFd listen_socket_;
  // Peers accepted from listen_socket_ whose hellos have not all come; progress thread only.
  HelloAcceptor acceptor_{HelloTransport::kUcx, HelloAcceptor::kTimeout,
                          [this](int fd) { WatchSocket(fd); },
                          [this](int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }};
  int ucx_fd_ = -1;
  size_t max_header_size_ = 0;
  // The UCX loaded honours UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL in ucp_am_send_nbx (SendAtOnce).
  bool send_at_once_ = false;
  TransportStats stats_;

  int event_fd_ = -1;
  int epoll_fd_ = -1;
  std::thread progress_thread_;

  absl::Mutex queue_mu_;
  std::vector<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(queue_mu_);
  std::vector<absl::AnyInvocable<void()>> spare_queue_;  // of whoever drives the worker
  std::vector<std::unique_ptr<PostedSend>> spare_posted_ ABSL_GUARDED_BY(queue_mu_);
  // Sent since the last DrainQueue, back to spare_posted_ at the next (of the driver).
  std::vector<std::unique_ptr<PostedSend>> posted_sent_;
  // Set once, after the last Post; read by the progress loop without taking queue_mu_.
  std::atomic<bool> stopping_{false};
  std::atomic<bool> has_posts_{false};
  std::atomic<bool> sleeping_{false};
  ProgressBaton baton_;

  std::atomic<ConnectionId> next_connection_id_{1};
  ConnectStop connect_stop_;  // StopConnecting
  // State of whoever drives the worker.
  std::chrono::steady_clock::time_point next_tick_;
  unsigned turns_ = 0;
  // Node-based: FindEndpoint keeps a pointer to the last one found, valid until it is erased.
  absl::node_hash_map<ConnectionId, Endpoint> endpoints_;
  ConnectionId last_found_id_ = kNoConnection;
  Endpoint* last_found_ = nullptr;
  std::vector<std::unique_ptr<SendOp>> spare_send_ops_;
  bool in_ucp_progress_ = false;   // inside ucp_worker_progress (its callbacks run)
  bool running_deferred_ = false;  // inside RunDeferred (sends join its list)
  // RunDeferred's work. An endpoint waiting here is in endpoints_ with a null ep.
  struct DeferredEndpoint {
    ConnectionId id;
    Hello remote;
    std::string peer;
    ScopedFd socket;
  };
  std::vector<DeferredEndpoint> deferred_endpoints_;
  std::vector<std::unique_ptr<SendOp>> deferred_sends_;
  std::vector<std::unique_ptr<SendOp>> spare_deferred_sends_;
  absl::flat_hash_map<ucp_ep_h, ConnectionId> connection_by_ep_;
  absl::flat_hash_map<int, ConnectionId> connection_by_socket_;
  // ucp_ep_close_nbx requests not completed yet. A close whose flush is done waits in the
  // worker's callback queue for its next progress; a worker destroyed first asserts that
  // the request was released (ucp_ep.c:382), so a restart or the destructor releases them
  // (ReleaseCloseRequests) and their callbacks, should UCX still call them, do nothing.
  absl::flat_hash_set<void*> close_requests_;
  // Rendezvous receives UCX has not completed yet (progress thread), so that a worker
  // restart can release their requests.
  absl::flat_hash_set<RecvOp*> receives_in_flight_;
  // Endpoints closed gracefully whose flush has not completed yet.
  absl::flat_hash_map<ucp_ep_h, Flushing> flushing_;
  SendOp* sends_in_flight_ = nullptr;  // a list through SendOp::prev/next
  // The receive queue watch (progress thread): probes sent and arrived, by number.
  std::unique_ptr<ReceiveQueueProbe> probe_;
  bool probe_wanted_ = false;
  bool probe_broken_ = false;  // the probe could not be set up; said so once
  uint64_t probes_sent_ = 0;
  uint64_t probes_arrived_ = 0;
  std::chrono::steady_clock::time_point probe_sent_at_;
  // The evidence a late probe is judged by (ucx_receive_watch.cc): passes that found the
  // worker with nothing more to read (ucp_worker_progress returned 0; whoever holds the
  // baton counts them), when the probe was seen in the queue, and ticks that, while it
  // waited for room, came after such a pass.
  uint64_t drains_ = 0;
  uint64_t drains_at_last_check_ = 0;
  bool probe_left_ = false;
  uint64_t drains_when_probe_left_ = 0;
  std::chrono::steady_clock::time_point probe_left_at_;
  int full_after_drain_ticks_ = 0;
  std::string last_dead_peer_;
};

}  // namespace sluice::transport::ucx

#endif  // SLUICE_TRANSPORT_UCX_UCX_TRANSPORT_H_
