// Which peers can reach this process through shared memory: a short string equal for two
// processes exactly when they run on the same booted kernel and share the namespaces that
// UCX's shared-memory transports need (IPC for sysv, mount for posix's /dev/shm, PID for
// cma's process_vm_readv). Peers exchange it in the bootstrap hello (bootstrap.h) so the
// UCX transport can leave a same-host peer to the bootstrap socket alone (ucx_transport.h).
//
//   std::string mine = HostLocality();  // "3f2a...-...;ipc=4026531839;mnt=...;pid=..."
//   bool same_host = !mine.empty() && mine == remote_hello.locality;
#ifndef SLUICE_TRANSPORT_HOST_LOCALITY_H_
#define SLUICE_TRANSPORT_HOST_LOCALITY_H_

#include <string>

namespace sluice::transport {

// This process's locality, or "" when it cannot be told (no /proc): then no peer matches.
[[nodiscard]] std::string HostLocality();

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_HOST_LOCALITY_H_
