#include "transport/ofi/shm_endpoint_keeper.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice::transport::ofi {
namespace {

struct Parked {
  ShmEndpointParts parts;
  absl::Time since;
};

struct Keeper {
  absl::Mutex mu;
  int open ABSL_GUARDED_BY(mu) = 0;
  std::vector<Parked> parked ABSL_GUARDED_BY(mu);
  absl::Duration lifetime ABSL_GUARDED_BY(mu) = ShmEndpointKeeper::kParkedLifetime;
};

Keeper& TheKeeper() {
  static Keeper* keeper = new Keeper;  // never destroyed: transports may close at exit
  return *keeper;
}

void Destroy(ShmEndpointParts& parts) {
  if (parts.domain == nullptr) return;
  // No progress thread owns the domain any more; its calls are serialised here.
  parts.domain->RunUnowned([&parts] {
    parts.endpoint.reset();
    parts.receive_registration.reset();
  });
  parts.receive_buffers.reset();
  parts.domain.reset();
}

}  // namespace

void ShmEndpointKeeper::Opened() {
  Keeper& keeper = TheKeeper();
  absl::MutexLock lock(&keeper.mu);
  ++keeper.open;
}

void ShmEndpointKeeper::Close(ShmEndpointParts parts) {
  Keeper& keeper = TheKeeper();
  std::vector<Parked> closing;
  {
    absl::MutexLock lock(&keeper.mu);
    const absl::Time now = absl::Now();
    if (--keeper.open > 0) {
      // Those parked long enough go now; this one waits its turn.
      auto expired = std::stable_partition(
          keeper.parked.begin(), keeper.parked.end(),
          [&](const Parked& each) { return now - each.since < keeper.lifetime; });
      std::move(expired, keeper.parked.end(), std::back_inserter(closing));
      keeper.parked.erase(expired, keeper.parked.end());
      keeper.parked.push_back(Parked{std::move(parts), now});
    } else {
      closing.swap(keeper.parked);
      closing.push_back(Parked{std::move(parts), now});
    }
  }
  // Closed outside the lock: an endpoint's close may take a while, and a transport opening
  // meanwhile cannot reach these (their listeners and connections are gone).
  for (Parked& each : closing) Destroy(each.parts);
}

void ShmEndpointKeeper::SetParkedLifetimeForTesting(absl::Duration lifetime) {
  Keeper& keeper = TheKeeper();
  absl::MutexLock lock(&keeper.mu);
  keeper.lifetime = lifetime;
}

size_t ShmEndpointKeeper::parked() {
  Keeper& keeper = TheKeeper();
  absl::MutexLock lock(&keeper.mu);
  return keeper.parked.size();
}

}  // namespace sluice::transport::ofi
