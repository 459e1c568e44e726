// Names for libfabric shm endpoints that cannot collide, and removal of the regions that
// dead processes left behind.
//
// The shm provider of libfabric 1.17 names an endpoint's region in /dev/shm after the pid
// ("PID:UID:N"). A process killed with SIGKILL leaves its 16 MiB region behind, and a later
// process that is given the same pid cannot enable its endpoint (fi_enable fails with EBUSY).
// Sluice names its regions "sluice_PID_NONCE" instead, so a reused pid does not collide, and
// each shm transport removes the regions whose process is gone before it opens its own.
//
//   std::string name = UniqueShmEndpointName();      // "sluice_4242_9f1c0e77a3b5d210"
//   int removed = RemoveStaleShmRegions("/dev/shm");  // regions of dead sluice processes
#ifndef SLUICE_TRANSPORT_OFI_SHM_NAMES_H_
#define SLUICE_TRANSPORT_OFI_SHM_NAMES_H_

#include <string>

namespace sluice::transport::ofi {

// The prefix of every region name Sluice gives the shm provider.
inline constexpr char kShmNamePrefix[] = "sluice_";

// "sluice_<pid>_<64 random bits in hex>": unique on this host even across pid reuse.
[[nodiscard]] std::string UniqueShmEndpointName();

// Unlinks the files in `dir` named "sluice_<pid>_..." whose pid no longer exists and that
// this user owns; returns how many it removed. Mappings that live peers hold stay valid (an
// unlinked file lives on until its last mapping goes). Processes in another pid namespace
// that share `dir` would look dead: Sluice assumes one pid namespace per /dev/shm.
int RemoveStaleShmRegions(const std::string& dir);

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_SHM_NAMES_H_
