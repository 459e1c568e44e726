// `sluice-perf transport`: bandwidth and latency of Sluice's own data path between two
// processes, to be compared with `ucx_perftest` on the same UCX_TLS.
//
// The server answers BLOB requests with a payload of the requested size from one registered
// slab, and ECHO requests with their body. The client keeps `window` BLOB requests in flight,
// each landing in its own registered slab, exactly like a client fetching batches, and then
// times `latency_iterations` sequential 8-byte ECHO round trips, and as many round trips of
// bare 8-byte transport messages (message_ping_pong.h).
//
//   RunTransportPerfServer(bind, [](const Address& a) { Announce(a); });  // until stopped
//   absl::StatusOr<TransportPerfResult> r = RunTransportPerfClient(server, options);
#ifndef SLUICE_PERF_TRANSPORT_PERF_H_
#define SLUICE_PERF_TRANSPORT_PERF_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "transport/address.h"
#include "transport/transport.h"

namespace sluice::perf {

struct TransportPerfOptions {
  size_t size = 1 << 20;
  int64_t iterations = 2000;
  int window = 8;
  int64_t latency_iterations = 20000;
  transport::TransportOptions transport;
  // Called about every second with the fraction done, for a progress line.
  std::function<void(double fraction)> progress;
};

struct TransportPerfResult {
  std::string transport;         // scheme
  std::string ucx_tls;           // UCX_TLS in effect (for ucx)
  std::string ofi_provider;      // the libfabric provider (for ofi)
  std::string progress;          // "thread" or "caller" (TransportOptions::caller_driven_progress)
  double wait_spin_us = 0;       // how long a caller not driving polls for its reply first
  std::string ucx_peer_failure;  // as asked: "auto", "ucx", "socket" or "local" (ucx)
  std::string transport_description;  // Transport::Describe() of the client: as resolved
  size_t size = 0;
  int64_t iterations = 0;
  int window = 0;  // requests in flight
  double seconds = 0;
  double bandwidth_mb_s = 0;      // decimal MB/s of payload
  bool latency_measured = false;  // latency_iterations > 0; JSON null latencies otherwise
  double latency_us = 0;          // one-way: half the mean 8-byte round trip, as ucx_perftest
  double round_trip_us = 0;
  // The same for bare Transport messages, without the RPC layer (message_ping_pong.h).
  double message_latency_us = 0;
  double message_round_trip_us = 0;
  uint64_t payload_bytes_copied = 0;  // by the receiving transport during the bandwidth run
  bool huge_pages = false;            // the landing pool asked for huge pages (SlabPool)

  [[nodiscard]] nlohmann::json ToJson() const;
};

// Serves until `stop` returns true (polled every 100 ms).
[[nodiscard]] absl::Status RunTransportPerfServer(
    const transport::Address& bind, const transport::TransportOptions& options,
    const std::function<void(const transport::Address&)>& on_ready,
    const std::function<bool()>& stop);

[[nodiscard]] absl::StatusOr<TransportPerfResult> RunTransportPerfClient(
    const transport::Address& server, const TransportPerfOptions& options);

// The UCX_TLS in effect for a transport created with `options` ("all" when unset).
std::string EffectiveUcxTls(const transport::TransportOptions& options);
// The libfabric provider a transport with `options` uses.
std::string EffectiveOfiProvider(const transport::TransportOptions& options);
// The UcxPeerFailure asked for, as the flag spells it (the option, else the environment).
std::string EffectiveUcxPeerFailure(const transport::TransportOptions& options);

}  // namespace sluice::perf

#endif  // SLUICE_PERF_TRANSPORT_PERF_H_
