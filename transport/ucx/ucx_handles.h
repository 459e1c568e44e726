// RAII owners for the UCX C handles Sluice uses, and a shared context.
//
// Every handle has a deleter so that a failure half way through set-up unwinds in reverse
// order. The context is shared (std::shared_ptr) because registered memory regions must not
// outlive it, and users may keep a region a little longer than the transport.
//
//   absl::StatusOr<std::shared_ptr<UcxContext>> ctx = UcxContext::Create("tcp,self");
//   UcxWorkerPtr worker = ...;  // ucp_worker_destroy on scope exit
#ifndef SLUICE_TRANSPORT_UCX_UCX_HANDLES_H_
#define SLUICE_TRANSPORT_UCX_UCX_HANDLES_H_

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/bootstrap.h"
#include "transport/transport.h"

namespace sluice::transport::ucx {

// Maps a ucs_status_t to an absl::Status carrying UCX's own message and `what`.
absl::Status UcsError(ucs_status_t status, absl::string_view what);

// True when the UCX library loaded (ucp_get_version), whatever the headers built against,
// is at least major.minor.
[[nodiscard]] bool LoadedUcxAtLeast(unsigned major, unsigned minor);

struct ConfigDeleter {
  void operator()(ucp_config_t* c) const { ucp_config_release(c); }
};
struct WorkerDeleter {
  void operator()(ucp_worker* w) const { ucp_worker_destroy(w); }
};
struct ListenerDeleter {
  void operator()(ucp_listener* l) const { ucp_listener_destroy(l); }
};
using UcxConfigPtr = std::unique_ptr<ucp_config_t, ConfigDeleter>;
using UcxWorkerPtr = std::unique_ptr<ucp_worker, WorkerDeleter>;
using UcxListenerPtr = std::unique_ptr<ucp_listener, ListenerDeleter>;

class UcxContext {
 public:
  // `tls` overrides UCX_TLS for this context ("" keeps the environment's choice).
  // `peer_failure` kAuto is resolved here (see UcxPeerFailure), from the transports UCX
  // opened for this context. `tcp_segment_bytes`: see TransportOptions.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<UcxContext>> Create(
      const std::string& tls, UcxPeerFailure peer_failure = UcxPeerFailure::kAuto,
      size_t tcp_segment_bytes = 0);
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  [[nodiscard]] ucp_context_h get() const { return context_; }
  [[nodiscard]] const std::string& tls() const { return tls_; }
  // The transports (UCT names such as "tcp", "posix", "rc_mlx5") UCX opened.
  [[nodiscard]] const std::vector<std::string>& transports() const { return transports_; }
  // Who watches an endpoint's peer (UcxPeerFailure resolved). With kUcx, an endpoint between
  // shared-memory-only peers still falls back to NONE: UCX 1.13's posix, sysv, cma and self
  // have no peer failure handler and call such an endpoint "unreachable".
  [[nodiscard]] PeerWatch peer_watch() const { return peer_watch_; }

  // kAuto's rule, from the transports UCX opened: kSocket for shared memory and self only;
  // kSocketForLocalPeers for shared memory (posix or sysv, and a single-copy transport:
  // cma, knem or xpmem) and tcp; kUcx as soon as RDMA is present, or tcp without such
  // shared memory (SameHostPeersUseTcp).
  [[nodiscard]] static PeerWatch ChooseAutomatically(const std::vector<std::string>& transports);
  // True when UCX would carry a same-host peer's large messages over tcp: shared memory
  // (posix or sysv) and tcp, but no single-copy transport (cma, knem, xpmem).
  [[nodiscard]] static bool SameHostPeersUseTcp(const std::vector<std::string>& transports);
  // True when every transport named is shared memory or self, none of which can fail
  // inside UCX when a peer dies.
  [[nodiscard]] static bool SharedMemoryOnly(const std::vector<std::string>& transports);

 private:
  UcxContext(ucp_context_h context, std::string tls) : context_(context), tls_(std::move(tls)) {}
  ucp_context_h context_;
  std::string tls_;
  std::vector<std::string> transports_;
  PeerWatch peer_watch_ = PeerWatch::kUcx;
};

// Lowers UCX's log level to at most `level` for its lifetime (process-wide: UCX has one
// log level), to silence warnings Sluice knows to be expected.
class ScopedUcxLogLevel {
 public:
  explicit ScopedUcxLogLevel(ucs_log_level_t level);
  ~ScopedUcxLogLevel();
  ScopedUcxLogLevel(const ScopedUcxLogLevel&) = delete;
  ScopedUcxLogLevel& operator=(const ScopedUcxLogLevel&) = delete;

 private:
  ucs_log_level_t saved_;
};

// The transport names in the text of ucp_context_print_info ("... flags -- tcp/lo" lines).
[[nodiscard]] std::vector<std::string> ParseContextTransports(absl::string_view info);
// Whether a UCX_TLS value lets UCX open `transport`: "all", a list naming it (or an alias
// of UCX 1.13's that covers it: "sm", "shm", "mm"), an exclusion ("^...") that does not,
// or an empty value (unset: UCX opens all it can).
[[nodiscard]] bool TlsMayInclude(absl::string_view tls, absl::string_view transport);
[[nodiscard]] bool TlsMayIncludeTcp(absl::string_view tls);

// What ucp_ep_print_info tells of an endpoint, in part.
struct EndpointInfo {
  // The transports of its lanes ("lane[0]:  3:sysv/memory.0 md[2] ..."), each once.
  std::vector<std::string> transports;
  // The active message protocol by size, e.g. "0..<egr/short>..8185..<egr/zcopy>..20553..
  // <rndv>..(inf)" (bytes).
  std::string am_send;
};
[[nodiscard]] EndpointInfo ParseEndpointInfo(absl::string_view info);
// ParseEndpointInfo of the endpoint's own description (on the worker's thread).
[[nodiscard]] EndpointInfo DescribeEndpoint(ucp_ep_h ep);

}  // namespace sluice::transport::ucx

#endif  // SLUICE_TRANSPORT_UCX_UCX_HANDLES_H_
