// Keeps the shm regions of closed libfabric endpoints mapped while another shm endpoint of
// the same process may still reach them.
//
// The shm provider of libfabric 1.17 does not map the region of a peer that lives in the same
// process: it uses that endpoint's own mapping, by pointer. When one of two such endpoints
// closes, its region is unmapped, yet the other may still hold a response from it in its
// queue and lock the gone region while handling it (a SIGSEGV in pthread_spin_trylock at
// region + 0x18, seen in about 1 of 50 runs of rpc_test's in-process shm cases). So Sluice
// closes no shm endpoint while another one of this process is open: a closing transport
// parks its endpoint, with the receive buffers that endpoint's posted receives name, and
// the last shm transport of the process to close closes them all.
//
// Parked endpoints are closed when the last open one closes, or once parked for
// kParkedLifetime: by then their in-process peers have long seen the connections end and
// dropped their addresses (ofi_transport.cc, kAddressGrace), so nothing reaches the region.
// That bounds what a process keeps when one shm transport lives on while others come and go.
//
//   ShmEndpointKeeper::Opened();                  // after the shm endpoint is open
//   ...
//   ShmEndpointKeeper::Close(std::move(parts));   // instead of destroying them
#ifndef SLUICE_TRANSPORT_OFI_SHM_ENDPOINT_KEEPER_H_
#define SLUICE_TRANSPORT_OFI_SHM_ENDPOINT_KEEPER_H_

#include <cstddef>
#include <memory>

#include "absl/time/time.h"
#include "transport/ofi/ofi_domain.h"
#include "transport/ofi/ofi_endpoint.h"
#include "transport/ofi/ofi_handles.h"

namespace sluice::transport::ofi {

// What a closing shm transport hands over: its endpoint and what that endpoint's posted
// receives point into. No thread may progress the endpoint any more.
struct ShmEndpointParts {
  std::shared_ptr<OfiDomain> domain;
  std::unique_ptr<std::byte[]> receive_buffers;
  MrPtr receive_registration;
  std::unique_ptr<OfiEndpoint> endpoint;
};

class ShmEndpointKeeper {
 public:
  // Well beyond the transports' address grace (1 s) and close grace (2 s): a peer drops a
  // parked endpoint's address before the endpoint goes.
  static constexpr absl::Duration kParkedLifetime = absl::Seconds(10);

  // An shm endpoint of this process is open; every call is matched by one Close.
  static void Opened();
  // Parks `parts` while another shm endpoint of this process is open, else closes them and
  // every parked endpoint (each endpoint before its registration, before its buffers).
  static void Close(ShmEndpointParts parts);
  // How many closed endpoints wait for the last open one (for tests and diagnostics).
  [[nodiscard]] static size_t parked();
  // Tests only: how long an endpoint stays parked (kParkedLifetime by default).
  static void SetParkedLifetimeForTesting(absl::Duration lifetime);
};

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_SHM_ENDPOINT_KEEPER_H_
