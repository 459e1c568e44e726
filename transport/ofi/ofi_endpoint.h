// One reliable-datagram libfabric endpoint (FI_EP_RDM) with its completion queue and
// address vector, and the bookkeeping of the operations handed to it.
//
// Every operation is an OfiOp subclass whose fi_context2 is the libfabric context. The
// endpoint owns an op from submission until its completion (or error) arrives, then hands
// the op back to it through Complete. A submission that libfabric refuses with -FI_EAGAIN
// (queue full) waits in its connection's FIFO backlog and is retried on every Progress,
// before completions are read: libfabric asks callers to progress the CQ to free room. The
// backlog is per connection, and a connection may hold at most a quarter of the provider's
// transmit queue, 16 slots at least (`tx_share`): a peer that stops reading fills its
// socket, its sends stop completing, and without the share they took every slot of the
// endpoint-wide queue (rxm's 2048), so that the sends to every other peer were refused
// behind them. (Four such peers still fill it.)
// Progress-thread only.
//
//   auto ep = OfiEndpoint::Open(domain);
//   (*ep)->Send(std::make_unique<MySendOp>(...), peer, bytes, n, /*desc=*/nullptr);
//   while (running) (*ep)->Progress();
#ifndef SLUICE_TRANSPORT_OFI_OFI_ENDPOINT_H_
#define SLUICE_TRANSPORT_OFI_OFI_ENDPOINT_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "transport/ofi/ofi_domain.h"
#include "transport/transport.h"

namespace sluice::transport::ofi {

// An operation given to libfabric.
class OfiOp {
 public:
  explicit OfiOp(ConnectionId connection) : connection_(connection) { slot_.op = this; }
  virtual ~OfiOp() = default;
  OfiOp(const OfiOp&) = delete;
  OfiOp& operator=(const OfiOp&) = delete;

  // The op finished: `status` is its error, `length` the bytes a receive got. `self` is the
  // op itself; keeping it (to post it again) is allowed.
  virtual void Complete(std::unique_ptr<OfiOp> self, absl::Status status, size_t length) = 0;

  [[nodiscard]] ConnectionId connection() const { return connection_; }
  [[nodiscard]] void* context() { return &slot_.context; }
  [[nodiscard]] static OfiOp* FromContext(void* context) {
    return static_cast<Slot*>(context)->op;  // the context is the first member of Slot
  }

 private:
  struct Slot {
    fi_context2 context;  // owned by the provider while the op is in flight
    OfiOp* op;
  };
  Slot slot_{};
  ConnectionId connection_;
};

class OfiEndpoint {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<OfiEndpoint>> Open(
      std::shared_ptr<OfiDomain> domain);
  // Closes the endpoint first, then frees the ops libfabric still held (no Complete).
  ~OfiEndpoint();

  // This endpoint's address (fi_getname), for the peer's address vector.
  [[nodiscard]] const std::string& name() const { return name_; }
  // The completion queue's wait fd, or -1 when the provider has none (shm).
  [[nodiscard]] int wait_fd() const { return wait_fd_; }
  // fi_trywait: true when nothing is pending and sleeping on wait_fd() is safe.
  [[nodiscard]] bool CanBlock();

  // The peer's address in the AV, inserted on first use. Connections to the same peer share
  // one entry: each Insert is matched by one Remove, and the entry leaves the AV with the last.
  // (libfabric 1.17's shm provider unmaps a peer's region on the first fi_av_remove even when
  // the address was inserted twice, so a second connection's sends would hit the gone
  // mapping.)
  [[nodiscard]] absl::StatusOr<fi_addr_t> Insert(const std::string& peer_name);
  void Remove(fi_addr_t address);

  // Errors, immediate or later, reach op->Complete from Progress, never from inside these
  // calls, so callers may hold iterators across them.
  void Send(std::unique_ptr<OfiOp> op, fi_addr_t to, const void* data, size_t size, void* desc);
  void Receive(std::unique_ptr<OfiOp> op, void* data, size_t size, void* desc);
  void Read(std::unique_ptr<OfiOp> op, fi_addr_t from, void* data, size_t size, void* desc,
            uint64_t remote_addr, uint64_t remote_key);

  // Retries the backlog and handles completions; returns how many ops completed.
  int Progress();
  // How many sends and reads one connection may have given to libfabric at once.
  [[nodiscard]] size_t tx_share() const { return tx_share_; }
  // Completes the backlogged (not yet accepted) ops of `connection` with `why`, now.
  void FailBacklog(ConnectionId connection, const absl::Status& why);
  // Whether libfabric holds no op of `connection` (its address may then be removed).
  [[nodiscard]] bool Idle(ConnectionId connection) const {
    return !op_counts_.contains(connection);
  }

 private:
  using Poster = std::function<ssize_t(void* context)>;
  struct Deferred {
    std::unique_ptr<OfiOp> op;
    Poster post;
    const char* what;
    bool transmits;  // a send or a read: it takes a slot of the transmit queue
  };
  struct InFlight {
    std::unique_ptr<OfiOp> op;
    bool transmits;
  };
  struct Refused {
    std::unique_ptr<OfiOp> op;
    absl::Status status;
  };
  explicit OfiEndpoint(std::shared_ptr<OfiDomain> domain) : domain_(std::move(domain)) {}
  void Submit(std::unique_ptr<OfiOp> op, Poster post, const char* what, bool transmits);
  // Hands `deferred` to libfabric. 0: it took the op (now in flight). -FI_EAGAIN: libfabric
  // or the connection's share refused it for now. Another error: libfabric refused it. The
  // op stays in `deferred` unless taken.
  ssize_t Post(Deferred& deferred);
  void Finish(OfiOp* op, absl::Status status, size_t length);
  void Count(ConnectionId connection, int delta);

  std::shared_ptr<OfiDomain> domain_;
  CqPtr cq_;
  AvPtr av_;
  EpPtr ep_;
  std::string name_;
  int wait_fd_ = -1;
  absl::flat_hash_map<OfiOp*, InFlight> inflight_;
  bool warned_contextless_error_ = false;  // a completion error naming no op, said once
  size_t tx_share_ = 0;
  // Sends and reads given to libfabric and not completed, per connection.
  absl::flat_hash_map<ConnectionId, size_t> transmitting_;
  // Per connection, in submission order; a connection is listed only while it has some.
  absl::flat_hash_map<ConnectionId, std::deque<Deferred>> backlogs_;
  std::deque<Refused> refused_;
  absl::flat_hash_map<ConnectionId, int> op_counts_;
  struct Peer {
    fi_addr_t address = FI_ADDR_UNSPEC;
    int users = 0;  // Inserts not yet matched by a Remove
  };
  absl::flat_hash_map<std::string, Peer> peers_;
  absl::flat_hash_map<fi_addr_t, std::string> peer_names_;
};

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_OFI_ENDPOINT_H_
