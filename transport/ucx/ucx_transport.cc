#include "transport/ucx/ucx_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "transport/adaptive_spin.h"
#include "transport/host_locality.h"
#include "transport/spin_wait.h"
#include "transport/ucx/ucx_memory.h"

namespace sluice::transport::ucx {
namespace {

constexpr int kSleepTimeoutMs = 5;
constexpr auto kTickInterval = std::chrono::milliseconds(5);
// How long a caller holding the baton may sleep in epoll for a slow reply before it hands
// the engine back to the progress thread (up to a millisecond more: epoll counts whole ones).
constexpr auto kCallerSleep = std::chrono::milliseconds(2);

// Polling loops read the clock once every this many turns: a turn without events costs
// about as much as a clock read in a VM.
constexpr unsigned kClockEvery = 16;

// Tells a polling loop when it has handled nothing for `spin`. It reads the clock only in
// idle turns, one in kClockEvery: a caller driving a round trip of a microsecond reads it
// about once, not on every start and event.
class IdleTimer {
 public:
  explicit IdleTimer(std::chrono::nanoseconds spin) : spin_(spin) {}
  explicit IdleTimer(absl::Duration spin) : IdleTimer(ToChrono(spin)) {}
  // After a turn that handled something.
  void Active() { active_ = true; }
  // After a turn that handled nothing: true once nothing has been handled for `spin`
  // (counted from the first clock read after the last activity).
  bool Expired() {
    if (++idle_turns_ % kClockEvery != 0) return false;
    auto now = std::chrono::steady_clock::now();
    if (active_) {
      active_ = false;
      since_ = now;
    }
    return now - since_ >= spin_;
  }
  void Restart() { active_ = true; }
  void set_spin(absl::Duration spin) { spin_ = ToChrono(spin); }
  // Debian's Abseil is a shared library: its conversions are calls through the PLT, so the
  // path of every driven call converts nothing.
  static std::chrono::nanoseconds ToChrono(absl::Duration d) {
    return std::chrono::nanoseconds(absl::ToInt64Nanoseconds(d));
  }

 private:
  std::chrono::nanoseconds spin_;
  bool active_ = true;
  unsigned idle_turns_ = 0;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(const TransportOptions& options,
                                                                   MessageHandler* handler) {
  std::unique_ptr<UcxTransport> transport(new UcxTransport(options, handler));
  SLUICE_RETURN_IF_ERROR(transport->Start());
  return transport;
}

UcxTransport::UcxTransport(const TransportOptions& options, MessageHandler* handler)
    : options_(options),
      handler_(handler),
      caller_spin_(options.spin_before_sleep, options.max_spin_before_sleep),
      caller_spin_now_(absl::ToInt64Nanoseconds(options.spin_before_sleep)),
      baton_(options.caller_linger) {}

absl::Status UcxTransport::Start() {
  SLUICE_ASSIGN_OR_RETURN(context_, UcxContext::Create(options_.ucx_tls, options_.ucx_peer_failure,
                                                       options_.ucx_tcp_segment_bytes));
  // 1.13's ucp_am_send_nbx refuses with UCS_ERR_NO_RESOURCE what its short protocol cannot
  // send at once under the flag; the version Sluice builds on, and read there (SendAtOnce).
  send_at_once_ = LoadedUcxAtLeast(1, 13);

  locality_ = HostLocality();
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (event_fd_ < 0 || epoll_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd/epoll_create1: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = event_fd_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
  }
  SLUICE_ASSIGN_OR_RETURN(UcxWorkerPtr none, ReplaceWorker());
  progress_thread_ = std::thread([this] {
    SetCurrentThreadName("sluice-ucx");
    ProgressLoop();
  });
  return absl::OkStatus();
}

UcxTransport::~UcxTransport() {
  if (progress_thread_.joinable()) {
    RunSync([this] {
      if (listen_socket_.get() >= 0)
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_socket_.get(), nullptr);
      listen_socket_.reset();
      acceptor_.Clear();
      std::vector<ConnectionId> ids;
      for (const auto& [id, endpoint] : endpoints_) ids.push_back(id);
      for (ConnectionId id : ids) CloseEndpoint(id, Closing::kGraceful);
    });
    // Flushes get a bounded time: a peer behind a partition never acknowledges. What is left
    // is then force-closed, which cancels its requests, so that no request is still ours
    // when the worker is destroyed (UCX asserts on that).
    auto wait_until = [this](auto done_pred) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (std::chrono::steady_clock::now() < deadline) {
        bool done = false;
        RunSync([&] { done = done_pred(); });
        if (done) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    wait_until([this] { return flushing_.empty(); });
    RunSync([this] {
      std::vector<std::pair<ucp_ep_h, bool>> left;
      for (const auto& [ep, flushing] : flushing_) left.emplace_back(ep, flushing.ucx_watches);
      flushing_.clear();  // their flushes now complete (cancelled) without closing again
      // Their peers did not answer in time: forced where UCX allows it; the others go with
      // the worker.
      for (auto [ep, ucx_watches] : left) {
        if (ucx_watches) CloseUcxEndpoint(ep, /*force=*/true);
      }
    });
    wait_until([this] { return close_requests_.empty(); });
    stopping_.store(true, std::memory_order_seq_cst);
    has_posts_.store(true, std::memory_order_seq_cst);  // makes the loop look once more
    uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
    progress_thread_.join();
  }
  // Without UCX's peer-failure mode (UcxPeerFailure), UCX never ends a rendezvous receive
  // whose sender died, and closing the endpoint does not purge it; Sluice failed those calls
  // when the peer's bootstrap socket closed. Destroying the worker, UCX would list each
  // request and buffer of theirs as "not returned to mpool": expected here, not news.
  std::optional<ScopedUcxLogLevel> quiet;
  if (!receives_in_flight_.empty() && context_->peer_watch() != PeerWatch::kUcx)
    quiet.emplace(UCS_LOG_LEVEL_ERROR);
  probe_.reset();
  AbandonSends(kNoConnection, std::nullopt);
  ReleaseCloseRequests();  // those a peer did not let finish within the wait above
  worker_.reset();
  // What the worker took with it; nobody is told any more (the handler may be going too).
  ForgetSends();
  for (RecvOp* op : receives_in_flight_) delete op;
  receives_in_flight_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
}

void UcxTransport::Post(absl::AnyInvocable<void()> task) {
  {
    absl::MutexLock lock(&queue_mu_);
    queue_.push_back(std::move(task));
  }
  WakeForPosts();
}

void UcxTransport::PostSend(ConnectionId to, absl::string_view header, Payload payload,
                            SendCallback&& done) {
  {
    absl::MutexLock lock(&queue_mu_);
    std::unique_ptr<PostedSend> send;
    if (spare_posted_.empty()) {
      send = std::make_unique<PostedSend>();
    } else {
      send = std::move(spare_posted_.back());
      spare_posted_.pop_back();
    }
    send->to = to;
    send->header.assign(header.data(), header.size());
    send->payload = payload;
    send->done = std::move(done);
    // `this` and the pointer: AnyInvocable keeps them in place.
    queue_.push_back([this, send = std::move(send)]() mutable {
      // Taken out here: a callback DoSend ran without taking (a closed connection, a
      // message sent at once) is destroyed now, with what it holds (a batch's slab), not
      // when a later post drains the queue.
      SendCallback send_done = std::move(send->done);
      DoSend(send->to, send->header, send->payload, std::move(send_done));
      posted_sent_.push_back(std::move(send));
    });
  }
  WakeForPosts();
}

void UcxTransport::WakeForPosts() {
  has_posts_.store(true, std::memory_order_seq_cst);
  // Only a sleeping progress thread needs the (system call) wake-up.
  if (sleeping_.load(std::memory_order_seq_cst)) {
    uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
  }
}

namespace {
// The transport whose progress thread this is: asked on every send, where comparing thread
// ids read pthread_self() each time.
thread_local const UcxTransport* progress_thread_of = nullptr;
}  // namespace

bool UcxTransport::DrivesWorker() const {
  return progress_thread_of == this || baton_.HeldByThisThread();
}

void UcxTransport::RunSync(const std::function<void()>& task) {
  if (DrivesWorker()) {
    task();
    return;
  }
  absl::Notification done;
  Post([&] {
    task();
    done.Notify();
  });
  done.WaitForNotification();
}

void UcxTransport::DrainQueue() {
  // A plain load first: a polling loop comes here every turn, mostly to find nothing, and
  // an exchange is a locked instruction.
  if (!has_posts_.load(std::memory_order_acquire)) return;
  if (!has_posts_.exchange(false, std::memory_order_acq_rel)) return;
  // The two vectors trade places so that no drain allocates (a task may itself drain).
  std::vector<absl::AnyInvocable<void()>> tasks;
  tasks.swap(spare_queue_);
  {
    absl::MutexLock lock(&queue_mu_);
    tasks.swap(queue_);
    for (std::unique_ptr<PostedSend>& sent : posted_sent_) {
      if (spare_posted_.size() >= kMaxSparePostedSends) break;
      sent->done = nullptr;  // moved from already; nothing of the last send stays
      spare_posted_.push_back(std::move(sent));
    }
  }
  posted_sent_.clear();
  for (auto& task : tasks) task();
  tasks.clear();
  spare_queue_.swap(tasks);
}

unsigned UcxTransport::ProgressOnce() {
  DrainQueue();
  unsigned events = 0;
  // Streaming keeps ucp_worker_progress finding work, so this loop could run for as long as
  // the stream lasts: a caller asking for the baton meanwhile would wait for all of it
  // (yielding; 140 sched_yield calls per 1 MiB batch were counted before this check).
  while (unsigned n = ProgressWorker()) {
    events += n;
    if (baton_.asked()) break;
  }
  if (++turns_ % kClockEvery == 0) {
    if (auto now = std::chrono::steady_clock::now(); now >= next_tick_) {
      handler_->OnTick();
      next_tick_ = now + kTickInterval;
      // A loop that never sleeps (streaming, or ucp_worker_arm answering BUSY for as long as
      // a dead sender's half-written element sits in a shared-memory queue) would otherwise
      // never accept a connection or notice a closed bootstrap socket.
      epoll_event ready[16];
      HandleReadyFds(ready, epoll_wait(epoll_fd_, ready, 16, 0));
      if (acceptor_.pending() > 0) acceptor_.DropOverdue(now);
      CheckReceiveQueue(now);
    }
  }
  return events;
}

unsigned UcxTransport::ProgressWorker() {
  in_ucp_progress_ = true;
  const unsigned events = ucp_worker_progress(worker_.get());
  in_ucp_progress_ = false;
  if (events == 0) ++drains_;
  // Tested here: most polls defer nothing, and a call per poll was 28 instructions each.
  if (!deferred_endpoints_.empty() || !deferred_sends_.empty()) RunDeferred();
  return events;
}

bool UcxTransport::DriveUntil(absl::FunctionRef<void()> start, absl::FunctionRef<bool()> done) {
  auto start_undriven = [&] {
    start();
    return false;
  };
  if (!options_.caller_driven_progress || DrivesWorker()) return start_undriven();
  auto wake = [this] {
    if (sleeping_.load(std::memory_order_seq_cst)) {
      uint64_t one = 1;
      (void)!write(event_fd_, &one, sizeof(one));
    }
  };
  if (!baton_.TryTake(wake, absl::Milliseconds(1))) return start_undriven();
  // Holding the worker, `start`'s sends go out directly instead of through the queue, behind
  // what this or another thread queued before (a connection's messages keep their order).
  DrainQueue();
  start();
  std::chrono::steady_clock::time_point give_back_at;  // set once a reply is slow
  IdleTimer idle(caller_spin_now_);
  while (true) {
    // One poll per turn, then the check: the reply is seen as soon as its callback ran
    // (ProgressOnce would poll once more first). Ticks (deadlines) are left to the progress
    // thread: it gets the baton back at least every ~10 ms (ProgressBaton's max away), and a
    // caller keeps it only while replies come within kCallerSleep.
    DrainQueue();
    const unsigned events = ProgressWorker();
    if (done()) {
      baton_.Lend();
      return true;
    }
    // However busy the worker, the progress thread gets its turn after ~10 ms away.
    if (baton_.wants_back()) {
      baton_.Return();
      return false;
    }
    if (events > 0 || has_posts_.load(std::memory_order_acquire)) {
      idle.Active();
      continue;
    }
    if (!idle.Expired()) continue;
    // A slow reply. This thread sleeps for it in epoll, still holding the baton: handing the
    // engine back would wake the progress thread to poll while this one waits to be woken
    // by it, three runnable threads with the peer's on two cores, and each late reply then
    // made the next ones late (measured in perf/RESULTS.md, session 20). Past
    // kCallerSleep, or when the progress thread wants its turn (ticks, a connection to
    // accept), it takes over.
    const auto now = std::chrono::steady_clock::now();
    if (give_back_at == std::chrono::steady_clock::time_point()) give_back_at = now + kCallerSleep;
    if (now >= give_back_at || stopping_.load(std::memory_order_acquire) ||
        !SleepHoldingBaton(give_back_at - now)) {
      baton_.Return();
      return false;
    }
    idle.set_spin(caller_spin_.current());
    idle.Restart();
  }
}

UcxTransport::Slept UcxTransport::SleepOnEvents(int timeout_ms, bool baton_requests_wake,
                                                epoll_event (&ready)[16], int& n,
                                                std::chrono::steady_clock::duration* slept_for) {
  n = 0;
  if (ucp_worker_arm(worker_.get()) == UCS_ERR_BUSY) return Slept::kNot;
  sleeping_.store(true, std::memory_order_seq_cst);
  const bool raced =
      has_posts_.load(std::memory_order_seq_cst) || (baton_requests_wake && baton_.asked());
  const auto from = slept_for != nullptr ? std::chrono::steady_clock::now()
                                         : std::chrono::steady_clock::time_point();
  if (!raced) n = std::max(0, epoll_wait(epoll_fd_, ready, 16, timeout_ms));
  sleeping_.store(false, std::memory_order_release);
  if (slept_for != nullptr) *slept_for = std::chrono::steady_clock::now() - from;
  return raced ? Slept::kRaced : Slept::kWoke;
}

bool UcxTransport::SleepHoldingBaton(std::chrono::steady_clock::duration at_most) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(at_most);
  epoll_event ready[16];
  int n = 0;
  std::chrono::steady_clock::duration slept_for{};
  const Slept slept = SleepOnEvents(static_cast<int>(ms.count()), /*baton_requests_wake=*/false,
                                    ready, n, &slept_for);
  switch (slept) {
    case Slept::kNot:
      return true;  // back to polling
    case Slept::kRaced:
    case Slept::kWoke:
      break;
  }
  caller_spin_.Slept(absl::FromChrono(slept_for), slept == Slept::kRaced || n > 0);
  caller_spin_now_ = IdleTimer::ToChrono(caller_spin_.current());
  if (slept == Slept::kRaced) return true;
  // Accepting, and answering a hello, is for the progress thread, not a caller in the middle
  // of its call. Their sockets stay readable for it.
  bool connection_waiting = false;
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (ready[i].data.fd == listen_socket_.get() || acceptor_.Owns(ready[i].data.fd)) {
      connection_waiting = true;
    } else {
      ready[kept++] = ready[i];
    }
  }
  HandleReadyFds(ready, kept);
  return !connection_waiting;
}

void UcxTransport::ProgressLoop() {
  progress_thread_of = this;
  next_tick_ = std::chrono::steady_clock::now() + kTickInterval;
  // Spinning a little after the last event keeps request/response latency low (an epoll
  // wake-up costs tens of microseconds) without burning a core while idle.
  AdaptiveSpin spin(options_.spin_before_sleep, options_.max_spin_before_sleep);
  IdleTimer idle(spin.current());
  while (true) {
    if (baton_.ParkIfAsked()) {
      idle.Restart();
      // Its one turn between hand-overs reads the clock, so that ticks (deadlines) run.
      turns_ = kClockEvery - 1;
      // Back from callers: what only this loop does (accepting, noticing dead peers by their
      // sockets) gets its turn before the next hand-over.
      epoll_event ready[16];
      HandleReadyFds(ready, epoll_wait(epoll_fd_, ready, 16, 0));
    }
    // The queue lock is taken only once stopping (not on every spin of the loop).
    if (stopping_.load(std::memory_order_acquire)) {
      DrainQueue();
      absl::MutexLock lock(&queue_mu_);
      if (queue_.empty()) break;
    }
    const unsigned events = ProgressOnce();
    if (events > 0 || has_posts_.load(std::memory_order_acquire)) {
      idle.Active();
      continue;
    }
    if (!idle.Expired() || baton_.asked()) continue;
    epoll_event ready[16];
    int n = 0;
    std::chrono::steady_clock::duration slept_for{};
    const Slept slept =
        SleepOnEvents(kSleepTimeoutMs, /*baton_requests_wake=*/true, ready, n, &slept_for);
    switch (slept) {
      case Slept::kNot:
        continue;
      case Slept::kRaced:
      case Slept::kWoke:
        break;
    }
    idle.Restart();
    // Woken early (work came) or not: how long the spin before the next sleep should be.
    spin.Slept(absl::FromChrono(slept_for), slept == Slept::kRaced || n > 0);
    idle.set_spin(spin.current());
    HandleReadyFds(ready, n);
  }
}

void UcxTransport::HandleReadyFds(const epoll_event* ready, int n) {
  // Whose socket each fd was when epoll reported it: draining below may fail and close
  // connections, and a connection made meanwhile may be given a closed one's fd number.
  absl::InlinedVector<ConnectionId, 16> owners(std::max(n, 0), kNoConnection);
  for (int i = 0; i < n; ++i) {
    if (auto it = connection_by_socket_.find(ready[i].data.fd); it != connection_by_socket_.end()) {
      owners[i] = it->second;
    }
  }
  for (int i = 0; i < n; ++i) {
    int fd = ready[i].data.fd;
    if (fd == event_fd_) {
      uint64_t count;
      (void)!read(event_fd_, &count, sizeof(count));
    } else if (fd == listen_socket_.get()) {
      AcceptConnections();
    } else if (owners[i] == kNoConnection && acceptor_.Owns(fd)) {
      FinishAccept(fd);
    } else if (owners[i] != kNoConnection) {
      // Nothing is sent on a bootstrap socket after the hello: readable means closed.
      const ConnectionId id = owners[i];
      TakeWhatArrived();
      // Failed meanwhile (UCX saw it too), or the fd is another connection's by now.
      auto still = connection_by_socket_.find(fd);
      if (still == connection_by_socket_.end() || still->second != id) continue;
      FailConnection(id,
                     absl::UnavailableError(absl::StrCat("connection to ", endpoints_[id].peer,
                                                         " closed by the peer (process exited?)")));
    }
  }
}

void UcxTransport::TakeWhatArrived() {
  ProgressUntilQuiet([this] { return ProgressWorker(); }, std::chrono::milliseconds(1),
                     std::chrono::milliseconds(10));
}

std::string UcxTransport::Describe() const {
  if (context_ == nullptr) return "UCX (not started)";
  absl::string_view watch;
  switch (context_->peer_watch()) {
    case PeerWatch::kUcx:
      watch = "UCX (peer mode) and bootstrap socket";
      break;
    case PeerWatch::kSocket:
      watch = "bootstrap socket";
      break;
    case PeerWatch::kSocketForLocalPeers:
      watch =
          "bootstrap socket for same-host peers, UCX (peer mode) and bootstrap socket for others";
      break;
  }
  return absl::StrCat("UCX ", ucp_get_version_string(), ": ",
                      absl::StrJoin(context_->transports(), ","), "; dead peers: ", watch);
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> UcxTransport::RegisterMemory(void* base,
                                                                           size_t size) {
  return UcxMemoryRegion::Map(context_, base, size);
}

}  // namespace sluice::transport::ucx
