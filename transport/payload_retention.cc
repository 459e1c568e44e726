#include "transport/payload_retention.h"

#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/synchronization/mutex.h"

namespace sluice::transport {
namespace {

struct Kept {
  absl::Mutex mu;
  std::vector<std::shared_ptr<const void>> owners ABSL_GUARDED_BY(mu);
};

// Never destroyed: an owner may hold a slab pool whose registration needs its transport,
// gone by the time static destructors run.
Kept& KeptOwners() {
  static Kept* kept = new Kept;
  return *kept;
}

}  // namespace

absl::Status PayloadMayStillBeReadError(absl::Status why) {
  why.SetPayload(kPayloadMayStillBeReadPayload, absl::Cord("1"));
  return why;
}

bool PayloadMayStillBeRead(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kPayloadMayStillBeReadPayload).has_value();
}

void KeepForPeerReads(std::shared_ptr<const void> owner) {
  if (owner == nullptr) return;
  Kept& kept = KeptOwners();
  absl::MutexLock lock(&kept.mu);
  kept.owners.push_back(std::move(owner));
}

int64_t PayloadsKeptForPeerReads() {
  Kept& kept = KeptOwners();
  absl::MutexLock lock(&kept.mu);
  return static_cast<int64_t>(kept.owners.size());
}

}  // namespace sluice::transport
