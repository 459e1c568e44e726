#include "transport/ofi/shm_endpoint_keeper.h"

#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice::transport::ofi {
namespace {

struct Keeper {
  absl::Mutex mu;
  int open ABSL_GUARDED_BY(mu) = 0;
  std::vector<ShmEndpointParts> parked ABSL_GUARDED_BY(mu);
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
  std::vector<ShmEndpointParts> closing;
  {
    absl::MutexLock lock(&keeper.mu);
    keeper.parked.push_back(std::move(parts));
    if (--keeper.open > 0) return;
    closing.swap(keeper.parked);
  }
  // Closed outside the lock: an endpoint's close may take a while, and a transport opening
  // meanwhile cannot reach these (their listeners and connections are gone).
  for (ShmEndpointParts& each : closing) Destroy(each);
}

size_t ShmEndpointKeeper::parked() {
  Keeper& keeper = TheKeeper();
  absl::MutexLock lock(&keeper.mu);
  return keeper.parked.size();
}

}  // namespace sluice::transport::ofi
