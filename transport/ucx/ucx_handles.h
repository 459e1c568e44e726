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

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::transport::ucx {

// Maps a ucs_status_t to an absl::Status carrying UCX's own message and `what`.
absl::Status UcsError(ucs_status_t status, absl::string_view what);

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
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<UcxContext>> Create(const std::string& tls);
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  [[nodiscard]] ucp_context_h get() const { return context_; }
  [[nodiscard]] const std::string& tls() const { return tls_; }
  // Whether endpoints can ask for UCP_ERR_HANDLING_MODE_PEER. UCX 1.13's shared-memory
  // transports (posix, sysv, cma, self) have no peer failure handler: with only those in
  // UCX_TLS a PEER-mode endpoint is "unreachable". Sluice then relies on its bootstrap
  // socket to learn of a dead peer.
  [[nodiscard]] bool peer_failure_handling() const;

 private:
  UcxContext(ucp_context_h context, std::string tls) : context_(context), tls_(std::move(tls)) {}
  ucp_context_h context_;
  std::string tls_;
};

}  // namespace sluice::transport::ucx

#endif  // SLUICE_TRANSPORT_UCX_UCX_HANDLES_H_
