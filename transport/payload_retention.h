// What a sender does with a payload whose send failed while the peer may still read it.
//
// A rendezvous send tells the peer where the payload is; the peer then reads it from this
// process's memory when it gets to it (UCX over cma, libfabric's fi_read), and a provider
// may hold an eager send's bytes until it sends them. A transport that gives up on such a
// send without the peer's word (UCX restarting its worker, an Abort of a peer presumed
// behind a partition) cannot stop that read, and says so on the failure it reports. The
// payload's owner must then not write that memory again until the peer can no longer
// read it: a slab refilled with the next batch would reach the peer as this one, whole
// and OK.
//
//   transport->Send(to, header, Payload{slab->data(), n},
//                   [slab](absl::Status sent) mutable {
//                     if (PayloadMayStillBeRead(sent)) KeepForPeerReads(std::move(slab));
//                   });
#ifndef SLUICE_TRANSPORT_PAYLOAD_RETENTION_H_
#define SLUICE_TRANSPORT_PAYLOAD_RETENTION_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sluice::transport {

// The status payload that marks such a failure.
inline constexpr char kPayloadMayStillBeReadPayload[] =
    "sluice.transport/payload-may-still-be-read";

// `why`, marked: the payload of the send it fails may still be read.
[[nodiscard]] absl::Status PayloadMayStillBeReadError(absl::Status why);
[[nodiscard]] bool PayloadMayStillBeRead(const absl::Status& status);

// How long KeepForPeerReads holds an owner. A peer reads what it was told of when its
// progress next runs, or drops it when it sees our connection close; one stalled for
// longer has given up on the call the payload answers (a reader's request_timeout, 60 s
// by default) and drops the reply unread.
inline constexpr absl::Duration kPeerReadHold = absl::Seconds(60);

// Keeps `owner` (what holds a payload's memory: a slab, a buffer) for `hold`, so that its
// memory is neither freed nor handed out again meanwhile; then drops it at the next
// KeepForPeerReads or ReleaseExpiredPeerReadHolds. Rare (a worker restart, a partition),
// and bounded by the payloads in flight at that moment.
void KeepForPeerReads(std::shared_ptr<const void> owner, absl::Duration hold = kPeerReadHold);
// Drops the owners whose hold has passed. A thread that waits for memory they may hold (a
// worker's producer waiting for a slab) calls it while it waits.
void ReleaseExpiredPeerReadHolds();
// How many owners KeepForPeerReads holds.
[[nodiscard]] int64_t PayloadsKeptForPeerReads();

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_PAYLOAD_RETENTION_H_
