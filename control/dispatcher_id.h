// The id a fault-tolerant dispatcher keeps in its work dir across restarts, so that workers
// and clients can tell a restart that kept its state (the same id) from one that lost it (a
// new id, after which they re-register and start their reads again).
//
//   absl::StatusOr<std::string> id = LoadOrCreateDispatcherId("/var/lib/sluice");
//   // First start: a new random id, written to /var/lib/sluice/dispatcher_id.
//   // Later starts: the same id, or an error if the file was damaged.
#ifndef SLUICE_CONTROL_DISPATCHER_ID_H_
#define SLUICE_CONTROL_DISPATCHER_ID_H_

#include <string>

#include "absl/status/statusor.h"

namespace sluice::control {

// Reads `dir`/dispatcher_id, or creates it (atomically, fsynced) when it does not exist and
// `dir` holds no state (`has_state`: a journal was recovered from it). FailedPrecondition
// for a file that does not hold an id (16 hex digits and a newline, or nothing but
// whitespace around them) and for a missing one beside a journal: a new id would tell every
// peer that the state was lost while the journal restores it, and an id read from a
// damaged file could match nothing the peers knew.
[[nodiscard]] absl::StatusOr<std::string> LoadOrCreateDispatcherId(const std::string& dir,
                                                                   bool has_state);

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_DISPATCHER_ID_H_
