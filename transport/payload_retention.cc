#include "transport/payload_retention.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace sluice::transport {
namespace {

struct Held {
  absl::Time until;
  std::shared_ptr<const void> owner;
};

struct Holds {
  absl::Mutex mu;
  std::vector<Held> held ABSL_GUARDED_BY(mu);
};

// Never destroyed: an owner may hold a slab pool whose registration needs its transport,
// gone by the time static destructors run.
Holds& AllHolds() {
  static Holds* holds = new Holds;
  return *holds;
}

// The expired holds, taken out under the lock: they are dropped outside it (a slab goes
// back to its pool, which takes the pool's lock).
std::vector<Held> TakeExpired(Holds& holds, absl::Time now)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(holds.mu) {
  std::vector<Held> expired;
  auto still_held = [now](const Held& h) { return h.until > now; };
  auto split = std::partition(holds.held.begin(), holds.held.end(), still_held);
  std::move(split, holds.held.end(), std::back_inserter(expired));
  holds.held.erase(split, holds.held.end());
  return expired;
}

}  // namespace

absl::Status PayloadMayStillBeReadError(absl::Status why) {
  why.SetPayload(kPayloadMayStillBeReadPayload, absl::Cord("1"));
  return why;
}

bool PayloadMayStillBeRead(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kPayloadMayStillBeReadPayload).has_value();
}

void KeepForPeerReads(std::shared_ptr<const void> owner, absl::Duration hold) {
  if (owner == nullptr) return;
  const absl::Time now = absl::Now();
  Holds& holds = AllHolds();
  std::vector<Held> expired;  // dropped after the lock is let go
  absl::MutexLock lock(&holds.mu);
  expired = TakeExpired(holds, now);
  holds.held.push_back(Held{now + hold, std::move(owner)});
}

void ReleaseExpiredPeerReadHolds() {
  Holds& holds = AllHolds();
  std::vector<Held> expired;  // dropped after the lock is let go
  absl::MutexLock lock(&holds.mu);
  if (holds.held.empty()) return;
  expired = TakeExpired(holds, absl::Now());
}

int64_t PayloadsKeptForPeerReads() {
  Holds& holds = AllHolds();
  absl::MutexLock lock(&holds.mu);
  return static_cast<int64_t>(holds.held.size());
}

}  // namespace sluice::transport
