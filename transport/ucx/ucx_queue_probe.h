// Tells whether a UCX worker's shared-memory receive queue still moves.
//
// UCX's shared-memory transports (posix, sysv) give each worker one receive FIFO that all
// same-host senders write into: a sender claims the next element, fills it, then flips its
// owner flag. A sender killed between the claim and the flip leaves an element the receiver
// waits on for ever, and every message queued behind it, from every peer, is stuck with it
// (ucp_worker_arm meanwhile answers BUSY, so the worker never sleeps). Nothing in UCX 1.13
// recovers from that. The probe is a second worker on the same context that sends a short
// active message to the watched worker over shared memory: if it does not arrive while the
// watched worker is progressed, the queue is stuck.
//
//   auto probe = ReceiveQueueProbe::Create(context, watched_worker_address);
//   (*probe)->Send(7);  // the watched worker's kActiveMessageId handler receives 7
//   ... progress both workers; no 7 within a second: restart the watched worker ...
#ifndef SLUICE_TRANSPORT_UCX_UCX_QUEUE_PROBE_H_
#define SLUICE_TRANSPORT_UCX_UCX_QUEUE_PROBE_H_

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "transport/ucx/ucx_handles.h"

namespace sluice::transport::ucx {

class ReceiveQueueProbe {
 public:
  // The AM id the watched worker must handle; the message's data is the 8-byte number sent.
  static constexpr unsigned kActiveMessageId = 1;

  // A worker on `context` and an endpoint from it to the worker at `watched_address`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ReceiveQueueProbe>> Create(
      ucp_context_h context, const std::string& watched_address);
  // Cancels what is still queued and destroys the endpoint and the worker.
  ~ReceiveQueueProbe();
  ReceiveQueueProbe(const ReceiveQueueProbe&) = delete;
  ReceiveQueueProbe& operator=(const ReceiveQueueProbe&) = delete;

  // Sends `number` to the watched worker. A full queue is not an error: the message waits
  // in the probe's worker (Progress) like any other sender's.
  [[nodiscard]] absl::Status Send(uint64_t number);
  // Progresses the probe's own worker (its queued sends, its side of UCX's wire-up).
  void Progress();
  // The last probe sent is in the watched worker's queue (UCX completed its send), not
  // waiting in the probe's worker for room.
  [[nodiscard]] bool left() const { return sends_in_flight_ == 0; }

 private:
  ReceiveQueueProbe() = default;

  UcxWorkerPtr worker_;
  ucp_ep_h ep_ = nullptr;
  uint64_t number_ = 0;  // UCX reads it until the send completes
  int sends_in_flight_ = 0;
};

}  // namespace sluice::transport::ucx

#endif  // SLUICE_TRANSPORT_UCX_UCX_QUEUE_PROBE_H_
